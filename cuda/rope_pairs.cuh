// RoPE's rotation pairs and angle, shared by the RoPE + KV-write kernel (cuda/rope.cu) and the
// decode attention that ropes its own query and key (cuda/attention.cu).
#pragma once
#include <cstdint>

namespace akunu::cuda {

// Interleaved (GPT-J / GGUF Llama) pairs dims (2i, 2i+1); NeoX pairs (i, i + rope_dim/2).
// first / second: pair i's dims; pair_of / is_first: the other way, for a dim d < rope_dim.
struct Interleaved {
    __device__ static uint32_t first(uint32_t i, uint32_t) { return 2 * i; }
    __device__ static uint32_t second(uint32_t i, uint32_t) { return 2 * i + 1; }
    __device__ static uint32_t pair_of(uint32_t d, uint32_t) { return d / 2; }
    __device__ static bool is_first(uint32_t d, uint32_t) { return (d & 1) == 0; }
};
struct NeoX {
    __device__ static uint32_t first(uint32_t i, uint32_t) { return i; }
    __device__ static uint32_t second(uint32_t i, uint32_t rope_dim) { return i + rope_dim / 2; }
    __device__ static uint32_t pair_of(uint32_t d, uint32_t rope_dim) { return d < rope_dim / 2 ? d : d - rope_dim / 2; }
    __device__ static bool is_first(uint32_t d, uint32_t rope_dim) { return d < rope_dim / 2; }
};

// sin and cos of pair i's angle at `pos`, rounded as the CPU rounds pos * inv_freq.
__device__ __forceinline__ void rope_sincos(uint32_t pos, float inv_freq_i, float *s, float *c) {
    sincosf(__fmul_rn((float)pos, inv_freq_i), s, c);
}

}  // namespace akunu::cuda
