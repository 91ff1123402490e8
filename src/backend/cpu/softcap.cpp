#include <cmath>

#include "backend/cpu/kernels.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

// Unit = one row: x = cap * tanh(x / cap) (Gemma 2's final logit soft-capping).
void softcap_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const SoftcapParams &p = params_of<SoftcapParams>(a);
    const float inv_cap = 1.0f / p.cap;
    for (int64_t r = begin; r < end; ++r) {
        float *x = reinterpret_cast<float *>(a.buffers[0]) + (size_t)r * p.n;
        for (uint32_t i = 0; i < p.n; ++i) x[i] = p.cap * std::tanh(x[i] * inv_cap);
    }
}

}  // namespace akunu::cpu
