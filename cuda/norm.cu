// RMSNorm family, one block per row (one warp per head for QK-norm):
//   rmsnorm_f32       y = x / sqrt(mean(x^2) + eps) * w
//   rmsnorm_add_f32   y += x / sqrt(mean(x^2) + eps) * w   (post-norm into the residual)
//   head_rmsnorm_f32  the same over each Q and K head of the qkv rows, in place (QK-norm)
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

constexpr int kNormThreads = 256;
constexpr int kMaxVecsPerThread = 8;  // float4s held in registers: dim <= 8192 on the fast path

// Decode runs this on one row between two GEMVs, so it is latency that counts: every thread issues
// all its x and w loads at once (float4, held in registers across the reduction) instead of
// walking the row twice with dependent scalar loads.
template <bool kAccumulate>
__global__ void __launch_bounds__(kNormThreads)
    rmsnorm_vec4_kernel(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y,
                        const __grid_constant__ RMSNormParams p) {
    pdl_enter();
    __shared__ float red[32];
    const float4 *xr = reinterpret_cast<const float4 *>(x + (size_t)blockIdx.x * p.x_stride);
    const float4 *wr = reinterpret_cast<const float4 *>(w);
    float4 *yr = reinterpret_cast<float4 *>(y + (size_t)blockIdx.x * p.out_stride);
    const uint32_t n4 = p.dim / 4;
    float4 xv[kMaxVecsPerThread], wv[kMaxVecsPerThread];
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxVecsPerThread; ++k) {
        const uint32_t i = threadIdx.x + (uint32_t)k * kNormThreads;
        if (i < n4) {
            xv[k] = xr[i];
            wv[k] = __ldg(wr + i);
        }
    }
#pragma unroll
    for (int k = 0; k < kMaxVecsPerThread; ++k)
        if (threadIdx.x + (uint32_t)k * kNormThreads < n4)
            sum += xv[k].x * xv[k].x + xv[k].y * xv[k].y + xv[k].z * xv[k].z + xv[k].w * xv[k].w;
    sum = block_reduce<false>(sum, red);
    const float inv = 1.0f / sqrtf(sum / (float)p.dim + p.eps);
#pragma unroll
    for (int k = 0; k < kMaxVecsPerThread; ++k) {
        const uint32_t i = threadIdx.x + (uint32_t)k * kNormThreads;
        if (i < n4) {
            float4 v = make_float4(xv[k].x * inv * wv[k].x, xv[k].y * inv * wv[k].y, xv[k].z * inv * wv[k].z,
                                   xv[k].w * inv * wv[k].w);
            if (kAccumulate) {
                const float4 o = yr[i];
                v = make_float4(o.x + v.x, o.y + v.y, o.z + v.z, o.w + v.w);
            }
            yr[i] = v;
        }
    }
}

// Any dim and stride: two passes over the row.
template <bool kAccumulate>
__global__ void __launch_bounds__(kNormThreads)
    rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y,
                   const __grid_constant__ RMSNormParams p) {
    pdl_enter();
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * p.x_stride;
    float *yr = y + (size_t)blockIdx.x * p.out_stride;
    float sum = 0.f;
    for (uint32_t i = threadIdx.x; i < p.dim; i += kNormThreads) sum += xr[i] * xr[i];
    sum = block_reduce<false>(sum, red);
    const float inv = 1.0f / sqrtf(sum / (float)p.dim + p.eps);
    for (uint32_t i = threadIdx.x; i < p.dim; i += kNormThreads) {
        const float v = xr[i] * inv * w[i];
        yr[i] = kAccumulate ? yr[i] + v : v;
    }
}

// Block = one warp = one head of one token row (Q heads first, then K heads).
__global__ void head_rmsnorm_kernel(float *__restrict__ qkv, const float *__restrict__ q_w,
                                    const float *__restrict__ k_w, const __grid_constant__ HeadNormParams p) {
    pdl_enter();
    const uint32_t heads = p.n_heads + p.n_kv_heads;
    const uint32_t r = blockIdx.x / heads, h = blockIdx.x % heads;
    float *x = qkv + (size_t)r * p.stride + (size_t)h * p.head_dim;
    const float *w = h < p.n_heads ? q_w : k_w;
    float sum = 0.f;
    for (uint32_t i = threadIdx.x; i < p.head_dim; i += 32) sum += x[i] * x[i];
    sum = warp_sum(sum);
    const float inv = 1.0f / sqrtf(sum / (float)p.head_dim + p.eps);
    for (uint32_t i = threadIdx.x; i < p.head_dim; i += 32) x[i] = x[i] * inv * w[i];
}

template <bool kAccumulate>
void launch_rmsnorm(const LaunchArgs &a, const char *name) {
    const RMSNormParams &p = params_of<RMSNormParams>(a);
    const auto *x = reinterpret_cast<const float *>(a.buffers[0]);
    const auto *w = reinterpret_cast<const float *>(a.buffers[1]);
    auto *y = reinterpret_cast<float *>(a.buffers[2]);
    const bool vec4 = p.dim % 4 == 0 && p.x_stride % 4 == 0 && p.out_stride % 4 == 0 &&
                      p.dim <= 4u * kNormThreads * kMaxVecsPerThread &&
                      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    if (vec4)
        launch_pdl(rmsnorm_vec4_kernel<kAccumulate>, p.rows, kNormThreads, 0, a, x, w, y, p);
    else
        launch_pdl(rmsnorm_kernel<kAccumulate>, p.rows, kNormThreads, 0, a, x, w, y, p);
    check_launch(name);
}

}  // namespace

void launch_rmsnorm_f32(const LaunchArgs &a) { launch_rmsnorm<false>(a, "rmsnorm_f32"); }
void launch_rmsnorm_add_f32(const LaunchArgs &a) { launch_rmsnorm<true>(a, "rmsnorm_add_f32"); }

void launch_head_rmsnorm_f32(const LaunchArgs &a) {
    const HeadNormParams &p = params_of<HeadNormParams>(a);
    launch_pdl(head_rmsnorm_kernel, p.rows * (p.n_heads + p.n_kv_heads), 32, 0, a,
               reinterpret_cast<float *>(a.buffers[0]), reinterpret_cast<const float *>(a.buffers[1]),
               reinterpret_cast<const float *>(a.buffers[2]), p);
    check_launch("head_rmsnorm_f32");
}

}  // namespace akunu::cuda
