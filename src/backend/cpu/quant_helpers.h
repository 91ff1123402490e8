// Small inline helpers shared by the quantized row kernels (dequantize.cpp, gemm_tiles.cpp,
// kquant_kernels.cpp, r8_layout.cpp).
#pragma once
#include <cstdint>

#include "backend/cpu/convert.h"
#include "backend/cpu/gemm_tiles.h"
#include "backend/cpu/simd_config.h"
#include "core/quant_blocks.h"

namespace akunu::cpu {

#if defined(AKUNU_CPU_AVX2)
// Hardware conversion for scales inside the dot products (quiets sNaN; irrelevant there).
inline float fp16_scale(uint16_t h) { return _cvtsh_ss(h); }

// 16 bytes of nibbles -> 32 bytes in element order: low nibbles (elements 0..15) in the low
// 128-bit lane, high nibbles (elements 16..31) in the high lane. Values 0..15.
// Broadcasting the 16 bytes to both lanes is a pure load; a per-lane shift count (0 | 4) then
// brings the high nibbles down in the upper lane only.
inline __m256i unpack_nibbles(const uint8_t *qs) {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    const __m256i shifted = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

// One 32-element block of an RN x RM tile's integer dots: acc[m][r] += (we[r] . even + wo[r] . odd)
// * scale[r] * d_m, where we / wo hold weight row r's even / odd elements as int16 and activation
// block b of row m holds its even elements in qs[0..15], its odd ones in qs[16..31].
template <int RN, int RM>
inline void accumulate_block_dots(const BlockQ16Act *const (&x_rows)[RM], int64_t b, const __m256i (&we)[RN],
                                  const __m256i (&wo)[RN], const __m256 (&scale)[RN], __m256 (&acc)[RM][RN]) {
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) {
        const BlockQ16Act &ab = x_rows[m][b];
        const __m256i ae = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ab.qs));
        const __m256i ao = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ab.qs + 16));
        const __m256 ad = _mm256_set1_ps(ab.d);
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) {
            const __m256i dots = _mm256_add_epi32(_mm256_madd_epi16(we[r], ae), _mm256_madd_epi16(wo[r], ao));
            acc[m][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), _mm256_mul_ps(scale[r], ad), acc[m][r]);
        }
    }
}
#else
inline float fp16_scale(uint16_t h) { return fp16_to_f32(h); }
#endif

// The rows of an RN x RM GEMM tile: weight rows (as W) a.w_row_bytes apart from w0, activation rows
// (as X) a.x_row_bytes apart from x0.
template <class W, class X, int RN, int RM> struct TileRows {
    const W *w[RN];
    const X *x[RM];
    TileRows(const GemmArgs &a, const uint8_t *w0, const uint8_t *x0) {
        for (int r = 0; r < RN; ++r) w[r] = reinterpret_cast<const W *>(w0 + r * a.w_row_bytes);
        for (int m = 0; m < RM; ++m) x[m] = reinterpret_cast<const X *>(x0 + m * a.x_row_bytes);
    }
};

// A GEMM output element: written, or added to what is there (the fused residual add).
inline void store_out(float *y, float v, bool accumulate) { *y = accumulate ? *y + v : v; }

}  // namespace akunu::cpu
