// gemm_rows (gemm_tiles.h) over GGUF rows of F32, F16, BF16, Q8_0, Q4_0 and Q4_1 in register tiles
// of weight rows x activation rows. Repacked weights go to r8_layout.cpp or r16_layout.cpp, the
// group-scaled dtypes to kquant_kernels.cpp.
//
// Activations for the integer dots are BlockQ16Act (act_quant.h): float d, float sum = d * Σq,
// int16 q[32] in the element order the weight unpacking below produces (see quant_blocks.h).
//
// SIMD paths are chosen at compile time (simd_config.h): AVX2+FMA+F16C, or the scalar code on
// every other target and under AKUNU_FORCE_SCALAR; the AVX2 code matches the scalar code to float
// rounding.
#include "backend/cpu/gemm_tiles.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/convert.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/quant_helpers.h"
#include "backend/cpu/repacked_layout.h"
#include "backend/cpu/simd_config.h"
#include "backend/cpu/tile_table.h"
#include "core/quant_blocks.h"

namespace akunu::cpu {

// Both paths walk the output in tiles of RN weight rows x RM activation rows, each tile being a
// full-K dot product. Weights loaded (and unpacked / converted) once feed RM activation rows;
// activations loaded once feed RN weight rows. Around the tiles, N and M are cut into chunks of
// roughly L2 size so a chunk of weight rows stays cached while the activation chunk streams by.

namespace {

template <DType T> struct QuantBlock;
template <> struct QuantBlock<DType::Q8_0> { using type = BlockQ8_0; };
template <> struct QuantBlock<DType::Q4_0> { using type = BlockQ4_0; };
template <> struct QuantBlock<DType::Q4_1> { using type = BlockQ4_1; };

// ---- scalar dots (fallback, and the tails of the float SIMD paths) ----

template <DType T> inline float load_weight_scalar(const uint8_t *row, int64_t i);
template <> inline float load_weight_scalar<DType::F32>(const uint8_t *row, int64_t i) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
}
template <> inline float load_weight_scalar<DType::F16>(const uint8_t *row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return fp16_to_f32(h);
}
template <> inline float load_weight_scalar<DType::BF16>(const uint8_t *row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return bf16_to_f32(h);
}

template <DType T>
float dot_float_scalar(const uint8_t *w, const float *x, int64_t begin, int64_t end) {
    float sum = 0.0f;
    for (int64_t i = begin; i < end; ++i) sum += load_weight_scalar<T>(w, i) * x[i];
    return sum;
}

template <DType T> float dot_quant_scalar(const uint8_t *w_row, const BlockQ16Act *x, int64_t nb);

// Integer block sums are exact in int32: |q_w| <= 128, |q_a| <= 32767, 32 products < 2^27.
template <> [[maybe_unused]] float dot_quant_scalar<DType::Q8_0>(const uint8_t *w_row, const BlockQ16Act *x, int64_t nb) {
    const BlockQ8_0 *w = reinterpret_cast<const BlockQ8_0 *>(w_row);
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        int isum = 0;
        for (int j = 0; j < 32; ++j) isum += w[b].qs[j] * x[b].qs[act_q16_pos(j)];
        sum += fp16_scale(w[b].d) * x[b].d * (float)isum;
    }
    return sum;
}

template <> [[maybe_unused]] float dot_quant_scalar<DType::Q4_0>(const uint8_t *w_row, const BlockQ16Act *x, int64_t nb) {
    const BlockQ4_0 *w = reinterpret_cast<const BlockQ4_0 *>(w_row);
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        int isum = 0;
        for (int j = 0; j < 16; ++j) {
            isum += ((w[b].qs[j] & 0xf) - 8) * x[b].qs[act_q16_pos(j)];
            isum += ((w[b].qs[j] >> 4) - 8) * x[b].qs[act_q16_pos(j + 16)];
        }
        sum += fp16_scale(w[b].d) * x[b].d * (float)isum;
    }
    return sum;
}

template <> [[maybe_unused]] float dot_quant_scalar<DType::Q4_1>(const uint8_t *w_row, const BlockQ16Act *x, int64_t nb) {
    const BlockQ4_1 *w = reinterpret_cast<const BlockQ4_1 *>(w_row);
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        int isum = 0;
        for (int j = 0; j < 16; ++j) {
            isum += (w[b].qs[j] & 0xf) * x[b].qs[act_q16_pos(j)];
            isum += (w[b].qs[j] >> 4) * x[b].qs[act_q16_pos(j + 16)];
        }
        sum += fp16_scale(w[b].d) * x[b].d * (float)isum + fp16_scale(w[b].m) * x[b].sum;
    }
    return sum;
}

// ---- tile kernel signature shared by all paths ----
// Computes the RN x RM tile whose top-left output is y[0] (rows of y are y_stride apart,
// weight rows advance along y's columns).
using TileFn = void (*)(const GemmArgs &a, const uint8_t *w, const uint8_t *x, float *y);

template <DType T, int RN, int RM> void tile_scalar(const GemmArgs &a, const uint8_t *w, const uint8_t *x, float *y) {
    for (int m = 0; m < RM; ++m) {
        for (int r = 0; r < RN; ++r) {
            const uint8_t *w_row = w + r * a.w_row_bytes;
            const uint8_t *x_row = x + m * a.x_row_bytes;
            float v;
            if constexpr (T == DType::F32 || T == DType::F16 || T == DType::BF16)
                v = dot_float_scalar<T>(w_row, reinterpret_cast<const float *>(x_row), 0, a.K);
            else
                v = dot_quant_scalar<T>(w_row, reinterpret_cast<const BlockQ16Act *>(x_row), a.K / QK_ACT);
            store_out(y + m * a.y_stride + r, v, a.accumulate);
        }
    }
}

#if defined(AKUNU_CPU_AVX2)

// fp16 scale broadcast to 8 floats: a 16-bit broadcast load and one conversion.
inline __m256 broadcast_fp16(const uint16_t *h) {
    return _mm256_cvtph_ps(_mm_set1_epi16((short)*h));
}

// 8 weights of a float-family row -> 8 floats.
template <DType T> inline __m256 load8_weights(const uint8_t *row, int64_t i);
template <> inline __m256 load8_weights<DType::F32>(const uint8_t *row, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float *>(row) + i);
}
template <> inline __m256 load8_weights<DType::F16>(const uint8_t *row, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * i)));
}
// bf16 is the top half of an f32: widen to 32 bits and shift into place.
template <> inline __m256 load8_weights<DType::BF16>(const uint8_t *row, int64_t i) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}

template <DType T, int RN, int RM> void tile_float_avx2(const GemmArgs &a, const uint8_t *w, const uint8_t *x, float *y) {
    const TileRows<uint8_t, float, RN, RM> rows(a, w, x);
    const auto &w_rows = rows.w;
    const auto &x_rows = rows.x;

    __m256 acc[RM][RN] = {};

    const int64_t K = a.K, K8 = K & ~int64_t(7);
    for (int64_t i = 0; i < K8; i += 8) {
        __m256 wv[RN];
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) wv[r] = load8_weights<T>(w_rows[r], i);
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) {
            const __m256 xv = _mm256_loadu_ps(x_rows[m] + i);
            AKUNU_UNROLL
            for (int r = 0; r < RN; ++r) acc[m][r] = _mm256_fmadd_ps(wv[r], xv, acc[m][r]);
        }
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m)
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) {
            const float v = hsum(acc[m][r]) + dot_float_scalar<T>(w_rows[r], x_rows[m], K8, K);
            store_out(y + m * a.y_stride + r, v, a.accumulate);
        }
}

// Weight block -> two int16 vectors in the activation block's element order (quant_blocks.h):
// `even` holds elements (0, 2, .., 14 | 16, 18, .., 30), `odd` holds (1, 3, .., 15 | 17, .., 31).
// Both unpackings stay inside 128-bit lanes.
//  - Q4: the 16 nibble bytes broadcast to both lanes; per lane one 32-bit shift (0 | 4 for even,
//    8 | 12 for odd) and a 0x000f word mask pick lo/hi nibbles of the even/odd bytes.
//  - Q8_0: shifting each 16-bit word left then arithmetic right by 8 sign-extends its low (even)
//    byte; an arithmetic right shift by 8 alone sign-extends the high (odd) byte.
inline void unpack_nibbles_i16(const uint8_t *qs, __m256i &even, __m256i &odd) {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    const __m256i mask = _mm256_set1_epi16(0x000f);
    even = _mm256_and_si256(_mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), mask);
    odd = _mm256_and_si256(_mm256_srlv_epi32(both, _mm256_setr_epi32(8, 8, 8, 8, 12, 12, 12, 12)), mask);
}

// Q4_0 straight to nibble - 8: n ^ 8 read as a signed 4-bit number is n - 8. Shifting each
// nibble to the top of its 16-bit word (left by 12 | 8 for even, 4 | 0 for odd) and shifting
// arithmetically back down by 12 sign-extends it.
inline void unpack_nibbles_m8_i16(const uint8_t *qs, __m256i &even, __m256i &odd) {
    const __m256i both = _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs)),
                                          _mm256_set1_epi8((char)0x88));
    even = _mm256_srai_epi16(_mm256_sllv_epi32(both, _mm256_setr_epi32(12, 12, 12, 12, 8, 8, 8, 8)), 12);
    odd = _mm256_srai_epi16(_mm256_sllv_epi32(both, _mm256_setr_epi32(4, 4, 4, 4, 0, 0, 0, 0)), 12);
}

inline void unpack_q8_i16(const int8_t *qs, __m256i &even, __m256i &odd) {
    const __m256i w = _mm256_loadu_si256((const __m256i *)qs);
    even = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8);
    odd = _mm256_srai_epi16(w, 8);
}

// Integer dots against int16 activations, 32 products per block through _mm256_madd_epi16
// (s16 x s16 -> s32 pair sums; |q_w| <= 128 and |q_a| <= 32767, so nothing overflows):
//  - Q8_0: weights sign-extended to int16.
//  - Q4_0: nibble - 8 in int16, made while unpacking (shared by all RM activation rows).
//  - Q4_1: nibbles as they are; the offset adds m_w * sum_a per block.
// Per (weight row, activation row) and block: two madds, an add, a conversion and an FMA.
template <DType T, int RN, int RM> void tile_quant_avx2(const GemmArgs &a, const uint8_t *w, const uint8_t *x, float *y) {
    using WBlock = typename QuantBlock<T>::type;
    const TileRows<WBlock, BlockQ16Act, RN, RM> rows(a, w, x);
    const auto &w_rows = rows.w;
    const auto &x_rows = rows.x;

    __m256 acc[RM][RN] = {};
    float min_acc[RM][RN] = {};  // Q4_1: Σ m_w * sum_a

    const int64_t nb = a.K / QK_ACT;
    for (int64_t b = 0; b < nb; ++b) {
        __m256i we[RN], wo[RN];
        __m256 wd[RN];
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) {
            const WBlock &blk = w_rows[r][b];
            wd[r] = broadcast_fp16(&blk.d);
            if constexpr (T == DType::Q8_0) {
                unpack_q8_i16(blk.qs, we[r], wo[r]);
            } else if constexpr (T == DType::Q4_0) {
                unpack_nibbles_m8_i16(blk.qs, we[r], wo[r]);
            } else {
                unpack_nibbles_i16(blk.qs, we[r], wo[r]);
            }
        }
        accumulate_block_dots<RN, RM>(x_rows, b, we, wo, wd, acc);
    }
    // Q4_1's offset terms in a pass of their own: in the loop above their scalars would push the
    // vector registers into spills.
    if constexpr (T == DType::Q4_1) {
        for (int64_t b = 0; b < nb; ++b) {
            float wmin[RN];
            AKUNU_UNROLL
            for (int r = 0; r < RN; ++r) wmin[r] = fp16_scale(w_rows[r][b].m);
            AKUNU_UNROLL
            for (int m = 0; m < RM; ++m) {
                const float sum_a = x_rows[m][b].sum;
                AKUNU_UNROLL
                for (int r = 0; r < RN; ++r) min_acc[m][r] += wmin[r] * sum_a;
            }
        }
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m)
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) store_out(y + m * a.y_stride + r, hsum(acc[m][r]) + min_acc[m][r], a.accumulate);
}

#endif  // AKUNU_CPU_AVX2

// Tile shapes. AVX2 has 16 ymm registers: RN x RM accumulators plus the weight vectors of RN
// rows should (nearly) fit; a few L1 spills are cheap.
//  - Float weights: 4x3 (on Zen 3, 4x3 / 4x4 / 3x4 measured within noise of each other).
//  - Quantized weights (int16 activations, two weight vectors per row and block): 2x6 for
//    prefill (on Zen 3 ~15-30% faster than 4x3 at M = 512); while M is small (decode, M = 1) 4xM
//    tiles instead, i.e. four weight streams at once.
#if defined(AKUNU_CPU_AVX2)
#ifndef AKUNU_TILE_N  // overridable for tuning experiments
#define AKUNU_TILE_N 4
#define AKUNU_TILE_M 3
#endif
#ifndef AKUNU_QTILE_N
#define AKUNU_QTILE_N 2
#define AKUNU_QTILE_M 6
#endif
constexpr int kTileN = AKUNU_TILE_N;
constexpr int kTileM = AKUNU_TILE_M;
constexpr int kQTileN = AKUNU_QTILE_N;
constexpr int kQTileM = AKUNU_QTILE_M;
#else
constexpr int kTileN = 4;
constexpr int kTileM = 2;
constexpr int kQTileN = kTileN;
constexpr int kQTileM = kTileM;
#endif
constexpr int kQSmallTileN = 4;  // quantized weights, M <= kQSmallM: kQSmallTileN x M tiles
constexpr int kQSmallM = 3;

template <DType T> constexpr bool is_quant_type() { return T == DType::Q8_0 || T == DType::Q4_0 || T == DType::Q4_1; }

// Largest tile (table bounds) of a dtype.
template <DType T> struct TileBounds {
    static constexpr int N = is_quant_type<T>() ? std::max(kQTileN, kQSmallTileN) : kTileN;
    static constexpr int M = is_quant_type<T>() ? std::max(kQTileM, kQSmallM) : kTileM;
};

template <DType T, int RN, int RM> constexpr TileFn pick_tile() {
#if defined(AKUNU_CPU_AVX2)
    if constexpr (T == DType::F32 || T == DType::F16 || T == DType::BF16)
        return &tile_float_avx2<T, RN, RM>;
    else
        return &tile_quant_avx2<T, RN, RM>;
#else
    return &tile_scalar<T, RN, RM>;
#endif
}

// Tile kernels for every edge shape (rn, rm) in [1, N] x [1, M] (TileBounds<T>).
template <DType T> struct PickTile {
    template <int RN, int RM> static constexpr TileFn at() { return pick_tile<T, RN, RM>(); }
};
template <DType T> using TypedTileTable = TileTable<TileFn, TileBounds<T>::N, TileBounds<T>::M, PickTile<T>>;

template <DType T> void gemm_rows_typed(const GemmArgs &a, int64_t n_begin, int64_t n_end) {
    static constexpr TypedTileTable<T> table{};
    int64_t tile_n = kTileN, tile_m = kTileM;
    if constexpr (is_quant_type<T>()) {
        if (a.M <= kQSmallM) {
            tile_n = kQSmallTileN;
            tile_m = kQSmallM;
        } else {
            tile_n = kQTileN;
            tile_m = kQTileM;
        }
    }
    // Chunks of ~256 KiB of whole weight rows and ~256 KiB of whole activation rows: the weight
    // chunk stays in L2 while the activation chunk (also in L2) is swept by the tiles, so each
    // weight byte comes from memory once per activation chunk rather than once per tile.
    // (Slicing K as well, to fit a tile in L1, measured no better on Zen 3 and is not done.)
    constexpr size_t kChunkBytes = 256 * 1024;
    const int64_t n_chunk = std::max<int64_t>(tile_n, (int64_t)(kChunkBytes / std::max<size_t>(a.w_row_bytes, 1)) / tile_n * tile_n);
    const int64_t m_chunk = std::max<int64_t>(tile_m, (int64_t)(kChunkBytes / std::max<size_t>(a.x_row_bytes, 1)) / tile_m * tile_m);

    for (int64_t nc = n_begin; nc < n_end; nc += n_chunk) {
        const int64_t nc_end = std::min(n_end, nc + n_chunk);
        for (int64_t mc = 0; mc < a.M; mc += m_chunk) {
            const int64_t mc_end = std::min(a.M, mc + m_chunk);
            for (int64_t n = nc; n < nc_end; n += tile_n) {
                const int rn = (int)std::min<int64_t>(tile_n, nc_end - n);
                const uint8_t *w = a.w + (size_t)n * a.w_row_bytes;
                for (int64_t m = mc; m < mc_end; m += tile_m) {
                    const int rm = (int)std::min<int64_t>(tile_m, mc_end - m);
                    table.fn[rn - 1][rm - 1](a, w, a.x + (size_t)m * a.x_row_bytes, a.y + (size_t)m * a.y_stride + n);
                }
            }
        }
    }
}

}  // namespace

void gemm_rows(const GemmArgs &args, int64_t n_begin, int64_t n_end) {
    if (n_begin >= n_end || args.M <= 0) return;
    if (args.repacked) return gemm_rows_repacked(args, n_begin, n_end);
    switch (args.type) {
        case DType::F32: return gemm_rows_typed<DType::F32>(args, n_begin, n_end);
        case DType::F16: return gemm_rows_typed<DType::F16>(args, n_begin, n_end);
        case DType::BF16: return gemm_rows_typed<DType::BF16>(args, n_begin, n_end);
        case DType::Q8_0: return gemm_rows_typed<DType::Q8_0>(args, n_begin, n_end);
        case DType::Q4_0: return gemm_rows_typed<DType::Q4_0>(args, n_begin, n_end);
        case DType::Q4_1: return gemm_rows_typed<DType::Q4_1>(args, n_begin, n_end);
        default: return kquant_gemm_rows(args, n_begin, n_end);  // the group-scaled dtypes (or nothing)
    }
}

}  // namespace akunu::cpu
