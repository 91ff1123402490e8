// The 256-element superblock formats (K-quants and IQ4_XS) behind formats.h's decoder interface.
// Chunk c is elements 16c .. 16c + 15 of the superblock, which is exactly one 16-element group of
// the formats with a scale per 16 (Q2_K, Q3_K, Q6_K) and half of group c / 2 of those with a scale
// per 32 (Q4_K, Q5_K, IQ4_XS). Layouts: src/core/kquant_blocks.h; each value is computed as the
// CPU backend's decoder computes it (src/backend/cpu/kquant_decode.h: sub-scale = d * scale
// rounded to float, then sub-scale * q - sub-min), so the two agree bit for bit.
#pragma once
#include "formats.h"

// Q2_K / Q3_K low bits: element 128 h + 32 s + l is bits 2s..2s+1 of qs[32 h + l]. For chunk c
// (h = c / 8, s = (c % 8) / 2, l = 16 (c % 2) + i) that is element i's two bits.
inline uint two_bit_quant(device const uchar *qs, uint chunk, uint i) {
    const uint h = chunk / 8, s = (chunk % 8) / 2, l = 16 * (chunk % 2) + i;
    return (qs[32 * h + l] >> (2 * s)) & 3;
}

// Q4_K / Q5_K: the 6-bit scale and min of 32-element group j from the 12 packed bytes (groups
// 0..3 in the low 6 bits of bytes j / j + 4; groups 4..7 split over a nibble of byte j + 4 and the
// top 2 bits of bytes j - 4 / j).
inline void k_scale_min(device const uchar *s, uint j, thread uint *scale, thread uint *min_) {
    if (j < 4) {
        *scale = s[j] & 63;
        *min_ = s[j + 4] & 63;
    } else {
        *scale = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *min_ = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// Q4_K / Q5_K nibbles: element 64 c + 32 h + l is nibble h of qs[32 c + l]. Chunk k covers
// group j = k / 2 = 2 c + h, l = 16 (k % 2) + i.
inline uint k_nibble(device const uchar *qs, uint chunk, uint i) {
    const uint j = chunk / 2, l = 16 * (chunk % 2) + i;
    return (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
}

// Q2_K, 84 bytes: scales[16] (low nibble scale, high nibble min of each 16-group), qs[64] 2-bit
// quants, f16 d, f16 dmin; value = d * scale * q - dmin * min.
struct FormatQ2_K {
    enum { kBlockElements = 256, kBlockBytes = 84 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        const uchar sc = block[chunk];
        const float scale = load_f16(block + 80) * float(sc & 15);
        const float min_ = load_f16(block + 82) * float(sc >> 4);
        for (uint i = 0; i < 16; ++i) out[i] = scale * float(two_bit_quant(block + 16, chunk, i)) - min_;
    }
};

// Q3_K, 110 bytes: hmask[32], qs[64] 2-bit low quants, scales[12] (16 6-bit scales: low 4 bits
// nibble g / 8 of byte g % 8, high 2 bits bits 2 (g / 4) of byte 8 + g % 4), f16 d;
// value = d * (scale - 32) * q, q = low bits - 4 unless bit e / 32 of hmask[e % 32] is set.
struct FormatQ3_K {
    enum { kBlockElements = 256, kBlockBytes = 110 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        device const uchar *scales = block + 96;
        const uint lo = (scales[chunk % 8] >> (4 * (chunk / 8))) & 15;
        const uint hi = (scales[8 + chunk % 4] >> (2 * (chunk / 4))) & 3;
        const float scale = load_f16(block + 108) * float(int(lo | (hi << 4)) - 32);
        device const uchar *hmask = block + 16 * (chunk % 2);  // hmask[e % 32] for e = 16 chunk + i
        const uint hbit = chunk / 2;                            // e / 32
        for (uint i = 0; i < 16; ++i) {
            const int q = int(two_bit_quant(block + 32, chunk, i)) - (((hmask[i] >> hbit) & 1) ? 0 : 4);
            out[i] = scale * float(q);
        }
    }
};

// Q4_K, 144 bytes: f16 d, f16 dmin, scales[12] (k_scale_min), qs[128] nibbles (k_nibble);
// value = d * scale * q - dmin * min per 32-element group.
struct FormatQ4_K {
    enum { kBlockElements = 256, kBlockBytes = 144 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        uint sc, m;
        k_scale_min(block + 4, chunk / 2, &sc, &m);
        const float scale = load_f16(block) * float(sc), min_ = load_f16(block + 2) * float(m);
        for (uint i = 0; i < 16; ++i) out[i] = scale * float(k_nibble(block + 16, chunk, i)) - min_;
    }
};

// Q5_K, 176 bytes: Q4_K's fields with qh[32] before qs[128]: the fifth bit of element 32 j + l is
// bit j of qh[l].
struct FormatQ5_K {
    enum { kBlockElements = 256, kBlockBytes = 176 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        uint sc, m;
        const uint j = chunk / 2;
        k_scale_min(block + 4, j, &sc, &m);
        const float scale = load_f16(block) * float(sc), min_ = load_f16(block + 2) * float(m);
        device const uchar *qh = block + 16 + 16 * (chunk % 2);
        for (uint i = 0; i < 16; ++i) {
            const uint q = k_nibble(block + 48, chunk, i) | (((qh[i] >> j) & 1) << 4);
            out[i] = scale * float(q) - min_;
        }
    }
};

// Q6_K, 210 bytes: ql[128], qh[64], int8 scales[16], f16 d; value = d * scale * (q - 32). For
// element 128 h + r: low 4 bits are nibble r / 64 of ql[64 h + r % 64], high 2 bits are bits
// 2 (r / 32) of qh[32 h + r % 32].
struct FormatQ6_K {
    enum { kBlockElements = 256, kBlockBytes = 210 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        const float scale = load_f16(block + 208) * float(int8_value(block[192 + chunk]));
        const uint h = chunk / 8, r0 = 16 * (chunk % 8);  // element 16 chunk + i = 128 h + r0 + i
        device const uchar *ql = block + 64 * h + r0 % 64;
        device const uchar *qh = block + 128 + 32 * h + r0 % 32;
        const uint lo_shift = 4 * (r0 / 64), hi_shift = 2 * (r0 / 32);
        for (uint i = 0; i < 16; ++i) {
            const uint q = ((ql[i] >> lo_shift) & 15) | (((qh[i] >> hi_shift) & 3) << 4);
            out[i] = scale * float(int(q) - 32);
        }
    }
};

// IQ4_XS, 136 bytes: f16 d, u16 scales_h, scales_l[4], qs[128]; group j's 6-bit scale ls has its
// low 4 bits in nibble j % 2 of scales_l[j / 2], its high 2 in bits 2j of scales_h; value =
// d * (ls - 32) * iq4_grid(nibble), the nibbles of group j in qs[16 j ..] in Q4_0's order.
struct FormatIQ4_XS {
    enum { kBlockElements = 256, kBlockBytes = 136 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        const uint j = chunk / 2;
        const uint lo = (block[4 + j / 2] >> (4 * (j % 2))) & 15;
        const uint hi = (uint(load_u16(block + 2)) >> (2 * j)) & 3;
        const float scale = load_f16(block) * float(int(lo | (hi << 4)) - 32);
        device const uchar *qs = block + 8 + 16 * j;
        const uint shift = 4 * (chunk % 2);
        for (uint i = 0; i < 16; ++i) out[i] = scale * iq4_grid((qs[i] >> shift) & 15);
    }
};
