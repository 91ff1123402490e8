#include "inference/weight_list.h"

#include "core/errors.h"
#include "core/quoted_text.h"

namespace akunu {

namespace {
size_t element_count(const TensorView &t) {
    size_t n = 1;
    for (uint64_t d : t.dims) n *= (size_t)d;  // the reader checked the product (gguf_file.cpp, safetensors_source.cpp)
    return n;
}
}  // namespace

void visit_weights(const WeightProvider &wp, const ArchDescriptor &arch, const ModelConfig &config,
                   ModelWeights &weights, WeightVisitor &visit) {
    // A vector read from the file (norm weights), as F32.
    auto file_vector = [&](Buffer &slot, const std::string &name) {
        visit.vector(slot, element_count(wp.get(name)), [&wp, name] { return wp.get_f32(name); });
    };
    auto config_vector = [&](Buffer &slot, const std::vector<float> &values) {
        visit.vector(slot, values.size(), [&values] { return values; });
    };
    visit.matrix(weights.token_embedding, wp.get(tensor_names::kTokenEmbedding));
    if (arch.tie_embeddings)
        weights.output = weights.token_embedding;
    else
        visit.matrix(weights.output, wp.get(tensor_names::kOutput));
    file_vector(weights.output_norm, tensor_names::kOutputNorm);
    config_vector(weights.rope_inv_freq, config.rope_inv_freq);
    if (!config.rope_inv_freq_local.empty()) config_vector(weights.rope_inv_freq_local, config.rope_inv_freq_local);
    weights.layers.resize(config.n_layers);
    for (uint32_t l = 0; l < config.n_layers; ++l) {
        auto name = [&](const char *suffix) { return tensor_names::layer((int)l, suffix); };
        LayerWeights &L = weights.layers[l];
        file_vector(L.attention_norm, name(tensor_names::kAttentionNorm));
        file_vector(L.ffn_norm, name(tensor_names::kFFNNorm));
        visit.matrix(L.q, wp.get(name(tensor_names::kQ)));
        visit.matrix(L.k, wp.get(name(tensor_names::kK)));
        visit.matrix(L.v, wp.get(name(tensor_names::kV)));
        visit.matrix(L.o, wp.get(name(tensor_names::kO)));
        visit.matrix(L.gate, wp.get(name(tensor_names::kGate)));
        visit.matrix(L.up, wp.get(name(tensor_names::kUp)));
        visit.matrix(L.down, wp.get(name(tensor_names::kDown)));
        if (arch.has_qkv_bias) {  // one buffer: the Q, K and V biases side by side
            const std::vector<std::string> parts = {name(tensor_names::kQBias), name(tensor_names::kKBias),
                                                    name(tensor_names::kVBias)};
            size_t n = 0;
            for (const std::string &part : parts) n += element_count(wp.get(part));
            visit.vector(L.qkv_bias, n, [&wp, parts] {
                std::vector<float> bias;
                for (const std::string &part : parts) {
                    std::vector<float> b = wp.get_f32(part);
                    bias.insert(bias.end(), b.begin(), b.end());
                }
                return bias;
            });
        }
        if (arch.qk_norm) {
            file_vector(L.q_norm, name(tensor_names::kQNorm));
            file_vector(L.k_norm, name(tensor_names::kKNorm));
        }
        if (arch.post_attention_norm) file_vector(L.post_attention_norm, name(tensor_names::kPostAttentionNorm));
        if (arch.post_ffn_norm) file_vector(L.post_ffn_norm, name(tensor_names::kPostFFNNorm));
    }
}

void describe_matrix(const Device &device, const TensorView &t, const std::string &path, WeightMatrix &slot) {
    slot.desc = device.dtype_lookup(t.dtype);
    if (!slot.desc)
        throw UnsupportedError(path + ": tensor " + quoted(t.file_name) + " has dtype " + dtype_name(t.dtype) +
                               ", which the " + device.backend_name() + " backend does not support yet");
    slot.cols = (uint32_t)t.dims[0];
    slot.rows = (uint32_t)t.dims[1];
    slot.row_bytes = t.n_bytes / slot.rows;
}

size_t device_matrix_bytes(const WeightMatrix &slot, const TensorView &t) {
    return slot.desc->repack ? slot.desc->repacked_bytes(slot.rows, slot.cols) : t.n_bytes;
}

}  // namespace akunu
