// The (value, index) argmax across a grid, the first index on ties: each block reduces its share,
// the last block to finish reduces the blocks' results and writes the winner. Shared by
// argmax_f32 (logits) and sample_f32 (Gumbel scores). Their block results and arrival counter sit
// at the workspace's end (the last 128 floats, the last counter): a table ends in one or the other.
#pragma once
#include <algorithm>

#include "cuda/common.cuh"

namespace akunu::cuda {

constexpr unsigned kGridArgmaxMaxBlocks = 64;

// Where the blocks leave their results; null pointers: one block only.
struct GridArgmax {
    float *block_vals = nullptr;
    uint32_t *block_idxs = nullptr;
    unsigned *done_blocks = nullptr;
};

inline GridArgmax grid_argmax_workspace(const Workspace &ws) {
    if (ws.n_counters == 0 || ws.floats < 2 * kGridArgmaxMaxBlocks) return {};
    return {ws.data + ws.floats - 2 * kGridArgmaxMaxBlocks,
            reinterpret_cast<uint32_t *>(ws.data + ws.floats - kGridArgmaxMaxBlocks), ws.counters + ws.n_counters - 1};
}

// Blocks for `work_items` items at `per_block` each: at most kGridArgmaxMaxBlocks, 1 without a workspace.
inline unsigned grid_argmax_blocks(const GridArgmax &g, uint64_t work_items, uint64_t per_block) {
    if (!g.done_blocks) return 1;
    return std::min<unsigned>(kGridArgmaxMaxBlocks, ceil_div_u(work_items, per_block));
}

__device__ __forceinline__ void better(float &v, uint32_t &i, float v2, uint32_t i2) {
    if (v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

// Block-wide (value, index) best; thread 0 gets the result.
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

// Every thread of every block calls this with its own best (v, idx); the grid's winner (0 when no
// thread saw an index) lands in *out.
__device__ __forceinline__ void finish_grid_argmax(float v, uint32_t idx, uint32_t *out, const GridArgmax &g) {
    __shared__ float vals[32];
    __shared__ uint32_t idxs[32];
    __shared__ bool is_last;
    block_best(v, idx, vals, idxs);
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) *out = idx == 0xFFFFFFFFu ? 0u : idx;
        return;
    }
    if (threadIdx.x == 0) {
        g.block_vals[blockIdx.x] = v;
        g.block_idxs[blockIdx.x] = idx;
        __threadfence();
        is_last = atomicAdd(g.done_blocks, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    v = -INFINITY;
    idx = 0xFFFFFFFFu;
    for (uint32_t b = threadIdx.x; b < gridDim.x; b += blockDim.x)
        better(v, idx, __ldcg(g.block_vals + b), __ldcg(g.block_idxs + b));
    block_best(v, idx, vals, idxs);
    if (threadIdx.x == 0) {
        *out = idx == 0xFFFFFFFFu ? 0u : idx;
        *g.done_blocks = 0;  // ready for the next replay
    }
}

}  // namespace akunu::cuda
