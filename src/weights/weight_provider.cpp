#include "weights/weight_provider.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/arch_descriptor.h"
#include "core/errors.h"
#include "core/half.h"
#include "weights/gguf_file.h"
#include "weights/hf_checkpoint.h"
#include "weights/safetensors_source.h"

namespace akunu {

std::string tensor_names::layer(int l, const char *suffix) { return "layers." + std::to_string(l) + "." + suffix; }

namespace {

// GGUF (llama.cpp) tensor names -> canonical names.
struct NameMap {
    const char *gguf_suffix;
    const char *canonical;
};
const NameMap kGlobalNames[] = {
    {"token_embd.weight", tensor_names::kTokenEmbedding},
    {"output_norm.weight", tensor_names::kOutputNorm},
    {"output.weight", tensor_names::kOutput},
    {"rope_freqs.weight", tensor_names::kRopeFreqs},
};
const NameMap kLayerNames[] = {
    {"attn_norm.weight", tensor_names::kAttentionNorm},
    {"attn_q.weight", tensor_names::kQ},
    {"attn_k.weight", tensor_names::kK},
    {"attn_v.weight", tensor_names::kV},
    {"attn_output.weight", tensor_names::kO},
    {"ffn_norm.weight", tensor_names::kFFNNorm},
    {"ffn_gate.weight", tensor_names::kGate},
    {"ffn_up.weight", tensor_names::kUp},
    {"ffn_down.weight", tensor_names::kDown},
};

std::string canonical_name(const std::string &gguf_name) {
    for (const NameMap &m : kGlobalNames)
        if (gguf_name == m.gguf_suffix) return m.canonical;
    unsigned layer = 0;
    int consumed = 0;
    if (std::sscanf(gguf_name.c_str(), "blk.%u.%n", &layer, &consumed) == 1 && consumed > 0) {
        std::string rest = gguf_name.substr((size_t)consumed);
        for (const NameMap &m : kLayerNames)
            if (rest == m.gguf_suffix) return tensor_names::layer((int)layer, m.canonical);
    }
    return "";
}

TensorView view_of(const GGUFTensor &t) {
    TensorView v;
    v.file_name = t.name;
    v.dtype = t.dtype;
    v.dims = t.dims;
    v.data = t.data;
    v.n_bytes = t.n_bytes;
    return v;
}

std::string dims_str(const std::vector<uint64_t> &dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
}

}  // namespace

WeightProvider::~WeightProvider() = default;

std::unique_ptr<WeightProvider> WeightProvider::open(const std::string &path) {
    std::unique_ptr<WeightProvider> wp(new WeightProvider());
    wp->format_ = "gguf";
    wp->path_ = path;
    wp->gguf_ = GGUFFile::open(path);
    for (const GGUFTensor &t : wp->gguf_->tensors()) {
        std::string canonical = canonical_name(t.name);
        if (!canonical.empty()) wp->tensors_.emplace(canonical, view_of(t));
    }
    wp->read_config();
    wp->check_shapes();
    return wp;
}

std::unique_ptr<WeightProvider> WeightProvider::open_checkpoint(const HFCheckpoint &checkpoint) {
    validate_checkpoint_config(checkpoint);
    std::unique_ptr<WeightProvider> wp(new WeightProvider());
    wp->format_ = checkpoint.format;
    wp->path_ = checkpoint.path;
    wp->config_ = checkpoint.config;
    wp->safetensors_ = SafeTensorsSource::open(checkpoint);
    wp->tensors_ = wp->safetensors_->tensors();
    wp->check_shapes();
    return wp;
}

void WeightProvider::release_host_copies(const std::set<const void *> &in_use) {
    if (!safetensors_) return;
    safetensors_->release_unused(in_use);
    tensors_ = safetensors_->tensors();
}

size_t WeightProvider::owned_bytes() const { return safetensors_ ? safetensors_->converted_bytes() : 0; }

bool WeightProvider::has(const std::string &canonical) const { return tensors_.count(canonical) != 0; }

const TensorView &WeightProvider::get(const std::string &canonical) const {
    auto it = tensors_.find(canonical);
    if (it != tensors_.end()) return it->second;
    throw ModelFormatError(path_ + ": missing tensor '" + canonical + "'");
}

std::vector<float> WeightProvider::get_f32(const std::string &canonical) const {
    const TensorView &t = get(canonical);
    if (!t.data) throw AkunuError(path_ + ": tensor '" + t.file_name + "' was released after upload");
    size_t n = 1;
    for (uint64_t d : t.dims) n *= (size_t)d;
    std::vector<float> out(n);
    switch (t.dtype) {
        case DType::F32: std::memcpy(out.data(), t.data, n * 4); break;
        case DType::F16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, t.data + 2 * i, 2);
                out[i] = half_bits_to_float(h);
            }
            break;
        case DType::BF16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, t.data + 2 * i, 2);
                out[i] = bf16_bits_to_float(h);
            }
            break;
        default:
            throw UnsupportedError(path_ + ": tensor '" + t.file_name + "' has dtype " +
                                   dtype_name(t.dtype) + "; expected F32, F16 or BF16 for a vector");
    }
    return out;
}

std::vector<TensorView> WeightProvider::all_tensors() const {
    if (safetensors_) return safetensors_->all_tensors();
    std::vector<TensorView> out;
    for (const GGUFTensor &t : gguf_->tensors()) out.push_back(view_of(t));
    return out;
}

void WeightProvider::read_config() {
    const GGUFFile &f = *gguf_;
    ModelConfig &c = config_;
    c.architecture = f.get_string("general.architecture", "");
    if (c.architecture.empty()) throw ModelFormatError(f.path() + ": missing general.architecture");
    arch_from_name(c.architecture);  // refuse unknown architectures before reading their keys
    c.name = f.get_string("general.name", "");
    const std::string a = c.architecture + ".";
    auto need_u32 = [&](const std::string &key) -> uint32_t {
        int64_t v = f.get_int(key, -1);
        if (v <= 0 || v > (int64_t)UINT32_MAX)
            throw ModelFormatError(f.path() + ": metadata '" + key + "' is missing or not a positive integer");
        return (uint32_t)v;
    };
    c.dim = need_u32(a + "embedding_length");
    c.n_layers = need_u32(a + "block_count");
    c.n_heads = need_u32(a + "attention.head_count");
    c.ffn_dim = need_u32(a + "feed_forward_length");
    c.n_kv_heads = f.has(a + "attention.head_count_kv") ? need_u32(a + "attention.head_count_kv") : c.n_heads;
    c.head_dim = f.has(a + "attention.key_length") ? need_u32(a + "attention.key_length") : c.dim / c.n_heads;
    c.rope_dim = f.has(a + "rope.dimension_count") ? need_u32(a + "rope.dimension_count") : c.head_dim;
    c.max_seq_len = f.has(a + "context_length") ? need_u32(a + "context_length") : 2048;
    c.norm_eps = (float)f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5);
    c.rope_theta = (float)f.get_float(a + "rope.freq_base", 10000.0);

    const TensorView &emb = get(tensor_names::kTokenEmbedding);
    if (emb.dims.size() != 2) throw ModelFormatError(f.path() + ": token_embd.weight must be 2-D");
    c.vocab_size = (uint32_t)emb.dims[1];

    if (c.n_heads % c.n_kv_heads != 0)
        throw ModelFormatError(f.path() + ": head_count " + std::to_string(c.n_heads) +
                               " is not a multiple of head_count_kv " + std::to_string(c.n_kv_heads));
    if (c.head_dim % 2 != 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim)
        throw ModelFormatError(f.path() + ": head_dim/rope dimension must be even and rope_dim <= head_dim");
    if (!(c.norm_eps > 0) || !(c.rope_theta > 0))
        throw ModelFormatError(f.path() + ": norm epsilon and rope.freq_base must be positive");

    // RoPE frequencies with the file's scaling folded in: Llama 3 ships per-frequency divisors as
    // rope_freqs.weight; linear scaling divides every frequency by the same factor.
    c.rope_inv_freq.resize(c.rope_dim / 2);
    for (uint32_t i = 0; i < c.rope_dim / 2; ++i)
        c.rope_inv_freq[i] = (float)std::pow((double)c.rope_theta, -2.0 * i / (double)c.rope_dim);
    if (has(tensor_names::kRopeFreqs)) {
        std::vector<float> factors = get_f32(tensor_names::kRopeFreqs);
        if (factors.size() != c.rope_inv_freq.size())
            throw ModelFormatError(f.path() + ": rope_freqs.weight has " + std::to_string(factors.size()) +
                                   " values, expected " + std::to_string(c.rope_inv_freq.size()));
        for (size_t i = 0; i < factors.size(); ++i) c.rope_inv_freq[i] /= factors[i];
    }
    std::string scaling = f.get_string(a + "rope.scaling.type", "none");
    if (scaling == "linear") {
        float factor = (float)f.get_float(a + "rope.scaling.factor", 1.0);
        if (!(factor > 0)) throw ModelFormatError(f.path() + ": rope.scaling.factor must be positive");
        for (float &x : c.rope_inv_freq) x /= factor;
    } else if (scaling != "none" && !scaling.empty()) {
        throw UnsupportedError(f.path() + ": rope scaling type '" + scaling + "' is not supported");
    }
}

// Every tensor the forward pass reads must have exactly the shape the config implies; otherwise a
// kernel would read past the end of a weight.
void WeightProvider::check_shapes() const {
    const ModelConfig &c = config_;
    auto expect = [&](const std::string &name, std::vector<uint64_t> dims) {
        const TensorView &t = get(name);
        if (t.dims != dims)
            throw ModelFormatError(path_ + ": tensor '" + t.file_name + "' has shape " + dims_str(t.dims) +
                                   ", expected " + dims_str(dims));
    };
    expect(tensor_names::kTokenEmbedding, {c.dim, c.vocab_size});
    expect(tensor_names::kOutputNorm, {c.dim});
    if (has(tensor_names::kOutput)) expect(tensor_names::kOutput, {c.dim, c.vocab_size});
    for (uint32_t l = 0; l < c.n_layers; ++l) {
        auto L = [&](const char *s) { return tensor_names::layer((int)l, s); };
        expect(L(tensor_names::kAttentionNorm), {c.dim});
        expect(L(tensor_names::kQ), {c.dim, c.q_dim()});
        expect(L(tensor_names::kK), {c.dim, c.kv_dim()});
        expect(L(tensor_names::kV), {c.dim, c.kv_dim()});
        expect(L(tensor_names::kO), {c.q_dim(), c.dim});
        expect(L(tensor_names::kFFNNorm), {c.dim});
        expect(L(tensor_names::kGate), {c.dim, c.ffn_dim});
        expect(L(tensor_names::kUp), {c.dim, c.ffn_dim});
        expect(L(tensor_names::kDown), {c.ffn_dim, c.dim});
    }
}

}  // namespace akunu
