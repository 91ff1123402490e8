// grammar_bitmask_f32: logits[i] = -inf where the grammar's mask clears bit i (bit i % 32 of word
// i / 32), before the argmax or the sampler, so neither picks a forbidden token (the CPU's
// src/backend/cpu/grammar_bitmask.cpp, CUDA's cuda/grammar_bitmask.cu).
#include "common.h"

// buffers: 0 logits [n] (in place), 1 mask u32 [(n + 31) / 32]. The grid is the CPU's work units,
// one per 64 mask words: a threadgroup takes those 2048 logits, a thread per logit (consecutive
// threads, consecutive logits; a word's 32 lanes read it once from the cache).
kernel void grammar_bitmask_f32(device float *logits [[buffer(0)]], device const uint *mask [[buffer(1)]],
                                constant GrammarBitmaskParams &p [[buffer(2)]], AKUNU_THREAD_ARGS) {
    const uint first = group.x * 2048u, last = min(first + 2048u, p.n);
    for (uint i = first + thread_position.x; i < last; i += group_size.x)
        if (!((mask[i >> 5] >> (i & 31u)) & 1u)) logits[i] = -INFINITY;
}
