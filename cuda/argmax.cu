// Argmax over the logits into a token slot (the first index on ties, like the CPU), and the tiny
// store that sets the replay's base position in device memory.
#include <algorithm>

#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

constexpr int kArgmaxThreads = 1024;

__device__ __forceinline__ void better(float &v, uint32_t &i, float v2, uint32_t i2) {
    if (v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

// Block-wide (value, index) reduction; thread 0 gets the result.
__device__ __forceinline__ void block_best(float &v, uint32_t &idx, float *vals, uint32_t *idxs) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        vals[warp] = v;
        idxs[warp] = idx;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? vals[lane] : -INFINITY;
        idx = lane < (int)(blockDim.x >> 5) ? idxs[lane] : 0xFFFFFFFFu;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
    }
}

// Each block reduces a slice of the logits, four at a time per thread (a 49K vocabulary is one
// float4 per thread of 12 blocks: no serial walk); the last block to finish reduces the blocks'
// results and writes the token.
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_kernel(const float *__restrict__ x, uint32_t *__restrict__ out, const __grid_constant__ ArgmaxParams p,
                  float *block_vals, uint32_t *block_idxs, unsigned *done_blocks) {
    pdl_enter();
    __shared__ float vals[32];
    __shared__ uint32_t idxs[32];
    __shared__ bool is_last;
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
    block_best(v, idx, vals, idxs);
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) *out = idx == 0xFFFFFFFFu ? 0u : idx;
        return;
    }
    if (threadIdx.x == 0) {
        block_vals[blockIdx.x] = v;
        block_idxs[blockIdx.x] = idx;
        __threadfence();
        is_last = atomicAdd(done_blocks, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    v = -INFINITY;
    idx = 0xFFFFFFFFu;
    for (uint32_t b = threadIdx.x; b < gridDim.x; b += kArgmaxThreads) better(v, idx, __ldcg(block_vals + b), __ldcg(block_idxs + b));
    block_best(v, idx, vals, idxs);
    if (threadIdx.x == 0) {
        *out = idx == 0xFFFFFFFFu ? 0u : idx;
        *done_blocks = 0;  // ready for the next replay
    }
}

__global__ void set_u32_kernel(uint32_t *dst, uint32_t value) { *dst = value; }

}  // namespace

void launch_argmax_f32(const LaunchArgs &a) {
    const ArgmaxParams &p = params_of<ArgmaxParams>(a);
    // One block per 4K logits (at most 64): the partial results sit at the workspace's end, the
    // arrival count in its last counter (split attention uses the first n_heads).
    const Workspace &ws = *a.workspace;
    unsigned blocks = std::min<unsigned>(64, ceil_div_u(p.n, 4 * kArgmaxThreads));
    if (ws.n_counters == 0 || ws.floats < 128) blocks = 1;
    if (reinterpret_cast<uintptr_t>(a.buffers[0]) % 16 != 0)
        throw AkunuError("internal: argmax_f32 on CUDA reads logits 16-byte aligned");
    float *block_vals = ws.data + ws.floats - 128;
    uint32_t *block_idxs = reinterpret_cast<uint32_t *>(ws.data + ws.floats - 64);
    launch_pdl(argmax_kernel, blocks, kArgmaxThreads, 0, a, reinterpret_cast<const float *>(a.buffers[0]),
               reinterpret_cast<uint32_t *>(a.buffers[1]), p, block_vals, block_idxs, ws.counters + ws.n_counters - 1);
    check_launch("argmax_f32");
}

void launch_set_u32(uint32_t *dst, uint32_t value, cudaStream_t stream) {
    set_u32_kernel<<<1, 1, 0, stream>>>(dst, value);
    check_launch("set_u32");
}

}  // namespace akunu::cuda
