// The decode GEMV (M = 1) of cuda/gemm.cu: y[N] (+)= W[N, K] . x[K], memory bound, one kernel per
// weight layout. Both split K between the warps of a block and reuse each x chunk for all of the
// block's rows; partial sums meet in shared memory.
#pragma once
#include "cuda/common.cuh"
#include "cuda/formats_g8.cuh"
#include "cuda/formats_kquant.cuh"

namespace akunu::cuda {

struct WeightPtrs {
    const uint8_t *part[GemmParams::kMaxParts];
    // part[i] by selects: indexing the kernel parameter with a runtime i would copy it to the stack.
    __device__ __forceinline__ const uint8_t *at(uint32_t i) const { return i == 0 ? part[0] : i == 1 ? part[1] : part[2]; }
};

constexpr int kGemvWarps = 4;

// Which part a global weight row (counted across parts) falls in, and its row inside that part.
__device__ __forceinline__ void locate_row(const GemmParams &p, uint32_t row, uint32_t &part, uint32_t &local) {
    part = 0;
    local = row;
    while (part + 1 < p.n_parts && local >= p.N[part]) {
        local -= p.N[part];
        ++part;
    }
}

__host__ __device__ __forceinline__ uint32_t g8_groups(uint32_t rows) { return (rows + kG8Rows - 1) / kG8Rows; }

// The same for 8-row groups of the g8 layout (a part's last group may be partly padding).
__device__ __forceinline__ void locate_group(const GemmParams &p, uint32_t group, uint32_t &part, uint32_t &local) {
    part = 0;
    local = group;
    while (part + 1 < p.n_parts && local >= g8_groups(p.N[part])) {
        local -= g8_groups(p.N[part]);
        ++part;
    }
}

// ------------------------------------------------------------------------------------------
// GGUF rows as stored (the K-quants and float formats). Block = kRows weight rows; a warp-step
// is 8 blocks = 256 elements (warp w takes steps w, w + 4, ...); lane = (block lane / 4, slice
// lane % 4), so a warp's weight loads are one contiguous run of 8 blocks and its x loads 1 KB.
template <class Fmt, int kRows>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_rows_kernel(const float *__restrict__ x, float *__restrict__ y, WeightPtrs w, GemmParams p, uint32_t total_rows) {
    pdl_enter();
    __shared__ float partial[kGemvWarps][kRows];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t row0 = blockIdx.x * kRows;

    const uint8_t *wrow[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        // Rows past the end recompute row0 (no divergence in the loop) and are not stored.
        const uint32_t row = row0 + r < total_rows ? row0 + r : row0;
        uint32_t part, local;
        locate_row(p, row, part, local);
        wrow[r] = w.at(part) + (size_t)local * p.w_row_bytes[part];
    }

    const int sub = lane & 3;               // slice of the block
    const uint32_t blk_in_step = lane >> 2;  // 0..7
    const uint32_t n_blocks = p.K / 32;
    float acc[kRows] = {};
#pragma unroll 2
    for (uint32_t kb = (uint32_t)warp * 8 + blk_in_step; kb < n_blocks; kb += kGemvWarps * 8) {
        const float4 xa = *reinterpret_cast<const float4 *>(x + (size_t)kb * 32 + 4 * sub);
        const float4 xb = *reinterpret_cast<const float4 *>(x + (size_t)kb * 32 + 16 + 4 * sub);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] += fmt_dot8<Fmt>(wrow[r], kb, sub, xa, xb);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const float s = warp_sum(acc[r]);
        if (lane == 0) partial[warp][r] = s;
    }
    __syncthreads();
    if (threadIdx.x < kRows && row0 + threadIdx.x < total_rows) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < kGemvWarps; ++i) s += partial[i][threadIdx.x];
        uint32_t part, local;
        locate_row(p, row0 + threadIdx.x, part, local);
        float *dst = y + p.y_col[part] + local;
        *dst = p.accumulate ? *dst + s : s;
    }
}

// ------------------------------------------------------------------------------------------
// g8 layout (cuda/layout_g8.h). Block = kGroups groups of 8 rows, K split between kWarps warps
// in warp-steps of 4 blocks (warp w takes steps w, w + kWarps, ...). Lane = (block lane / 8 of the
// step, row lane % 8): each lane loads its row's whole block (16 or 32 bytes at once), so a warp
// reads 512 contiguous bytes per group and step; lanes of one block share their 32 x values (a
// broadcast load), reused for every group of the block.
template <class F, int kGroups, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_g8_kernel(const float *__restrict__ x, float *__restrict__ y, WeightPtrs w, GemmParams p, uint32_t total_groups) {
    pdl_enter();
    using Block = G8Block<F::Layout::kQuantBytes / 16>;
    __shared__ float partial[kWarps][kGroups][kG8Rows];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t r = lane & 7, kq = lane >> 3;
    const uint32_t K = p.K, n_blocks = K / 32;
    const size_t group_bytes = F::Layout::group_bytes(K);

    const uint8_t *grp[kGroups];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        // Groups past the end recompute the block's first group and are not stored.
        const uint32_t group = blockIdx.x * kGroups + g < total_groups ? blockIdx.x * kGroups + g : blockIdx.x * kGroups;
        uint32_t part, local;
        locate_group(p, group, part, local);
        grp[g] = w.at(part) + (size_t)local * group_bytes;
    }

    float acc[kGroups] = {};
#pragma unroll 2
    for (uint32_t kb = (uint32_t)warp * 4 + kq; kb < n_blocks; kb += kWarps * 4) {
        Block blk[kGroups];
#pragma unroll
        for (int g = 0; g < kGroups; ++g) blk[g] = g8_load_block<F>(grp[g], K, kb, r);
        float xv[32];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float4 v = __ldg(reinterpret_cast<const float4 *>(x + (size_t)kb * 32) + i);
            xv[4 * i] = v.x;
            xv[4 * i + 1] = v.y;
            xv[4 * i + 2] = v.z;
            xv[4 * i + 3] = v.w;
        }
        float x_sum = 0.f;
        if constexpr (F::kNeedsXSum) {
#pragma unroll
            for (int i = 0; i < 32; ++i) x_sum += xv[i];
        }
#pragma unroll
        for (int g = 0; g < kGroups; ++g) acc[g] += F::block_dot(blk[g], xv, x_sum);
    }
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        float s = acc[g];
        s += __shfl_xor_sync(0xffffffffu, s, 8);
        s += __shfl_xor_sync(0xffffffffu, s, 16);
        if (kq == 0) partial[warp][g][r] = s;
    }
    __syncthreads();
    if (threadIdx.x < kGroups * kG8Rows) {
        const uint32_t g = threadIdx.x / kG8Rows, rr = threadIdx.x % kG8Rows;
        const uint32_t group = blockIdx.x * kGroups + g;
        if (group < total_groups) {
            float s = 0.f;
#pragma unroll
            for (int i = 0; i < kWarps; ++i) s += partial[i][g][rr];
            uint32_t part, local;
            locate_group(p, group, part, local);
            const uint32_t row = local * kG8Rows + rr;
            if (row < p.N[part]) {
                float *dst = y + p.y_col[part] + row;
                *dst = p.accumulate ? *dst + s : s;
            }
        }
    }
}

}  // namespace akunu::cuda
