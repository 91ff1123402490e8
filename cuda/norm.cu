// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, one block per row.
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

constexpr int kNormThreads = 256;

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
    for (uint32_t i = threadIdx.x; i < p.dim; i += kNormThreads) yr[i] = xr[i] * inv * w[i];
}

}  // namespace

void launch_rmsnorm_f32(const LaunchArgs &a) {
    const RMSNormParams &p = params_of<RMSNormParams>(a);
    launch_pdl(rmsnorm_kernel, p.rows, kNormThreads, 0, a, reinterpret_cast<const float *>(a.buffers[0]),
                                                          reinterpret_cast<const float *>(a.buffers[1]),
                                                          reinterpret_cast<float *>(a.buffers[2]), p);
    check_launch("rmsnorm_f32");
}

}  // namespace akunu::cuda
