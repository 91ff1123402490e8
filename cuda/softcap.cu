// softcap_f32: x = cap * tanh(x / cap) in place (Gemma 2's final logit soft-capping).
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

__global__ void softcap_kernel(float *__restrict__ x, const __grid_constant__ SoftcapParams p) {
    pdl_enter();
    const size_t n = (size_t)p.rows * p.n;
    const float inv_cap = 1.0f / p.cap;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = p.cap * tanhf(x[i] * inv_cap);
}

}  // namespace

void launch_softcap_f32(const LaunchArgs &a) {
    const SoftcapParams &p = params_of<SoftcapParams>(a);
    const size_t n = (size_t)p.rows * p.n;
    const unsigned blocks = (unsigned)std::min<size_t>((n + 255) / 256, 65535);
    launch_pdl(softcap_kernel, blocks, 256, 0, a, reinterpret_cast<float *>(a.buffers[0]), p);
    check_launch("softcap_f32");
}

}  // namespace akunu::cuda
