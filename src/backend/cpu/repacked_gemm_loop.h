// The loop nest shared by the repacked layouts' GEMMs (r8_layout.cpp, r8_kquant_layout.cpp, r16_layout.cpp,
// r16_kquant_layout.cpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cpu/gemm_tiles.h"
#include "backend/cpu/quant_helpers.h"
#include "backend/cpu/simd_config.h"
#include "core/quant_blocks.h"

namespace akunu::cpu {

// Calls tile(group, m, rm, row0, lo, hi) for every tile of a GEMM over weight rows [n_begin, n_end)
// of a layout in groups of kGroupRows rows: `group` points at the group whose first row is row0,
// the tile covers activation rows [m, m + rm) (rm <= kTileM), and only the group's rows [lo, hi)
// belong to the range (a thread's range may start or end mid-group).
// Groups and activation rows go in chunks of ~256 KiB each, so that in prefill a chunk of weights
// stays in L2 while every activation row of a chunk passes it; decode (M = 1) is one stream.
// x_bytes_read: the bytes of an activation row the tiles read (r16 rows hold more, see act_quant.h).
template <int kGroupRows, int kTileM, class Tile>
inline void for_each_group_tile(const GemmArgs &a, int64_t n_begin, int64_t n_end, Tile &&tile, size_t x_bytes_read) {
    constexpr size_t kChunkBytes = 256 * 1024;
    const size_t group_bytes = (size_t)kGroupRows * a.w_row_bytes;
    const int64_t g_chunk = std::max<int64_t>(1, (int64_t)(kChunkBytes / group_bytes));
    const int64_t m_chunk =
        std::max<int64_t>(kTileM, (int64_t)(kChunkBytes / std::max<size_t>(x_bytes_read, 1)) / kTileM * kTileM);
    const int64_t g_begin = n_begin / kGroupRows, g_end = (n_end + kGroupRows - 1) / kGroupRows;
    for (int64_t gc = g_begin; gc < g_end; gc += g_chunk) {
        const int64_t gc_end = std::min(g_end, gc + g_chunk);
        for (int64_t mc = 0; mc < a.M; mc += m_chunk) {
            const int64_t mc_end = std::min(a.M, mc + m_chunk);
            for (int64_t g = gc; g < gc_end; ++g) {
                const int64_t row0 = g * kGroupRows;
                const int lo = (int)(std::max(n_begin, row0) - row0);
                const int hi = (int)(std::min(n_end, row0 + kGroupRows) - row0);
                const uint8_t *group = a.w + (size_t)g * group_bytes;
                for (int64_t m = mc; m < mc_end; m += kTileM)
                    tile(group, m, (int)std::min<int64_t>(kTileM, mc_end - m), row0, lo, hi);
            }
        }
    }
}

#if defined(AKUNU_CPU_AVX2) && !defined(AKUNU_CPU_VNNI512)
// An r8 tile: one group of 8 rows against rm activation rows, out[m] lane l = dot(row l, row m).
using R8TileFn = void (*)(const uint8_t *group, const uint8_t *x, size_t x_row_bytes, int64_t nb, __m256 *out);

// An r8 tile's results out[i] (i < rm) into y rows m + i, columns row0 + [lo, hi): stored, or added
// where a.accumulate.
inline void store_r8_tile(const GemmArgs &a, const __m256 *out, int64_t m, int rm, int64_t row0, int lo, int hi) {
    for (int i = 0; i < rm; ++i) {
        float *y = a.y + (size_t)(m + i) * a.y_stride + row0;
        if (lo == 0 && hi == 8) {
            const __m256 v = a.accumulate ? _mm256_add_ps(_mm256_loadu_ps(y), out[i]) : out[i];
            _mm256_storeu_ps(y, v);
        } else {
            alignas(32) float tmp[8];
            _mm256_store_ps(tmp, out[i]);
            for (int l = lo; l < hi; ++l) store_out(y + l, tmp[l], a.accumulate);
        }
    }
}

// Rows [n_begin, n_end) of an r8 GEMM (r8_layout.cpp, r8_kquant_layout.cpp): tiles[rm - 1] runs each
// tile of rm activation rows over nb blocks; only the range's rows of a group are stored (or added).
template <int kTileM>
inline void r8_gemm_rows(const GemmArgs &a, int64_t n_begin, int64_t n_end, int64_t nb, const R8TileFn (&tiles)[kTileM]) {
    for_each_group_tile<8, kTileM>(a, n_begin, n_end, [&](const uint8_t *group, int64_t m, int rm, int64_t row0, int lo, int hi) {
        __m256 out[kTileM];
        tiles[rm - 1](group, a.x + (size_t)m * a.x_row_bytes, a.x_row_bytes, nb, out);
        store_r8_tile(a, out, m, rm, row0, lo, hi);
    }, a.x_row_bytes);
}
#endif

#if defined(AKUNU_CPU_VNNI512)
// An r16 tile: one group of 16 rows against rm activation rows, out[m] lane l = dot(row l, row m).
using R16TileFn = void (*)(const uint8_t *group, const uint8_t *x, size_t x_row_bytes, int64_t nb, __m512 *out);

// An r16 tile's results out[i] (i < rm) into y rows m + i, columns row0 + [lo, hi): stored, or added
// where a.accumulate.
inline void store_r16_tile(const GemmArgs &a, const __m512 *out, int64_t m, int rm, int64_t row0, int lo, int hi) {
    const __mmask16 keep = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
    for (int i = 0; i < rm; ++i) {
        float *y = a.y + (size_t)(m + i) * a.y_stride + row0;
        const __m512 v = a.accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(keep, y), out[i]) : out[i];
        _mm512_mask_storeu_ps(y, keep, v);
    }
}

// Rows [n_begin, n_end) of an r16 GEMM (r16_layout.cpp, r16_kquant_layout.cpp): tiles[rm - 1] runs each
// tile of rm activation rows over nb blocks; only the range's rows of a group are stored (or added).
template <int kTileM>
inline void r16_gemm_rows(const GemmArgs &a, int64_t n_begin, int64_t n_end, int64_t nb, const R16TileFn (&tiles)[kTileM]) {
    for_each_group_tile<16, kTileM>(a, n_begin, n_end, [&](const uint8_t *group, int64_t m, int rm, int64_t row0, int lo, int hi) {
        __m512 out[kTileM];
        tiles[rm - 1](group, a.x + (size_t)m * a.x_row_bytes, a.x_row_bytes, nb, out);
        store_r16_tile(a, out, m, rm, row0, lo, hi);
    }, (size_t)(a.K / QK_ACT) * sizeof(BlockQ8x2Act));
}
#endif

}  // namespace akunu::cpu
