// The sampling command (core/sampling_rule.h; the CPU backend runs its host reference, which must
// draw the same tokens). Two kernels:
//   sample_cut_kernel   one block: the penalties (in place), the max logit, then the top-k
//                       and top-p thresholds (cut_by_value_bins; select_key, a radix selection
//                       over the logits' order keys, when the boundary bin is crowded). Softmax
//                       weights are summed in fixed point, so no sum depends on the order of the
//                       atomic adds. Writes the SamplingCut into the sampling buffer.
//   sample_draw_kernel  a grid, like argmax_f32: Gumbel-max over the kept tokens (argmax when
//                       greedy); the last block to finish writes the token.
// Chained: the draw's position (its noise stream) is read from device memory per replay.
#include <algorithm>

#include "core/sampling_rule.h"
#include "cuda/grid_argmax.cuh"

namespace akunu::cuda {

namespace {

constexpr int kThreads = 1024;

struct SamplingBuffer {
    const SamplingRule *rule;
    SamplingCut *cut;
    const uint32_t *recent;
};
__device__ __forceinline__ SamplingBuffer sampling_buffer(uint8_t *state) {
    return {reinterpret_cast<const SamplingRule *>(state), reinterpret_cast<SamplingCut *>(state + kSamplingCutOffset),
            reinterpret_cast<const uint32_t *>(state + kSamplingRecentOffset)};
}

// Calls f(i, x[i]) for this thread's share of x[0, n): 16-byte loads, two in flight, as one block
// reading the logits from L2 is latency-bound otherwise. Plain loads: the penalty may have
// written x in this kernel. x is 16-byte aligned (checked by the launcher).
template <typename F>
__device__ __forceinline__ void for_each_logit(const float *x, uint32_t n, F &&f) {
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    const uint32_t n4 = n / 4;
    uint32_t q = threadIdx.x;
    for (; q + kThreads < n4; q += 2 * kThreads) {
        const float4 a = x4[q], b = x4[q + kThreads];
        const uint32_t i = 4 * q, j = 4 * (q + kThreads);
        f(i, a.x), f(i + 1, a.y), f(i + 2, a.z), f(i + 3, a.w);
        f(j, b.x), f(j + 1, b.y), f(j + 2, b.z), f(j + 3, b.w);
    }
    if (q < n4) {
        const float4 a = x4[q];
        f(4 * q, a.x), f(4 * q + 1, a.y), f(4 * q + 2, a.z), f(4 * q + 3, a.w);
    }
    for (uint32_t i = 4 * n4 + threadIdx.x; i < n; i += kThreads) f(i, x[i]);
}

// Exclusive prefix sum over the block (thread order); `scratch` holds 32 values of shared memory.
__device__ uint64_t block_exclusive_sum(uint64_t v, uint64_t *scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint64_t inclusive = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const uint64_t up = __shfl_up_sync(0xffffffffu, inclusive, o);
        if (lane >= o) inclusive += up;
    }
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 31) scratch[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        uint64_t w = lane < kThreads / 32 ? scratch[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const uint64_t up = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += up;
        }
        scratch[lane] = w;  // inclusive sums of the warps
    }
    __syncthreads();
    return inclusive - v + (warp > 0 ? scratch[warp - 1] : 0);
}

// The largest order key t such that the tokens with key >= max(t, floor_key) weigh at least
// `target` (weight 1 each: the target-th largest key; softmax weights: top-p's cut).
template <bool kSoftmaxWeights>
__device__ uint32_t select_key(const float *x, uint32_t n, uint32_t floor_key, uint64_t target, float max_logit,
                               float inv_t, unsigned long long *hist, uint64_t *scratch) {
    __shared__ uint32_t chosen_bin;
    __shared__ uint64_t chosen_above;
    uint32_t prefix = 0, prefix_mask = 0;
    for (int pass = 0; pass < 3; ++pass) {
        const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
        const uint32_t bins = pass < 2 ? 2048u : 1024u;
        for (uint32_t b = threadIdx.x; b < bins; b += kThreads) hist[b] = 0;
        __syncthreads();
        for_each_logit(x, n, [&](uint32_t, float l) {
            const uint32_t key = order_key(l);
            if (key < floor_key || (key & prefix_mask) != prefix) return;
            const unsigned long long w = kSoftmaxWeights ? softmax_weight(l, max_logit, inv_t) : 1ull;
            if (w) atomicAdd(&hist[(key >> shift) & (bins - 1)], w);
        });
        __syncthreads();
        // Walk the bins from the top: thread t holds the `per` bins below the top t * per.
        const uint32_t per = bins / kThreads;
        const uint32_t top = bins - 1 - threadIdx.x * per;
        uint64_t mine = 0;
        for (uint32_t j = 0; j < per; ++j) mine += hist[top - j];
        uint64_t above = block_exclusive_sum(mine, scratch);
        if (above < target && above + mine >= target) {
            for (uint32_t j = 0; j < per; ++j) {
                if (above + hist[top - j] >= target) {
                    chosen_bin = top - j;
                    chosen_above = above;
                    break;
                }
                above += hist[top - j];
            }
        }
        __syncthreads();
        target -= chosen_above;
        prefix |= chosen_bin << shift;
        prefix_mask |= (bins - 1) << shift;
        __syncthreads();  // chosen_* and hist are rewritten by the next pass
    }
    return prefix;
}

// The value bin of a logit: bin 0 holds the largest logits, kValueBins - 1 the smallest (and any
// -inf or NaN). Monotone: a larger logit never lands in a later bin.
constexpr uint32_t kValueBins = 2048;
__device__ __forceinline__ uint32_t value_bin(float l, float max_logit, float scale) {
    return (uint32_t)fminf((max_logit - l) * scale, (float)(kValueBins - 1));
}

// Shared memory of the cut kernel past the penalties (which use it for their seen-bitmap and a
// tile of the window first).
constexpr uint32_t kMaxBinTokens = 4096;
struct CutSmem {
    uint32_t counts[kValueBins];
    unsigned long long weights[kValueBins];
    uint32_t members[kMaxBinTokens];  // order keys of one bin's tokens, sorted descending
};

// Sorts keys[0, size) descending; size a power of two.
__device__ void bitonic_sort_descending(uint32_t *keys, uint32_t size) {
    for (uint32_t k = 2; k <= size; k <<= 1)
        for (uint32_t j = k >> 1; j > 0; j >>= 1) {
            for (uint32_t i = threadIdx.x; i < size; i += kThreads) {
                const uint32_t partner = i ^ j;
                if (partner <= i) continue;
                const uint32_t a = keys[i], b = keys[partner];
                if (((i & k) == 0) == (a < b)) {
                    keys[i] = b;
                    keys[partner] = a;
                }
            }
            __syncthreads();
        }
}

// The keys of the `count` tokens in value bin `bin` (count <= kMaxBinTokens), sorted descending.
__device__ void gather_bin(const float *x, uint32_t n, uint32_t bin, uint32_t count, float max_logit, float scale,
                           uint32_t *members) {
    __shared__ uint32_t filled;
    if (threadIdx.x == 0) filled = 0;
    __syncthreads();
    for_each_logit(x, n, [&](uint32_t, float l) {  // few takers: one shared counter does
        if (value_bin(l, max_logit, scale) == bin) members[atomicAdd(&filled, 1u)] = order_key(l);
    });
    uint32_t size = 2;
    while (size < count) size <<= 1;
    __syncthreads();
    for (uint32_t i = count + threadIdx.x; i < size; i += kThreads) members[i] = 0;  // sorts last
    __syncthreads();
    bitonic_sort_descending(members, size);
}

// Softmax weights of the sorted members at or above min_key, four consecutive ones per thread:
// w[], their sum `local` and the sum over the members before them (returned).
__device__ uint64_t member_weights(const uint32_t *members, uint32_t count, uint32_t min_key, float max_logit,
                                   float inv_t, uint64_t w[4], uint64_t &local, uint64_t *scratch) {
    local = 0;
    for (int k = 0; k < 4; ++k) {
        const uint32_t i = 4 * threadIdx.x + k;
        const bool kept = i < count && members[i] >= min_key;
        w[k] = kept ? softmax_weight(order_key_value(members[i]), max_logit, inv_t) : 0;
        local += w[k];
    }
    return block_exclusive_sum(local, scratch);
}

// The first bin at which the running sum of the per-bin values (thread t: bins 2t, 2t + 1) reaches
// `target`, and the sum over the bins before it. Every thread gets both.
__device__ void find_bin(uint64_t v0, uint64_t v1, uint64_t target, uint64_t *scratch, uint32_t *bin, uint64_t *before) {
    __shared__ uint32_t found_bin;
    __shared__ uint64_t found_before;
    const uint64_t above = block_exclusive_sum(v0 + v1, scratch);
    if (above < target && above + v0 + v1 >= target) {
        const bool first = above + v0 >= target;
        found_bin = 2 * threadIdx.x + (first ? 0 : 1);
        found_before = first ? above : above + v0;
    }
    __syncthreads();
    *bin = found_bin;
    *before = found_before;
    __syncthreads();
}

// The cut, fast path. A histogram of the logits over value bins (spread evenly between the
// smallest relevant and the largest logit, so the atomic adds rarely collide) gives, per bin, the
// token count and softmax weight; the bin where top-k's count or top-p's weight is reached is
// then gathered and sorted in shared memory (a few hundred tokens for ordinary logits), and the
// exact cut found within it. Returns false, leaving the cut to select_key, when that bin holds
// more than kMaxBinTokens tokens.
__device__ bool cut_by_value_bins(const float *x, uint32_t n, const SamplingRule &rule, float max_logit,
                                  float min_logit, CutSmem &sm, uint64_t *scratch, uint32_t *min_key_out) {
    __shared__ uint64_t total_weight;
    __shared__ uint32_t top_p_key;
    const bool top_k_on = rule.top_k > 0 && rule.top_k < n, top_p_on = rule.top_p < 1.f;
    const float inv_t = rule.inv_temperature;
    // Without top-k, tokens more than 28 / inv_t below the max weigh nothing (< 2^-40 of the
    // best): they may share the last bin.
    const float lo = top_k_on ? min_logit : fmaxf(min_logit, max_logit - 28.f / inv_t);
    const float range = max_logit - lo;
    const float scale = range > 0.f ? fminf((float)(kValueBins - 1) / range, 1e30f) : 0.f;

    for (uint32_t b = threadIdx.x; b < kValueBins; b += kThreads) {
        sm.counts[b] = 0;
        sm.weights[b] = 0;
    }
    __syncthreads();
    for_each_logit(x, n, [&](uint32_t, float l) {
        const uint32_t b = value_bin(l, max_logit, scale);
        atomicAdd(&sm.counts[b], 1u);
        if (top_p_on) {
            const unsigned long long w = softmax_weight(l, max_logit, inv_t);
            if (w) atomicAdd(&sm.weights[b], w);
        }
    });
    __syncthreads();
    const uint32_t b0 = 2 * threadIdx.x, b1 = b0 + 1;

    uint32_t top_k_key = 0, k_bin = kValueBins, k_count = 0;
    if (top_k_on) {
        uint64_t before;
        find_bin(sm.counts[b0], sm.counts[b1], rule.top_k, scratch, &k_bin, &before);
        k_count = sm.counts[k_bin];
        if (k_count > kMaxBinTokens) return false;
        gather_bin(x, n, k_bin, k_count, max_logit, scale, sm.members);
        top_k_key = sm.members[rule.top_k - (uint32_t)before - 1];
    }
    uint32_t min_key = top_k_key;
    if (top_p_on) {
        // The weight of the top-k set per bin: none after its bin, only the members >= the
        // top-k key in it.
        uint64_t w[4], local, k_bin_weight = 0;
        if (top_k_on) {
            const uint64_t before = member_weights(sm.members, k_count, top_k_key, max_logit, inv_t, w, local, scratch);
            if (threadIdx.x == kThreads - 1) total_weight = before + local;
            __syncthreads();
            k_bin_weight = total_weight;
            __syncthreads();
        }
        auto weight_of = [&](uint32_t b) -> uint64_t { return b < k_bin ? sm.weights[b] : b == k_bin ? k_bin_weight : 0; };
        const uint64_t v0 = weight_of(b0), v1 = weight_of(b1);
        const uint64_t above = block_exclusive_sum(v0 + v1, scratch);
        if (threadIdx.x == kThreads - 1) total_weight = above + v0 + v1;
        __syncthreads();
        const uint64_t target = top_p_target(total_weight, rule.top_p);
        uint32_t p_bin;
        uint64_t p_before;
        find_bin(v0, v1, target, scratch, &p_bin, &p_before);
        uint32_t p_count = k_count;
        if (p_bin != k_bin) {
            p_count = sm.counts[p_bin];
            if (p_count > kMaxBinTokens) return false;
            gather_bin(x, n, p_bin, p_count, max_logit, scale, sm.members);
        }
        // The first member whose running weight (after the bins before) reaches the target.
        const uint64_t before = p_before + member_weights(sm.members, p_count, top_k_key, max_logit, inv_t, w, local, scratch);
        if (before < target && before + local >= target) {
            uint64_t acc = before;
            for (int k = 0; k < 4; ++k) {
                acc += w[k];
                if (acc >= target) {
                    top_p_key = sm.members[4 * threadIdx.x + k];
                    break;
                }
            }
        }
        __syncthreads();
        min_key = max(min_key, top_p_key);
    }
    *min_key_out = min_key;
    return true;
}

__global__ void __launch_bounds__(kThreads)
    sample_cut_kernel(float *x, const uint32_t *out, uint8_t *state, const __grid_constant__ SampleParams p) {
    pdl_enter();
    extern __shared__ uint32_t dynamic_smem[];  // the penalties' seen-bitmap and tile, then CutSmem
    __shared__ uint64_t scratch[32];
    __shared__ float red[32];
    const SamplingBuffer buf = sampling_buffer(state);
    const SamplingRule rule = *buf.rule;
    const uint32_t n = p.n;

    if (rule.repeat_window > 0 && (rule.repeat_penalty != 1.f || additive_penalties_on(rule))) {
        // The window: the last repeat_window of (the buffer's recent tokens, this replay's draws,
        // which sit in the chain_index slots before `out`); its last `generated` tokens are the
        // generated ones. Each distinct token once: the thread whose bit finds it unseen applies
        // the penalties to it, with its count among the generated tokens, which the block stages
        // through shared memory a tile at a time (integer counts: the same in any order).
        uint32_t *seen = dynamic_smem;
        uint32_t *tile = dynamic_smem + (n + 31) / 32;
        for (uint32_t w = threadIdx.x; w < (n + 31) / 32; w += kThreads) seen[w] = 0;
        __syncthreads();
        const uint32_t total = rule.recent_count + p.chain_index;
        const uint32_t len = min(rule.repeat_window, total);
        const uint32_t generated = additive_penalties_on(rule) ? min(len, rule.recent_generated + p.chain_index) : 0u;
        auto token_at = [&](uint32_t j) -> uint32_t {  // the window's j-th token
            const uint32_t at = total - len + j;
            return at < rule.recent_count ? buf.recent[at] : out[(int)(at - rule.recent_count) - (int)p.chain_index];
        };
        for (uint32_t base = 0; base < len; base += kThreads) {  // uniform over the block: the tiles need every thread
            const uint32_t j = base + threadIdx.x;
            const uint32_t t = j < len ? token_at(j) : n;
            bool mine = false;
            if (t < n) {
                const uint32_t bit = 1u << (t & 31);
                mine = !(atomicOr(&seen[t >> 5], bit) & bit);
            }
            uint32_t count = 0;
            for (uint32_t g = len - generated; g < len; g += kThreads) {
                const uint32_t m = min((uint32_t)kThreads, len - g);
                __syncthreads();  // the previous tile has been read
                if (threadIdx.x < m) tile[threadIdx.x] = token_at(g + threadIdx.x);
                __syncthreads();
                if (mine)
                    for (uint32_t k = 0; k < m; ++k) count += tile[k] == t;
            }
            if (mine) x[t] = penalized_logit(rule, x[t], count);
        }
        __syncthreads();  // the penalized logits are read below and by the draw
    }
    if (rule.inv_temperature == 0.f) return;  // greedy: the draw takes the argmax

    float hi = -INFINITY, lo = INFINITY;
    for_each_logit(x, n, [&](uint32_t, float l) {
        hi = fmaxf(hi, l);
        if (isfinite(l)) lo = fminf(lo, l);
    });
    const float max_logit = block_reduce<true>(hi, red);
    const float min_logit = -block_reduce<true>(-lo, red);

    uint32_t min_key = 0;
    const bool top_k_on = rule.top_k > 0 && rule.top_k < n, top_p_on = rule.top_p < 1.f;
    CutSmem &sm = *reinterpret_cast<CutSmem *>(dynamic_smem);
    if ((top_k_on || top_p_on) && !cut_by_value_bins(x, n, rule, max_logit, min_logit, sm, scratch, &min_key)) {
        // Slow path (many tokens at the boundary, e.g. a flat distribution): radix selection
        // over all the logits' keys.
        __syncthreads();
        unsigned long long *hist = sm.weights;
        min_key = 0;
        if (top_k_on) min_key = select_key<false>(x, n, 0, rule.top_k, max_logit, rule.inv_temperature, hist, scratch);
        if (top_p_on) {
            uint64_t w = 0;
            for_each_logit(x, n, [&](uint32_t, float l) {
                if (order_key(l) >= min_key) w += softmax_weight(l, max_logit, rule.inv_temperature);
            });
            const uint64_t before = block_exclusive_sum(w, scratch);
            __shared__ uint64_t total;
            if (threadIdx.x == kThreads - 1) total = before + w;
            __syncthreads();
            const uint64_t target = top_p_target(total, rule.top_p);
            min_key = select_key<true>(x, n, min_key, target, max_logit, rule.inv_temperature, hist, scratch);
        }
    }
    if (threadIdx.x == 0) {
        buf.cut->max_logit = max_logit;
        buf.cut->min_key = min_key;
    }
}

__global__ void __launch_bounds__(kThreads)
    sample_draw_kernel(const float *x, uint32_t *out, uint8_t *state, const __grid_constant__ SampleParams p,
                       PatchContext pc, const GridArgmax g) {
    pdl_enter();
    const SamplingBuffer buf = sampling_buffer(state);
    const float inv_t = buf.rule->inv_temperature, log_min_p = buf.rule->log_min_p;
    const float max_logit = buf.cut->max_logit;
    const uint32_t min_key = buf.cut->min_key;
    const uint32_t position = pc.patch == PatchType::SampleOutput ? *pc.base_position + pc.token_index + 1 : p.position;
    const uint32_t stream = noise_stream(buf.rule->seed_lo, buf.rule->seed_hi, position);
    float v = -INFINITY;
    uint32_t idx = 0xFFFFFFFFu;
    for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < p.n; i += gridDim.x * kThreads) {
        const float l = x[i];
        if (inv_t == 0.f)
            better(v, idx, l, i);
        else if (order_key(l) >= min_key && min_p_keeps(l, max_logit, inv_t, log_min_p))
            better(v, idx, gumbel_score(l, max_logit, inv_t, gumbel_noise(stream, i)), i);
    }
    finish_grid_argmax(v, idx, out, g);
}

}  // namespace

void launch_sample_f32(const LaunchArgs &a) {
    const SampleParams &p = params_of<SampleParams>(a);
    float *x = reinterpret_cast<float *>(a.buffers[0]);
    uint32_t *out = reinterpret_cast<uint32_t *>(a.buffers[1]);
    uint8_t *state = a.buffers[2];

    if (reinterpret_cast<uintptr_t>(x) % 16 != 0) throw AkunuError("internal: sample_f32 on CUDA reads logits 16-byte aligned");
    const size_t smem = std::max<size_t>(((p.n + 31) / 32 + kThreads) * 4, sizeof(CutSmem));
    if (!allow_dynamic_smem(sample_cut_kernel, smem))
        throw AkunuError("sample_f32 on CUDA: a vocabulary of " + std::to_string(p.n) + " tokens is too large");
    launch_pdl(sample_cut_kernel, 1, kThreads, smem, a, x, (const uint32_t *)out, state, p);
    check_launch("sample_f32 (cut)");

    const GridArgmax g = grid_argmax_workspace(*a.workspace);
    const unsigned blocks = grid_argmax_blocks(g, p.n, 2 * kThreads);
    launch_pdl(sample_draw_kernel, blocks, kThreads, 0, a, (const float *)x, out, state, p, a.patch, g);
    check_launch("sample_f32 (draw)");
}

}  // namespace akunu::cuda
