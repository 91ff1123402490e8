#include "backend/metal/metal_kernels.h"

namespace akunu::metal {

const std::vector<MetalKernelInfo> &metal_kernels() {
    static const std::vector<MetalKernelInfo> kernels = {
        // norm.metal: one group per row.
        {"rmsnorm_f32", 256, 3},
        {"rmsnorm_add_f32", 256, 3},
        {"head_rmsnorm_f32", 128, 3},
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
    };
    return kernels;
}

const MetalKernelInfo *find_metal_kernel(const std::string &name) {
    for (const MetalKernelInfo &k : metal_kernels())
        if (name == k.name) return &k;
    return nullptr;
}

}  // namespace akunu::metal
