// Pieces shared by the decode attention kernels (cuda/attention_decode.cu, one block per query
// head; cuda/attention_decode_gqa.cu, one block per KV head on the tensor cores): the RoPE
// variant's inputs, the rotation of a head by a warp, and the merge of a head's splits.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/q16_activation.cuh"
#include "cuda/rope_pairs.cuh"

namespace akunu::cuda {

// The plain kernel: q already rotated in qkv, the token's K/V already in the cache.
struct NoRope {};

// What the RoPE variant reads besides AttentionParams.
struct RopeInputs {
    const float *inv_freq = nullptr;  // [rope_dim / 2]
    const float *q_norm = nullptr;    // QK-norm weights [head_dim]; null: no QK-norm
    const float *k_norm = nullptr;
    uint32_t rope_dim = 0;
    float norm_eps = 0.f;
};

// A lane's dims of one head, rotated: x = rope(norm(src)) * scale, the work of the QK-norm and
// RoPE commands in their order of float operations (so the CPU's values). `stash` is this warp's
// [head_dim] floats of shared memory (a partner dim may live in another lane); cs holds each dim's
// (cos, sin), computed before the wait.
template <class Pairs, int kDpl>
__device__ __forceinline__ void rotate_head(float (&x)[kDpl], const float *__restrict__ src,
                                            const float *__restrict__ norm_w, const RopeInputs &ri,
                                            const float2 (&cs)[kDpl], uint32_t hd, float scale, float *stash) {
    const uint32_t d0 = (threadIdx.x & 31) * kDpl;
    const bool mine = d0 < hd;
    float sum_sq = 0.f;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) {
        x[i] = mine ? src[d0 + i] : 0.f;
        sum_sq += x[i] * x[i];
    }
    if (norm_w) {
        const float inv = 1.0f / sqrtf(warp_sum(sum_sq) / (float)hd + ri.norm_eps);
#pragma unroll
        for (int i = 0; i < kDpl; ++i)
            if (mine) x[i] = x[i] * inv * norm_w[d0 + i];
    }
    if (mine)
#pragma unroll
        for (int i = 0; i < kDpl; ++i) stash[d0 + i] = x[i];
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kDpl; ++i) {
        const uint32_t d = d0 + i;
        if (!mine) continue;
        if (d >= ri.rope_dim) {
            x[i] *= scale;  // partial rotary: past rope_dim, unrotated
            continue;
        }
        const uint32_t pair = Pairs::pair_of(d, ri.rope_dim);
        const float a = stash[Pairs::first(pair, ri.rope_dim)], b = stash[Pairs::second(pair, ri.rope_dim)];
        const float c = cs[i].x, s = cs[i].y;
        x[i] = Pairs::is_first(d, ri.rope_dim) ? (a * c - b * s) * scale : (a * s + b * c) * scale;
    }
    __syncwarp();  // the stash is reused
}

// The merge of a head's splits for one output dim d: sum_s acc_s[d] e^(m_s - M) / sum_s l_s e^(m_s -
// M), where load(s, i) reads float i of split s's (m, l, acc[hd]). A thread reads 16 splits' (m, l,
// acc[d]) at once (no load depends on another: one round of loads, where the block-phase merge
// before took two with a barrier between), then weighs them with independent exps.
template <class Load>
__device__ __forceinline__ float merge_split_states(Load load, uint32_t d, uint32_t active) {
    constexpr uint32_t kAtOnce = 16;
    float M = -INFINITY, L = 0.f, t = 0.f;
    for (uint32_t s0 = 0; s0 < active; s0 += kAtOnce) {
        float m[kAtOnce], l[kAtOnce], a[kAtOnce];
#pragma unroll
        for (uint32_t i = 0; i < kAtOnce; ++i) {
            const bool on = s0 + i < active;
            m[i] = on ? load(s0 + i, 0) : -INFINITY;
            l[i] = on ? load(s0 + i, 1) : 0.f;
            a[i] = on ? load(s0 + i, 2 + d) : 0.f;
        }
        float new_m = M;
#pragma unroll
        for (uint32_t i = 0; i < kAtOnce; ++i) new_m = fmaxf(new_m, l[i] > 0.f ? m[i] : -INFINITY);  // empty: none
        const float corr = L > 0.f ? expf(M - new_m) : 0.f;
        L *= corr;
        t *= corr;
#pragma unroll
        for (uint32_t i = 0; i < kAtOnce; ++i) {
            const float w = l[i] > 0.f ? expf(m[i] - new_m) : 0.f;
            L = fmaf(l[i], w, L);
            t = fmaf(a[i], w, t);
        }
        M = new_m;
    }
    return t / L;
}
// The same for every dim of a head, by the block's threads. xq_out: also leave the head's outputs
// quantized for the o_proj GEMV (cuda/q16_activation.cuh; head_dim % 32 == 0, so each warp holds
// whole blocks); out_base: the head's first output.
template <class Load>
__device__ __forceinline__ void merge_splits(Load load, float *__restrict__ out, uint32_t hd, uint32_t active,
                                             XQ16Chunk *xq_out, uint32_t out_base, const float *out_norm_w) {
    for (uint32_t d = threadIdx.x; d < hd; d += blockDim.x) {
        const float o = merge_split_states(load, d, active);
        out[d] = o;
        if (xq_out) store_q16_block(xq_out, out_base + d - (threadIdx.x & 31), o, out_norm_w);
    }
}

}  // namespace akunu::cuda
