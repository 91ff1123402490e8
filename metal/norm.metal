// RMSNorm kernels (the CPU's src/backend/cpu/norm.cpp, the CUDA cuda/norm.cu).
// One threadgroup per row; threads stride over the row, reduce the sum of squares, then write.
#include "common.h"
#include "reduce.h"

namespace {
// out = x / sqrt(mean(x^2) + eps) * w, or out += ... (the post-norm into the residual).
template <bool kAccumulate, typename Partials>
inline void rmsnorm_row(device const float *x, device const float *w, device float *out, uint dim, float eps,
                        Partials partials, uint tid, uint n_threads, uint simd_lane, uint simd_index) {
    float sum = 0.0f;
    for (uint i = tid; i < dim; i += n_threads) sum += x[i] * x[i];
    sum = threadgroup_sum(sum, partials, simd_lane, simd_index, n_threads);
    const float inv = 1.0f / sqrt(sum / float(dim) + eps);
    for (uint i = tid; i < dim; i += n_threads) {
        const float y = x[i] * inv * w[i];
        out[i] = kAccumulate ? out[i] + y : y;
    }
}
}  // namespace

// buffers: 0 x [rows, dim], 1 weight [dim], 2 out [rows, dim]; group = row
kernel void rmsnorm_f32(device const float *x [[buffer(0)]], device const float *w [[buffer(1)]],
                        device float *out [[buffer(2)]], constant RMSNormParams &p [[buffer(3)]],
                        AKUNU_THREAD_ARGS) {
    threadgroup float partials[32];
    const uint r = group.x;
    rmsnorm_row<false>(x + r * p.x_stride, w, out + r * p.out_stride, p.dim, p.eps, partials, thread_position.x,
                       group_size.x, simd_lane, simd_index);
}

kernel void rmsnorm_add_f32(device const float *x [[buffer(0)]], device const float *w [[buffer(1)]],
                            device float *out [[buffer(2)]], constant RMSNormParams &p [[buffer(3)]],
                            AKUNU_THREAD_ARGS) {
    threadgroup float partials[32];
    const uint r = group.x;
    rmsnorm_row<true>(x + r * p.x_stride, w, out + r * p.out_stride, p.dim, p.eps, partials, thread_position.x,
                      group_size.x, simd_lane, simd_index);
}

// Per-head RMSNorm of Q and K in place. buffers: 0 qkv, 1 q weight [head_dim], 2 k weight;
// group = row; one SIMD group per head at a time.
kernel void head_rmsnorm_f32(device float *qkv [[buffer(0)]], device const float *q_w [[buffer(1)]],
                             device const float *k_w [[buffer(2)]], constant HeadNormParams &p [[buffer(3)]],
                             AKUNU_THREAD_ARGS) {
    device float *row = qkv + group.x * p.stride;
    const uint n_simd = (group_size.x + AKUNU_SIMD_WIDTH - 1) / AKUNU_SIMD_WIDTH;
    for (uint h = simd_index; h < p.n_heads + p.n_kv_heads; h += n_simd) {
        device float *x = row + h * p.head_dim;
        device const float *w = h < p.n_heads ? q_w : k_w;
        float sum = 0.0f;
        for (uint i = simd_lane; i < p.head_dim; i += AKUNU_SIMD_WIDTH) sum += x[i] * x[i];
        sum = simd_sum(sum);
        const float inv = 1.0f / sqrt(sum / float(p.head_dim) + p.eps);
        for (uint i = simd_lane; i < p.head_dim; i += AKUNU_SIMD_WIDTH) x[i] = x[i] * inv * w[i];
    }
}
