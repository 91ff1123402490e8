// The Q8_0 KV cache (kv_cache_dtype "q8_0"): its layout and block math, defined once for every
// backend (docs/adr/0011-q8-kv-cache.md).
//
// One layer's K buffer (and likewise V) holds two planes, each head-major like the F16 cache:
//   values  int8  [n_kv_heads][max_seq][head_dim]          at byte 0
//   scales  fp16  [n_kv_heads][max_seq][head_dim / 32]     at byte n_kv_heads * max_seq * head_dim
// Each 32 consecutive dims of a row form a block quantized exactly as ggml's quantize_row_q8_0_ref
// (gguf-py's Q8_0): d = amax / 127, q = roundf(x / d) (ties away from zero), stored scale fp16(d);
// value = fp16_to_f32(scale) * q. head_dim must be a multiple of 32.
//
// The layout functions are constexpr, so CUDA device code can call them (nvcc runs with
// --expt-relaxed-constexpr); quantize_kv_block_q8 is the host reference that GPU kernels mirror.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/half.h"

namespace akunu {

constexpr uint32_t kKVQ8Block = 32;  // elements per scale (Q8_0's block)

// Bytes of the value plane of one layer's K or V buffer: where its scale plane starts.
constexpr size_t kv_q8_scales_offset(uint32_t n_kv_heads, uint32_t max_seq, uint32_t head_dim) {
    return (size_t)n_kv_heads * max_seq * head_dim;
}

// Bytes of one layer's K or V buffer.
constexpr size_t kv_q8_buffer_bytes(uint32_t n_kv_heads, uint32_t max_seq, uint32_t head_dim) {
    return kv_q8_scales_offset(n_kv_heads, max_seq, head_dim) +
           (size_t)n_kv_heads * max_seq * (head_dim / kKVQ8Block) * sizeof(uint16_t);
}

// Row (kv_head, position) in either plane: the values start at row * head_dim bytes, the scales at
// row * (head_dim / 32) fp16 entries from the scale plane.
constexpr size_t kv_row(uint32_t kv_head, uint32_t position, uint32_t max_seq) {
    return (size_t)kv_head * max_seq + position;
}

// Keys are quantized in a rotated basis (docs/adr/0031-q8-kv-keys-hadamard-rotated.md): each 32-dim
// block of a K row goes through the Walsh-Hadamard transform below before quantize_kv_block_q8, and
// each 32-dim block of the query rows that read it goes through the same transform times 1/32.
// Scores are unchanged (H H^T = 32 I), but a key block's outlier dims are spread over the whole
// block, so its scale is set by the block's size rather than by its largest dim: the rounding error
// of the scores halves (SmolLM2 over 4096 tokens: mean KL to the F16 cache 5.6e-4 -> 2.6e-4).
//
// The butterflies are unnormalized (+-1 entries, exact scaling by 1/32 on the query side) and run
// in this order, stage h = 1, 2, 4, 8, 16: (x[i], x[i + h]) <- (x[i] + x[i + h], x[i] - x[i + h])
// for every i with bit h clear. Each element is then a fixed sequence of float additions, so every
// backend's kernel (a loop here, warp shuffles on CUDA, SIMD shuffles on Metal) gives the same bits.
constexpr float kKVQ8QueryScale = 1.0f / 32.0f;

inline void hadamard_kv_block(float *x) {
    for (uint32_t h = 1; h < kKVQ8Block; h <<= 1)
        for (uint32_t i = 0; i < kKVQ8Block; ++i)
            if ((i & h) == 0) {
                const float a = x[i], b = x[i + h];
                x[i] = a + b;
                x[i + h] = a - b;
            }
}

// A query or key row of head_dim dims (a multiple of 32) transformed block by block.
inline void hadamard_kv_row(float *x, uint32_t head_dim) {
    for (uint32_t b = 0; b < head_dim / kKVQ8Block; ++b) hadamard_kv_block(x + b * kKVQ8Block);
}
inline void hadamard_query_row(float *x, uint32_t head_dim) {
    hadamard_kv_row(x, head_dim);
    for (uint32_t d = 0; d < head_dim; ++d) x[d] *= kKVQ8QueryScale;
}

// Quantizes x[0..32) into q and returns the block's fp16 scale, bit for bit as ggml's reference.
inline uint16_t quantize_kv_block_q8(const float *x, int8_t *q) {
    float amax = 0.f;
    for (uint32_t i = 0; i < kKVQ8Block; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.0f / d : 0.f;
    for (uint32_t i = 0; i < kKVQ8Block; ++i) q[i] = (int8_t)std::roundf(x[i] * id);
    return float_to_half_bits(d);
}

// Quantizes a row of head_dim floats into its values and head_dim / 32 scales.
inline void quantize_kv_row_q8(const float *x, uint32_t head_dim, int8_t *q, uint16_t *scales) {
    for (uint32_t b = 0; b < head_dim / kKVQ8Block; ++b)
        scales[b] = quantize_kv_block_q8(x + b * kKVQ8Block, q + b * kKVQ8Block);
}

}  // namespace akunu
