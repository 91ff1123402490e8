// Quantized block layouts, defined once and included by every backend.
// These mirror the GGUF on-disk formats byte for byte (real files win over the book).
#pragma once
#include <cstdint>

namespace akunu {

constexpr int QK4_0 = 32;
constexpr int QK4_1 = 32;
constexpr int QK8_0 = 32;
constexpr int QK_ACT = 32;

// Q4_0: value = (nibble - 8) * d. qs[j] low nibble is element j, high nibble is element j + 16.
struct BlockQ4_0 {
    uint16_t d;  // fp16 bits
    uint8_t qs[QK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block is 18 bytes");

// Q4_1: value = nibble * d + m, same nibble order as Q4_0.
struct BlockQ4_1 {
    uint16_t d;  // fp16 bits
    uint16_t m;  // fp16 bits
    uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block is 20 bytes");

// Q8_0: value = q * d.
struct BlockQ8_0 {
    uint16_t d;  // fp16 bits
    int8_t qs[QK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block is 34 bytes");

// Activation block used by the integer dot products (never stored on disk): 32 activations as
// int16, value = q * d with d = max|x| / 32767, and sum = d * sum(q) so that Q4_1's offset term
// costs one multiply per block. (int8 activations cost too much accuracy end to end.)
// Element order inside qs is the one the AVX2 dots unpack weights into without lane crossing:
//   qs[0..7] = x[0, 2, .., 14], qs[8..15] = x[16, 18, .., 30],
//   qs[16..23] = x[1, 3, .., 15], qs[24..31] = x[17, 19, .., 31]
// i.e. element e lives at act_q16_pos(e). Only quantize_row_act and the dots depend on it.
struct BlockQ16Act {
    float d;
    float sum;
    int16_t qs[QK_ACT];
};
static_assert(sizeof(BlockQ16Act) == 72, "activation block is 72 bytes");

// Activation block for the r16 layout's u8 x s8 dot products (CPU builds with AVX-512 VNNI):
// q = 128 * hi + lo with |q| <= 16383, lo in [0, 127]; elements in natural order.
struct BlockQ8x2Act {
    float d;         // x ~= d * q
    float sum;       // d * qsum
    int32_t qsum;    // sum of the 32 q (exact: weights stored with an offset subtract offset * qsum)
    int32_t qsum_lo; // sum of q over elements 0..15 (formats with a scale per 16 elements)
    int8_t hi[QK_ACT];
    int8_t lo[QK_ACT];
};
static_assert(sizeof(BlockQ8x2Act) == 80, "two-digit activation block is 80 bytes");

constexpr int act_q16_pos(int e) { return (e & 1) * 16 + (e >> 4) * 8 + ((e & 15) >> 1); }

}  // namespace akunu
