// ArchDescriptor: how one architecture differs from another, as data. The table builder reads
// these fields and never branches on an architecture's name; a new architecture is a new factory.
// Per-model numbers (window size, softcap values, which layers slide) live in ModelConfig; the
// fields here are the family's structure and the defaults a weight file may leave out.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace akunu {

struct ArchDescriptor {
    std::string name;                  // "llama"
    const char *norm_kernel;           // "rmsnorm_f32"
    const char *activation_kernel;     // gated FFN activation: "silu_mul_f32", "gelu_tanh_mul_f32"
    uint32_t fused_activation;         // the same activation inside a gate/up GEMV (a GemmOutputOp)
    // The kernels that touch the KV cache are named for an F16 cache; the table builder runs their
    // variant for the cache's dtype (kv_kernel_name: "rope_neox_kv_write_q8", "attention_q8kv").
    const char *rope_kernel;           // RoPE + KV-cache write: "rope_interleaved_kv_write", "rope_neox_kv_write"
    const char *attention_kernel;      // "attention_f16kv" (sliding window and softcap are its params)
    // Decode attention doing the RoPE kernel's work too (RopeAttentionParams; GPU backends):
    // "attention_rope_interleaved_f16kv", "attention_rope_neox_f16kv", the rotation of rope_kernel.
    const char *rope_attention_kernel;
    const char *post_norm_kernel = "rmsnorm_add_f32";   // residual += norm(x) * w
    const char *qk_norm_kernel = "head_rmsnorm_f32";    // per-head RMSNorm of Q and K
    const char *bias_kernel = "bias_add_f32";           // Q/K/V biases added after the projection
    const char *softcap_kernel = "softcap_f32";         // final logit soft-capping
    bool embedding_scale_sqrt_dim = false;  // Gemma: embeddings multiplied by sqrt(dim)
    bool tie_embeddings = false;       // output projection reuses the token embedding
    bool has_qkv_bias = false;         // Qwen2: attn_q/k/v.bias
    bool qk_norm = false;              // Qwen3, Gemma 3: RMSNorm over each head of Q and K before RoPE
    bool post_attention_norm = false;  // Gemma 2/3: x += norm(O . attention)
    bool post_ffn_norm = false;        // Gemma 2/3: x += norm(FFN)
    // Defaults for values the file may omit (the file's own keys win). 0 = off.
    float attn_logit_softcap = 0.f;    // Gemma 2: scores = c * tanh(scores / c)
    float final_logit_softcap = 0.f;   // Gemma 2: logits = c * tanh(logits / c)
    uint32_t sliding_window = 0;       // Gemma 2: 4096
    // Which layers use the sliding window (when a window is set): 0 none, 1 every layer,
    // N > 1: every layer but the last of each group of N (Gemma 2: 2, Gemma 3: 6).
    uint32_t sliding_window_pattern = 0;
    float local_rope_theta = 0.f;      // RoPE base of sliding layers (Gemma 3: 10000); 0: the global base
    bool sliding_window_ignored = false;  // Phi-3: llama.cpp disables the window its files declare
    // Models of these depths scale queries by 1 / sqrt(dim / n_heads) instead of 1 / sqrt(head_dim)
    // (Gemma 2/3 27B: their query_pre_attn_scalar is not in the file; llama.cpp's rule).
    std::vector<uint32_t> query_scale_by_dim_per_head_layers;
};

ArchDescriptor arch_llama();
ArchDescriptor arch_qwen2();
ArchDescriptor arch_qwen3();
ArchDescriptor arch_gemma();
ArchDescriptor arch_gemma2();
ArchDescriptor arch_gemma3();
ArchDescriptor arch_phi3();

// Finds the descriptor for a general.architecture value; throws UnsupportedError naming the
// architecture and listing the supported ones.
ArchDescriptor arch_from_name(const std::string &architecture);
std::vector<std::string> supported_architectures();

// Per layer: does layer `l` use sliding-window attention (and the local RoPE base)?
// `pattern` as ArchDescriptor::sliding_window_pattern; no layer slides when window is 0.
std::vector<uint8_t> sliding_layers(uint32_t n_layers, uint32_t window, uint32_t pattern);

}  // namespace akunu
