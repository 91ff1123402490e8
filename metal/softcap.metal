// softcap_f32: x = cap * tanh(x / cap) in place (Gemma 2's final logit soft-capping; the CPU's
// src/backend/cpu/softcap.cpp, CUDA's cuda/softcap.cu). One threadgroup per row.
#include "common.h"

// buffers: 0 x [rows, n] (in place); group = row
kernel void softcap_f32(device float *x [[buffer(0)]], constant SoftcapParams &p [[buffer(1)]], AKUNU_THREAD_ARGS) {
    device float *row = x + group.x * p.n;
    const float inv_cap = 1.0f / p.cap;  // as the CPU: a multiply per element, not a divide
    for (uint i = thread_position.x; i < p.n; i += group_size.x) row[i] = p.cap * precise::tanh(row[i] * inv_cap);
}
