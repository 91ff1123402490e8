// The "r16" layout, used instead of r8 (r8_layout.cpp) on builds for CPUs with AVX-512 VNNI:
// Q4_0 / Q4_1 / Q8_0 weights repacked at load into groups of 16 interleaved rows, their GEMM
// against BlockQ8x2Act activations (quantize_row_act_q8x2), and the way back to GGUF blocks.
// Layout described in repacked_layout.h.
//
// Why a second layout: vpdpbusd multiplies 64 unsigned bytes by 64 signed bytes and adds each
// group of four products into an int32 lane, in one instruction. With 16 rows interleaved four
// bytes at a time, one 64-byte load of weights against one broadcast of four activation bytes
// gives all sixteen rows' partial dots, and a nibble needs only a mask (and one shift per pair of
// nibbles) to become a byte. The activations stay 15-bit precise (docs/adr/0002: 8-bit ones fail
// our accuracy bar) by being split into two int8 digits, q = 128 * hi + lo, each its own dpbusd.
// Against r8's int16 madds this halves the instructions per weight (measured ~2x on a Zen 4 core
// with the matrix in L2); Q4_0 decode stops being bound by the core and streams at DRAM speed.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics start from `__m512 __Y = __Y;` (an undefined vector) and warn
// about it wherever they are inlined; nothing here reads an undefined value.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/repacked_layout.h"
#include "backend/cpu/simd_config.h"

#if defined(AKUNU_CPU_VNNI512)

#include "backend/cpu/act_quant.h"
#include "backend/cpu/dequantize.h"
#include "backend/cpu/r16_kquant_layout.h"
#include "backend/cpu/repacked_gemm_loop.h"
#include "core/kquant_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace akunu::cpu {

namespace {

constexpr int kR16Rows = 16;

template <DType T> struct R16Geom;
template <> struct R16Geom<DType::Q4_0> {
    using Block = BlockQ4_0;
    static constexpr size_t kGroupBlock = kR16Rows * sizeof(BlockQ4_0);  // 288
    static constexpr size_t kQs = 32;                                    // quants after d[16]
    static constexpr int kChunks = 4;                                    // 64-byte chunks of quants
    static constexpr int32_t kOffset = 8;                                // stored q = value + 8
};
template <> struct R16Geom<DType::Q4_1> {
    using Block = BlockQ4_1;
    static constexpr size_t kGroupBlock = kR16Rows * sizeof(BlockQ4_1);  // 320
    static constexpr size_t kQs = 64;                                    // after d[16], m[16]
    static constexpr int kChunks = 4;
    static constexpr int32_t kOffset = 0;  // value = d * q + m: the min is applied in float
};
template <> struct R16Geom<DType::Q8_0> {
    using Block = BlockQ8_0;
    static constexpr size_t kGroupBlock = kR16Rows * sizeof(BlockQ8_0);  // 544
    static constexpr size_t kQs = 32;
    static constexpr int kChunks = 8;
    static constexpr int32_t kOffset = 128;  // stored byte = int8 weight + 128 (XOR 0x80)
};

inline uint16_t load_u16(const uint8_t *p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
inline int32_t load_i32(const void *p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// The byte of a group-block's quant area that holds element e (0..31) of row l.
// Q4: chunk (e & 15) / 4, row l's 4 bytes, byte e & 3; elements 16..31 in the high nibbles.
// Q8: chunk e / 4, row l's 4 bytes, byte e & 3.
inline size_t r16_q4_byte(int l, int e) { return 64 * ((e & 15) >> 2) + 4 * l + (e & 3); }
inline size_t r16_q8_byte(int l, int e) { return 64 * (e >> 2) + 4 * l + (e & 3); }

template <DType T> void repack_r16(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t K) {
    using G = R16Geom<T>;
    using Block = typename G::Block;
    const int64_t nb = K / QK_ACT;
    const size_t row_bytes = (size_t)nb * sizeof(Block);
    const int64_t groups = (rows + kR16Rows - 1) / kR16Rows;
    if (rows % kR16Rows)  // padding rows of the last group stay zero (d = 0)
        std::memset(dst + (size_t)(groups - 1) * kR16Rows * row_bytes, 0, kR16Rows * row_bytes);
    for (int64_t g = 0; g < groups; ++g) {  // group-block by group-block: the output is written in order
        const int n_rows = (int)std::min<int64_t>(kR16Rows, rows - g * kR16Rows);
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t *gb = dst + (size_t)g * kR16Rows * row_bytes + (size_t)b * G::kGroupBlock;
            uint8_t *qs = gb + G::kQs;
            for (int l = 0; l < n_rows; ++l) {
                Block w;
                std::memcpy(&w, src + (size_t)(g * kR16Rows + l) * row_bytes + (size_t)b * sizeof(Block), sizeof(Block));
                std::memcpy(gb + 2 * l, &w.d, 2);
                // Row l's bytes for elements 4c .. 4c + 3 go to chunk c (r16_q8_byte / r16_q4_byte).
                if constexpr (T == DType::Q8_0) {
                    uint8_t biased[QK_ACT];
                    for (int e = 0; e < QK_ACT; ++e) biased[e] = (uint8_t)w.qs[e] ^ 0x80;
                    for (int c = 0; c < G::kChunks; ++c) std::memcpy(qs + 64 * c + 4 * l, biased + 4 * c, 4);
                } else {
                    if constexpr (T == DType::Q4_1) std::memcpy(gb + 32 + 2 * l, &w.m, 2);
                    // GGUF byte j holds elements j (low nibble) and j + 16 (high nibble), as r16 does.
                    for (int c = 0; c < G::kChunks; ++c) std::memcpy(qs + 64 * c + 4 * l, w.qs + 4 * c, 4);
                }
            }
        }
    }
}

// One GGUF block back out of the r16 layout (row `row`, block b).
template <DType T> typename R16Geom<T>::Block unpack_r16_block(const uint8_t *packed, int64_t row, int64_t b, int64_t K) {
    using G = R16Geom<T>;
    typename G::Block w{};
    const size_t row_bytes = (size_t)(K / QK_ACT) * sizeof(typename G::Block);
    const int l = (int)(row % kR16Rows);
    const uint8_t *gb = packed + (size_t)(row / kR16Rows) * kR16Rows * row_bytes + (size_t)b * G::kGroupBlock;
    w.d = load_u16(gb + 2 * l);
    if constexpr (T == DType::Q8_0) {
        for (int e = 0; e < QK_ACT; ++e) w.qs[e] = (int8_t)(gb[G::kQs + r16_q8_byte(l, e)] ^ 0x80);
    } else {
        if constexpr (T == DType::Q4_1) w.m = load_u16(gb + 32 + 2 * l);
        for (int j = 0; j < 16; ++j) w.qs[j] = gb[G::kQs + r16_q4_byte(l, j)];
    }
    return w;
}

// Row `row` gathered back into GGUF blocks a batch at a time, then one dequantize_row over them
// (the same arithmetic as the file's row, so bit-exact).
template <DType T> void dequantize_row_r16(const uint8_t *packed, int64_t row, float *dst, int64_t K) {
    constexpr int64_t kBatch = 32;
    typename R16Geom<T>::Block blocks[kBatch];
    const int64_t nb = K / QK_ACT;
    for (int64_t b0 = 0; b0 < nb; b0 += kBatch) {
        const int64_t n = std::min<int64_t>(kBatch, nb - b0);
        for (int64_t i = 0; i < n; ++i) blocks[i] = unpack_r16_block<T>(packed, row, b0 + i, K);
        dequantize_row(T, blocks, dst + b0 * QK_ACT, n * QK_ACT);
    }
}

#ifndef AKUNU_R16_TILE_M
#define AKUNU_R16_TILE_M 4
#endif
constexpr int kR16TileM = AKUNU_R16_TILE_M;

inline __m512i bcast4(const int8_t *p) { return _mm512_set1_epi32(load_i32(p)); }

// One group of 16 rows against RM activation rows: out[m] lane l = dot(row l, activation row m).
// Per activation row four dpbusd chains (high / low digit x two halves of the chunks), so each
// block's chains are short and independent; they meet once per block:
//   isum = 128 * (H0 + H1) + (L0 + L1) - offset * sum(q)   (exact in int32)
template <DType T, int RM>
void tile_r16(const uint8_t *group, const uint8_t *x, size_t x_row_bytes, int64_t nb, __m512 *out) {
    using G = R16Geom<T>;
    const BlockQ8x2Act *xr[RM];
    __m512 acc[RM];
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) {
        xr[m] = reinterpret_cast<const BlockQ8x2Act *>(x + (size_t)m * x_row_bytes);
        acc[m] = _mm512_setzero_ps();
    }
    const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *gb = group + (size_t)b * G::kGroupBlock;
        __m512i hi[RM][2], lo[RM][2];
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) hi[m][0] = hi[m][1] = lo[m][0] = lo[m][1] = _mm512_setzero_si512();
        AKUNU_UNROLL
        for (int c = 0; c < G::kChunks; ++c) {
            const __m512i w = _mm512_loadu_si512(gb + G::kQs + 64 * c);
            if constexpr (T == DType::Q8_0) {  // chunk c: elements 4c .. 4c + 3 of every row
                AKUNU_UNROLL
                for (int m = 0; m < RM; ++m) {
                    const BlockQ8x2Act &a = xr[m][b];
                    hi[m][c & 1] = _mm512_dpbusd_epi32(hi[m][c & 1], w, bcast4(a.hi + 4 * c));
                    lo[m][c & 1] = _mm512_dpbusd_epi32(lo[m][c & 1], w, bcast4(a.lo + 4 * c));
                }
            } else {  // low nibbles: elements 4c .. 4c + 3; high nibbles: 16 + 4c .. 16 + 4c + 3
                const __m512i w_lo = _mm512_and_si512(w, low_nibbles);
                const __m512i w_hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low_nibbles);
                AKUNU_UNROLL
                for (int m = 0; m < RM; ++m) {
                    const BlockQ8x2Act &a = xr[m][b];
                    hi[m][0] = _mm512_dpbusd_epi32(hi[m][0], w_lo, bcast4(a.hi + 4 * c));
                    lo[m][0] = _mm512_dpbusd_epi32(lo[m][0], w_lo, bcast4(a.lo + 4 * c));
                    hi[m][1] = _mm512_dpbusd_epi32(hi[m][1], w_hi, bcast4(a.hi + 16 + 4 * c));
                    lo[m][1] = _mm512_dpbusd_epi32(lo[m][1], w_hi, bcast4(a.lo + 16 + 4 * c));
                }
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb)));
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) {
            const BlockQ8x2Act &a = xr[m][b];
            __m512i isum = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(hi[m][0], hi[m][1]), 7),
                                            _mm512_add_epi32(lo[m][0], lo[m][1]));
            if constexpr (G::kOffset != 0) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(G::kOffset * a.qsum));
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(a.d)), acc[m]);
        }
        if constexpr (T == DType::Q4_1) {
            const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb + 32)));
            AKUNU_UNROLL
            for (int m = 0; m < RM; ++m) acc[m] = _mm512_fmadd_ps(dm, _mm512_set1_ps(xr[m][b].sum), acc[m]);
        }
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) out[m] = acc[m];
}

template <DType T> struct R16TileTable {
    R16TileFn fn[kR16TileM];
    template <int RM> constexpr void fill() {
        fn[RM - 1] = &tile_r16<T, RM>;
        if constexpr (RM > 1) fill<RM - 1>();
    }
    constexpr R16TileTable() : fn{} { fill<kR16TileM>(); }
};

template <DType T> void gemm_rows_r16(const GemmArgs &a, int64_t n_begin, int64_t n_end) {
    static constexpr R16TileTable<T> table{};
    r16_gemm_rows<kR16TileM>(a, n_begin, n_end, a.K / QK_ACT, table.fn);
}

constexpr float kQ8x2Max = 16383.0f;  // q = 128 * hi + lo must keep hi within int8

// One 32-element block with scale d: q = x / d rounded to nearest (even on ties), clamped to
// +-q_max, hi = q >> 7 (arithmetic), lo = q & 127, qsum = sum(q), qsum_lo = the sum of the first
// 16, sum = d * qsum; and q as int16 in q16 when given.
void quantize_block_q8x2(const float *x, float d, float q_max, BlockQ8x2Act &o, int16_t *q16) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    // amax may be inf or NaN (a broken model): clamp so the int conversion stays defined.
    const __m512 id = _mm512_set1_ps(d > 0.0f && std::isfinite(d) ? 1.0f / d : 0.0f);
    const __m512 lo_lim = _mm512_set1_ps(-q_max), hi_lim = _mm512_set1_ps(q_max);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, id), lo_lim), hi_lim));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, id), lo_lim), hi_lim));
    const __m512i seven_bits = _mm512_set1_epi32(127);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(o.hi), _mm512_cvtepi32_epi8(_mm512_srai_epi32(q0, 7)));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(o.hi + 16), _mm512_cvtepi32_epi8(_mm512_srai_epi32(q1, 7)));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(o.lo), _mm512_cvtepi32_epi8(_mm512_and_si512(q0, seven_bits)));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(o.lo + 16), _mm512_cvtepi32_epi8(_mm512_and_si512(q1, seven_bits)));
    if (q16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(q16), _mm512_cvtepi32_epi16(q0));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(q16 + 16), _mm512_cvtepi32_epi16(q1));
    }
    o.qsum_lo = _mm512_reduce_add_epi32(q0);
    o.qsum = o.qsum_lo + _mm512_reduce_add_epi32(q1);
    o.d = d;
    o.sum = d * (float)o.qsum;
}

float abs_max(const float *x, int n) {
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    return _mm512_reduce_max_ps(m);
}

}  // namespace

// d = max|x| / 16383 per block.
void quantize_row_act_q8x2(const float *x, BlockQ8x2Act *dst, int64_t k) {
    for (int64_t b = 0; b < k / QK_ACT; ++b)
        quantize_block_q8x2(x + b * QK_ACT, abs_max(x + b * QK_ACT, QK_ACT) / kQ8x2Max, kQ8x2Max, dst[b], nullptr);
}

// d = max|x| / 2047 per superblock, in each of its blocks.
void quantize_row_act_q8x2_superblocks(const float *x, BlockQ8x2Act *dst, int64_t k, int16_t *q16) {
    constexpr int kBlocks = QK_K / QK_ACT;
    for (int64_t s = 0; s < k / QK_K; ++s) {
        const float d = abs_max(x + s * QK_K, QK_K) / kQ8x2SuperblockMax;
        for (int j = 0; j < kBlocks; ++j) {
            const int64_t b = s * kBlocks + j;
            quantize_block_q8x2(x + b * QK_ACT, d, kQ8x2SuperblockMax, dst[b], q16 + b * QK_ACT);
        }
    }
}

size_t repacked_act_row_bytes(DType t, int64_t K) {
    return (size_t)(K / QK_ACT) * sizeof(BlockQ8x2Act) + (r16k::has_panel(t) ? (size_t)K * sizeof(int16_t) : 0);
}
void quantize_row_act_repacked(DType t, const float *x, void *dst, int64_t k) {
    BlockQ8x2Act *blocks = static_cast<BlockQ8x2Act *>(dst);
    if (r16k::has_panel(t)) quantize_row_act_q8x2_superblocks(x, blocks, k, q8x2_row_int16(blocks, k));
    else quantize_row_act_q8x2(x, blocks, k);
}

void gemm_rows_repacked(const GemmArgs &args, int64_t n_begin, int64_t n_end) {
    switch (args.type) {
        case DType::Q4_0: return gemm_rows_r16<DType::Q4_0>(args, n_begin, n_end);
        case DType::Q4_1: return gemm_rows_r16<DType::Q4_1>(args, n_begin, n_end);
        case DType::Q8_0: return gemm_rows_r16<DType::Q8_0>(args, n_begin, n_end);
        default: return r16k::gemm_rows(args, n_begin, n_end);  // callers check has_repacked_layout
    }
}

bool has_repacked_layout(DType t) { return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0 || r16k::handles(t); }

int repack_row_group(DType t) { return has_repacked_layout(t) ? kR16Rows : 0; }

size_t repacked_bytes(DType t, int64_t rows, int64_t K) {
    const size_t padded_rows = (size_t)((rows + kR16Rows - 1) / kR16Rows) * kR16Rows;
    switch (t) {
        case DType::Q4_0: return padded_rows * (size_t)(K / QK4_0) * sizeof(BlockQ4_0);
        case DType::Q4_1: return padded_rows * (size_t)(K / QK4_1) * sizeof(BlockQ4_1);
        case DType::Q8_0: return padded_rows * (size_t)(K / QK8_0) * sizeof(BlockQ8_0);
        default: return r16k::repacked_bytes(t, rows, K);
    }
}

void repack_weights(DType t, const void *src, void *dst, int64_t rows, int64_t K) {
    const uint8_t *s = static_cast<const uint8_t *>(src);
    uint8_t *d = static_cast<uint8_t *>(dst);
    switch (t) {
        case DType::Q4_0: return repack_r16<DType::Q4_0>(s, d, rows, K);
        case DType::Q4_1: return repack_r16<DType::Q4_1>(s, d, rows, K);
        case DType::Q8_0: return repack_r16<DType::Q8_0>(s, d, rows, K);
        default: return r16k::repack(t, s, d, rows, K);
    }
}

void dequantize_row_repacked(DType t, const void *packed, int64_t row, float *dst, int64_t K) {
    const uint8_t *p = static_cast<const uint8_t *>(packed);
    switch (t) {
        case DType::Q4_0: return dequantize_row_r16<DType::Q4_0>(p, row, dst, K);
        case DType::Q4_1: return dequantize_row_r16<DType::Q4_1>(p, row, dst, K);
        case DType::Q8_0: return dequantize_row_r16<DType::Q8_0>(p, row, dst, K);
        default: return r16k::dequantize_row(t, p, row, dst, K);
    }
}

}  // namespace akunu::cpu

#endif  // AKUNU_CPU_VNNI512
