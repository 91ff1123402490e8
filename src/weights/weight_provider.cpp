#include "weights/weight_provider.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/arch_descriptor.h"
#include "core/errors.h"
#include "core/half.h"
#include "core/quoted_text.h"
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
    {"attn_q.bias", tensor_names::kQBias},
    {"attn_k.bias", tensor_names::kKBias},
    {"attn_v.bias", tensor_names::kVBias},
    {"attn_q_norm.weight", tensor_names::kQNorm},
    {"attn_k_norm.weight", tensor_names::kKNorm},
    {"post_attention_norm.weight", tensor_names::kPostAttentionNorm},
    {"post_ffw_norm.weight", tensor_names::kPostFFNNorm},
    {"attn_qkv.weight", tensor_names::kQKV},
};
// Phi-3 stores gate and up as one ffn_up of 2 * ffn rows (and no ffn_gate); split_fused_tensors
// tells the two apart by shape.

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
    wp->split_fused_tensors();
    wp->check_shapes();
    wp->read_rope_frequencies();  // after the shapes: rope_dim <= head_dim is then bounded by the file
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
    wp->split_fused_tensors();
    wp->check_shapes();
    return wp;
}

void WeightProvider::release_host_copies(const std::set<const void *> &in_use) {
    if (!safetensors_) return;
    safetensors_->release_unused(in_use);
    tensors_ = safetensors_->tensors();
    split_fused_tensors();
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
    if (!t.data) throw AkunuError(path_ + ": tensor " + quoted(t.file_name) + " was released after upload");
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
            throw UnsupportedError(path_ + ": tensor " + quoted(t.file_name) + " has dtype " +
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
    const ArchDescriptor arch = arch_from_name(c.architecture);  // refuse unknown ones before reading keys
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
    // Every layer has tensors of its own: a count past the file's tensors is a lie, and believing
    // it would size per-layer tables (and loops) by it before any tensor is looked at.
    if (c.n_layers > f.tensors().size())
        throw ModelFormatError(f.path() + ": block_count " + std::to_string(c.n_layers) + " exceeds the " +
                               std::to_string(f.tensors().size()) + " tensors in the file (each layer has its own)");
    c.n_heads = need_u32(a + "attention.head_count");
    c.ffn_dim = need_u32(a + "feed_forward_length");
    c.n_kv_heads = f.has(a + "attention.head_count_kv") ? need_u32(a + "attention.head_count_kv") : c.n_heads;
    c.head_dim = f.has(a + "attention.key_length") ? need_u32(a + "attention.key_length") : c.dim / c.n_heads;
    // q_dim() / kv_dim() are 32-bit products: one that wraps could match a small tensor's shape.
    if ((uint64_t)c.n_heads * c.head_dim > UINT32_MAX || (uint64_t)c.n_kv_heads * c.head_dim > UINT32_MAX)
        throw ModelFormatError(f.path() + ": head_count " + std::to_string(c.n_heads) + " x key_length " +
                               std::to_string(c.head_dim) + " does not fit in 32 bits");
    c.rope_dim = f.has(a + "rope.dimension_count") ? need_u32(a + "rope.dimension_count") : c.head_dim;
    c.max_seq_len = f.has(a + "context_length") ? need_u32(a + "context_length") : 2048;
    c.norm_eps = (float)f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5);
    c.rope_theta = (float)f.get_float(a + "rope.freq_base", 10000.0);

    // Architecture extras: the file's keys win over the descriptor's defaults.
    if (f.has(a + "attention.scale")) {
        c.attention_scale = (float)f.get_float(a + "attention.scale", 0.0);
    } else {
        for (uint32_t layers : arch.query_scale_by_dim_per_head_layers)
            if (c.n_layers == layers) c.attention_scale = 1.0f / std::sqrt((float)(c.dim / c.n_heads));
    }
    if (arch.embedding_scale_sqrt_dim) c.embedding_scale = std::sqrt((float)c.dim);
    c.attn_logit_softcap = (float)f.get_float(a + "attn_logit_softcapping", arch.attn_logit_softcap);
    c.final_logit_softcap = (float)f.get_float(a + "final_logit_softcapping", arch.final_logit_softcap);
    if (!(c.attn_logit_softcap >= 0) || !(c.final_logit_softcap >= 0) || !(c.attention_scale >= 0))
        throw ModelFormatError(f.path() + ": softcapping values and attention.scale must not be negative");
    int64_t window = f.get_int(a + "attention.sliding_window", (int64_t)arch.sliding_window);
    if (window < 0 || window > (int64_t)UINT32_MAX)
        throw ModelFormatError(f.path() + ": attention.sliding_window must be a non-negative integer");
    c.sliding_window = arch.sliding_window_ignored ? 0 : (uint32_t)window;
    // The pattern is a period (uint32) or one flag per layer (bool array, true = sliding).
    const GGUFValue *per_layer = f.find(a + "attention.sliding_window_pattern");
    if (per_layer && per_layer->type == GGUFValueType::ARRAY) {
        if (per_layer->ints.size() != c.n_layers)
            throw ModelFormatError(f.path() + ": attention.sliding_window_pattern has " +
                                   std::to_string(per_layer->ints.size()) + " flags for " +
                                   std::to_string(c.n_layers) + " layers");
        c.layer_sliding.assign(c.n_layers, 0);
        for (uint32_t l = 0; l < c.n_layers; ++l) c.layer_sliding[l] = c.sliding_window && per_layer->ints[l] != 0;
    } else {
        int64_t pattern = f.get_int(a + "attention.sliding_window_pattern", (int64_t)arch.sliding_window_pattern);
        if (pattern < 0 || pattern > 1024)
            throw ModelFormatError(f.path() + ": attention.sliding_window_pattern must be a small non-negative integer");
        c.layer_sliding = sliding_layers(c.n_layers, c.sliding_window, (uint32_t)pattern);
    }

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
}

// RoPE frequencies with the file's scaling folded in (Llama 3's rope_freqs.weight divisors, linear
// scaling) and Gemma 3's local ones. Runs after check_shapes: rope_dim <= head_dim, and head_dim
// is then the width of real Q/K tensors, so the tables are sized by the file, not by a claim.
void WeightProvider::read_rope_frequencies() {
    const GGUFFile &f = *gguf_;
    ModelConfig &c = config_;
    const ArchDescriptor arch = arch_from_name(c.architecture);
    const std::string a = c.architecture + ".";
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
        throw UnsupportedError(f.path() + ": rope scaling type " + quoted(scaling) + " is not supported");
    }
    if (f.tensor("rope_factors_long.weight") || f.tensor("rope_factors_short.weight"))
        throw UnsupportedError(f.path() + ": LongRoPE (rope_factors_long/short) is not supported");
    // Local layers with their own base (Gemma 3) rotate with unscaled frequencies, as in llama.cpp.
    bool any_sliding = false;
    for (uint8_t s : c.layer_sliding) any_sliding |= s != 0;
    if (any_sliding && arch.local_rope_theta > 0) {
        const double base = f.get_float(a + "rope.freq_base_swa", arch.local_rope_theta);
        if (!(base > 0)) throw ModelFormatError(f.path() + ": rope.freq_base_swa must be positive");
        c.rope_inv_freq_local.resize(c.rope_dim / 2);
        for (uint32_t i = 0; i < c.rope_dim / 2; ++i)
            c.rope_inv_freq_local[i] = (float)std::pow(base, -2.0 * i / (double)c.rope_dim);
    }
}

// Fused projections become row ranges of the file's tensor, so the rest of the engine sees the
// usual Q/K/V and gate/up matrices (zero copy: a range of rows is a range of bytes).
void WeightProvider::split_fused_tensors() {
    const ModelConfig &c = config_;
    auto split = [&](const std::string &fused, const std::vector<std::pair<std::string, uint32_t>> &parts) {
        const TensorView t = get(fused);
        uint64_t total = 0;
        for (const auto &p : parts) total += p.second;
        if (t.dims.size() != 2 || t.dims[1] != total || t.dims[0] == 0)
            throw ModelFormatError(path_ + ": tensor " + quoted(t.file_name) + " has shape " + dims_str(t.dims) +
                                   ", expected [" + std::to_string(t.dims.empty() ? 0 : t.dims[0]) + ", " +
                                   std::to_string(total) + "]");
        const size_t row_bytes = t.n_bytes / total;
        uint64_t row = 0;
        for (const auto &p : parts) {
            TensorView v = t;
            v.dims = {t.dims[0], p.second};
            v.data = t.data ? t.data + row * row_bytes : nullptr;  // released after upload: stays so
            v.n_bytes = (size_t)p.second * row_bytes;
            tensors_[p.first] = v;
            row += p.second;
        }
        tensors_.erase(fused);
    };
    for (uint32_t l = 0; l < c.n_layers; ++l) {
        auto L = [&](const char *s) { return tensor_names::layer((int)l, s); };
        if (has(L(tensor_names::kQKV)))
            split(L(tensor_names::kQKV), {{L(tensor_names::kQ), c.q_dim()},
                                          {L(tensor_names::kK), c.kv_dim()},
                                          {L(tensor_names::kV), c.kv_dim()}});
        // No ffn_gate: ffn_up holds gate then up (Phi-3's GGUF); checkpoints name it ffn.gate_up.
        if (!has(L(tensor_names::kGate)) && has(L(tensor_names::kUp)) && get(L(tensor_names::kUp)).dims.size() == 2 &&
            get(L(tensor_names::kUp)).dims[1] == 2ull * c.ffn_dim)
            tensors_[L(tensor_names::kGateUp)] = get(L(tensor_names::kUp));
        if (has(L(tensor_names::kGateUp)))
            split(L(tensor_names::kGateUp), {{L(tensor_names::kGate), c.ffn_dim}, {L(tensor_names::kUp), c.ffn_dim}});
    }
}

// Every tensor the forward pass reads must have exactly the shape the config implies; otherwise a
// kernel would read past the end of a weight.
void WeightProvider::check_shapes() const {
    const ModelConfig &c = config_;
    const ArchDescriptor arch = arch_from_name(c.architecture);
    auto expect = [&](const std::string &name, std::vector<uint64_t> dims) {
        const TensorView &t = get(name);
        if (t.dims != dims)
            throw ModelFormatError(path_ + ": tensor " + quoted(t.file_name) + " has shape " + dims_str(t.dims) +
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
        if (arch.has_qkv_bias) {
            expect(L(tensor_names::kQBias), {c.q_dim()});
            expect(L(tensor_names::kKBias), {c.kv_dim()});
            expect(L(tensor_names::kVBias), {c.kv_dim()});
        }
        if (arch.qk_norm) {
            expect(L(tensor_names::kQNorm), {c.head_dim});
            expect(L(tensor_names::kKNorm), {c.head_dim});
        }
        if (arch.post_attention_norm) expect(L(tensor_names::kPostAttentionNorm), {c.dim});
        if (arch.post_ffn_norm) expect(L(tensor_names::kPostFFNNorm), {c.dim});
    }
}

}  // namespace akunu
