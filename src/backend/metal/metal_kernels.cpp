#include "backend/metal/metal_kernels.h"

namespace akunu::metal {

const std::vector<MetalKernelInfo> &metal_kernels() {
    static const std::vector<MetalKernelInfo> kernels = {
        // norm.metal: one group per row.
        {"rmsnorm_f32", 256, 3},
        {"rmsnorm_add_f32", 256, 3},
        {"head_rmsnorm_f32", 128, 3},
        // embedding.metal: one group per token row, threads over its 16-element chunks.
        {"embedding_f32", 128, 3},
        {"embedding_f16", 128, 3},
        {"embedding_bf16", 128, 3},
        {"embedding_q8_0", 128, 3},
        {"embedding_q4_0", 128, 3},
        {"embedding_q4_1", 128, 3},
        {"embedding_q5_0", 128, 3},
        {"embedding_q5_1", 128, 3},
        {"embedding_iq4_nl", 128, 3},
        {"embedding_q2_k", 128, 3},
        {"embedding_q3_k", 128, 3},
        {"embedding_q4_k", 128, 3},
        {"embedding_q5_k", 128, 3},
        {"embedding_q6_k", 128, 3},
        {"embedding_iq4_xs", 128, 3},
        // gemm.metal: one group per rows_per_unit weight rows; x, y, up to three weights, the
        // input norm's weight.
        {"gemm_f32", 128, 6},
        {"gemm_f16", 128, 6},
        {"gemm_bf16", 128, 6},
        {"gemm_q8_0", 128, 6},
        {"gemm_q4_0", 128, 6},
        {"gemm_q4_1", 128, 6},
        {"gemm_q5_0", 128, 6},
        {"gemm_q5_1", 128, 6},
        {"gemm_iq4_nl", 128, 6},
        {"gemm_q2_k", 128, 6},
        {"gemm_q3_k", 128, 6},
        {"gemm_q4_k", 128, 6},
        {"gemm_q5_k", 128, 6},
        {"gemm_q6_k", 128, 6},
        {"gemm_iq4_xs", 128, 6},
        // rope.metal: one group per token row (threads: a multiple of 32).
        {"rope_interleaved_kv_write", 64, 4},
        {"rope_neox_kv_write", 64, 4},
        {"rope_interleaved_kv_write_q8", 64, 4},
        {"rope_neox_kv_write_q8", 64, 4},
        // attention.metal: one group per (query head, query row); the decode forms one per query
        // head (threads: a multiple of 32, at most 128).
        {"attention_f16kv", 128, 4},
        {"attention_q8kv", 128, 4},
        {"attention_rope_interleaved_f16kv", 128, 7},
        {"attention_rope_neox_f16kv", 128, 7},
        {"attention_rope_interleaved_q8kv", 128, 7},
        {"attention_rope_neox_q8kv", 128, 7},
        // bias.metal, softcap.metal, activation.metal: one group per row.
        {"bias_add_f32", 256, 2},
        {"softcap_f32", 256, 1},
        {"silu_mul_f32", 256, 2},
        {"gelu_tanh_mul_f32", 256, 2},
        // argmax.metal, sample.metal: one group for the whole vocabulary. 256 threads with two
        // 16-byte loads in flight each (for_each_logit.h) have 2048 logits in flight, more than
        // 1024 threads loading one each, at a quarter of the shim's OS threads.
        {"argmax_f32", 256, 2},
        {"sample_f32", 256, 3},
        // grammar_bitmask.metal: one group per 64 mask words (2048 logits), a thread per logit.
        {"grammar_bitmask_f32", 256, 2},
    };
    return kernels;
}

const MetalKernelInfo *find_metal_kernel(const std::string &name) {
    for (const MetalKernelInfo &k : metal_kernels())
        if (name == k.name) return &k;
    return nullptr;
}

}  // namespace akunu::metal
