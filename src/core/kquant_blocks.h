// Block layouts of the 5-bit, K-quant and IQ4 formats, byte for byte as in GGUF files (llama.cpp's
// ggml-common.h order; gguf-py's dequantize is the reference for what the bits mean). Shared by
// every backend. The 32-element formats (Q5_0, Q5_1, IQ4_NL) keep Q4_0's nibble order: qs[j] low
// nibble is element j, high nibble element j + 16. The others are 256-element superblocks.
#pragma once
#include <cstdint>

namespace akunu {

constexpr int QK_K = 256;  // elements per superblock

// Q5_0: value = (q - 16) * d, q = nibble | (bit e of qh) << 4.
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];  // little-endian u32: bit e is the 5th bit of element e
    uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block is 22 bytes");

// Q5_1: value = q * d + m, q as Q5_0 (unsigned).
struct BlockQ5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block is 24 bytes");

// IQ4_NL: value = d * kIQ4Values[nibble].
struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "IQ4_NL block is 18 bytes");

// The non-linear 4-bit grid of IQ4_NL / IQ4_XS.
constexpr int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Q2_K: 16 groups of 16; value = d * (sc & 15) * q - dmin * (sc >> 4), q 2 bits.
// Element e = 128 h + 32 s + l is bits 2s..2s+1 of qs[32 h + l].
struct BlockQ2_K {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
};
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block is 84 bytes");

// Q3_K: 16 groups of 16; value = d * (sc - 32) * q, q = low 2 bits (as Q2_K) - 4 * !(bit e / 32 of
// hmask[e % 32]); the 16 6-bit scales: low 4 bits in scales[0..7] (nibble g / 8 of byte g % 8),
// high 2 bits in scales[8..11] (bits 2 (g / 4) of byte 8 + g % 4).
struct BlockQ3_K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block is 110 bytes");

// Q4_K: 8 groups of 32; value = d * sc[j] * q - dmin * m[j], q = nibble h of qs[32 c + l] for
// element 64 c + 32 h + l (group j = 2 c + h). 6-bit sc/m packed in 12 bytes (kquant_scale_min).
struct BlockQ4_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block is 144 bytes");

// Q5_K: Q4_K plus a 5th bit: bit j of qh[l] for element 32 j + l.
struct BlockQ5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block is 176 bytes");

// Q6_K: 16 groups of 16; value = d * scales[g] * (q - 32), q 6 bits. For element 128 h + r:
// low 4 bits are nibble r / 64 of ql[64 h + r % 64], high 2 bits are bits 2 (r / 32) of qh[32 h + r % 32].
struct BlockQ6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block is 210 bytes");

// IQ4_XS: 8 groups of 32; value = d * (ls - 32) * kIQ4Values[nibble], ls 6 bits: low 4 in nibble
// j % 2 of scales_l[j / 2], high 2 in bits 2j of scales_h. Nibbles of group j: qs[16 j ..], Q4_0 order.
struct BlockIQ4_XS {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "IQ4_XS block is 136 bytes");

// Q4_K / Q5_K: the 6-bit scale and min of group j (0..7) from the 12 packed bytes. (constexpr so
// that CUDA device code may call it too.)
constexpr void kquant_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

}  // namespace akunu
