// RoPE's rotation pairs and angles, shared by the RoPE + KV-write kernels (rope.metal) and the
// decode attention that rotates its own query and key (attention.metal). The float operations
// are the CPU's (src/backend/cpu/rope.cpp), in its order, so rotated values match it.
#pragma once
#include "common.h"

// Interleaved (GPT-J / GGUF Llama) pairs dims (2i, 2i+1); NeoX pairs (i, i + rope_dim/2).
// first / second: pair i's dims; pair_of / is_first: the other way, for a dim d < rope_dim.
struct RopeInterleaved {
    static uint first(uint i, uint rope_dim) { return 2 * i; }
    static uint second(uint i, uint rope_dim) { return 2 * i + 1; }
    static uint pair_of(uint d, uint rope_dim) { return d / 2; }
    static bool is_first(uint d, uint rope_dim) { return (d & 1) == 0; }
};
struct RopeNeoX {
    static uint first(uint i, uint rope_dim) { return i; }
    static uint second(uint i, uint rope_dim) { return i + rope_dim / 2; }
    static uint pair_of(uint d, uint rope_dim) { return d < rope_dim / 2 ? d : d - rope_dim / 2; }
    static bool is_first(uint d, uint rope_dim) { return d < rope_dim / 2; }
};

// (cos, sin) of pair i's angle at `pos`. precise:: because positions run into the thousands of
// radians, where the fast functions' range reduction loses the angle.
inline float2 rope_cos_sin(uint pos, float inv_freq_i) {
    const float angle = float(pos) * inv_freq_i;
    return float2(precise::cos(angle), precise::sin(angle));
}

// Rotates pair i of one head in place.
template <typename Pairs>
inline void rotate_pair(device float *head, uint i, uint rope_dim, float2 cs) {
    device float &x0 = head[Pairs::first(i, rope_dim)];
    device float &x1 = head[Pairs::second(i, rope_dim)];
    const float a = x0, b = x1;
    x0 = a * cs.x - b * cs.y;
    x1 = a * cs.y + b * cs.x;
}

// Dim d of a head after RoPE at `pos`, the head before it being src (any address space: a
// partner dim may belong to another thread). Dims past rope_dim (partial rotary) stay as they are.
template <typename Pairs, typename Src>
inline float rotated_dim(Src src, uint d, uint rope_dim, uint pos, device const float *inv_freq) {
    if (d >= rope_dim) return src[d];
    const uint pair = Pairs::pair_of(d, rope_dim);
    const float a = src[Pairs::first(pair, rope_dim)], b = src[Pairs::second(pair, rope_dim)];
    const float2 cs = rope_cos_sin(pos, inv_freq[pair]);
    return Pairs::is_first(d, rope_dim) ? a * cs.x - b * cs.y : a * cs.y + b * cs.x;
}
