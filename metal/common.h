// What every kernel in metal/ includes: the Metal standard library on Apple's compiler, the
// shim (tests/metal_shim/metal_shim.h) when the file is compiled as C++ for the Linux tests,
// and the parameter structs every backend shares.
#pragma once
#if defined(__METAL_VERSION__)
#include <metal_stdlib>
#else
#include "metal_shim.h"
#include "metal_shim_keywords.h"
#endif
// Headers of src/core/ included after this one take their Metal spelling (core/sampling_rule.h);
// the shim's compiler is no Metal compiler, so __METAL_VERSION__ alone does not tell them.
#define AKUNU_METAL_SOURCE 1
#include "core/kernel_params.h"

using namespace metal;
using namespace akunu;

// The thread-position arguments every kernel ends with, always these five in this order (the
// shim passes them by position; Metal by attribute).
#define AKUNU_THREAD_ARGS                                         \
    uint3 group [[threadgroup_position_in_grid]],                 \
    uint3 thread_position [[thread_position_in_threadgroup]],     \
    uint3 group_size [[threads_per_threadgroup]],                 \
    uint simd_lane [[thread_index_in_simdgroup]],                 \
    uint simd_index [[simdgroup_index_in_threadgroup]]

// Threads of a SIMD group on every Apple GPU.
#define AKUNU_SIMD_WIDTH 32
