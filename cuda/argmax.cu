// Argmax over the logits into a token slot (the first index on ties, like the CPU), and the tiny
// store that sets the replay's base position in device memory.
#include <algorithm>

#include "cuda/grid_argmax.cuh"

namespace akunu::cuda {

namespace {

constexpr int kArgmaxThreads = 1024;

// Each block reduces a slice of the logits, four at a time per thread (a 49K vocabulary is one
// float4 per thread of 12 blocks: no serial walk); the last block to finish reduces the blocks'
// results and writes the token.
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_kernel(const float *__restrict__ x, uint32_t *__restrict__ out, const __grid_constant__ ArgmaxParams p,
                  const GridArgmax g) {
    pdl_enter();
    float v = -INFINITY;
    uint32_t idx = 0xFFFFFFFFu;
    const uint32_t n4 = p.n / 4, stride = gridDim.x * kArgmaxThreads;
    for (uint32_t i = blockIdx.x * kArgmaxThreads + threadIdx.x; i < n4; i += stride) {
        const float4 f = __ldg(reinterpret_cast<const float4 *>(x) + i);
        better(v, idx, f.x, 4 * i);
        better(v, idx, f.y, 4 * i + 1);
        better(v, idx, f.z, 4 * i + 2);
        better(v, idx, f.w, 4 * i + 3);
    }
    if (blockIdx.x == 0 && threadIdx.x < p.n % 4) better(v, idx, x[4 * n4 + threadIdx.x], 4 * n4 + threadIdx.x);
    finish_grid_argmax(v, idx, out, g);
}

__global__ void set_u32_kernel(uint32_t *dst, uint32_t value) { *dst = value; }

}  // namespace

void launch_argmax_f32(const LaunchArgs &a) {
    const ArgmaxParams &p = params_of<ArgmaxParams>(a);
    // One block per 4K logits (cuda/grid_argmax.cuh: at most 64).
    const GridArgmax g = grid_argmax_workspace(*a.workspace);
    const unsigned blocks = grid_argmax_blocks(g, p.n, 4 * kArgmaxThreads);
    if (reinterpret_cast<uintptr_t>(a.buffers[0]) % 16 != 0)
        throw AkunuError("internal: argmax_f32 on CUDA reads logits 16-byte aligned");
    launch_pdl(argmax_kernel, blocks, kArgmaxThreads, 0, a, reinterpret_cast<const float *>(a.buffers[0]),
               reinterpret_cast<uint32_t *>(a.buffers[1]), p, g);
    check_launch("argmax_f32");
}

void launch_set_u32(uint32_t *dst, uint32_t value, cudaStream_t stream) {
    set_u32_kernel<<<1, 1, 0, stream>>>(dst, value);
    check_launch("set_u32");
}

}  // namespace akunu::cuda
