#include "backend/cpu/kernels.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

// Unit = one row: x += bias (Qwen2's Q/K/V biases, added to the fused projection output).
void bias_add_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const BiasAddParams &p = params_of<BiasAddParams>(a);
    const float *b = reinterpret_cast<const float *>(a.buffers[1]);
    for (int64_t r = begin; r < end; ++r) {
        float *x = reinterpret_cast<float *>(a.buffers[0]) + (size_t)r * p.stride;
#pragma omp simd
        for (uint32_t i = 0; i < p.n; ++i) x[i] += b[i];
    }
}

}  // namespace akunu::cpu
