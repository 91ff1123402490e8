// The metal/ kernels compiled as C++ through the shim (one translation unit, as one Metal
// library), and the registry that finds them by name.
#include "metal_shim.h"

#include "norm.metal"
#include "embedding.metal"
#include "gemm.metal"

#include "rope.metal"
#include "attention.metal"

// The small kernels (bias, softcap, gated activations, argmax, grammar mask, sampler).
#include "activation.metal"
#include "argmax.metal"
#include "bias.metal"
#include "grammar_bitmask.metal"
#include "sample.metal"
#include "softcap.metal"

namespace shim {

#define AKUNU_SHIM_KERNEL(name) {#name, &invoke<name>, buffer_arguments(name)}

const std::vector<KernelEntry> &kernels() {
    static const std::vector<KernelEntry> entries = {
        AKUNU_SHIM_KERNEL(rmsnorm_f32),
        AKUNU_SHIM_KERNEL(rmsnorm_add_f32),
        AKUNU_SHIM_KERNEL(head_rmsnorm_f32),
        // embedding.metal
        AKUNU_SHIM_KERNEL(embedding_f32),
        AKUNU_SHIM_KERNEL(embedding_f16),
        AKUNU_SHIM_KERNEL(embedding_bf16),
        AKUNU_SHIM_KERNEL(embedding_q8_0),
        AKUNU_SHIM_KERNEL(embedding_q4_0),
        AKUNU_SHIM_KERNEL(embedding_q4_1),
        AKUNU_SHIM_KERNEL(embedding_q5_0),
        AKUNU_SHIM_KERNEL(embedding_q5_1),
        AKUNU_SHIM_KERNEL(embedding_iq4_nl),
        AKUNU_SHIM_KERNEL(embedding_q2_k),
        AKUNU_SHIM_KERNEL(embedding_q3_k),
        AKUNU_SHIM_KERNEL(embedding_q4_k),
        AKUNU_SHIM_KERNEL(embedding_q5_k),
        AKUNU_SHIM_KERNEL(embedding_q6_k),
        AKUNU_SHIM_KERNEL(embedding_iq4_xs),
        // gemm.metal
        AKUNU_SHIM_KERNEL(gemm_f32),
        AKUNU_SHIM_KERNEL(gemm_f16),
        AKUNU_SHIM_KERNEL(gemm_bf16),
        AKUNU_SHIM_KERNEL(gemm_q8_0),
        AKUNU_SHIM_KERNEL(gemm_q4_0),
        AKUNU_SHIM_KERNEL(gemm_q4_1),
        AKUNU_SHIM_KERNEL(gemm_q5_0),
        AKUNU_SHIM_KERNEL(gemm_q5_1),
        AKUNU_SHIM_KERNEL(gemm_iq4_nl),
        AKUNU_SHIM_KERNEL(gemm_q2_k),
        AKUNU_SHIM_KERNEL(gemm_q3_k),
        AKUNU_SHIM_KERNEL(gemm_q4_k),
        AKUNU_SHIM_KERNEL(gemm_q5_k),
        AKUNU_SHIM_KERNEL(gemm_q6_k),
        AKUNU_SHIM_KERNEL(gemm_iq4_xs),
        // rope.metal
        AKUNU_SHIM_KERNEL(rope_interleaved_kv_write),
        AKUNU_SHIM_KERNEL(rope_neox_kv_write),
        AKUNU_SHIM_KERNEL(rope_interleaved_kv_write_q8),
        AKUNU_SHIM_KERNEL(rope_neox_kv_write_q8),
        // attention.metal
        AKUNU_SHIM_KERNEL(attention_f16kv),
        AKUNU_SHIM_KERNEL(attention_q8kv),
        AKUNU_SHIM_KERNEL(attention_rope_interleaved_f16kv),
        AKUNU_SHIM_KERNEL(attention_rope_neox_f16kv),
        AKUNU_SHIM_KERNEL(attention_rope_interleaved_q8kv),
        AKUNU_SHIM_KERNEL(attention_rope_neox_q8kv),
        // The small kernels.
        AKUNU_SHIM_KERNEL(bias_add_f32),
        AKUNU_SHIM_KERNEL(softcap_f32),
        AKUNU_SHIM_KERNEL(silu_mul_f32),
        AKUNU_SHIM_KERNEL(gelu_tanh_mul_f32),
        AKUNU_SHIM_KERNEL(argmax_f32),
        AKUNU_SHIM_KERNEL(grammar_bitmask_f32),
        AKUNU_SHIM_KERNEL(sample_f32),
    };
    return entries;
}

}  // namespace shim
