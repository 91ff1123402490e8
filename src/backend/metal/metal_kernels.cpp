#include "backend/metal/metal_kernels.h"

namespace akunu::metal {

const std::vector<MetalKernelInfo> &metal_kernels() {
    static const std::vector<MetalKernelInfo> kernels = {
        // norm.metal: one group per row.
        {"rmsnorm_f32", 256, 3},
        {"rmsnorm_add_f32", 256, 3},
        {"head_rmsnorm_f32", 128, 3},
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
