// Gated activation: out = silu(gate) * up, gate and up side by side in each row.
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

__global__ void silu_mul_kernel(const float *__restrict__ gate_up, float *__restrict__ out, GatedActParams p) {
    pdl_enter();
    const size_t n = (size_t)p.rows * p.ffn_dim;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / p.ffn_dim, c = i % p.ffn_dim;
        const float g = gate_up[r * 2 * p.ffn_dim + c], u = gate_up[r * 2 * p.ffn_dim + p.ffn_dim + c];
        out[i] = g / (1.0f + expf(-g)) * u;
    }
}

}  // namespace

void launch_silu_mul_f32(const LaunchArgs &a) {
    const GatedActParams &p = params_of<GatedActParams>(a);
    const size_t n = (size_t)p.rows * p.ffn_dim;
    const unsigned blocks = (unsigned)std::min<size_t>((n + 255) / 256, 65535);
    launch_pdl(silu_mul_kernel, blocks, 256, 0, a, reinterpret_cast<const float *>(a.buffers[0]),
                                                  reinterpret_cast<float *>(a.buffers[1]), p);
    check_launch("silu_mul_f32");
}

}  // namespace akunu::cuda
