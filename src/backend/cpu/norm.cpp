#include <cmath>

#include "backend/cpu/kernels.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

namespace {

// 1 / sqrt(mean(x^2) + eps) over n values.
inline float rms_inverse(const float *x, uint32_t n, float eps) {
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (uint32_t i = 0; i < n; ++i) sum += x[i] * x[i];
    return 1.0f / std::sqrt(sum / (float)n + eps);
}

// Unit = one row: y = x / sqrt(mean(x^2) + eps) * w, or y += ... (a post-norm feeding the residual).
template <bool kAccumulate> void rmsnorm_rows(const KernelArgs &a, int64_t begin, int64_t end) {
    const RMSNormParams &p = params_of<RMSNormParams>(a);
    const float *w = reinterpret_cast<const float *>(a.buffers[1]);
    for (int64_t r = begin; r < end; ++r) {
        const float *x = reinterpret_cast<const float *>(a.buffers[0]) + (size_t)r * p.x_stride;
        float *y = reinterpret_cast<float *>(a.buffers[2]) + (size_t)r * p.out_stride;
        const float inv = rms_inverse(x, p.dim, p.eps);
#pragma omp simd
        for (uint32_t i = 0; i < p.dim; ++i) y[i] = (kAccumulate ? y[i] : 0.f) + x[i] * inv * w[i];
    }
}

}  // namespace

void rmsnorm_kernel(const KernelArgs &a, int64_t begin, int64_t end) { rmsnorm_rows<false>(a, begin, end); }
void rmsnorm_add_kernel(const KernelArgs &a, int64_t begin, int64_t end) { rmsnorm_rows<true>(a, begin, end); }

// Unit = one token row: RMSNorm over each Q head (weight q_w) and each K head (weight k_w), in place.
void head_rmsnorm_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const HeadNormParams &p = params_of<HeadNormParams>(a);
    const float *q_w = reinterpret_cast<const float *>(a.buffers[1]);
    const float *k_w = reinterpret_cast<const float *>(a.buffers[2]);
    for (int64_t r = begin; r < end; ++r) {
        float *row = reinterpret_cast<float *>(a.buffers[0]) + (size_t)r * p.stride;
        for (uint32_t h = 0; h < p.n_heads + p.n_kv_heads; ++h) {
            float *x = row + (size_t)h * p.head_dim;
            const float *w = h < p.n_heads ? q_w : k_w;
            const float inv = rms_inverse(x, p.head_dim, p.eps);
#pragma omp simd
            for (uint32_t i = 0; i < p.head_dim; ++i) x[i] = x[i] * inv * w[i];
        }
    }
}

}  // namespace akunu::cpu
