#include "core/arch_descriptor.h"

#include "core/errors.h"
#include "core/kernel_params.h"
#include "core/quoted_text.h"

namespace akunu {

ArchDescriptor arch_llama() {
    ArchDescriptor a;
    a.name = "llama";
    a.norm_kernel = "rmsnorm_f32";
    a.activation_kernel = "silu_mul_f32";
    a.fused_activation = kGemmOutputSiluMul;
    // GGUF stores Llama's Q/K rows permuted so that rotation pairs are adjacent (GPT-J style).
    a.rope_kernel = "rope_interleaved_kv_write";
    a.rope_attention_kernel = "attention_rope_interleaved_f16kv";
    a.attention_kernel = "attention_f16kv";
    a.tie_embeddings = false;  // the loader turns this on when output.weight is absent
    // Mistral: a window, when the file sets one, applies to every layer.
    a.sliding_window_pattern = 1;
    return a;
}

// Qwen2: Llama with Q/K/V biases; its Q/K rows are not permuted, so RoPE pairs (i, i + d/2).
ArchDescriptor arch_qwen2() {
    ArchDescriptor a = arch_llama();
    a.name = "qwen2";
    a.rope_kernel = "rope_neox_kv_write";
    a.rope_attention_kernel = "attention_rope_neox_f16kv";
    a.has_qkv_bias = true;
    a.sliding_window_pattern = 0;  // llama.cpp ignores Qwen2's use_sliding_window
    return a;
}

// Qwen3: no biases, RMSNorm over each Q/K head before RoPE.
ArchDescriptor arch_qwen3() {
    ArchDescriptor a = arch_qwen2();
    a.name = "qwen3";
    a.has_qkv_bias = false;
    a.qk_norm = true;
    return a;
}

// Gemma: GELU-tanh gate, embeddings scaled by sqrt(dim). Its (1 + w) RMSNorm needs no kernel of
// its own: the converter stores w + 1 in the file.
ArchDescriptor arch_gemma() {
    ArchDescriptor a = arch_llama();
    a.name = "gemma";
    a.activation_kernel = "gelu_tanh_mul_f32";
    a.fused_activation = kGemmOutputGeluTanhMul;
    a.rope_kernel = "rope_neox_kv_write";
    a.rope_attention_kernel = "attention_rope_neox_f16kv";
    a.embedding_scale_sqrt_dim = true;
    a.sliding_window_pattern = 0;
    return a;
}

// Gemma 2: post-norms, soft-capped attention scores and logits, a window on every other layer
// (layers 0, 2, 4... slide). Defaults are llama.cpp's for files without the keys.
ArchDescriptor arch_gemma2() {
    ArchDescriptor a = arch_gemma();
    a.name = "gemma2";
    a.post_attention_norm = true;
    a.post_ffn_norm = true;
    a.attn_logit_softcap = 50.f;
    a.final_logit_softcap = 30.f;
    a.sliding_window = 4096;
    a.sliding_window_pattern = 2;
    a.query_scale_by_dim_per_head_layers = {46};  // Gemma 2 27B
    return a;
}

// Gemma 3: Gemma 2 without softcaps, plus QK-norm; five local layers (window, RoPE base 10000)
// per global layer.
ArchDescriptor arch_gemma3() {
    ArchDescriptor a = arch_gemma2();
    a.name = "gemma3";
    a.qk_norm = true;
    a.attn_logit_softcap = 0.f;
    a.final_logit_softcap = 0.f;
    a.sliding_window = 0;  // the file must say
    a.sliding_window_pattern = 6;
    a.local_rope_theta = 10000.f;
    a.query_scale_by_dim_per_head_layers = {62};  // Gemma 3 27B
    return a;
}

// Phi-3: Llama with fused attn_qkv and gate/up tensors (split at load) and NeoX RoPE, possibly
// over only part of each head. llama.cpp disables the sliding window Phi-3 files declare.
ArchDescriptor arch_phi3() {
    ArchDescriptor a = arch_llama();
    a.name = "phi3";
    a.rope_kernel = "rope_neox_kv_write";
    a.rope_attention_kernel = "attention_rope_neox_f16kv";
    a.sliding_window_pattern = 0;
    a.sliding_window_ignored = true;
    return a;
}

namespace {
struct ArchEntry {
    const char *gguf_name;
    ArchDescriptor (*factory)();
};
// Mistral GGUFs declare "llama"; the extra names cover files that spell it out.
const ArchEntry kArchitectures[] = {
    {"llama", arch_llama},   {"mistral", arch_llama}, {"qwen2", arch_qwen2},   {"qwen3", arch_qwen3},
    {"gemma", arch_gemma},   {"gemma2", arch_gemma2}, {"gemma3", arch_gemma3}, {"phi3", arch_phi3},
};
}  // namespace

ArchDescriptor arch_from_name(const std::string &architecture) {
    for (const ArchEntry &e : kArchitectures)
        if (architecture == e.gguf_name) return e.factory();
    std::string supported;
    for (const std::string &s : supported_architectures()) supported += (supported.empty() ? "" : ", ") + s;
    throw UnsupportedError("unsupported architecture " + quoted(architecture) + " (supported: " + supported + ")");
}

std::vector<std::string> supported_architectures() {
    std::vector<std::string> names;
    for (const ArchEntry &e : kArchitectures) names.push_back(e.gguf_name);
    return names;
}

std::vector<uint8_t> sliding_layers(uint32_t n_layers, uint32_t window, uint32_t pattern) {
    std::vector<uint8_t> out(n_layers, 0);
    if (window == 0 || pattern == 0) return out;
    for (uint32_t l = 0; l < n_layers; ++l) out[l] = pattern == 1 || (l % pattern) < pattern - 1;
    return out;
}

}  // namespace akunu
