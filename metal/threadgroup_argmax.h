// The (value, index) argmax of a threadgroup, the first index on ties, as the CPU's argmax
// (src/backend/cpu/argmax.cpp) and sampler (src/core/sampling_rule.cpp) pick; shared by
// argmax.metal and sample.metal (CUDA's counterpart: cuda/grid_argmax.cuh).
#pragma once
#include "common.h"
#include "for_each_logit.h"

// The index of "no element seen" (it loses every tie).
enum : uint { kNoIndex = 0xFFFFFFFFu };

// (v, i) becomes (v2, i2) when v2 is larger, or equal at a lower index. A NaN v2 never wins.
inline void keep_better(thread float &v, thread uint &i, float v2, uint i2) {
    if (v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

// Every thread passes its own best (v, idx) (v never NaN) and gets the group's winner. `values`
// and `indices` are threadgroup arrays with a slot per SIMD group.
template <typename Values, typename Indices>
inline uint threadgroup_argmax(float v, uint idx, Values values, Indices indices, uint simd_lane, uint simd_index,
                               uint n_threads) {
    // The SIMD group's largest value, then the lowest index holding it.
    const float simd_best = simd_max(v);
    const uint simd_best_index = simd_min(v == simd_best ? idx : uint(kNoIndex));
    if (simd_lane == 0) {
        values[simd_index] = simd_best;
        indices[simd_index] = simd_best_index;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint n_simd = (n_threads + AKUNU_SIMD_WIDTH - 1) / AKUNU_SIMD_WIDTH;
    float best = values[0];
    uint best_index = indices[0];
    for (uint s = 1; s < n_simd; ++s) keep_better(best, best_index, values[s], indices[s]);
    // The slots are read by all before any thread may reuse them.
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return best_index;
}

// Visits logits keeping the first index of the largest, as the CPU's scan
// `if (x[i] > x[best]) best = i` from best = 0 finds it: a NaN never wins, except that a NaN at
// index 0 is never beaten (it competes as +inf, which index 0 wins on ties).
struct FirstArgmax {
    float value = -INFINITY;
    uint index = kNoIndex;
    void visit(uint i, float l) { keep_better(value, index, i == 0 && isnan(l) ? INFINITY : l, i); }
};

// The group's FirstArgmax over x[0, n) (0 when n is 0).
template <typename Values, typename Indices>
inline uint first_argmax(device const float *x, uint n, Values values, Indices indices, uint tid, uint n_threads,
                         uint simd_lane, uint simd_index) {
    FirstArgmax best;
    for_each_logit(x, n, tid, n_threads, best);
    const uint index = threadgroup_argmax(best.value, best.index, values, indices, simd_lane, simd_index, n_threads);
    return index == kNoIndex ? 0u : index;
}
