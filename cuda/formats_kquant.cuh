// Weight formats with per-group scales read as stored (layouts: src/core/kquant_blocks.h; values as
// gguf-py's dequantize): the 256-element superblocks Q2_K and Q3_K. (Every other quantized format is
// repacked at load into the g8 layout, cuda/formats_g8.cuh.) A
// superblock format has kSuperBytes instead of kBlockBytes and its dot8 / dequant_half take the
// superblock plus the index j (0..7) of the 32-element block inside it (fmt_dot8 / fmt_dequant_half
// in common.cuh do the addressing). Same slice convention as common.cuh: slice i of a 32-element
// block is its elements 4i..4i+3 (with xa) and 16+4i..16+4i+3 (with xb).
//
// Every format turns four quants into four unsigned bytes and those into floats with
// byte_as_float; signed values carry an offset that is folded into one x-sum term.
#pragma once
#include "core/kquant_blocks.h"
#include "cuda/common.cuh"

namespace akunu::cuda {

// --- helpers -------------------------------------------------------------------------------

__device__ __forceinline__ float dot4_bytes(uint32_t v, float4 x, float s) {
    return dot4(x, byte_as_float(v, 0), byte_as_float(v, 1), byte_as_float(v, 2), byte_as_float(v, 3), s);
}
__device__ __forceinline__ void bytes_to_floats(uint32_t v, float offset, float scale, float sub, float *out) {
#pragma unroll
    for (int b = 0; b < 4; ++b) out[b] = (byte_as_float(v, b) - offset) * scale - sub;
}

// --- superblocks: (sb, j) = the superblock and a 32-element block in it --------------------
// Each format: quads(sb, j, l) = unsigned quant bytes of elements 32j + l .. + 3 (l % 4 == 0),
// group(sb, j, h, scale, min) = factors of the 16 elements 32j + 16h ..: value = scale * (q - kOffset) - min.
template <class F>
struct SuperFmt {
    __device__ static float dot8(const uint8_t *sb, int j, int i, float4 xa, float4 xb) {
        float sa, ma, sbb, mb;
        F::group(sb, j, 0, sa, ma);
        F::group(sb, j, 1, sbb, mb);
        const float ya = hsum4(xa), yb = hsum4(xb);
        const float da = dot4_bytes(F::quads(sb, j, 4 * i), xa, 0.f) - F::kOffset * ya;
        const float db = dot4_bytes(F::quads(sb, j, 16 + 4 * i), xb, 0.f) - F::kOffset * yb;
        return sa * da + sbb * db - (ma * ya + mb * yb);
    }
    __device__ static void dequant_half(const uint8_t *sb, int j, int h, float *out) {
        float s, m;
        F::group(sb, j, h, s, m);
#pragma unroll
        for (int i = 0; i < 4; ++i) bytes_to_floats(F::quads(sb, j, 16 * h + 4 * i), F::kOffset, s, m, out + 4 * i);
    }
};

struct FmtQ2_K : SuperFmt<FmtQ2_K> {
    static constexpr int kSuperBytes = sizeof(BlockQ2_K);
    static constexpr float kOffset = 0.f;
    // Element 32 j + l: bits 2 (j % 4) of qs[32 (j / 4) + l].
    __device__ static uint32_t quads(const uint8_t *sb, int j, int l) {
        return (load_u32_a2(sb + 16 + 32 * (j / 4) + l) >> (2 * (j % 4))) & 0x03030303u;
    }
    __device__ static void group(const uint8_t *sb, int j, int h, float &scale, float &min) {
        const uint32_t sc = __ldg(sb + 2 * j + h);
        scale = load_f16(sb + 80) * (float)(sc & 15);
        min = load_f16(sb + 82) * (float)(sc >> 4);
    }
};

struct FmtQ3_K : SuperFmt<FmtQ3_K> {
    static constexpr int kSuperBytes = sizeof(BlockQ3_K);
    static constexpr float kOffset = 4.f;
    // Low 2 bits as Q2_K (qs at 32); bit j of hmask[l] adds 4 (the value is q - 4 when it is clear).
    __device__ static uint32_t quads(const uint8_t *sb, int j, int l) {
        const uint32_t low = (load_u32_a2(sb + 32 + 32 * (j / 4) + l) >> (2 * (j % 4))) & 0x03030303u;
        const uint32_t high = (load_u32_a2(sb + l) >> j) & 0x01010101u;
        return low | (high << 2);
    }
    __device__ static void group(const uint8_t *sb, int j, int h, float &scale, float &min) {
        const int g = 2 * j + h;
        const int lo = (__ldg(sb + 96 + g % 8) >> (4 * (g / 8))) & 15;
        const int hi = (__ldg(sb + 104 + g % 4) >> (2 * (g / 4))) & 3;
        scale = load_f16(sb + 108) * (float)((lo | hi << 4) - 32);
        min = 0.f;
    }
};


}  // namespace akunu::cuda
