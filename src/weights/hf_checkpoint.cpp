#include "weights/hf_checkpoint.h"

#include <cmath>

#include "core/arch_descriptor.h"
#include "core/errors.h"

namespace akunu {

void validate_checkpoint_config(const HFCheckpoint &checkpoint) {
    const ModelConfig &c = checkpoint.config;
    const std::string &p = checkpoint.path;
    if (checkpoint.format != "safetensors" && checkpoint.format != "mlx")
        throw UnsupportedError(p + ": checkpoint format '" + checkpoint.format + "' (expected safetensors or mlx)");
    arch_from_name(c.architecture);  // UnsupportedError listing the supported ones
    auto positive = [&](uint32_t v, const char *field) {
        if (v == 0) throw ModelFormatError(p + ": config field '" + field + "' must be a positive integer");
    };
    positive(c.dim, "dim");
    positive(c.n_layers, "n_layers");
    positive(c.n_heads, "n_heads");
    positive(c.n_kv_heads, "n_kv_heads");
    positive(c.head_dim, "head_dim");
    positive(c.rope_dim, "rope_dim");
    positive(c.ffn_dim, "ffn_dim");
    positive(c.vocab_size, "vocab_size");
    positive(c.max_seq_len, "max_seq_len");
    if (c.n_heads % c.n_kv_heads != 0)
        throw ModelFormatError(p + ": " + std::to_string(c.n_heads) + " attention heads are not a multiple of " +
                               std::to_string(c.n_kv_heads) + " key/value heads");
    if (c.head_dim % 2 != 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim)
        throw ModelFormatError(p + ": head_dim and the rotary dimension must be even, rotary <= head_dim");
    if (!(c.norm_eps > 0) || !(c.rope_theta > 0))
        throw ModelFormatError(p + ": rms_norm_eps and rope_theta must be positive");
    if (c.rope_inv_freq.size() != c.rope_dim / 2)
        throw ModelFormatError(p + ": " + std::to_string(c.rope_inv_freq.size()) + " RoPE frequencies, expected " +
                               std::to_string(c.rope_dim / 2));
    for (float f : c.rope_inv_freq)
        if (!std::isfinite(f) || !(f > 0)) throw ModelFormatError(p + ": RoPE frequencies must be finite and positive");
    if (!c.rope_inv_freq_local.empty() && c.rope_inv_freq_local.size() != c.rope_dim / 2)
        throw ModelFormatError(p + ": " + std::to_string(c.rope_inv_freq_local.size()) +
                               " local RoPE frequencies, expected " + std::to_string(c.rope_dim / 2));
    for (float f : c.rope_inv_freq_local)
        if (!std::isfinite(f) || !(f > 0))
            throw ModelFormatError(p + ": local RoPE frequencies must be finite and positive");
    if (!c.layer_sliding.empty() && c.layer_sliding.size() != c.n_layers)
        throw ModelFormatError(p + ": " + std::to_string(c.layer_sliding.size()) + " sliding-layer flags for " +
                               std::to_string(c.n_layers) + " layers");
    for (float v : {c.attention_scale, c.embedding_scale, c.attn_logit_softcap, c.final_logit_softcap})
        if (!std::isfinite(v) || v < 0)
            throw ModelFormatError(p + ": attention/embedding scales and softcaps must be finite and non-negative");
    for (int32_t id : checkpoint.eog_ids)
        if (id < 0 || (uint32_t)id >= c.vocab_size)
            throw ModelFormatError(p + ": end-of-generation token id " + std::to_string(id) + " is outside the vocabulary");
}

}  // namespace akunu
