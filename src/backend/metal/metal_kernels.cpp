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
    };
    return kernels;
}

const MetalKernelInfo *find_metal_kernel(const std::string &name) {
    for (const MetalKernelInfo &k : metal_kernels())
        if (name == k.name) return &k;
    return nullptr;
}

}  // namespace akunu::metal
