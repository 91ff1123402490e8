// The decode GEMV (M = 1) of cuda/gemm.cu: y[N] (+)= W[N, K] . x[K], memory bound, one kernel per
// weight layout. Both split K between the warps of a block and reuse each x chunk for all of the
// block's rows; partial sums meet in shared memory.
//
// Two fusions save decode the launches of the commands around a GEMV (GemmInputOp/GemmOutputOp):
// - Input RMSNorm, by linearity: W . (x * inv_rms * w_norm) = inv_rms * (W . (x * w_norm)). Each
//   block first stages x * w_norm in shared memory (K floats) while summing x^2, runs its product
//   over the staged row and scales its sums by inv_rms at the end. (Scaling x as it is loaded in
//   the main loop instead cost registers and occupancy, and decode measured slower:
//   benchmarks/HISTORY.md, 2026-11-22, e99d575.)
// - Gated output: a block computes gate row i and up row i together (the first and second half of
//   its rows or groups) and stores act(gate) * up.
#pragma once
#include "cuda/activations.cuh"
#include "cuda/common.cuh"
#include "cuda/formats_g8.cuh"
#include "cuda/formats_kquant.cuh"
#include "cuda/q16_activation.cuh"

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

__device__ __forceinline__ float4 mul4(float4 a, float4 b) { return make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__device__ __forceinline__ float sum_sq4(float4 a) { return a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w; }
// 1 / rms(x) from the row's sum of x^2, as rmsnorm_f32 computes it.
__device__ __forceinline__ float inv_rms(float sum_sq, const GemmParams &p) { return 1.0f / sqrtf(sum_sq / (float)p.K + p.eps); }

// The input RMSNorm's first step: xs = x * norm_w (K / 4 float4s of shared memory); returns
// 1 / rms(x) as rmsnorm_f32 computes it. Every thread of the block calls it.
__device__ __forceinline__ float stage_normed_x(const float *__restrict__ x, const float *__restrict__ norm_w,
                                                const GemmParams &p, float4 *xs, float *red) {
    const float4 *x4 = reinterpret_cast<const float4 *>(x), *w4 = reinterpret_cast<const float4 *>(norm_w);
    float sq = 0.f;
#pragma unroll 4
    for (uint32_t i = threadIdx.x; i < p.K / 4; i += blockDim.x) {
        const float4 v = x4[i];
        sq += sum_sq4(v);
        xs[i] = mul4(v, __ldg(w4 + i));
    }
    return inv_rms(block_reduce<false>(sq, red), p);  // (its barriers also publish xs)
}

// float4 i of the 32-element block kb of the GEMV's input row: staged in shared memory (normed)
// or read from global memory.
template <bool kNorm>
__device__ __forceinline__ float4 load_x4(const float *__restrict__ x, const float4 *xs, uint32_t kb, uint32_t i) {
    if constexpr (kNorm)
        return xs[kb * 8 + i];
    else
        return __ldg(reinterpret_cast<const float4 *>(x + (size_t)kb * 32) + i);
}

// ------------------------------------------------------------------------------------------
// GGUF rows as stored (the K-quants and float formats). Block = kRows weight rows; a warp-step
// is 8 blocks = 256 elements (warp w takes steps w, w + 4, ...); lane = (block lane / 4, slice
// lane % 4), so a warp's weight loads are one contiguous run of 8 blocks and its x loads 1 KB.

// The weight row (part, row inside the part) of slot r of GEMV block `block`; false for slots past
// the end, which compute a valid row and are not stored. Gated: slots r and r + kRows / 2 are gate
// row i and up row i.
template <int kRows>
__device__ __forceinline__ bool slot_row(const GemmParams &p, uint32_t total_rows, uint32_t block, uint32_t r,
                                         uint32_t &part, uint32_t &local) {
    if (p.output_op != kGemmOutputPlain) {
        constexpr uint32_t kHalf = kRows / 2;
        const uint32_t i = block * kHalf + r % kHalf;
        part = r < kHalf ? 0 : 1;
        local = i < p.N[0] ? i : block * kHalf;
        return i < p.N[0];
    }
    const uint32_t row = block * kRows + r;
    locate_row(p, row < total_rows ? row : block * kRows, part, local);
    return row < total_rows;
}

template <class Fmt, int kRows, bool kNorm>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_rows_kernel(const float *__restrict__ x, float *__restrict__ y, const __grid_constant__ WeightPtrs w,
                     const __grid_constant__ GemmParams p, uint32_t total_rows,
                     const float *__restrict__ norm_w) {
    pdl_enter();
    __shared__ float partial[kGemvWarps][kRows];
    __shared__ float red[32];
    extern __shared__ float4 staged_x[];  // kNorm: x * norm_w, K / 4 float4s
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float scale = kNorm ? stage_normed_x(x, norm_w, p, staged_x, red) : 1.0f;

    const uint8_t *wrow[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        uint32_t part, local;
        slot_row<kRows>(p, total_rows, blockIdx.x, r, part, local);
        wrow[r] = w.at(part) + (size_t)local * p.w_row_bytes[part];
    }

    const int sub = lane & 3;               // slice of the block
    const uint32_t blk_in_step = lane >> 2;  // 0..7
    const uint32_t n_blocks = p.K / 32;
    float acc[kRows] = {};
#pragma unroll 2
    for (uint32_t kb = (uint32_t)warp * 8 + blk_in_step; kb < n_blocks; kb += kGemvWarps * 8) {
        const float4 xa = load_x4<kNorm>(x, staged_x, kb, sub);
        const float4 xb = load_x4<kNorm>(x, staged_x, kb, 4 + sub);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] += fmt_dot8<Fmt>(wrow[r], kb, sub, xa, xb);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const float s = warp_sum(acc[r]);
        if (lane == 0) partial[warp][r] = s;
    }
    __syncthreads();
    const auto row_sum = [&](uint32_t r) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < kGemvWarps; ++i) s += partial[i][r];
        return s * scale;
    };
    uint32_t part, local;
    if (p.output_op != kGemmOutputPlain) {
        constexpr uint32_t kHalf = kRows / 2;
        if (threadIdx.x < kHalf && slot_row<kRows>(p, total_rows, blockIdx.x, threadIdx.x, part, local))
            y[p.y_col[0] + local] = gated_output(p.output_op, row_sum(threadIdx.x), row_sum(threadIdx.x + kHalf));
    } else if (threadIdx.x < kRows && slot_row<kRows>(p, total_rows, blockIdx.x, threadIdx.x, part, local)) {
        const float s = row_sum(threadIdx.x);
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

// The group (part, group inside the part) of slot g of GEMV block `block`, as slot_row. Gated
// (kGroups == 2): slot 0 is gate group `block`, slot 1 the up group of the same rows.
template <int kGroups>
__device__ __forceinline__ bool slot_group(const GemmParams &p, uint32_t total_groups, uint32_t block, uint32_t g,
                                           uint32_t &part, uint32_t &local) {
    if (p.output_op != kGemmOutputPlain) {
        part = g;
        local = block;
        return true;
    }
    const uint32_t group = block * kGroups + g;
    locate_group(p, group < total_groups ? group : block * kGroups, part, local);
    return group < total_groups;
}

// Where thread t < kGroups * 8 of a plain (not gated) output stores its row of `item`: group t / 8,
// row t % 8 of it; null past the matrix. gemv_g8_store writes there; an accumulating integer GEMV
// reads the old value there before its wait (cuda/gemv_q16.cuh).
template <int kGroups>
__device__ __forceinline__ float *g8_store_dst(float *y, const GemmParams &p, uint32_t total_groups, uint32_t item) {
    uint32_t part, local;
    if (!slot_group<kGroups>(p, total_groups, item, threadIdx.x / kG8Rows, part, local)) return nullptr;
    const uint32_t row = local * kG8Rows + threadIdx.x % kG8Rows;
    return row < p.N[part] ? y + p.y_col[part] + row : nullptr;
}

// The end of a g8 GEMV item: each lane's per-group sums (lanes of one row r = lane % 8 hold
// different blocks) reduced over the warp and then over the block's warps in shared memory,
// scaled, and stored (or, gated, combined into act(gate) * up). sq_by_warp: the warps' sums of
// x^2 (shared memory, written before the call), whose total sets the scale to 1 / rms(x).
// xq_out (32-row items of a one-part plain output, N % 32 == 0): warp 0, which stores the item's 32
// rows, also leaves them quantized for the next GEMV (cuda/q16_activation.cuh; out_nw: the lane's
// norm weight of that GEMV when out_normed, loaded early by the caller). gated_stage: a
// gated output's 8 values also go there (shared memory), for the caller to quantize 4 items' worth.
// have_prev: an accumulated output's old value for this thread's row is y_prev (read early by the
// caller), not *dst.
template <int kGroups, int kWarps>
__device__ __forceinline__ void gemv_g8_store(const float (&acc)[kGroups], float scale, float *__restrict__ y,
                                              const GemmParams &p, uint32_t total_groups, uint32_t item,
                                              float (&partial)[kWarps][kGroups][kG8Rows],
                                              const float *sq_by_warp = nullptr, XQ16Chunk *xq_out = nullptr,
                                              float out_nw = 1.f, bool out_normed = false,
                                              float *gated_stage = nullptr, bool have_prev = false,
                                              float y_prev = 0.f) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t r = lane & 7, kq = lane >> 3;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        float s = acc[g];
        s += __shfl_xor_sync(0xffffffffu, s, 8);
        s += __shfl_xor_sync(0xffffffffu, s, 16);
        if (kq == 0) partial[warp][g][r] = s;
    }
    __syncthreads();
    if (sq_by_warp) {
        float sq = 0.f;
#pragma unroll
        for (int i = 0; i < kWarps; ++i) sq += sq_by_warp[i];
        scale = inv_rms(sq, p);
    }
    const auto group_sum = [&](uint32_t g, uint32_t rr) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < kWarps; ++i) s += partial[i][g][rr];
        return s * scale;
    };
    if (kGroups == 2 && p.output_op != kGemmOutputPlain) {
        const uint32_t row = item * kG8Rows + threadIdx.x;
        if (threadIdx.x < kG8Rows && row < p.N[0]) {
            const float v = gated_output(p.output_op, group_sum(0, threadIdx.x), group_sum(kGroups - 1, threadIdx.x));
            y[p.y_col[0] + row] = v;
            if (gated_stage) gated_stage[threadIdx.x] = v;
        }
    } else if (threadIdx.x < kGroups * kG8Rows) {
        float out = 0.f;
        if (float *dst = g8_store_dst<kGroups>(y, p, total_groups, item)) {
            const float s = group_sum(threadIdx.x / kG8Rows, threadIdx.x % kG8Rows);
            out = p.accumulate ? (have_prev ? y_prev : *dst) + s : s;
            *dst = out;
        }
        if (kGroups * kG8Rows == 32 && xq_out) store_q16_block(xq_out, item * 32, out, out_nw, out_normed);
    }
}

// Row r's blocks kb of an item's groups (kb past the row: block 0, loaded and never used).
template <class F, int kGroups>
__device__ __forceinline__ void g8_load_step(const uint8_t *const (&grp)[kGroups], uint32_t K, uint32_t kb, uint32_t r,
                                             G8BlockOf<F> (&dst)[kGroups]) {
    if (kb >= K / 32) kb = 0;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) dst[g] = g8_load_block<F>(grp[g], K, kb, r);
}

// One work item of the g8 GEMV = slot_group's block `item`: its groups' sums into y. `blk` holds
// the lane's first step of weights, already loaded (g8_load_step); each step loads the next one
// before its math.
template <class F, int kGroups, int kWarps, bool kNorm>
__device__ __forceinline__ void gemv_g8_item(const float *__restrict__ x, const float4 *staged_x, float scale,
                                             float *__restrict__ y, const uint8_t *const (&grp)[kGroups],
                                             G8BlockOf<F> (&blk)[kGroups],
                                             const GemmParams &p, uint32_t total_groups, uint32_t item,
                                             float (&partial)[kWarps][kGroups][kG8Rows]) {
    using Block = G8BlockOf<F>;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t r = lane & 7, kq = lane >> 3;
    const uint32_t K = p.K, n_blocks = K / 32;
    float acc[kGroups] = {};
    for (uint32_t kb = (uint32_t)warp * 4 + kq; kb < n_blocks; kb += kWarps * 4) {
        Block next[kGroups];
        if (kb + kWarps * 4 < n_blocks) g8_load_step<F, kGroups>(grp, K, kb + kWarps * 4, r, next);
        float xv[32];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float4 v = load_x4<kNorm>(x, staged_x, kb, i);
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
        for (int g = 0; g < kGroups; ++g) {
            acc[g] += F::block_dot(blk[g], xv, x_sum);
            blk[g] = next[g];
        }
    }
    gemv_g8_store<kGroups, kWarps>(acc, scale, y, p, total_groups, item, partial);
}

template <class F, int kGroups>
__device__ __forceinline__ void g8_item_groups(const WeightPtrs &w, const GemmParams &p, uint32_t total_groups,
                                               uint32_t item, const uint8_t *(&grp)[kGroups]) {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        uint32_t part, local;
        slot_group<kGroups>(p, total_groups, item, g, part, local);
        grp[g] = w.at(part) + (size_t)local * F::Layout::group_bytes(p.K);
    }
}

// Plain: one item per block. Normed: a grid of one wave walks the items (grid-stride), so each
// block stages its input once, not once per item. Weights depend on no earlier command, so a
// block loads its first item's first step (and, with `prefetch`, asks L2 for the rest of its
// groups) before it waits for the previous kernel (PDL).
template <class F, int kGroups, int kWarps, bool kNorm>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_g8_kernel(const float *__restrict__ x, float *__restrict__ y, const __grid_constant__ WeightPtrs w,
                   const __grid_constant__ GemmParams p, uint32_t total_groups,
                   uint32_t n_items, const float *__restrict__ norm_w, bool prefetch) {
    __shared__ float partial[kWarps][kGroups][kG8Rows];
    __shared__ float red[32];
    extern __shared__ float4 staged_x[];  // kNorm: x * norm_w, K / 4 float4s
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t r = lane & 7, first_kb = (uint32_t)warp * 4 + (lane >> 3);
    const uint8_t *grp[kGroups];
    g8_item_groups<F, kGroups>(w, p, total_groups, blockIdx.x, grp);
    G8BlockOf<F> blk[kGroups];
    g8_load_step<F, kGroups>(grp, p.K, first_kb, r, blk);
    if (prefetch) {
        const uint32_t group_bytes = (uint32_t)F::Layout::group_bytes(p.K);
#pragma unroll
        for (int g = 0; g < kGroups; ++g)
            for (uint32_t off = threadIdx.x * 128u; off < group_bytes; off += kWarps * 32 * 128u) prefetch_l2(grp[g] + off);
    }
    pdl_enter();
    if constexpr (kNorm) {
        const float scale = stage_normed_x(x, norm_w, p, staged_x, red);
        for (uint32_t item = blockIdx.x; item < n_items; item += gridDim.x) {
            if (item != blockIdx.x) {
                g8_item_groups<F, kGroups>(w, p, total_groups, item, grp);
                g8_load_step<F, kGroups>(grp, p.K, first_kb, r, blk);
            }
            gemv_g8_item<F, kGroups, kWarps, kNorm>(x, staged_x, scale, y, grp, blk, p, total_groups, item, partial);
            __syncthreads();  // partial[] is rewritten by the next item
        }
    } else {
        gemv_g8_item<F, kGroups, kWarps, kNorm>(x, staged_x, 1.0f, y, grp, blk, p, total_groups, blockIdx.x, partial);
    }
}

}  // namespace akunu::cuda
