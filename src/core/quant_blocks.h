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

// Activation block used by the integer dot products (never stored on disk):
// value = q * d, and sum = d * sum(q) so that Q4_1's offset term costs one multiply per block.
struct BlockQ8Act {
    float d;
    float sum;
    int8_t qs[QK_ACT];
};
static_assert(sizeof(BlockQ8Act) == 40, "activation block is 40 bytes");

}  // namespace akunu
