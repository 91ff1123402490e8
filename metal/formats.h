// Weight formats as the Metal kernels read them: each one a struct with the geometry of its
// blocks and a decoder of 16-element chunks, so that one GEMM / GEMV / embedding template serves
// every dtype (the layouts are GGUF's, as src/core/quant_blocks.h and kquant_blocks.h spell them).
//
//   enum { kBlockElements, kBlockBytes };   a row of K elements is K / kBlockElements blocks
//   static void dequantize_chunk(device const uchar *block, uint chunk, thread float *out);
//       writes elements [16 * chunk, 16 * chunk + 16) of the block to out[0..15]
//
// The float formats use blocks of 16 elements (their rows must be a multiple of 16 long).
#pragma once
#include "common.h"

inline float f16_bits_to_float(ushort bits) { return float(as_type<half>(bits)); }
inline float bf16_bits_to_float(ushort bits) { return as_type<float>(uint(bits) << 16); }
// A little-endian u16 at any byte offset (GGUF blocks are packed, so fields may be unaligned).
inline ushort load_u16(device const uchar *p) { return ushort(p[0] | (ushort(p[1]) << 8)); }

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
