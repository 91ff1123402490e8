// Gated activation: out = silu(gate) * up, gate and up side by side in each row.
#include <algorithm>

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

// Same, four columns per thread (ffn_dim % 4 == 0): one 16-byte load of gate and of up.
__global__ void silu_mul_vec4_kernel(const float4 *__restrict__ gate_up, float4 *__restrict__ out, GatedActParams p) {
    pdl_enter();
    const uint32_t f4 = p.ffn_dim / 4;
    const size_t n = (size_t)p.rows * f4;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / f4, c = i % f4;
        const float4 g = gate_up[r * 2 * f4 + c], u = gate_up[r * 2 * f4 + f4 + c];
        out[i] = make_float4(g.x / (1.0f + expf(-g.x)) * u.x, g.y / (1.0f + expf(-g.y)) * u.y,
                             g.z / (1.0f + expf(-g.z)) * u.z, g.w / (1.0f + expf(-g.w)) * u.w);
    }
}

}  // namespace

void launch_silu_mul_f32(const LaunchArgs &a) {
    const GatedActParams &p = params_of<GatedActParams>(a);
    if (p.ffn_dim % 4 == 0 && ((reinterpret_cast<uintptr_t>(a.buffers[0]) | reinterpret_cast<uintptr_t>(a.buffers[1])) & 15) == 0) {
        const size_t n4 = (size_t)p.rows * p.ffn_dim / 4;
        const unsigned blocks = (unsigned)std::min<size_t>((n4 + 255) / 256, 65535);
        launch_pdl(silu_mul_vec4_kernel, blocks, 256, 0, a, reinterpret_cast<const float4 *>(a.buffers[0]),
                   reinterpret_cast<float4 *>(a.buffers[1]), p);
        check_launch("silu_mul_f32");
        return;
    }
    const size_t n = (size_t)p.rows * p.ffn_dim;
    const unsigned blocks = (unsigned)std::min<size_t>((n + 255) / 256, 65535);
    launch_pdl(silu_mul_kernel, blocks, 256, 0, a, reinterpret_cast<const float *>(a.buffers[0]),
                                                  reinterpret_cast<float *>(a.buffers[1]), p);
    check_launch("silu_mul_f32");
}

}  // namespace akunu::cuda
