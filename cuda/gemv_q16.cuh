// The decode GEMV over the g8 layout with integer products (Q4_0 / Q4_1 / Q8_0): the block-for-block
// twin of gemv.cuh's gemv_g8_kernel (same work split, same fusions), with x quantized to int16.
//
// Why: the float GEMV spends ~3.4 instructions per weight (byte -> float, bias, FMA); on an H100
// that, not DRAM, capped its large matrices (ncu: the issue slots were the busy part;
// benchmarks/HISTORY.md, 2026-11-22, 7931fe2). dp2a multiplies two int16 by two weight bytes into
// an exact int32 in one instruction, ~1.1 per weight.
//
// x is quantized exactly as the CPU backend quantizes it (ADR 0002, cpu/act_quant.cpp): int16 with
// one scale per 32-element block, d = max|x| / 32767, q = roundf(x * (1 / d)) (ties away from zero), so
// both backends see the same integers. Each warp quantizes only the blocks it will read, into its
// own slice of shared memory, so no block-wide barrier stands between the weight loads and the
// math; the first weight loads are issued before the wait for the previous kernel (PDL), since
// weights depend on no command.
#pragma once
#include "cuda/gemv.cuh"

namespace akunu::cuda {

// Shared memory of one warp of a q16 GEMV: one chunk (4 blocks with their scales and sums) per
// warp-step, the layout in which a producer leaves the row (cuda/q16_activation.cuh).
__host__ __device__ __forceinline__ size_t q16_warp_bytes(uint32_t steps) { return (size_t)steps * sizeof(XQ16Chunk); }
__host__ __device__ __forceinline__ uint32_t q16_steps(uint32_t K, int warps) { return (K / 32 + warps * 4 - 1) / (warps * 4); }

// Warp `warp` quantizes the blocks it reads (kb = warp * 4 + kq + s * kWarps * 4) into its slice:
// lane = (kq = lane / 8, sub = lane % 8) takes 4 consecutive floats of block kq of each step.
// With the input norm (kNorm) it quantizes x * norm_w and returns the lane's sum of x^2 (the
// warps' slices cover x exactly once, so their sums add up to the row's).
//
// The loads of kXBatch steps are issued together before any of them is used: x is the previous
// kernel's output, read right after the wait, and a loop of load -> shuffles -> store per step
// puts one round trip per step (down_proj of the 8B shape: 7) between the wait and the first
// product. The batches gain little (the ring's loads, issued before the wait, keep HBM busy through
// most of it; benchmarks/HISTORY.md, 2026-11-23, c833b96).
template <int kWarps, bool kNorm, uint32_t kXBatch>
__device__ __forceinline__ float quantize_warp_x(const float *__restrict__ x, const float *__restrict__ norm_w,
                                                 uint32_t n_blocks, uint32_t steps, XQ16Chunk *mine) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t kq = lane >> 3, sub = lane & 7;
    float sq = 0.f;
    for (uint32_t s0 = 0; s0 < steps; s0 += kXBatch) {
        float4 v[kXBatch], nw[kXBatch];
#pragma unroll
        for (uint32_t i = 0; i < kXBatch; ++i) {  // all loads first
            const uint32_t kb = (uint32_t)warp * 4 + kq + (s0 + i) * kWarps * 4;
            v[i] = nw[i] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (s0 + i < steps && kb < n_blocks) {
                v[i] = __ldg(reinterpret_cast<const float4 *>(x + (size_t)kb * 32) + sub);
                if constexpr (kNorm) nw[i] = __ldg(reinterpret_cast<const float4 *>(norm_w + (size_t)kb * 32) + sub);
            }
        }
#pragma unroll
        for (uint32_t i = 0; i < kXBatch; ++i) {
            const uint32_t s = s0 + i;
            if (s >= steps) break;  // warp-uniform
            if constexpr (kNorm) {
                sq += sum_sq4(v[i]);
                v[i] = mul4(v[i], nw[i]);
            }
            float amax = fmaxf(fmaxf(fabsf(v[i].x), fabsf(v[i].y)), fmaxf(fabsf(v[i].z), fabsf(v[i].w)));
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            const Q16Scale sc = q16_scale(amax);
            const int q0 = q16_quantize(v[i].x, sc.inv), q1 = q16_quantize(v[i].y, sc.inv);
            const int q2 = q16_quantize(v[i].z, sc.inv), q3 = q16_quantize(v[i].w, sc.inv);
            int sum = q0 + q1 + q2 + q3;
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            reinterpret_cast<int2 *>(mine[s].q[kq].w)[sub] = make_int2((int)(((uint32_t)q0 & 0xFFFFu) | ((uint32_t)q1 << 16)),
                                                                       (int)(((uint32_t)q2 & 0xFFFFu) | ((uint32_t)q3 << 16)));
            if (sub == 0) {
                mine[s].d[kq] = sc.d;
                mine[s].sum[kq] = sum;
            }
        }
    }
    __syncwarp();
    return sq;
}

// Two warp-steps of weights in flight per lane (a ring of registers; four measured slower on an
// H100: benchmarks/HISTORY.md, 2026-11-22, 7931fe2), the first two issued before the wait for the
// previous kernel (pdl_wait_after_loads: a plain wait let ptxas move them below it; HISTORY.md,
// 2026-11-22, 77f750f and 2026-11-23, 590392c). kNorm: the input RMSNorm, by linearity as in
// gemv.cuh (x * norm_w quantized, the sums scaled by 1 / rms at the end). late_release: let the
// next kernel launch only after the main loop (its early blocks would take SM room from this
// one's; 7931fe2). kGridStride: a grid of one wave walks the n_items items, quantizing x once per
// block, not once per item, and loading an item's first steps during the previous item's store
// (more items than fit on the GPU at once: the logits, the larger gate_ups).
// Handed-off rows (cuda/q16_activation.cuh): with xq_in the previous kernel left x quantized, and
// the warps copy it instead of quantizing; with xq_out the block quantizes its output rows for the
// next GEMV (times out_norm_w when that one has an input norm): a plain output in 32-row items
// (kGroups = 4), or a gated one walking runs of 4 consecutive 8-row items (per_block, a multiple
// of 4: the items of block b are b * per_block ..; 0: items b, b + gridDim.x, ...).
// output_settled (LaunchArgs::output_settled): an accumulated output's old values for the first item
// are read before the wait, which takes an L2 round trip off the store at the end (o_proj and
// down add into the residual: benchmarks/HISTORY.md, "2026-11-28, 5bb9da2").
// w and p are __grid_constant__ (common.cuh says why); here it also keeps the compiler from
// copying p to local memory, which it does for a plain p once cp.async's asm is in the kernel.
// Registers: the kernels of 1 and 2 groups are held to 64 a thread (32 warps an SM: two 16-warp or
// four 8-warp blocks). Left free, ptxas gave the 2-group kernels of the wider formats 70-80, and
// an SM then held one 16-warp block or three 8-warp ones: 8B-shape decode 22 % slower on Q4_K,
// 12 % on Q6_K, 6 % on Q8_0 (small spills in a few Q5_K kernels; benchmarks/HISTORY.md,
// 2026-11-27). The 4-group producers (cuda/q16_activation.cuh) need ~90-128 and stay free.
//
// The kernel's work as block `block` (gemv_g8_q16_kernel: blockIdx.x; gemv_g8_q16_pair_kernel: the
// block's index among those of its dtype, which walk no items: !kGridStride). p is the kernel's
// __grid_constant__ parameter, by reference; w by value (its three pointers: a reference kept the
// parameter's address in registers, and the strided kernels spilled more).
template <class F, int kGroups, int kWarps, bool kNorm, bool kGridStride>
__device__ __forceinline__ void gemv_g8_q16_body(uint32_t block, const float *__restrict__ x,
                                                 float *__restrict__ y, const WeightPtrs w, const GemmParams &p,
                                                 uint32_t total_groups, uint32_t n_items,
                                                 const float *__restrict__ norm_w, bool late_release,
                                                 const XQ16Chunk *__restrict__ xq_in, XQ16Chunk *__restrict__ xq_out,
                                                 const float *__restrict__ out_norm_w, uint32_t per_block,
                                                 bool output_settled) {
    constexpr int kDepth = 2;
    __shared__ float gated_stage[32];  // a gated handoff's 4 items of 8 outputs
    using Block = G8BlockOf<F>;
    __shared__ float partial[kWarps][kGroups][kG8Rows];
    __shared__ float sq_by_warp[kWarps];
    extern __shared__ int4 q16_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t r = lane & 7, kq = lane >> 3;
    const uint32_t K = p.K, n_blocks = K / 32, steps = q16_steps(K, kWarps);
    const uint32_t first = (uint32_t)warp * 4 + kq, stride = kWarps * 4;
    // This lane's steps: blocks first, first + stride, ... below n_blocks.
    const uint32_t my_steps = first < n_blocks ? (n_blocks - first + stride - 1) / stride : 0;

    const uint32_t item0 = per_block ? block * per_block : block;
    const uint32_t item_end = per_block ? min(item0 + per_block, n_items) : n_items;
    const uint8_t *grp[kGroups];
    g8_item_groups<F, kGroups>(w, p, total_groups, item0, grp);
    const auto load_step = [&](uint32_t s, Block (&dst)[kGroups]) {
        const uint32_t kb = s < my_steps ? first + s * stride : first % n_blocks;
#pragma unroll
        for (int g = 0; g < kGroups; ++g) dst[g] = g8_load_block<F>(grp[g], K, kb, r);
    };
    Block ring[kDepth][kGroups];
#pragma unroll
    for (int d = 0; d < kDepth; ++d) load_step(d, ring[d]);
    // A handoff's norm weights (the next GEMV's), by warp 0, which quantizes: weights, so before the wait.
    const bool gated_handoff = kGroups == 2 && xq_out && p.output_op != kGemmOutputPlain;
    float out_nw = 1.f;
    if (kGroups == 4 && xq_out && out_norm_w && warp == 0) out_nw = __ldg(out_norm_w + item0 * 32 + lane);
    // The first item's old output values, for the threads that store them (gemv_g8_store), past L1.
    // (An accumulating output is never gated: prepare in cuda/gemm.cu refuses that.)
    const bool have_prev = output_settled && p.accumulate && threadIdx.x < kGroups * kG8Rows;
    float y_prev = 0.f;
    if (have_prev)
        if (const float *dst = g8_store_dst<kGroups>(y, p, total_groups, item0)) y_prev = __ldcg(dst);
    pdl_wait_after_loads(K);  // K > 0; the loads above stay before the wait (see common.cuh)
    if (!late_release) pdl_release();

    XQ16Chunk *mine = reinterpret_cast<XQ16Chunk *>(q16_smem) + (size_t)warp * steps;
    // Steps of x loaded at once: as many as the registers beside the weight ring allow within the 64
    // per thread that keep these grids' occupancy (Q8_0's two-group ring alone takes 36 of them).
    constexpr uint32_t kXBatch = sizeof(Block) * kGroups > 40 ? 1 : kNorm ? 2 : 4;
    const float sq = xq_in ? copy_q16_chunks<kWarps>(xq_in, n_blocks, steps, mine)
                           : quantize_warp_x<kWarps, kNorm, kXBatch>(x, norm_w, n_blocks, steps, mine);
    if constexpr (kNorm) {
        const float t = warp_sum(sq);
        if (lane == 0) sq_by_warp[warp] = t;  // read after gemv_g8_store's barrier
    }

    for (uint32_t item = item0;;) {
        if (gated_handoff && out_norm_w && item % 4 == 0 && warp == 0)  // arrives long before the run's store
            out_nw = __ldg(out_norm_w + item * kG8Rows + lane);
        float acc[kGroups] = {};
        for (uint32_t s0 = 0; s0 < my_steps; s0 += kDepth) {
#pragma unroll
            for (int d = 0; d < kDepth; ++d) {
                const uint32_t s = s0 + d;
                if (s < my_steps) {
                    const XQ16Block xb = mine[s].q[kq];
                    const float xs = mine[s].d[kq];
                    const int qs = mine[s].sum[kq];
#pragma unroll
                    for (int g = 0; g < kGroups; ++g) acc[g] += F::block_dot_q16(ring[d][g], xb.w, xs, qs);
                    if (s + kDepth < my_steps) load_step(s + kDepth, ring[d]);
                }
            }
        }
        if (late_release && item == item0) pdl_release();
        const uint32_t next = per_block ? item + 1 : item + gridDim.x;
        if (kGridStride && next < item_end) {  // the ring is free: the next item's first steps
            g8_item_groups<F, kGroups>(w, p, total_groups, next, grp);
#pragma unroll
            for (int d = 0; d < kDepth; ++d) load_step(d, ring[d]);
        }
        gemv_g8_store<kGroups, kWarps>(acc, 1.0f, y, p, total_groups, item, partial, kNorm ? sq_by_warp : nullptr,
                                       kGroups == 4 ? xq_out : nullptr, out_nw, out_norm_w != nullptr,
                                       gated_handoff ? gated_stage + (item % 4) * kG8Rows : nullptr,
                                       have_prev && item == item0, y_prev);
        if (gated_handoff && item % 4 == 3 && warp == 0) {  // 32 outputs: items item - 3 .. item
            __syncwarp();
            store_q16_block(xq_out, (item - 3) * kG8Rows, gated_stage[lane], out_nw, out_norm_w != nullptr);
        }
        if (!kGridStride || next >= item_end) break;
        __syncthreads();  // partial[] is rewritten by the next item
        item = next;
    }
}

template <class F, int kGroups, int kWarps, bool kNorm, bool kGridStride>
__global__ void __launch_bounds__(kWarps * 32, kGroups <= 2 ? 32 / kWarps : 1)
    gemv_g8_q16_kernel(const float *__restrict__ x, float *__restrict__ y, const __grid_constant__ WeightPtrs w,
                       const __grid_constant__ GemmParams p,
                       uint32_t total_groups, uint32_t n_items, const float *__restrict__ norm_w, bool late_release,
                       const XQ16Chunk *__restrict__ xq_in, XQ16Chunk *__restrict__ xq_out,
                       const float *__restrict__ out_norm_w, uint32_t per_block, bool output_settled) {
    gemv_g8_q16_body<F, kGroups, kWarps, kNorm, kGridStride>(blockIdx.x, x, y, w, p, total_groups, n_items,
                                                             norm_w, late_release, xq_in, xq_out, out_norm_w, per_block,
                                                             output_settled);
}

// One launch for the parts of two dtypes of a pair command (GemmParams::second_part): the first
// items1 blocks take the parts of F1 (w1, p1), the others those of F2, one item a block; the
// same x (quantized, or copied from xq_in, by every block), no handed-off output.
template <class F1, class F2, int kGroups, int kWarps, bool kNorm>
__global__ void __launch_bounds__(kWarps * 32, 32 / kWarps)
    gemv_g8_q16_pair_kernel(const float *__restrict__ x, float *__restrict__ y, const __grid_constant__ WeightPtrs w1,
                            const __grid_constant__ GemmParams p1, const __grid_constant__ WeightPtrs w2,
                            const __grid_constant__ GemmParams p2, uint32_t total_groups1, uint32_t total_groups2,
                            uint32_t items1, const float *__restrict__ norm_w, bool late_release,
                            const XQ16Chunk *__restrict__ xq_in) {
    if (blockIdx.x < items1)
        gemv_g8_q16_body<F1, kGroups, kWarps, kNorm, false>(blockIdx.x, x, y, w1, p1, total_groups1, items1,
                                                            norm_w, late_release, xq_in, nullptr, nullptr, 0, false);
    else
        gemv_g8_q16_body<F2, kGroups, kWarps, kNorm, false>(blockIdx.x - items1, x, y, w2, p2,
                                                            total_groups2, gridDim.x - items1, norm_w, late_release,
                                                            xq_in, nullptr, nullptr, 0, false);
}

}  // namespace akunu::cuda
