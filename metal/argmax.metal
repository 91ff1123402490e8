// argmax_f32: the index of the largest logit into a token slot, the first one on ties (the CPU's
// src/backend/cpu/argmax.cpp, CUDA's cuda/argmax.cu). The command's grid is {1}: one threadgroup
// reduces the whole vocabulary.
#include "common.h"
#include "threadgroup_argmax.h"

// buffers: 0 logits [n], 1 token ids (writes slot 0 of its binding)
kernel void argmax_f32(device const float *x [[buffer(0)]], device uint *out [[buffer(1)]],
                       constant ArgmaxParams &p [[buffer(2)]], AKUNU_THREAD_ARGS) {
    threadgroup float values[32];
    threadgroup uint indices[32];
    const uint best = first_argmax(x, p.n, values, indices, thread_position.x, group_size.x, simd_lane, simd_index);
    if (thread_position.x == 0) out[0] = best;
}
