// sample_f32: draws one token by the sampling rule of src/core/sampling_rule.h (whose functions
// this file shares), exactly the token the CPU's sample_token (src/core/sampling_rule.cpp) draws
// for the same logits, rule, seed, position and history. The command's grid is {1}: one
// threadgroup does it all (CUDA's cuda/sample.cu takes two kernels):
//   1. the penalties, in place: each distinct valid token of the window once (the thread holding
//      its first occurrence), with its count among the window's generated tokens;
//   2. greedy (inv_temperature 0): the argmax, the first index on ties;
//   3. the max logit, then the top-k and top-p cuts as order-key thresholds by radix selection
//      (histograms of 11, 11 and 10 key bits in threadgroup memory; softmax weights summed in
//      fixed point, exact in any order of the atomic adds), left in the sampling buffer's
//      SamplingCut as CUDA's cut kernel leaves them;
//   4. Gumbel-max over the kept tokens, the first index on ties.
// Every loop over the logits reads them 16 bytes at a time (for_each_logit.h).
#include "common.h"
#include "core/sampling_rule.h"
#include "reduce.h"
#include "threadgroup_argmax.h"

namespace {

// The window's j-th token (of len, the last len of `total`): the sampling buffer's recent tokens,
// then this replay's earlier draws, which sit in the chain_index slots before `out`.
inline uint window_token(uint j, uint len, uint total, uint recent_count, device const uint *recent,
                         device const uint *out) {
    const uint at = total - len + j;
    return at < recent_count ? recent[at] : out[int(at - recent_count) - int(total - recent_count)];
}

// Penalizes x in place (sampling_rule.h's penalties over the CPU sample kernel's window). Each
// thread takes a window position and scans the window, staged a tile at a time in threadgroup
// memory, for an earlier occurrence of its token (then another thread owns it) and for the
// token's occurrences among the generated tokens: integer counts, the same in any order.
template <typename Tile>
inline void apply_penalties(device float *x, uint n, device const uint *out, device const uint *recent,
                            SamplingRule rule, uint chain_index, Tile tile, uint tid, uint n_threads) {
    const uint total = rule.recent_count + chain_index;
    const uint len = min(rule.repeat_window, total);
    const uint generated = additive_penalties_on(rule) ? min(len, rule.recent_generated + chain_index) : 0u;
    const uint first_generated = len - generated;
    for (uint base = 0; base < len; base += n_threads) {  // uniform: every thread stages the tiles
        const uint j = base + tid;
        const uint t = j < len ? window_token(j, len, total, rule.recent_count, recent, out) : n;
        bool owner = t < n;
        uint count = 0;
        for (uint g = 0; g < len; g += n_threads) {
            const uint m = min(n_threads, len - g);
            threadgroup_barrier(mem_flags::mem_threadgroup);  // the previous tile has been read
            if (tid < m) tile[tid] = window_token(g + tid, len, total, rule.recent_count, recent, out);
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if (t < n)
                for (uint k = 0; k < m; ++k)
                    if (tile[k] == t) {
                        if (g + k < j) owner = false;
                        if (g + k >= first_generated) ++count;
                    }
        }
        if (owner) x[t] = penalized_logit(rule, x[t], count);
    }
    // The penalized logits are read by every thread below.
    threadgroup_barrier(mem_flags::mem_device);
}

enum : uint { kCutPasses = 3, kMaxCutBins = 2048 };

// A histogram bin's value: a count, or a 64-bit weight kept as two words.
template <bool kSoftmaxWeights, typename Hist>
inline ulong bin_value(Hist lo, Hist hi, uint b) {
    const ulong low = atomic_load_explicit(&lo[b], memory_order_relaxed);
    return kSoftmaxWeights ? (ulong(atomic_load_explicit(&hi[b], memory_order_relaxed)) << 32) | low : low;
}

// Adds a 64-bit weight to a bin with 32-bit atomics: the thread whose add wraps the low word
// carries 1 into the high word, so the sum is exact whatever the order.
template <typename Hist>
inline void add_bin_weight(Hist lo, Hist hi, uint b, ulong w) {
    const uint w_lo = uint(w), w_hi = uint(w >> 32);
    const uint before = atomic_fetch_add_explicit(&lo[b], w_lo, memory_order_relaxed);
    const uint high = w_hi + (before + w_lo < before ? 1u : 0u);
    if (high) atomic_fetch_add_explicit(&hi[b], high, memory_order_relaxed);
}

// Visits logits adding those whose order key is at least floor_key and whose key bits above
// `shift` equal `prefix` to the histogram of their next key bits, weighing 1 or their softmax weight.
template <bool kSoftmaxWeights, typename Hist>
struct CutHistogram {
    Hist lo, hi;
    uint floor_key, prefix, prefix_mask, shift, bins;
    float max_logit, inv_t;
    void visit(uint, float l) {
        const uint key = order_key(l);
        if (key < floor_key || (key & prefix_mask) != prefix) return;
        const uint b = (key >> shift) & (bins - 1);
        if (kSoftmaxWeights) {
            const ulong w = softmax_weight(l, max_logit, inv_t);
            if (w) add_bin_weight(lo, hi, b, w);
        } else {
            atomic_fetch_add_explicit(&lo[b], 1u, memory_order_relaxed);
        }
    }
};

// The largest order key t such that the tokens with key >= max(t, floor_key) weigh at least the
// target, which is what the CPU's walk down the sorted keys finds:
//   kSoftmaxWeights false: each token weighs 1 and the target is `target` (top-k's cut: the
//   target-th largest key);
//   true: softmax weights, the target being top_p_target of their total (top-p's cut).
// Three passes over the logits, each a histogram of the next key bits over the tokens whose
// higher bits match those chosen so far; SIMD group 0 then finds the bin where the running sum
// from the top reaches the target (each lane sums bins / 32 bins, then walks its own), and the
// target left for the next pass. `walk` holds 34 values.
template <bool kSoftmaxWeights, typename Hist, typename Walk>
inline uint cut_key(device const float *x, uint n, uint floor_key, ulong target, float top_p, float max_logit,
                    float inv_t, Hist hist_lo, Hist hist_hi, Walk walk, uint tid, uint n_threads, uint simd_lane,
                    uint simd_index) {
    CutHistogram<kSoftmaxWeights, Hist> histogram;
    histogram.lo = hist_lo;
    histogram.hi = hist_hi;
    histogram.floor_key = floor_key;
    histogram.prefix = 0;
    histogram.prefix_mask = 0;
    histogram.max_logit = max_logit;
    histogram.inv_t = inv_t;
    for (uint pass = 0; pass < kCutPasses; ++pass) {
        const uint shift = pass == 0 ? 21u : pass == 1 ? 10u : 0u;
        const uint bins = pass < 2 ? 2048u : 1024u;
        for (uint b = tid; b < bins; b += n_threads) {
            atomic_store_explicit(&hist_lo[b], 0u, memory_order_relaxed);
            atomic_store_explicit(&hist_hi[b], 0u, memory_order_relaxed);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        histogram.shift = shift;
        histogram.bins = bins;
        for_each_logit(x, n, tid, n_threads, histogram);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (simd_index == 0) {
            // Lane l holds the `per` bins below bins - 1 - l * per, from the top down.
            const uint per = bins / AKUNU_SIMD_WIDTH, top = bins - 1 - simd_lane * per;
            ulong mine = 0;
            for (uint k = 0; k < per; ++k) mine += bin_value<kSoftmaxWeights>(hist_lo, hist_hi, top - k);
            walk[simd_lane] = mine;
            simdgroup_barrier(mem_flags::mem_threadgroup);
            ulong above = 0, sum = 0;
            for (uint l = 0; l < AKUNU_SIMD_WIDTH; ++l) {
                above += l < simd_lane ? walk[l] : 0;
                sum += walk[l];
            }
            // Top-p's target: its share of the weight at or above the floor (all of this pass).
            const ulong want = kSoftmaxWeights && pass == 0 ? top_p_target(sum, top_p) : target;
            if (above < want && above + mine >= want) {
                for (uint k = 0; k < per; ++k) {
                    const ulong v = bin_value<kSoftmaxWeights>(hist_lo, hist_hi, top - k);
                    if (above + v >= want) {
                        walk[32] = top - k;
                        walk[33] = want - above;
                        break;
                    }
                    above += v;
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        histogram.prefix |= uint(walk[32]) << shift;
        histogram.prefix_mask |= (bins - 1) << shift;
        target = walk[33];
        // walk is next written after two more barriers; the histogram only after this one.
    }
    return histogram.prefix;
}

struct MaxLogit {
    float value = -INFINITY;
    void visit(uint, float l) { value = fmax(value, l); }
};

// Visits logits keeping the Gumbel-max draw among the kept ones (the first index on ties). A
// token whose score could not beat the best so far even with the largest noise is skipped
// unhashed (fma is monotone in its addend, so the bound is exact; on a tie the earlier index,
// the best so far, wins anyway).
struct GumbelDraw {
    uint min_key, stream;
    float max_logit, inv_t, log_min_p, max_noise;
    float value = -INFINITY;
    uint index = kNoIndex;
    void visit(uint i, float l) {
        if (order_key(l) < min_key || !min_p_keeps(l, max_logit, inv_t, log_min_p)) return;
        if (index != kNoIndex && gumbel_score(l, max_logit, inv_t, max_noise) <= value) return;
        keep_better(value, index, gumbel_score(l, max_logit, inv_t, gumbel_noise(stream, i)), i);
    }
};

}  // namespace

// buffers: 0 logits [n] (penalized in place), 1 token ids (writes slot 0 of its binding; the
// chain_index slots before it hold this replay's earlier draws), 2 the sampling buffer
// (SamplingRule, SamplingCut, then the recent tokens)
kernel void sample_f32(device float *x [[buffer(0)]], device uint *out [[buffer(1)]],
                       device uchar *state [[buffer(2)]], constant SampleParams &p [[buffer(3)]],
                       AKUNU_THREAD_ARGS) {
    threadgroup uint window_tile[1024];
    threadgroup atomic_uint hist_lo[kMaxCutBins];
    threadgroup atomic_uint hist_hi[kMaxCutBins];
    threadgroup ulong walk[34];
    threadgroup float partials[32];
    threadgroup float values[32];
    threadgroup uint indices[32];
    const uint tid = thread_position.x, n_threads = group_size.x, n = p.n;
    const SamplingRule rule = *(device const SamplingRule *)state;
    // kSamplingCutOffset and kSamplingRecentOffset: the cut follows the rule, the recent tokens both.
    device SamplingCut *cut = (device SamplingCut *)(state + sizeof(SamplingRule));
    device const uint *recent = (device const uint *)(state + sizeof(SamplingRule) + sizeof(SamplingCut));

    if (rule.repeat_window > 0 && (rule.repeat_penalty != 1.f || additive_penalties_on(rule)))
        apply_penalties(x, n, out, recent, rule, p.chain_index, window_tile, tid, n_threads);
    if (rule.inv_temperature == 0.f) {
        const uint best = first_argmax(x, n, values, indices, tid, n_threads, simd_lane, simd_index);
        if (tid == 0) out[0] = best;
        return;
    }

    const float inv_t = rule.inv_temperature;
    MaxLogit hi;
    for_each_logit(x, n, tid, n_threads, hi);
    const float max_logit = threadgroup_max(hi.value, partials, simd_lane, simd_index, n_threads);

    uint min_key = 0;
    if (rule.top_k > 0 && rule.top_k < n)
        min_key = cut_key<false>(x, n, 0u, rule.top_k, 1.f, max_logit, inv_t, hist_lo, hist_hi, walk, tid, n_threads,
                                 simd_lane, simd_index);
    if (rule.top_p < 1.f)
        min_key = max(min_key, cut_key<true>(x, n, min_key, ulong(0), rule.top_p, max_logit, inv_t, hist_lo, hist_hi,
                                             walk, tid, n_threads, simd_lane, simd_index));
    if (tid == 0) {
        cut->max_logit = max_logit;
        cut->min_key = min_key;
    }

    GumbelDraw draw;
    draw.min_key = min_key;
    draw.stream = noise_stream(rule.seed_lo, rule.seed_hi, p.position);
    draw.max_logit = max_logit;
    draw.inv_t = inv_t;
    draw.log_min_p = rule.log_min_p;
    draw.max_noise = -precise::log(-precise::log((8388607.0f + 0.5f) / 8388608.0f));  // u's largest value
    for_each_logit(x, n, tid, n_threads, draw);
    const uint best = threadgroup_argmax(draw.value, draw.index, values, indices, simd_lane, simd_index, n_threads);
    if (tid == 0) out[0] = best == kNoIndex ? 0u : best;
}
