// The metal/ kernels compiled as C++ through the shim (one translation unit, as one Metal
// library), and the registry that finds them by name.
#include "metal_shim.h"

#include "norm.metal"

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
