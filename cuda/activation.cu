// Gated activations, gate and up side by side in each row:
//   silu_mul_f32       out = silu(gate) * up
//   gelu_tanh_mul_f32  out = gelu(gate) * up, GELU's tanh approximation (Gemma)
#include <algorithm>

#include "cuda/activations.cuh"
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

template <class Act>
__global__ void gated_kernel(const float *__restrict__ gate_up, float *__restrict__ out,
                             const __grid_constant__ GatedActParams p) {
    pdl_enter();
    const size_t n = (size_t)p.rows * p.ffn_dim;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / p.ffn_dim, c = i % p.ffn_dim;
        const float g = gate_up[r * 2 * p.ffn_dim + c], u = gate_up[r * 2 * p.ffn_dim + p.ffn_dim + c];
        out[i] = Act::apply(g) * u;
    }
}

// Same, four columns per thread (ffn_dim % 4 == 0): one 16-byte load of gate and of up.
template <class Act>
__global__ void gated_vec4_kernel(const float4 *__restrict__ gate_up, float4 *__restrict__ out,
                                  const __grid_constant__ GatedActParams p) {
    pdl_enter();
    const uint32_t f4 = p.ffn_dim / 4;
    const size_t n = (size_t)p.rows * f4;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / f4, c = i % f4;
        const float4 g = gate_up[r * 2 * f4 + c], u = gate_up[r * 2 * f4 + f4 + c];
        out[i] = make_float4(Act::apply(g.x) * u.x, Act::apply(g.y) * u.y, Act::apply(g.z) * u.z, Act::apply(g.w) * u.w);
    }
}

template <class Act>
void launch_gated(const LaunchArgs &a, const char *name) {
    const GatedActParams &p = params_of<GatedActParams>(a);
    const bool vec4 = p.ffn_dim % 4 == 0 &&
                      ((reinterpret_cast<uintptr_t>(a.buffers[0]) | reinterpret_cast<uintptr_t>(a.buffers[1])) & 15) == 0;
    const size_t n = (size_t)p.rows * p.ffn_dim / (vec4 ? 4 : 1);
    const unsigned blocks = (unsigned)std::min<size_t>((n + 255) / 256, 65535);
    if (vec4)
        launch_pdl(gated_vec4_kernel<Act>, blocks, 256, 0, a, reinterpret_cast<const float4 *>(a.buffers[0]),
                   reinterpret_cast<float4 *>(a.buffers[1]), p);
    else
        launch_pdl(gated_kernel<Act>, blocks, 256, 0, a, reinterpret_cast<const float *>(a.buffers[0]),
                   reinterpret_cast<float *>(a.buffers[1]), p);
    check_launch(name);
}

}  // namespace

void launch_silu_mul_f32(const LaunchArgs &a) { launch_gated<SiLU>(a, "silu_mul_f32"); }
void launch_gelu_tanh_mul_f32(const LaunchArgs &a) { launch_gated<GeluTanh>(a, "gelu_tanh_mul_f32"); }

}  // namespace akunu::cuda
