#include <cmath>

#include "backend/cpu/kernels.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

// Unit = one row: y = x / sqrt(mean(x^2) + eps) * w.
void rmsnorm_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const RMSNormParams &p = params_of<RMSNormParams>(a);
    const float *w = reinterpret_cast<const float *>(a.buffers[1]);
    for (int64_t r = begin; r < end; ++r) {
        const float *x = reinterpret_cast<const float *>(a.buffers[0]) + (size_t)r * p.x_stride;
        float *y = reinterpret_cast<float *>(a.buffers[2]) + (size_t)r * p.out_stride;
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (uint32_t i = 0; i < p.dim; ++i) sum += x[i] * x[i];
        const float inv = 1.0f / std::sqrt(sum / (float)p.dim + p.eps);
#pragma omp simd
        for (uint32_t i = 0; i < p.dim; ++i) y[i] = x[i] * inv * w[i];
    }
}

}  // namespace akunu::cpu
