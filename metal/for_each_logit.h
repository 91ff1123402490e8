// The loop over a vocabulary's logits of the single-threadgroup kernels (argmax.metal,
// sample.metal; CUDA's for_each_logit in cuda/sample.cu): one group alone reading the logits is
// bound by the loads' latency, so each thread loads 16 bytes at a time, two loads in flight.
#pragma once
#include "common.h"

// Calls visitor.visit(i, x[i]) for this thread's share of x[0, n), in increasing i. x must be
// 16-byte aligned (the logits are bound at offset 0).
template <typename Visitor>
inline void for_each_logit(device const float *x, uint n, uint tid, uint n_threads, thread Visitor &visitor) {
    device const float4 *x4 = (device const float4 *)x;
    const uint n4 = n / 4;
    uint q = tid;
    for (; q + n_threads < n4; q += 2 * n_threads) {
        const float4 a = x4[q], b = x4[q + n_threads];
        const uint i = 4 * q, j = 4 * (q + n_threads);
        visitor.visit(i, a.x);
        visitor.visit(i + 1, a.y);
        visitor.visit(i + 2, a.z);
        visitor.visit(i + 3, a.w);
        visitor.visit(j, b.x);
        visitor.visit(j + 1, b.y);
        visitor.visit(j + 2, b.z);
        visitor.visit(j + 3, b.w);
    }
    if (q < n4) {
        const float4 a = x4[q];
        visitor.visit(4 * q, a.x);
        visitor.visit(4 * q + 1, a.y);
        visitor.visit(4 * q + 2, a.z);
        visitor.visit(4 * q + 3, a.w);
    }
    for (uint i = 4 * n4 + tid; i < n; i += n_threads) visitor.visit(i, x[i]);
}
