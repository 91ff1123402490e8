// RMSNorm family, one block per row (one warp per head for QK-norm):
//   rmsnorm_f32       y = x / sqrt(mean(x^2) + eps) * w
//   rmsnorm_add_f32   y += x / sqrt(mean(x^2) + eps) * w   (post-norm into the residual)
//   head_rmsnorm_f32  the same over each Q and K head of the qkv rows, in place (QK-norm)
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

constexpr int kNormThreads = 256;

template <bool kAccumulate>
__global__ void __launch_bounds__(kNormThreads)
    rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y, RMSNormParams p) {
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
                                    const float *__restrict__ k_w, HeadNormParams p) {
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
    launch_pdl(rmsnorm_kernel<kAccumulate>, p.rows, kNormThreads, 0, a, reinterpret_cast<const float *>(a.buffers[0]),
               reinterpret_cast<const float *>(a.buffers[1]), reinterpret_cast<float *>(a.buffers[2]), p);
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
