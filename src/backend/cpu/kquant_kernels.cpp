// Dequantization and GEMM for the group-scaled dtypes (see kquant_kernels.h), on top of the block
// decoders of kquant_decode.h.
//
// GEMM: a tile of RN weight rows x RM activation rows walks K one format block at a time; a block
// is decoded once (int8 quants + per-16 factors, in L1) for all RM activation rows, or, for the
// GEMV of the common K-quants, its quants go straight from registers into the dots. Per 32
// elements the int8 quants are widened to int16 exactly like Q8_0's (even / odd elements: the
// activation block order, quant_blocks.h) and dotted with _mm256_madd_epi16 (|q| <= 127 and
// |q_act| <= 32767: far inside int32). Superblocks reduce their eight 32-element dots to the
// sixteen 16-element group sums and scale them with two vector FMAs, so a scale per 16 elements
// (Q2_K, Q3_K, Q6_K) costs nothing extra. Mins: per 32 elements (Q4_K, Q5_K, Q5_1) min x the
// activation block's sum; per 16 (Q2_K) the activation group sums, from madds against ones.
#include "backend/cpu/kquant_kernels.h"

#include <algorithm>

#include "backend/cpu/kquant_decode.h"
#include "backend/cpu/quant_helpers.h"
#include "backend/cpu/simd_config.h"
#include "backend/cpu/tile_table.h"

namespace akunu::cpu {

namespace {

using kquant::Format;

template <DType T> constexpr int kElems = Format<T>::Dec::kElems;
template <DType T> constexpr int kActBlocks = kElems<T> / QK_ACT;  // activation blocks per format block
template <DType T> constexpr size_t kBlockBytes = sizeof(typename Format<T>::Block);

// ---- dequantization ----

template <DType T> AKUNU_NO_FP_CONTRACT void dequant_row(const uint8_t *src, float *dst, int64_t k) {
    AKUNU_NO_FP_CONTRACT_SCOPE
    typename Format<T>::Dec d;
    for (int64_t b = 0; b < k / kElems<T>; ++b) {
        Format<T>::decode(src + (size_t)b * kBlockBytes<T>, d);
        float *out = dst + b * kElems<T>;
        for (int e = 0; e < kElems<T>; ++e) {
            const int g = kquant::group_slot<kElems<T>>(e / 16);
            const float prod = d.scale[g] * (float)d.q[e];  // rounded before the subtraction
            out[e] = prod - d.min[g];
        }
    }
}

// Tiles: 2 weight rows x M while M is small (decode; 4 rows measured no faster on Zen 3, and Q6_K's
// direct path spills with 4), 2 x 4 for prefill (decoded blocks are reused by 4 activation rows).
constexpr int kSmallTileN = 2, kSmallM = 3, kTileN = 2, kTileM = 4;

// ---- scalar dot (the fallback; also the reference the SIMD tile must match to float rounding) ----

template <DType T> [[maybe_unused]] float dot_scalar(const uint8_t *w_row, const BlockQ16Act *x, int64_t n_blocks) {
    typename Format<T>::Dec d;
    float sum = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
        Format<T>::decode(w_row + (size_t)b * kBlockBytes<T>, d);
        for (int j = 0; j < kActBlocks<T>; ++j) {
            const BlockQ16Act &a = x[b * kActBlocks<T> + j];
            for (int h = 0; h < 2; ++h) {
                int isum = 0, xsum = 0;
                for (int e = 16 * h; e < 16 * h + 16; ++e) {
                    const int qa = a.qs[act_q16_pos(e)];
                    isum += d.q[32 * j + e] * qa;
                    xsum += qa;
                }
                const int g = kquant::group_slot<kElems<T>>(2 * j + h);
                sum += a.d * (d.scale[g] * (float)isum - d.min[g] * (float)xsum);
            }
        }
    }
    return sum;
}

using TileFn = void (*)(const GemmArgs &a, const uint8_t *w, const uint8_t *x, float *y);

template <DType T, int RN, int RM> [[maybe_unused]] void tile_scalar(const GemmArgs &a, const uint8_t *w, const uint8_t *x, float *y) {
    for (int m = 0; m < RM; ++m)
        for (int r = 0; r < RN; ++r) {
            const float v = dot_scalar<T>(w + r * a.w_row_bytes, reinterpret_cast<const BlockQ16Act *>(x + m * a.x_row_bytes),
                                          a.K / kElems<T>);
            store_out(y + m * a.y_stride + r, v, a.accumulate);
        }
}

#if defined(AKUNU_CPU_AVX2)

// 32-element blocks (Q5_0, Q5_1, IQ4_NL): one activation block per weight block, like Q4_0's tile.
template <DType T, int RN, int RM> void tile_avx2_block32(const GemmArgs &a, const uint8_t *w, const uint8_t *x, float *y) {
    using F = Format<T>;
    static_assert(kActBlocks<T> == 1 && !F::kGroup16 && !F::kMin16, "one scale and min per 32-element block");
    const TileRows<uint8_t, BlockQ16Act, RN, RM> rows(a, w, x);
    const auto &w_rows = rows.w;
    const auto &x_rows = rows.x;

    __m256 acc[RM][RN] = {};
    float min_acc[RM][RN] = {};  // Σ min * activation block sum

    typename F::Dec dec[RN];
    for (int64_t b = 0; b < a.K / QK_ACT; ++b) {
        __m256i we[RN], wo[RN];
        __m256 sv[RN];
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) {
            F::decode(w_rows[r] + (size_t)b * kBlockBytes<T>, dec[r]);
            const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i *>(dec[r].q));
            we[r] = _mm256_srai_epi16(_mm256_slli_epi16(q, 8), 8);  // even elements, sign-extended
            wo[r] = _mm256_srai_epi16(q, 8);                         // odd elements
            sv[r] = _mm256_set1_ps(dec[r].scale[0]);
        }
        accumulate_block_dots<RN, RM>(x_rows, b, we, wo, sv, acc);
        if constexpr (F::kHasMin) {
            AKUNU_UNROLL
            for (int m = 0; m < RM; ++m)
                AKUNU_UNROLL
                for (int r = 0; r < RN; ++r) min_acc[m][r] += dec[r].min[0] * x_rows[m][b].sum;
        }
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m)
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) store_out(y + m * a.y_stride + r, hsum(acc[m][r]) - min_acc[m][r], a.accumulate);
}

// The eight 32-element dots of a superblock (int32 x 8 each; lanes 0..3 sum the first 16 elements,
// 4..7 the second) reduced to their sixteen 16-element group sums, in group_slot order:
// A = both halves of blocks 0..3, B = of blocks 4..7 (hadd works inside 128-bit lanes).
inline void group_sums(const __m256i dots[8], __m256i &A, __m256i &B) {
    A = _mm256_hadd_epi32(_mm256_hadd_epi32(dots[0], dots[1]), _mm256_hadd_epi32(dots[2], dots[3]));
    B = _mm256_hadd_epi32(_mm256_hadd_epi32(dots[4], dots[5]), _mm256_hadd_epi32(dots[6], dots[7]));
}

// Superblocks: per (weight row, activation row) eight 32-element integer dots, reduced to the 16
// group sums, scaled by (group scale x activation block scale) in two vector FMAs. While M is
// small (the GEMV) the quants go from F::quants straight into the dots; for larger tiles each
// block is widened to int16 once (into L1) and reused by all RM activation rows.
template <DType T, int RN, int RM> void tile_avx2_super(const GemmArgs &a, const uint8_t *w, const uint8_t *x, float *y) {
    using F = Format<T>;
    constexpr bool kDirect = RM <= kSmallM;
    static_assert(kActBlocks<T> == 8, "superblocks are 8 activation blocks");
    const TileRows<uint8_t, BlockQ16Act, RN, RM> rows(a, w, x);
    const auto &w_rows = rows.w;
    const auto &x_rows = rows.x;
    __m256 acc[RM][RN] = {};

    typename F::Dec dec[RN];                   // factors (the quants stay in registers or in q16)
    alignas(32) int16_t q16[kDirect ? 1 : RN][QK_K];  // per block j: its 16 even, then 16 odd elements
    const int64_t n_blocks = a.K / QK_K;
    for (int64_t b = 0; b < n_blocks; ++b) {
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) {
            F::factors(w_rows[r] + (size_t)b * kBlockBytes<T>, dec[r]);
            if constexpr (!kDirect)
                F::quants(w_rows[r] + (size_t)b * kBlockBytes<T>, [&](int j, __m256i q) {
                    _mm256_store_si256(reinterpret_cast<__m256i *>(q16[r] + 32 * j), _mm256_srai_epi16(_mm256_slli_epi16(q, 8), 8));
                    _mm256_store_si256(reinterpret_cast<__m256i *>(q16[r] + 32 * j + 16), _mm256_srai_epi16(q, 8));
                });
        }
        __m256 adA[RM], adB[RM];  // activation block scales in group_slot order
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) {
            const BlockQ16Act *xa = x_rows[m] + b * 8;
            adA[m] = _mm256_setr_ps(xa[0].d, xa[1].d, xa[2].d, xa[3].d, xa[0].d, xa[1].d, xa[2].d, xa[3].d);
            adB[m] = _mm256_setr_ps(xa[4].d, xa[5].d, xa[6].d, xa[7].d, xa[4].d, xa[5].d, xa[6].d, xa[7].d);
            if constexpr (F::kHasMin && !F::kMin16) {  // Σ_j min_j * (activation block j's sum)
                const __m256 xs = _mm256_setr_ps(xa[0].sum, xa[1].sum, xa[2].sum, xa[3].sum, xa[4].sum, xa[5].sum,
                                                 xa[6].sum, xa[7].sum);
                AKUNU_UNROLL
                for (int r = 0; r < RN; ++r)
                    acc[m][r] = _mm256_fnmadd_ps(_mm256_blend_ps(_mm256_load_ps(dec[r].min), _mm256_load_ps(dec[r].min + 8), 0xf0),
                                                 xs, acc[m][r]);
            }
            if constexpr (F::kMin16) {  // activation sums per 16-element group
                const __m256i ones = _mm256_set1_epi16(1);
                __m256i sums[8], sA, sB;
                for (int j = 0; j < 8; ++j)
                    sums[j] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(xa[j].qs)), ones),
                                               _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(xa[j].qs + 16)), ones));
                group_sums(sums, sA, sB);
                const __m256 xA = _mm256_mul_ps(_mm256_cvtepi32_ps(sA), adA[m]), xB = _mm256_mul_ps(_mm256_cvtepi32_ps(sB), adB[m]);
                AKUNU_UNROLL
                for (int r = 0; r < RN; ++r)
                    acc[m][r] = _mm256_fnmadd_ps(_mm256_load_ps(dec[r].min + 8), xB,
                                                 _mm256_fnmadd_ps(_mm256_load_ps(dec[r].min), xA, acc[m][r]));
            }
        }
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) {
            const __m256 scA = _mm256_load_ps(dec[r].scale), scB = _mm256_load_ps(dec[r].scale + 8);
            AKUNU_UNROLL
            for (int m = 0; m < RM; ++m) {
                const BlockQ16Act *xa = x_rows[m] + b * 8;
                __m256i dots[8], A, B;
                // Block j's even / odd elements in int16 (the activation order) dotted with the activations.
                auto dot16 = [&](int j, __m256i we, __m256i wo) {
                    dots[j] = _mm256_add_epi32(_mm256_madd_epi16(we, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xa[j].qs))),
                                               _mm256_madd_epi16(wo, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xa[j].qs + 16))));
                };
                if constexpr (kDirect) {
                    F::quants(w_rows[r] + (size_t)b * kBlockBytes<T>, [&](int j, __m256i q) {
                        dot16(j, _mm256_srai_epi16(_mm256_slli_epi16(q, 8), 8), _mm256_srai_epi16(q, 8));
                    });
                } else {
                    AKUNU_UNROLL
                    for (int j = 0; j < 8; ++j)
                        dot16(j, _mm256_load_si256(reinterpret_cast<const __m256i *>(q16[r] + 32 * j)),
                              _mm256_load_si256(reinterpret_cast<const __m256i *>(q16[r] + 32 * j + 16)));
                }
                group_sums(dots, A, B);
                acc[m][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(A), _mm256_mul_ps(scA, adA[m]), acc[m][r]);
                acc[m][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(B), _mm256_mul_ps(scB, adB[m]), acc[m][r]);
            }
        }
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m)
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) store_out(y + m * a.y_stride + r, hsum(acc[m][r]), a.accumulate);
}

#endif  // AKUNU_CPU_AVX2

constexpr int kMaxN = std::max(kSmallTileN, kTileN), kMaxM = std::max(kSmallM, kTileM);

template <DType T, int RN, int RM> constexpr TileFn pick_tile() {
#if defined(AKUNU_CPU_AVX2)
    if constexpr (kActBlocks<T> == 8)
        return &tile_avx2_super<T, RN, RM>;
    else
        return &tile_avx2_block32<T, RN, RM>;
#else
    return &tile_scalar<T, RN, RM>;
#endif
}

template <DType T> struct PickTile {
    template <int RN, int RM> static constexpr TileFn at() { return pick_tile<T, RN, RM>(); }
};

// Same chunking as gemm_tiles.cpp's gemm_rows_typed: ~256 KiB of weight rows stay in L2 while
// ~256 KiB of activation rows sweep past them.
template <DType T> void gemm_rows_kquant(const GemmArgs &a, int64_t n_begin, int64_t n_end) {
    static constexpr TileTable<TileFn, kMaxN, kMaxM, PickTile<T>> table{};
    const int64_t tile_n = a.M <= kSmallM ? kSmallTileN : kTileN, tile_m = a.M <= kSmallM ? kSmallM : kTileM;
    constexpr size_t kChunkBytes = 256 * 1024;
    const int64_t n_chunk = std::max<int64_t>(tile_n, (int64_t)(kChunkBytes / std::max<size_t>(a.w_row_bytes, 1)) / tile_n * tile_n);
    const int64_t m_chunk = std::max<int64_t>(tile_m, (int64_t)(kChunkBytes / std::max<size_t>(a.x_row_bytes, 1)) / tile_m * tile_m);
    for (int64_t nc = n_begin; nc < n_end; nc += n_chunk) {
        const int64_t nc_end = std::min(n_end, nc + n_chunk);
        for (int64_t mc = 0; mc < a.M; mc += m_chunk) {
            const int64_t mc_end = std::min(a.M, mc + m_chunk);
            for (int64_t n = nc; n < nc_end; n += tile_n) {
                const int rn = (int)std::min<int64_t>(tile_n, nc_end - n);
                for (int64_t m = mc; m < mc_end; m += tile_m) {
                    const int rm = (int)std::min<int64_t>(tile_m, mc_end - m);
                    table.fn[rn - 1][rm - 1](a, a.w + (size_t)n * a.w_row_bytes, a.x + (size_t)m * a.x_row_bytes,
                                             a.y + (size_t)m * a.y_stride + n);
                }
            }
        }
    }
}

}  // namespace

bool kquant_handles(DType t) {
    switch (t) {
#define AKUNU_CASE(name) case DType::name:
        AKUNU_KQUANT_DTYPES(AKUNU_CASE) return true;
#undef AKUNU_CASE
        default: return false;
    }
}

void kquant_dequantize_row(DType t, const void *src, float *dst, int64_t k) {
    const uint8_t *s = static_cast<const uint8_t *>(src);
    switch (t) {
#define AKUNU_CASE(name) case DType::name: return dequant_row<DType::name>(s, dst, k);
        AKUNU_KQUANT_DTYPES(AKUNU_CASE)
#undef AKUNU_CASE
        default: return;
    }
}

void kquant_gemm_rows(const GemmArgs &args, int64_t n_begin, int64_t n_end) {
    if (n_begin >= n_end || args.M <= 0) return;
    switch (args.type) {
#define AKUNU_CASE(name) case DType::name: return gemm_rows_kquant<DType::name>(args, n_begin, n_end);
        AKUNU_KQUANT_DTYPES(AKUNU_CASE)
#undef AKUNU_CASE
        default: return;
    }
}

}  // namespace akunu::cpu
