#include "backend/cpu/kernels.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

// Single unit: index of the largest logit (the first one on ties) into the token slot.
void argmax_kernel(const KernelArgs &a, int64_t, int64_t) {
    const ArgmaxParams &p = params_of<ArgmaxParams>(a);
    const float *x = reinterpret_cast<const float *>(a.buffers[0]);
    uint32_t best = 0;
    float best_value = x[0];
    for (uint32_t i = 1; i < p.n; ++i)
        if (x[i] > best_value) {
            best_value = x[i];
            best = i;
        }
    *reinterpret_cast<uint32_t *>(a.buffers[1]) = best;
}

}  // namespace akunu::cpu
