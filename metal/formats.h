// Weight formats as the Metal kernels read them: each one a struct with the geometry of its
// blocks and a decoder of 16-element chunks, so that one GEMM / GEMV / embedding template serves
// every dtype (the layouts are GGUF's, as src/core/quant_blocks.h and kquant_blocks.h spell them).
//
//   enum { kBlockElements, kBlockBytes };   a row of K elements is K / kBlockElements blocks
//   static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out);
//       writes elements [16 * chunk, 16 * chunk + 16) of the block to out[0..15]
//
// The float formats use blocks of 16 elements (their rows must be a multiple of 16 long).
// This file: the float formats and the 32-element blocks; formats_kquant.h: the 256-element
// superblocks (K-quants, IQ4_XS).
#pragma once
#include "common.h"

inline float f16_bits_to_float(ushort bits) { return float(as_type<half>(bits)); }
inline float bf16_bits_to_float(ushort bits) { return as_type<float>(uint(bits) << 16); }
// A little-endian u16 at any byte offset (GGUF blocks are packed, so fields may be unaligned).
inline ushort load_u16(device const uchar *p) { return ushort(p[0] | (ushort(p[1]) << 8)); }
// The same for a u32 (Q5_0 / Q5_1's fifth bits).
inline uint load_u32(device const uchar *p) {
    return uint(p[0]) | (uint(p[1]) << 8) | (uint(p[2]) << 16) | (uint(p[3]) << 24);
}
inline float load_f16(device const uchar *p) { return f16_bits_to_float(load_u16(p)); }
// A stored int8 (Q8_0 quants, Q6_K scales), sign-extended by arithmetic: the host compiler's
// `char` may be unsigned, MSL's is signed.
inline int int8_value(uchar b) { return int(b) - (int(b & 0x80) << 1); }

// Value `nibble` of IQ4_NL / IQ4_XS's non-linear grid {-127, -104, -83, -65, -49, -35, -22, -10,
// 1, 13, 25, 38, 53, 69, 89, 113}, whose int8 bytes are packed little-endian into four words: a
// lookup by shifts needs no table in memory (a per-thread index into a constant array is slow on
// the GPU, and a program-scope array would need linkage care across the library's files).
inline float iq4_grid(uint nibble) {
    const uint word = nibble < 8 ? (nibble < 4 ? 0xBFAD9881u : 0xF6EADDCFu) : (nibble < 12 ? 0x26190D01u : 0x71594535u);
    return float(int8_value(uchar(word >> (8 * (nibble & 3)))));
}

struct FormatF32 {
    enum { kBlockElements = 16, kBlockBytes = 64 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        device const float *x = (device const float *)block;
        for (uint i = 0; i < 16; ++i) out[i] = x[i];
    }
};

struct FormatF16 {
    enum { kBlockElements = 16, kBlockBytes = 32 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        device const half *x = (device const half *)block;
        for (uint i = 0; i < 16; ++i) out[i] = float(x[i]);
    }
};

struct FormatBF16 {
    enum { kBlockElements = 16, kBlockBytes = 32 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        device const ushort *x = (device const ushort *)block;
        for (uint i = 0; i < 16; ++i) out[i] = bf16_bits_to_float(x[i]);
    }
};

// --- 32-element blocks ----------------------------------------------------------------------------
// Each value is computed as the CPU backend's dequantize_row computes it (same operations in float),
// so the two agree bit for bit. Chunk 0 is elements 0..15, chunk 1 elements 16..31; the 4-bit
// formats keep both halves in one 16-byte qs array: low nibble of qs[j] is element j, high nibble
// element j + 16.

// Q8_0, 34 bytes: f16 d, then 32 int8 quants; value = q * d.
struct FormatQ8_0 {
    enum { kBlockElements = 32, kBlockBytes = 34 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        const float d = load_f16(block);
        device const uchar *qs = block + 2 + 16 * chunk;
        for (uint i = 0; i < 16; ++i) out[i] = float(int8_value(qs[i])) * d;
    }
};

// Q4_0, 18 bytes: f16 d, 16 bytes of nibbles; value = d * (nibble - 8).
struct FormatQ4_0 {
    enum { kBlockElements = 32, kBlockBytes = 18 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        const float d = load_f16(block);
        device const uchar *qs = block + 2;
        const uint shift = 4 * chunk;
        for (uint i = 0; i < 16; ++i) out[i] = d * float(int((qs[i] >> shift) & 15) - 8);
    }
};

// Q4_1, 20 bytes: f16 d, f16 m, 16 bytes of nibbles; value = d * nibble + m.
struct FormatQ4_1 {
    enum { kBlockElements = 32, kBlockBytes = 20 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        const float d = load_f16(block), m = load_f16(block + 2);
        device const uchar *qs = block + 4;
        const uint shift = 4 * chunk;
        for (uint i = 0; i < 16; ++i) out[i] = d * float((qs[i] >> shift) & 15) + m;
    }
};

// Q5_0 / Q5_1: the nibble plus a fifth bit, bit e of a little-endian u32 qh for element e.
inline uint q5_quant(device const uchar *qs, uint qh, uint chunk, uint i) {
    return ((qs[i] >> (4 * chunk)) & 15) | (((qh >> (16 * chunk + i)) & 1) << 4);
}

// Q5_0, 22 bytes: f16 d, u32 qh, 16 bytes of nibbles; value = d * (q - 16).
struct FormatQ5_0 {
    enum { kBlockElements = 32, kBlockBytes = 22 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        const float d = load_f16(block);
        const uint qh = load_u32(block + 2);
        for (uint i = 0; i < 16; ++i) out[i] = d * float(int(q5_quant(block + 6, qh, chunk, i)) - 16);
    }
};

// Q5_1, 24 bytes: f16 d, f16 m, u32 qh, 16 bytes of nibbles; value = d * q + m.
struct FormatQ5_1 {
    enum { kBlockElements = 32, kBlockBytes = 24 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        const float d = load_f16(block), m = load_f16(block + 2);
        const uint qh = load_u32(block + 4);
        for (uint i = 0; i < 16; ++i) out[i] = d * float(q5_quant(block + 8, qh, chunk, i)) + m;
    }
};

// IQ4_NL, 18 bytes: f16 d, 16 bytes of nibbles indexing the grid; value = d * iq4_grid(nibble).
struct FormatIQ4_NL {
    enum { kBlockElements = 32, kBlockBytes = 18 };
    static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out) {
        const float d = load_f16(block);
        device const uchar *qs = block + 2;
        const uint shift = 4 * chunk;
        for (uint i = 0; i < 16; ++i) out[i] = d * iq4_grid((qs[i] >> shift) & 15);
    }
};
