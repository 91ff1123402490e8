// Threadgroup-wide reductions: a SIMD-group reduction, one partial per SIMD group in threadgroup
// memory, then every thread reduces the partials. `partials` is a threadgroup array with a slot
// per SIMD group (a template so that one helper serves every address space, as the shim needs).
#pragma once
#include "common.h"

template <typename Partials>
inline float threadgroup_sum(float value, Partials partials, uint simd_lane, uint simd_index, uint n_threads) {
    value = simd_sum(value);
    if (simd_lane == 0) partials[simd_index] = value;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint n_simd = (n_threads + AKUNU_SIMD_WIDTH - 1) / AKUNU_SIMD_WIDTH;
    float total = 0.0f;
    for (uint s = 0; s < n_simd; ++s) total += partials[s];
    // The partials are read by all before any thread may reuse them.
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return total;
}

template <typename Partials>
inline float threadgroup_max(float value, Partials partials, uint simd_lane, uint simd_index, uint n_threads) {
    value = simd_max(value);
    if (simd_lane == 0) partials[simd_index] = value;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint n_simd = (n_threads + AKUNU_SIMD_WIDTH - 1) / AKUNU_SIMD_WIDTH;
    float best = partials[0];
    for (uint s = 1; s < n_simd; ++s) best = max(best, partials[s]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return best;
}
