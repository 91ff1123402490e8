// The "r8" layout: Q4_0 / Q4_1 / Q8_0 weights repacked at load into groups of 8 interleaved rows
// (repack_weights), their GEMM (gemm_rows_repacked) and the way back to GGUF blocks
// (dequantize_row_repacked, for embeddings and tests). Layout described in repacked_layout.h. On AVX2
// builds the entry points also serve Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS (r8_kquant_layout.cpp). Builds for AVX-512 VNNI use
// the r16 layout instead (r16_layout.cpp).
#include "backend/cpu/repacked_layout.h"
#include "backend/cpu/simd_config.h"

#if !defined(AKUNU_CPU_VNNI512)

#include <algorithm>
#include <cstring>

#include "backend/cpu/act_quant.h"
#include "backend/cpu/dequantize.h"
#include "backend/cpu/quant_helpers.h"
#include "backend/cpu/r8_kquant_layout.h"
#include "backend/cpu/r8_nibbles.h"
#include "backend/cpu/repacked_gemm_loop.h"

namespace akunu::cpu {

namespace {

// ---------------------------------------------------------------------------------------------
// "r8" repacked Q4_0 / Q4_1 / Q8_0 (layout: repacked_layout.h)
// ---------------------------------------------------------------------------------------------
//
// Decode is a stream over the weights, so the inner loop is built for ops per weight byte: per
// group-block (8 rows x 32 weights) four 32-byte loads, each split by 3 shifts (+ masks) into
// four int16 vectors holding one activation pair per row; a madd against that pair broadcast
// (a pure load) gives each row's int32 partial in its own lane. Sixteen madds summed in int32
// make the block's eight row dots in one vector, so the scale work (one fp16 conversion of the
// eight row scales, one int->float conversion, a multiply and an FMA) is shared by eight rows
// and there is no horizontal reduction at all. Each group is one contiguous stretch of memory.

template <DType T> struct R8Geom;
template <> struct R8Geom<DType::Q4_0> {
    using Block = BlockQ4_0;
    static constexpr size_t kGroupBlock = kR8Rows * sizeof(BlockQ4_0);  // 144
    static constexpr size_t kQs = 16;                                   // nibbles after d[8]
};
template <> struct R8Geom<DType::Q4_1> {
    using Block = BlockQ4_1;
    static constexpr size_t kGroupBlock = kR8Rows * sizeof(BlockQ4_1);  // 160
    static constexpr size_t kQs = 32;                                   // after d[8], m[8]
};
template <> struct R8Geom<DType::Q8_0> {
    using Block = BlockQ8_0;
    static constexpr size_t kGroupBlock = kR8Rows * sizeof(BlockQ8_0);  // 272
    static constexpr size_t kQs = 16;                                   // int8 quants after d[8]
};

// Q8_0: where the weight of group row l that multiplies activation qs[p] lives in the quant area.
// Chunk c (32 bytes) serves activation pairs 2c and 2c + 1; its 16-bit word 2l + h holds in its
// low byte row l's weight for qs[4c + h] and in its high byte the one for qs[4c + 2 + h].
constexpr int r8_q8_pos(int l, int p) {
    return 32 * (p >> 2) + 2 * (2 * l + (p & 1)) + ((p >> 1) & 1);
}
// A row's 32 bytes of a group-block are 4 bytes in each of the 8 chunks; byte t (chunk t / 4,
// offset t % 4) holds the weight of element kR8Q8Perm.elem[t]. As shuffle controls like R8PermIdx.
struct R8Q8Perm {
    uint8_t elem[QK_ACT], idx[QK_ACT], from_hi[QK_ACT];
    constexpr R8Q8Perm() : elem{}, idx{}, from_hi{} {
        constexpr int kPos[4] = {0, 2, 1, 3};  // byte in the row's 4 -> activation p offset in the chunk
        for (int t = 0; t < QK_ACT; ++t) {
            const int p = 4 * (t / 4) + kPos[t % 4];
            int e = 0;
            for (int ee = 0; ee < QK_ACT; ++ee)
                if (act_q16_pos(ee) == p) e = ee;
            elem[t] = (uint8_t)e;
            idx[t] = (uint8_t)(e & 15);
            from_hi[t] = e >= 16 ? 0xff : 0x00;
        }
    }
};
[[maybe_unused]] constexpr R8Q8Perm kR8Q8Perm{};

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

template <DType T> void repack_r8(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t K) {
    using G = R8Geom<T>;
    using Block = typename G::Block;
    const int64_t nb = K / QK_ACT;
    const size_t row_bytes = (size_t)nb * sizeof(Block);
    const int64_t groups = (rows + kR8Rows - 1) / kR8Rows;
    if (rows % kR8Rows)  // padding rows of the last group stay zero (d = 0)
        std::memset(dst + (size_t)(groups - 1) * kR8Rows * row_bytes, 0, kR8Rows * row_bytes);
    // Group-block by group-block, so the output is written sequentially.
    for (int64_t g = 0; g < groups; ++g) {
        const int n_rows = (int)std::min<int64_t>(kR8Rows, rows - g * kR8Rows);
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t *gb = dst + (size_t)g * kR8Rows * row_bytes + (size_t)b * G::kGroupBlock;
            for (int l = 0; l < n_rows; ++l) {
                Block w;
                std::memcpy(&w, src + (size_t)(g * kR8Rows + l) * row_bytes + (size_t)b * sizeof(Block), sizeof(Block));
                std::memcpy(gb + 2 * l, &w.d, 2);
                if constexpr (T == DType::Q8_0) {
                    alignas(32) uint8_t out[QK_ACT];
#if defined(AKUNU_CPU_AVX2)
                    // Gather the 32 bytes into kR8Q8Perm order: a per-lane shuffle of each half.
                    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w.qs));
                    const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kR8Q8Perm.idx));
                    const __m256i from_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kR8Q8Perm.from_hi));
                    const __m256i gathered = _mm256_blendv_epi8(_mm256_shuffle_epi8(_mm256_permute2x128_si256(q, q, 0x00), idx),
                                                                _mm256_shuffle_epi8(_mm256_permute2x128_si256(q, q, 0x11), idx), from_hi);
                    _mm256_store_si256(reinterpret_cast<__m256i *>(out), gathered);
#else
                    for (int t = 0; t < QK_ACT; ++t) out[t] = (uint8_t)w.qs[kR8Q8Perm.elem[t]];
#endif
                    for (int c = 0; c < 8; ++c) std::memcpy(gb + G::kQs + 32 * c + 4 * l, out + 4 * c, 4);
                    continue;
                } else {
                if constexpr (T == DType::Q4_1) std::memcpy(gb + 16 + 2 * l, &w.m, 2);
                constexpr uint8_t kFlip = T == DType::Q4_0 ? 0x88 : 0x00;  // Q4_0: nibble ^ 8
                uint8_t out[QK_ACT / 2];
                r8_pack_nibbles(w.qs, kFlip, out);
                for (int c = 0; c < 4; ++c) std::memcpy(gb + G::kQs + 32 * c + 4 * l, out + 4 * c, 4);
                }
            }
        }
    }
}

// One GGUF block back out of the r8 layout (row `row`, block b).
template <DType T> typename R8Geom<T>::Block unpack_r8_block(const uint8_t *packed, int64_t row, int64_t b, int64_t K) {
    using G = R8Geom<T>;
    typename G::Block w{};
    const size_t row_bytes = (size_t)(K / QK_ACT) * sizeof(typename G::Block);
    const int l = (int)(row % kR8Rows);
    const uint8_t *gb = packed + (size_t)(row / kR8Rows) * kR8Rows * row_bytes + (size_t)b * G::kGroupBlock;
    w.d = load_u16(gb + 2 * l);
    if constexpr (T == DType::Q8_0) {
        for (int p = 0; p < QK_ACT; ++p) w.qs[kActElem.elem[p]] = (int8_t)gb[G::kQs + r8_q8_pos(l, p)];
        return w;
    } else {
    if constexpr (T == DType::Q4_1) w.m = load_u16(gb + 16 + 2 * l);
    for (int p = 0; p < QK_ACT; ++p) {
        int byte, shift;
        r8_nibble_pos(l, p, &byte, &shift);
        int q = (gb[G::kQs + byte] >> shift) & 0xf;
        if constexpr (T == DType::Q4_0) q ^= 8;
        const int e = kActElem.elem[p];
        if (e < 16)
            w.qs[e] |= (uint8_t)q;
        else
            w.qs[e - 16] |= (uint8_t)(q << 4);
    }
    return w;
    }
}

// Scalar r8 dot of one row (fallback); same arithmetic as dot_quant_scalar.
template <DType T> float dot_r8_scalar(const uint8_t *group, int l, const BlockQ16Act *x, int64_t nb) {
    using G = R8Geom<T>;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *gb = group + (size_t)b * G::kGroupBlock;
        int isum = 0;
        for (int p = 0; p < QK_ACT; ++p) {
            if constexpr (T == DType::Q8_0) {
                isum += (int)(int8_t)gb[G::kQs + r8_q8_pos(l, p)] * x[b].qs[p];
                continue;
            } else {
            int byte, shift;
            r8_nibble_pos(l, p, &byte, &shift);
            int q = (gb[G::kQs + byte] >> shift) & 0xf;
            if constexpr (T == DType::Q4_0) q = (q ^ 8) - 8;
            isum += q * x[b].qs[p];
            }
        }
        if constexpr (T == DType::Q4_1)
            sum += fp16_scale(load_u16(gb + 2 * l)) * x[b].d * (float)isum + fp16_scale(load_u16(gb + 16 + 2 * l)) * x[b].sum;
        else
            sum += fp16_scale(load_u16(gb + 2 * l)) * x[b].d * (float)isum;
    }
    return sum;
}

#if defined(AKUNU_CPU_AVX2)

#ifndef AKUNU_R8_PREFETCH  // bytes ahead of the current group-block (0: none)
#define AKUNU_R8_PREFETCH 0
#endif
#ifndef AKUNU_R8_TILE_M
#define AKUNU_R8_TILE_M 4
#endif
constexpr int kR8TileM = AKUNU_R8_TILE_M;

// One group of 8 rows against RM activation rows: out[m] lane l = dot(row l, activation row m).
template <DType T, int RM>
void tile_r8_avx2(const uint8_t *group, const uint8_t *x, size_t x_row_bytes, int64_t nb, __m256 *out) {
    using G = R8Geom<T>;
    const BlockQ16Act *xr[RM];
    __m256 acc[RM];
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) {
        xr[m] = reinterpret_cast<const BlockQ16Act *>(x + (size_t)m * x_row_bytes);
        acc[m] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *gb = group + (size_t)b * G::kGroupBlock;
        if constexpr (AKUNU_R8_PREFETCH > 0) _mm_prefetch((const char *)(gb + AKUNU_R8_PREFETCH), _MM_HINT_T0);
        __m256i isum[RM];
        if constexpr (T == DType::Q8_0) {
            // Chunk c: int8 pairs of activation pairs 2c (low bytes) and 2c + 1 (high bytes);
            // shifting each word left then arithmetic right by 8 sign-extends the low byte.
            AKUNU_UNROLL
            for (int c = 0; c < 8; ++c) {
                const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb + G::kQs + 32 * c));
                const __m256i v0 = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8);
                const __m256i v1 = _mm256_srai_epi16(w, 8);
                AKUNU_UNROLL
                for (int m = 0; m < RM; ++m) {
                    const int16_t *aq = xr[m][b].qs + 4 * c;  // activation pairs 2c, 2c + 1
                    const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(v0, _mm256_set1_epi32(load_i32(aq + 0))),
                                                       _mm256_madd_epi16(v1, _mm256_set1_epi32(load_i32(aq + 2))));
                    isum[m] = c == 0 ? s : _mm256_add_epi32(isum[m], s);
                }
            }
        } else {
        AKUNU_UNROLL
        for (int c = 0; c < 4; ++c) {
            const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb + G::kQs + 32 * c));
            __m256i v0, v1, v2, v3;
            if constexpr (T == DType::Q4_0) {  // stored nibble ^ 8: sign-extend each 4-bit field
                v0 = _mm256_srai_epi16(_mm256_slli_epi16(w, 12), 12);
                v1 = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 12);
                v2 = _mm256_srai_epi16(_mm256_slli_epi16(w, 4), 12);
                v3 = _mm256_srai_epi16(w, 12);
            } else {
                const __m256i mask = _mm256_set1_epi16(0x000f);
                v0 = _mm256_and_si256(w, mask);
                v1 = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
                v2 = _mm256_and_si256(_mm256_srli_epi16(w, 8), mask);
                v3 = _mm256_srli_epi16(w, 12);
            }
            AKUNU_UNROLL
            for (int m = 0; m < RM; ++m) {
                const int16_t *aq = xr[m][b].qs + 8 * c;  // activation pairs 4c .. 4c + 3
                const __m256i s01 = _mm256_add_epi32(_mm256_madd_epi16(v0, _mm256_set1_epi32(load_i32(aq + 0))),
                                                     _mm256_madd_epi16(v1, _mm256_set1_epi32(load_i32(aq + 2))));
                const __m256i s23 = _mm256_add_epi32(_mm256_madd_epi16(v2, _mm256_set1_epi32(load_i32(aq + 4))),
                                                     _mm256_madd_epi16(v3, _mm256_set1_epi32(load_i32(aq + 6))));
                const __m256i s = _mm256_add_epi32(s01, s23);
                isum[m] = c == 0 ? s : _mm256_add_epi32(isum[m], s);
            }
        }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb)));
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m)
            acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_mul_ps(dw, _mm256_set1_ps(xr[m][b].d)), acc[m]);
        if constexpr (T == DType::Q4_1) {
            const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb + 16)));
            AKUNU_UNROLL
            for (int m = 0; m < RM; ++m) acc[m] = _mm256_fmadd_ps(dm, _mm256_set1_ps(xr[m][b].sum), acc[m]);
        }
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) out[m] = acc[m];
}

template <DType T> struct R8TileTable {
    R8TileFn fn[kR8TileM];
    template <int RM> constexpr void fill() {
        fn[RM - 1] = &tile_r8_avx2<T, RM>;
        if constexpr (RM > 1) fill<RM - 1>();
    }
    constexpr R8TileTable() : fn{} { fill<kR8TileM>(); }
};

template <DType T> void gemm_rows_r8(const GemmArgs &a, int64_t n_begin, int64_t n_end) {
    static constexpr R8TileTable<T> table{};
    r8_gemm_rows<kR8TileM>(a, n_begin, n_end, a.K / QK_ACT, table.fn);
}

#else

template <DType T> void gemm_rows_r8(const GemmArgs &a, int64_t n_begin, int64_t n_end) {
    const size_t group_bytes = (size_t)kR8Rows * a.w_row_bytes;
    const int64_t nb = a.K / QK_ACT;
    for (int64_t n = n_begin; n < n_end; ++n) {
        const uint8_t *grp = a.w + (size_t)(n / kR8Rows) * group_bytes;
        for (int64_t m = 0; m < a.M; ++m) {
            const BlockQ16Act *x = reinterpret_cast<const BlockQ16Act *>(a.x + (size_t)m * a.x_row_bytes);
            store_out(a.y + (size_t)m * a.y_stride + n, dot_r8_scalar<T>(grp, (int)(n % kR8Rows), x, nb), a.accumulate);
        }
    }
}

#endif  // AKUNU_CPU_AVX2

}  // namespace

size_t repacked_act_row_bytes(DType, int64_t K) { return (size_t)(K / QK_ACT) * sizeof(BlockQ16Act); }
void quantize_row_act_repacked(DType, const float *x, void *dst, int64_t k) {
    quantize_row_act(x, static_cast<BlockQ16Act *>(dst), k);
}

void gemm_rows_repacked(const GemmArgs &args, int64_t n_begin, int64_t n_end) {
    switch (args.type) {
        case DType::Q4_0: return gemm_rows_r8<DType::Q4_0>(args, n_begin, n_end);
        case DType::Q4_1: return gemm_rows_r8<DType::Q4_1>(args, n_begin, n_end);
        case DType::Q8_0: return gemm_rows_r8<DType::Q8_0>(args, n_begin, n_end);
        default: return r8k::gemm_rows(args, n_begin, n_end);  // callers check has_repacked_layout
    }
}

bool has_repacked_layout(DType t) { return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0 || r8k::handles(t); }

int repack_row_group(DType t) { return has_repacked_layout(t) ? kR8Rows : 0; }

size_t repacked_bytes(DType t, int64_t rows, int64_t K) {
    const size_t groups = (size_t)((rows + kR8Rows - 1) / kR8Rows);
    switch (t) {
        case DType::Q4_0: return groups * kR8Rows * (size_t)(K / QK4_0) * sizeof(BlockQ4_0);
        case DType::Q4_1: return groups * kR8Rows * (size_t)(K / QK4_1) * sizeof(BlockQ4_1);
        case DType::Q8_0: return groups * kR8Rows * (size_t)(K / QK8_0) * sizeof(BlockQ8_0);
        default: return r8k::repacked_bytes(t, rows, K);
    }
}

void repack_weights(DType t, const void *src, void *dst, int64_t rows, int64_t K) {
    const uint8_t *s = static_cast<const uint8_t *>(src);
    uint8_t *d = static_cast<uint8_t *>(dst);
    switch (t) {
        case DType::Q4_0: return repack_r8<DType::Q4_0>(s, d, rows, K);
        case DType::Q4_1: return repack_r8<DType::Q4_1>(s, d, rows, K);
        case DType::Q8_0: return repack_r8<DType::Q8_0>(s, d, rows, K);
        default: return r8k::repack(t, s, d, rows, K);
    }
}

void dequantize_row_repacked(DType t, const void *packed, int64_t row, float *dst, int64_t K) {
    const uint8_t *p = static_cast<const uint8_t *>(packed);
    if (r8k::handles(t)) return r8k::dequantize_row(t, p, row, dst, K);
    if (t == DType::Q8_0) {
        // Gather the row's blocks (each 32 bytes = 4 bytes from each of 8 chunks), then one
        // dequantize_row over them (same arithmetic as the GGUF row).
        constexpr int64_t kBatch = 32;
        BlockQ8_0 blocks[kBatch];
        for (int64_t b0 = 0; b0 < K / QK_ACT; b0 += kBatch) {
            const int64_t n = std::min<int64_t>(kBatch, K / QK_ACT - b0);
            for (int64_t i = 0; i < n; ++i) blocks[i] = unpack_r8_block<DType::Q8_0>(p, row, b0 + i, K);
            dequantize_row(t, blocks, dst + b0 * QK_ACT, n * QK_ACT);
        }
        return;
    }
    for (int64_t b = 0; b < K / QK_ACT; ++b) {
        if (t == DType::Q4_0) {
            const BlockQ4_0 w = unpack_r8_block<DType::Q4_0>(p, row, b, K);
            dequantize_row(t, &w, dst + b * QK_ACT, QK_ACT);
        } else if (t == DType::Q4_1) {
            const BlockQ4_1 w = unpack_r8_block<DType::Q4_1>(p, row, b, K);
            dequantize_row(t, &w, dst + b * QK_ACT, QK_ACT);
        }
    }
}

}  // namespace akunu::cpu

#endif  // !AKUNU_CPU_VNNI512
