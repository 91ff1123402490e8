// bias_add_f32: x[r][i] += bias[i] (Qwen2's Q/K/V biases on the fused projection output).
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

__global__ void bias_add_kernel(float *__restrict__ x, const float *__restrict__ bias,
                                const __grid_constant__ BiasAddParams p) {
    pdl_enter();
    const size_t n = (size_t)p.rows * p.n;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / p.n, c = i % p.n;
        x[r * p.stride + c] += bias[c];
    }
}

}  // namespace

void launch_bias_add_f32(const LaunchArgs &a) {
    const BiasAddParams &p = params_of<BiasAddParams>(a);
    const size_t n = (size_t)p.rows * p.n;
    const unsigned blocks = (unsigned)std::min<size_t>((n + 255) / 256, 65535);
    launch_pdl(bias_add_kernel, blocks, 256, 0, a, reinterpret_cast<float *>(a.buffers[0]),
               reinterpret_cast<const float *>(a.buffers[1]), p);
    check_launch("bias_add_f32");
}

}  // namespace akunu::cuda
