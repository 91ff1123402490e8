// r8 for Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS (AVX2 builds without AVX-512 VNNI): repacked
// at load into groups of 8 interleaved rows, their GEMM against int16 activations (BlockQ16Act), and
// the way back to GGUF blocks.
//
// Why: on GGUF rows these formats are decoded block by block into int8 and dotted per row
// (kquant_kernels.cpp). On an AVX2 machine that made a Llama-3.2-1B-shape decode 0.21-0.24x
// llama.cpp's, whose own AVX2 code repacks them (docs/adr/0029, benchmarks/HISTORY.md "2026-11-28,
// c0ce8d0"). Here, as for Q4_0 in r8_layout.cpp, one 32-byte load holds four quants of each of 8
// rows, shifts and masks make them int16, and one madd per activation pair gives all eight rows'
// partial dots; the superblock's factors are applied once per 32 (Q4_K, Q5_K) or 16 (Q6_K) elements
// for all 8 rows.
//
// A group-block (the same superblock of 8 rows; Q5_0, Q5_1, IQ4_NL: the same block) is exactly 8 x the
// GGUF block's bytes:
//   header | sub-block 0 | ... | sub-block 7             (one sub-block per 32 elements; Q5_0, Q5_1, IQ4_NL: one)
// header: the per-row factors as planes of 8 (plane p holds field p of rows 0..7):
//   Q5_0, IQ4_NL fp16 d[8]                                   16 bytes
//   Q5_1         fp16 d[8] | fp16 m[8]                       32 bytes
//   Q4_K, Q5_K   fp16 d[8] | fp16 dmin[8] | scales[12][8]   128 bytes (GGUF's 12 packed bytes)
//   Q6_K         fp16 d[8] | int8 scales[16][8]             144 bytes
//   IQ4_XS       fp16 d[8] | u16 scales_h[8] | scales_l[4][8] 64 bytes
// sub-block: the quants as unsigned numbers u (0..15, Q5_0, Q5_1 and Q5_K 0..31, Q6_K 0..63; IQ4's
// nibbles, indices into kIQ4Values) of its 32 elements:
//   4 nibble chunks of 32 bytes, r8's order (r8_nibbles.h: in chunk c, 16-bit word 2 l + h holds in
//     nibble k row l's weight for activation qs[2 (4 c + k) + h]): the low four bits;
//   Q5_0, Q5_1, Q5_K then 1 chunk of 32 bytes of fifth bits: word 2 l + h holds nibble k of chunk c's at bit 4 c + k;
//   Q6_K then 2 chunks of 32 bytes of the two bits above them: in chunk i, word 2 l + h holds in its
//     low byte those of nibble chunk 2 i, in its high byte those of 2 i + 1, nibble k at bits 2k, 2k + 1.
// Values: Q5_0 d (u - 16), the offset taken off each int16 weight; Q5_1 d u + m and Q4_K, Q5_K (d sc_j) u - dmin m_j
// per 32 elements (the offset comes back as m, or dmin m_j, x the activation block's float sum); Q6_K d sc_g (u - 32)
// per 16, the offset taken off each int16 weight; IQ4_NL d kIQ4Values[u], IQ4_XS d (ls_j - 32) kIQ4Values[u] per 32
// elements, the table looked up per byte (pshufb) before the int16 split.
#include "backend/cpu/r8_kquant_layout.h"

#include "backend/cpu/simd_config.h"

#if defined(AKUNU_CPU_AVX2) && !defined(AKUNU_CPU_VNNI512)

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/dequantize.h"
#include "backend/cpu/kquant_unsigned.h"
#include "backend/cpu/r8_nibbles.h"
#include "backend/cpu/repacked_gemm_loop.h"
#include "core/kquant_blocks.h"

namespace akunu::cpu::r8k {

namespace {

constexpr size_t kNibbleBytes = 4 * 32;  // a sub-block's nibble chunks

template <DType T> struct Geom;
template <> struct Geom<DType::Q5_0> {
    using Block = BlockQ5_0;
    static constexpr int kElems = 32;
    static constexpr size_t kHeader = 16, kSubBytes = kNibbleBytes + 32;
};
template <> struct Geom<DType::Q5_1> {
    using Block = BlockQ5_1;
    static constexpr int kElems = 32;
    static constexpr size_t kHeader = 32, kSubBytes = kNibbleBytes + 32;
};
template <> struct Geom<DType::IQ4_NL> {
    using Block = BlockIQ4_NL;
    static constexpr int kElems = 32;
    static constexpr size_t kHeader = 16, kSubBytes = kNibbleBytes;
};
template <> struct Geom<DType::IQ4_XS> {
    using Block = BlockIQ4_XS;
    static constexpr int kElems = QK_K;
    static constexpr size_t kHeader = 64, kSubBytes = kNibbleBytes;
};
template <> struct Geom<DType::Q4_K> {
    using Block = BlockQ4_K;
    static constexpr int kElems = QK_K;
    static constexpr size_t kHeader = 128, kSubBytes = kNibbleBytes;
};
template <> struct Geom<DType::Q5_K> {
    using Block = BlockQ5_K;
    static constexpr int kElems = QK_K;
    static constexpr size_t kHeader = 128, kSubBytes = kNibbleBytes + 32;
};
template <> struct Geom<DType::Q6_K> {
    using Block = BlockQ6_K;
    static constexpr int kElems = QK_K;
    static constexpr size_t kHeader = 144, kSubBytes = kNibbleBytes + 64;
};
template <DType T> constexpr int kSubBlocks = Geom<T>::kElems / 32;
template <DType T> constexpr size_t kGroupBlock = Geom<T>::kHeader + kSubBlocks<T> * Geom<T>::kSubBytes;
// One bit above the nibble, in one chunk a sub-block.
template <DType T> constexpr bool kFifthBit = T == DType::Q5_0 || T == DType::Q5_1 || T == DType::Q5_K;
// IQ4's nibbles index a table of values: the layout stores the nibbles, the GEMM looks them up.
template <DType T> constexpr bool kLookup = T == DType::IQ4_NL || T == DType::IQ4_XS;
static_assert(kGroupBlock<DType::Q4_K> == kR8Rows * sizeof(BlockQ4_K), "r8 Q4_K keeps the GGUF size");
static_assert(kGroupBlock<DType::Q5_0> == kR8Rows * sizeof(BlockQ5_0), "r8 Q5_0 keeps the GGUF size");
static_assert(kGroupBlock<DType::Q5_K> == kR8Rows * sizeof(BlockQ5_K), "r8 Q5_K keeps the GGUF size");
static_assert(kGroupBlock<DType::Q6_K> == kR8Rows * sizeof(BlockQ6_K), "r8 Q6_K keeps the GGUF size");
static_assert(kGroupBlock<DType::Q5_1> == kR8Rows * sizeof(BlockQ5_1), "r8 Q5_1 keeps the GGUF size");
static_assert(kGroupBlock<DType::IQ4_NL> == kR8Rows * sizeof(BlockIQ4_NL), "r8 IQ4_NL keeps the GGUF size");
static_assert(kGroupBlock<DType::IQ4_XS> == kR8Rows * sizeof(BlockIQ4_XS), "r8 IQ4_XS keeps the GGUF size");
// Q4_K and Q5_K share their header and factors.
template <DType T> constexpr bool kScaleMin = T == DType::Q4_K || T == DType::Q5_K;

// ---- a row's share of a group-block, in and out ----

template <DType T> void write_header(uint8_t *gb, int l, const typename Geom<T>::Block &w) {
    std::memcpy(gb + 2 * l, &w.d, 2);
    if constexpr (T == DType::Q5_1) {
        std::memcpy(gb + 16 + 2 * l, &w.m, 2);
    } else if constexpr (T == DType::IQ4_XS) {
        std::memcpy(gb + 16 + 2 * l, &w.scales_h, 2);
        for (int p = 0; p < 4; ++p) gb[32 + 8 * p + l] = w.scales_l[p];
    } else if constexpr (kScaleMin<T>) {
        std::memcpy(gb + 16 + 2 * l, &w.dmin, 2);
        for (int p = 0; p < 12; ++p) gb[32 + 8 * p + l] = w.scales[p];
    } else if constexpr (T == DType::Q6_K) {
        for (int g = 0; g < 16; ++g) gb[16 + 8 * g + l] = (uint8_t)w.scales[g];
    }
}
template <DType T> void read_header(const uint8_t *gb, int l, typename Geom<T>::Block &w) {
    std::memcpy(&w.d, gb + 2 * l, 2);
    if constexpr (T == DType::Q5_1) {
        std::memcpy(&w.m, gb + 16 + 2 * l, 2);
    } else if constexpr (T == DType::IQ4_XS) {
        std::memcpy(&w.scales_h, gb + 16 + 2 * l, 2);
        for (int p = 0; p < 4; ++p) w.scales_l[p] = gb[32 + 8 * p + l];
    } else if constexpr (kScaleMin<T>) {
        std::memcpy(&w.dmin, gb + 16 + 2 * l, 2);
        for (int p = 0; p < 12; ++p) w.scales[p] = gb[32 + 8 * p + l];
    } else if constexpr (T == DType::Q6_K) {
        for (int g = 0; g < 16; ++g) w.scales[g] = (int8_t)gb[16 + 8 * g + l];
    }
}

// Where the two bits above the nibble of row l for activation qs[p] live in a Q6_K sub-block.
inline void high_pos(int l, int p, int *byte, int *shift) {
    const int j = p >> 1, h = p & 1, c = j >> 2, k = j & 3;
    *byte = (int)kNibbleBytes + 32 * (c >> 1) + 2 * (2 * l + h) + (c & 1);
    *shift = 2 * k;
}
// Where Q5_0's / Q5_K's fifth bit of row l for activation qs[p] lives: bit 4 c + k of word 2 l + h of
// its one bit chunk.
inline void fifth_bit_pos(int l, int p, int *byte, int *shift) {
    const int j = p >> 1, h = p & 1, c = j >> 2, k = j & 3;
    *byte = (int)kNibbleBytes + 2 * (2 * l + h) + ((4 * c + k) >> 3);
    *shift = (4 * c + k) & 7;
}
// The same as bits of the row's four bytes of a chunk, for the repacking loop: Q6_K's bit pairs (in
// high chunk `chunk`, from bit `bit`) and the fifth bits (q5_bit).
struct HighBitsTable {
    uint8_t chunk[QK_ACT], bit[QK_ACT], q5_bit[QK_ACT];
    constexpr HighBitsTable() : chunk{}, bit{}, q5_bit{} {
        for (int p = 0; p < QK_ACT; ++p) {
            const int j = p >> 1, h = p & 1, c = j >> 2, k = j & 3;
            chunk[p] = (uint8_t)(c >> 1);
            bit[p] = (uint8_t)(8 * (2 * h + (c & 1)) + 2 * k);
            q5_bit[p] = (uint8_t)(16 * h + 4 * c + k);
        }
    }
};
constexpr HighBitsTable kHighBits{};

// Row l's part of a sub-block from the 32 unsigned quants u of its elements, and back.
template <DType T> void put_sub_block(uint8_t *sub, int l, const uint8_t *u) {
    uint8_t qs[16], packed[16];
    for (int j = 0; j < 16; ++j) qs[j] = (uint8_t)((u[j] & 15) | (u[j + 16] & 15) << 4);
    r8_pack_nibbles(qs, 0, packed);
    for (int c = 0; c < 4; ++c) std::memcpy(sub + 32 * c + 4 * l, packed + 4 * c, 4);
    if constexpr (T == DType::Q6_K) {
        uint32_t words[2] = {0, 0};  // row l's 4 bytes of high chunks 0 and 1
        for (int p = 0; p < QK_ACT; ++p)
            words[kHighBits.chunk[p]] |= (uint32_t)(u[kActElem.elem[p]] >> 4) << kHighBits.bit[p];
        for (int i = 0; i < 2; ++i) std::memcpy(sub + kNibbleBytes + 32 * i + 4 * l, &words[i], 4);
    } else if constexpr (kFifthBit<T>) {
        uint32_t word = 0;  // row l's 4 bytes of the bit chunk
        for (int p = 0; p < QK_ACT; ++p) word |= (uint32_t)(u[kActElem.elem[p]] >> 4) << kHighBits.q5_bit[p];
        std::memcpy(sub + kNibbleBytes + 4 * l, &word, 4);
    }
}
template <DType T> void get_sub_block(const uint8_t *sub, int l, uint8_t *u) {
    for (int p = 0; p < QK_ACT; ++p) {
        int byte, shift;
        r8_nibble_pos(l, p, &byte, &shift);
        uint8_t v = (uint8_t)((sub[byte] >> shift) & 15);
        if constexpr (T == DType::Q6_K) {
            high_pos(l, p, &byte, &shift);
            v |= (uint8_t)(((sub[byte] >> shift) & 3) << 4);
        } else if constexpr (kFifthBit<T>) {
            fifth_bit_pos(l, p, &byte, &shift);
            v |= (uint8_t)(((sub[byte] >> shift) & 1) << 4);
        }
        u[kActElem.elem[p]] = v;
    }
}

template <DType T> void quants_of(const typename Geom<T>::Block &w, uint8_t *u) {
    if constexpr (T == DType::Q5_0 || T == DType::Q5_1) q5_quants_of(w, u);
    else if constexpr (kLookup<T>) iq4_nibbles_of(w.qs, kSubBlocks<T>, u);
    else if constexpr (T == DType::Q4_K) q4k_nibbles_of(w, u);
    else if constexpr (T == DType::Q5_K) q5k_quants_of(w, u);
    else q6k_quants_of(w, u);
}
template <DType T> void set_quants(typename Geom<T>::Block &w, const uint8_t *u) {
    if constexpr (T == DType::Q5_0 || T == DType::Q5_1) set_q5_quants(w, u);
    else if constexpr (kLookup<T>) set_iq4_nibbles(w.qs, kSubBlocks<T>, u);
    else if constexpr (T == DType::Q4_K) set_q4k_nibbles(w, u);
    else if constexpr (T == DType::Q5_K) set_q5k_quants(w, u);
    else set_q6k_quants(w, u);
}

template <DType T> void repack_matrix(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t K) {
    using Block = typename Geom<T>::Block;
    const int64_t nb = K / Geom<T>::kElems;
    const size_t row_bytes = (size_t)nb * sizeof(Block);
    const int64_t groups = (rows + kR8Rows - 1) / kR8Rows;
    uint8_t u[Geom<T>::kElems];
    for (int64_t g = 0; g < groups; ++g) {
        const int n_rows = (int)std::min<int64_t>(kR8Rows, rows - g * kR8Rows);
        uint8_t *group = dst + (size_t)g * kR8Rows * row_bytes;
        if (n_rows < kR8Rows) std::memset(group, 0, kR8Rows * row_bytes);  // padding rows stay zero (d = 0)
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t *gb = group + (size_t)b * kGroupBlock<T>;
            for (int l = 0; l < n_rows; ++l) {
                Block w;
                std::memcpy(&w, src + (size_t)(g * kR8Rows + l) * row_bytes + (size_t)b * sizeof(Block), sizeof(Block));
                write_header<T>(gb, l, w);
                quants_of<T>(w, u);
                for (int s = 0; s < kSubBlocks<T>; ++s)
                    put_sub_block<T>(gb + Geom<T>::kHeader + (size_t)s * Geom<T>::kSubBytes, l, u + 32 * s);
            }
        }
    }
}

template <DType T> typename Geom<T>::Block unpack_block(const uint8_t *packed, int64_t row, int64_t b, int64_t K) {
    using Block = typename Geom<T>::Block;
    const size_t row_bytes = (size_t)(K / Geom<T>::kElems) * sizeof(Block);
    const int l = (int)(row % kR8Rows);
    const uint8_t *gb = packed + (size_t)(row / kR8Rows) * kR8Rows * row_bytes + (size_t)b * kGroupBlock<T>;
    Block w{};
    read_header<T>(gb, l, w);
    uint8_t u[Geom<T>::kElems];
    for (int s = 0; s < kSubBlocks<T>; ++s) get_sub_block<T>(gb + Geom<T>::kHeader + (size_t)s * Geom<T>::kSubBytes, l, u + 32 * s);
    set_quants<T>(w, u);
    return w;
}

// Row `row` gathered back into GGUF blocks, then the GGUF row's dequantize_row: bit-exact.
template <DType T> void dequantize_matrix_row(const uint8_t *packed, int64_t row, float *dst, int64_t K) {
    constexpr int64_t kBatch = 8;
    typename Geom<T>::Block blocks[kBatch];
    constexpr int64_t kElems = Geom<T>::kElems;
    const int64_t nb = K / kElems;
    for (int64_t b0 = 0; b0 < nb; b0 += kBatch) {
        const int64_t n = std::min<int64_t>(kBatch, nb - b0);
        for (int64_t i = 0; i < n; ++i) blocks[i] = unpack_block<T>(packed, row, b0 + i, K);
        akunu::cpu::dequantize_row(T, blocks, dst + b0 * kElems, n * kElems);
    }
}

// ---- the GEMM ----

inline __m256i bcast_pair(const int16_t *p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
// Eight bytes (one per row) as eight floats.
inline __m256 bytes_as_floats(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p))));
}
inline __m256 int8s_as_floats(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p))));
}

// Chunk c of a sub-block as four int16 vectors v[k] (word 2 l + h: row l's weight for activation
// qs[2 (4 c + k) + h]): Q4_K's nibbles, Q5_1's and Q5_K's five-bit values, Q5_0's minus 16, Q6_K's six-bit
// values minus 32, IQ4's table values.
template <DType T> AKUNU_ALWAYS_INLINE void chunk_vectors(const uint8_t *sub, int c, __m256i (&v)[4]) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sub + 32 * c));
    if constexpr (kLookup<T>) {
        // Look up every byte's low and high nibble (nibbles 0, 2 and 1, 3 of each word), then split
        // each word's two int8 values into int16s by arithmetic shifts (sign extension).
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(kIQ4Values)));
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        const __m256i v02 = _mm256_shuffle_epi8(table, _mm256_and_si256(w, low4));
        const __m256i v13 = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(w, 4), low4));
        v[0] = _mm256_srai_epi16(_mm256_slli_epi16(v02, 8), 8);
        v[1] = _mm256_srai_epi16(_mm256_slli_epi16(v13, 8), 8);
        v[2] = _mm256_srai_epi16(v02, 8);
        v[3] = _mm256_srai_epi16(v13, 8);
        return;
    }
    const __m256i low4 = _mm256_set1_epi16(0x000f);
    v[0] = _mm256_and_si256(w, low4);
    v[1] = _mm256_and_si256(_mm256_srli_epi16(w, 4), low4);
    v[2] = _mm256_and_si256(_mm256_srli_epi16(w, 8), low4);
    v[3] = _mm256_srli_epi16(w, 12);
    if constexpr (T == DType::Q6_K) {
        __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sub + kNibbleBytes + 32 * (c >> 1)));
        if (c & 1) hb = _mm256_srli_epi16(hb, 8);
        // Nibble k's two bits (bits 2k, 2k + 1) to bits 4, 5; the mask drops what else moved there.
        const __m256i bits45 = _mm256_set1_epi16(0x0030), offset = _mm256_set1_epi16(32);
        const __m256i h[4] = {_mm256_slli_epi16(hb, 4), _mm256_slli_epi16(hb, 2), hb, _mm256_srli_epi16(hb, 2)};
        AKUNU_UNROLL
        for (int k = 0; k < 4; ++k) v[k] = _mm256_sub_epi16(_mm256_or_si256(v[k], _mm256_and_si256(h[k], bits45)), offset);
    } else if constexpr (kFifthBit<T>) {
        // Bit 4 c + k of each word to bit 4 (c is a compile-time constant where this is inlined).
        const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sub + kNibbleBytes));
        const __m256i bit4 = _mm256_set1_epi16(0x0010);
        AKUNU_UNROLL
        for (int k = 0; k < 4; ++k) {
            const int b = 4 * c + k;
            const __m256i moved = b <= 4 ? _mm256_slli_epi16(hb, 4 - b) : _mm256_srli_epi16(hb, b - 4);
            v[k] = _mm256_or_si256(v[k], _mm256_and_si256(moved, bit4));
            if constexpr (T == DType::Q5_0) v[k] = _mm256_sub_epi16(v[k], _mm256_set1_epi16(16));
        }
    }
}

// The int32 dots of chunk c with activation rows a[m] (8 lanes: rows of the group).
template <int RM> AKUNU_ALWAYS_INLINE void chunk_dots(const __m256i (&v)[4], const BlockQ16Act *const (&a)[RM], int c,
                                                     __m256i (&dots)[RM]) {
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) {
        const int16_t *aq = a[m]->qs + 8 * c;  // activation pairs 4c .. 4c + 3
        const __m256i s01 = _mm256_add_epi32(_mm256_madd_epi16(v[0], bcast_pair(aq + 0)), _mm256_madd_epi16(v[1], bcast_pair(aq + 2)));
        const __m256i s23 = _mm256_add_epi32(_mm256_madd_epi16(v[2], bcast_pair(aq + 4)), _mm256_madd_epi16(v[3], bcast_pair(aq + 6)));
        dots[m] = _mm256_add_epi32(s01, s23);
    }
}

// A sub-block's int32 dots with activation rows a[m]: lo over its elements 0..15, hi over 16..31
// (chunks 0, 2 and 1, 3: the activation order, quant_blocks.h), apart for Q6_K's scales per 16.
template <DType T, int RM>
AKUNU_ALWAYS_INLINE void sub_block_dots(const uint8_t *sub, const BlockQ16Act *const (&a)[RM], __m256i (&lo)[RM],
                                        __m256i (&hi)[RM]) {
    AKUNU_UNROLL
    for (int c = 0; c < 4; ++c) {
        __m256i v[4], dots[RM];
        chunk_vectors<T>(sub, c, v);
        chunk_dots<RM>(v, a, c, dots);
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) {
            __m256i &sum = (c & 1) ? hi[m] : lo[m];
            sum = c < 2 ? dots[m] : _mm256_add_epi32(sum, dots[m]);
        }
    }
}

// The group-block's factors beside d: Q4_K's and Q5_K's dmin and 6-bit sc and m of sub-blocks 0..3
// and 4..7 of the 8 rows, unpacked from GGUF's 12 bytes (kquant_scale_min) for all rows at once:
// planes p of 8 bytes, 4 planes a vector. (Q5_0 and Q6_K: none.)
struct ScaleMin {
    __m256 dmin;
    alignas(32) uint8_t sc03[32], m03[32], sc47[32], m47[32];  // byte 8 j + l: sub-block j (mod 4) of row l
    explicit ScaleMin(const uint8_t *gb) {
        dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb + 16)));
        const uint8_t *planes = gb + 32;
        const __m256i s03 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(planes));
        const __m256i s47 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(planes + 32));
        const __m256i s811 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(planes + 64));
        const __m256i b63 = _mm256_set1_epi8(63), b15 = _mm256_set1_epi8(15), b48 = _mm256_set1_epi8(0x30);
        // sc_j = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4; m_j = (s[j + 4] >> 4) | (s[j] >> 6) << 4 (j >= 4)
        const __m256i sc47v = _mm256_or_si256(_mm256_and_si256(s811, b15), _mm256_and_si256(_mm256_srli_epi16(s03, 2), b48));
        const __m256i m47v =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(s811, 4), b15), _mm256_and_si256(_mm256_srli_epi16(s47, 2), b48));
        _mm256_store_si256(reinterpret_cast<__m256i *>(sc03), _mm256_and_si256(s03, b63));
        _mm256_store_si256(reinterpret_cast<__m256i *>(m03), _mm256_and_si256(s47, b63));
        _mm256_store_si256(reinterpret_cast<__m256i *>(sc47), sc47v);
        _mm256_store_si256(reinterpret_cast<__m256i *>(m47), m47v);
    }
    const uint8_t *sc(int j) const { return (j < 4 ? sc03 : sc47) + 8 * (j % 4); }
    const uint8_t *m(int j) const { return (j < 4 ? m03 : m47) + 8 * (j % 4); }
};
// IQ4_XS's factors d (ls_j - 32) of sub-blocks j = 0..7 for the 8 rows, from the header's planes of
// d, scales_h and scales_l (IQ4_XS's ls: low four bits nibble j % 2 of scales_l[j / 2], high two bits
// 2 j, 2 j + 1 of scales_h).
struct IQ4XSFactors {
    __m256 f[8];
    explicit IQ4XSFactors(const uint8_t *gb) {
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb)));
        const __m256i high = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb + 16)));
        const __m256i low4 = _mm256_set1_epi32(15), two = _mm256_set1_epi32(3), offset = _mm256_set1_epi32(32);
        AKUNU_UNROLL
        for (int j = 0; j < 8; ++j) {
            const __m256i sl = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(gb + 32 + 8 * (j / 2))));
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(sl, 4 * (j % 2)), low4);
            const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(high, 2 * j), two), 4);
            f[j] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_or_si256(lo, hi), offset)));
        }
    }
};
struct NoFactors {
    explicit NoFactors(const uint8_t *) {}
};

// One group of 8 rows against RM activation rows: out[m] lane l = dot(row l, activation row m).
template <DType T, int RM>
void tile(const uint8_t *group, const uint8_t *x, size_t x_row_bytes, int64_t nb, __m256 *out) {
    const BlockQ16Act *xr[RM];
    __m256 acc[RM];
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) {
        xr[m] = reinterpret_cast<const BlockQ16Act *>(x + (size_t)m * x_row_bytes);
        acc[m] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *gb = group + (size_t)b * kGroupBlock<T>;
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb)));
        const std::conditional_t<kScaleMin<T>, ScaleMin, std::conditional_t<T == DType::IQ4_XS, IQ4XSFactors, NoFactors>> f(gb);
        for (int s = 0; s < kSubBlocks<T>; ++s) {
            const uint8_t *sub = gb + Geom<T>::kHeader + (size_t)s * Geom<T>::kSubBytes;
            const BlockQ16Act *a[RM];
            AKUNU_UNROLL
            for (int m = 0; m < RM; ++m) a[m] = xr[m] + b * kSubBlocks<T> + s;
            __m256i lo[RM], hi[RM];
            sub_block_dots<T, RM>(sub, a, lo, hi);
            if constexpr (kScaleMin<T>) {  // (d sc_s) u - dmin m_s
                const __m256 scale = _mm256_mul_ps(d, bytes_as_floats(f.sc(s)));
                const __m256 min = _mm256_mul_ps(f.dmin, bytes_as_floats(f.m(s)));
                AKUNU_UNROLL
                for (int m = 0; m < RM; ++m) {
                    const __m256i isum = _mm256_add_epi32(lo[m], hi[m]);
                    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(scale, _mm256_set1_ps(a[m]->d)), acc[m]);
                    acc[m] = _mm256_fnmadd_ps(min, _mm256_set1_ps(a[m]->sum), acc[m]);
                }
            } else if constexpr (T == DType::Q6_K) {  // d sc_g (u - 32), g = 2 s, 2 s + 1
                const __m256 scale_lo = _mm256_mul_ps(d, int8s_as_floats(gb + 16 + 8 * (2 * s)));
                const __m256 scale_hi = _mm256_mul_ps(d, int8s_as_floats(gb + 16 + 8 * (2 * s + 1)));
                AKUNU_UNROLL
                for (int m = 0; m < RM; ++m) {
                    const __m256 ad = _mm256_set1_ps(a[m]->d);
                    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo[m]), _mm256_mul_ps(scale_lo, ad), acc[m]);
                    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi[m]), _mm256_mul_ps(scale_hi, ad), acc[m]);
                }
            } else if constexpr (T == DType::IQ4_XS) {  // d (ls_s - 32) kIQ4Values[u]
                AKUNU_UNROLL
                for (int m = 0; m < RM; ++m) {
                    const __m256i isum = _mm256_add_epi32(lo[m], hi[m]);
                    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(f.f[s], _mm256_set1_ps(a[m]->d)), acc[m]);
                }
            } else {  // Q5_0 d (u - 16), Q5_1 d u + m, IQ4_NL d kIQ4Values[u]: one sub-block
                AKUNU_UNROLL
                for (int m = 0; m < RM; ++m) {
                    const __m256i isum = _mm256_add_epi32(lo[m], hi[m]);
                    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(a[m]->d)), acc[m]);
                }
                if constexpr (T == DType::Q5_1) {
                    const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb + 16)));
                    AKUNU_UNROLL
                    for (int m = 0; m < RM; ++m) acc[m] = _mm256_fmadd_ps(dm, _mm256_set1_ps(a[m]->sum), acc[m]);
                }
            }
        }
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) out[m] = acc[m];
}

// Activation rows per tile (as r8's Q4_0 / Q4_1 / Q8_0).
constexpr int kTileM = 4;
template <DType T> struct TileTable {
    R8TileFn fn[kTileM];
    template <int RM> constexpr void fill() {
        fn[RM - 1] = &tile<T, RM>;
        if constexpr (RM > 1) fill<RM - 1>();
    }
    constexpr TileTable() : fn{} { fill<kTileM>(); }
};

template <DType T> void gemm_matrix_rows(const GemmArgs &a, int64_t n_begin, int64_t n_end) {
    static constexpr TileTable<T> table{};
    r8_gemm_rows<kTileM>(a, n_begin, n_end, a.K / Geom<T>::kElems, table.fn);
}

}  // namespace

namespace {
// fn(std::integral_constant<DType, t>{}) where t is one of this layout's dtypes; nothing for the others.
template <class Fn> void with_dtype(DType t, Fn &&fn) {
    switch (t) {
        case DType::Q5_0: return fn(std::integral_constant<DType, DType::Q5_0>{});
        case DType::Q5_1: return fn(std::integral_constant<DType, DType::Q5_1>{});
        case DType::IQ4_NL: return fn(std::integral_constant<DType, DType::IQ4_NL>{});
        case DType::Q4_K: return fn(std::integral_constant<DType, DType::Q4_K>{});
        case DType::Q5_K: return fn(std::integral_constant<DType, DType::Q5_K>{});
        case DType::Q6_K: return fn(std::integral_constant<DType, DType::Q6_K>{});
        case DType::IQ4_XS: return fn(std::integral_constant<DType, DType::IQ4_XS>{});
        default: return;
    }
}
}  // namespace

bool handles(DType t) {
    bool handled = false;
    with_dtype(t, [&](auto) { handled = true; });
    return handled;
}

size_t repacked_bytes(DType t, int64_t rows, int64_t K) {
    const size_t groups = (size_t)((rows + kR8Rows - 1) / kR8Rows);
    size_t bytes = 0;
    with_dtype(t, [&](auto T) {
        using Block = typename Geom<T.value>::Block;
        bytes = groups * kR8Rows * (size_t)(K / Geom<T.value>::kElems) * sizeof(Block);
    });
    return bytes;
}

void repack(DType t, const uint8_t *src, uint8_t *dst, int64_t rows, int64_t K) {
    with_dtype(t, [&](auto T) { repack_matrix<T.value>(src, dst, rows, K); });
}

void dequantize_row(DType t, const uint8_t *packed, int64_t row, float *dst, int64_t K) {
    with_dtype(t, [&](auto T) { dequantize_matrix_row<T.value>(packed, row, dst, K); });
}

void gemm_rows(const GemmArgs &args, int64_t n_begin, int64_t n_end) {
    with_dtype(args.type, [&](auto T) { gemm_matrix_rows<T.value>(args, n_begin, n_end); });
}

}  // namespace akunu::cpu::r8k

#else  // no AVX2, or AVX-512 VNNI (r16_kquant_layout.cpp): these K-quants stay GGUF rows here

namespace akunu::cpu::r8k {
bool handles(DType) { return false; }
size_t repacked_bytes(DType, int64_t, int64_t) { return 0; }
void repack(DType, const uint8_t *, uint8_t *, int64_t, int64_t) {}
void dequantize_row(DType, const uint8_t *, int64_t, float *, int64_t) {}
void gemm_rows(const GemmArgs &, int64_t, int64_t) {}
}  // namespace akunu::cpu::r8k

#endif
