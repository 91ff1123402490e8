// r16 for the other 4- to 6-bit formats (AVX-512 VNNI builds): Q5_0, Q5_1, IQ4_NL and the
// superblock formats Q4_K, Q5_K, Q6_K, IQ4_XS, repacked at load into groups of 16 interleaved rows,
// their GEMM against BlockQ8x2Act activations, and the way back to GGUF blocks.
//
// Why: on GGUF rows these formats are decoded block by block into int8 and dotted with int16 madds
// (kquant_kernels.cpp); a Llama-3.2-1B Q4_K_M token then costs the core more than the memory. Here,
// as for Q4_0 in r16_layout.cpp, one 64-byte load holds four quants of each of 16 rows, a mask
// makes them bytes, and one vpdpbusd per activation digit gives all sixteen rows' partial dots.
//
// A group-block (the same block of 16 rows) is exactly 16 x the GGUF block's bytes:
//   header | sub-block 0 | sub-block 1 | ...           (one sub-block per 32 elements)
// header: the per-row factors as planes of 16 (plane p holds field p of rows 0..15):
//   Q5_0, IQ4_NL  fp16 d[16]                                        32 bytes
//   Q5_1          fp16 d[16] | fp16 m[16]                           64 bytes
//   IQ4_XS        fp16 d[16] | u16 scales_h[16] | scales_l[4][16]   128 bytes
//   Q4_K, Q5_K    fp16 d[16] | fp16 dmin[16] | scales[12][16]       256 bytes (GGUF's 12 packed bytes)
//   Q6_K          fp16 d[16] | int8 scales[16][16]                  288 bytes
// sub-block: the quants as unsigned numbers u (the value is a function of u and the factors), in
// "vectors" k = 0..7 of elements 4 k .. 4 k + 3 (byte 4 l + b of a vector: row l's element 4 k + b):
//   4 nibble chunks of 64 bytes: chunk c holds vectors c (low nibbles) and 4 + c (high nibbles),
//     Q4_0's order;
//   Q5 then 64 bytes of fifth bits: byte 4 l + b, bit k = bit 4 of row l's element 4 k + b.
//   Q6_K instead has its own six chunks, three per 16 elements (vectors 4 h .. 4 h + 3): chunk 3 h + j
//     (j = 0, 1, 2) holds vector 4 h + j in the low six bits of each byte and bits 2 j, 2 j + 1 of
//     vector 4 h + 3 in the top two.
// A vector's bytes come out of a nibble chunk with a mask (or a shift and a mask) and, for Q5, one
// shift of the bit chunk and one ternary-logic op that ORs its bit in at 4; IQ4's nibbles go through
// one vpshufb of its 16 values (+ 128). Q6_K's layout needs 9 ops for four vectors where nibbles and
// bit planes needed 13: with one activation row (decode) these ops, not the vpdpbusd, bound the
// GEMV, because they share the two pipes the vpdpbusd leave free (tools/vnni_probe.c).
//
// Values: Q5_0 d (u - 16); Q5_1 d u + m; IQ4_NL d (u - 128); IQ4_XS d (ls_j - 32) (u - 128);
// Q4_K / Q5_K (d sc_j) u - dmin m_j per 32 elements; Q6_K d sc_g (u - 32) per 16. The integer dots
// sum u x q exactly in int32 (u <= 241, |q| <= 16383); the offsets come back as offset x (sum of
// q): per 32 elements from BlockQ8x2Act::qsum, per 16 with qsum_lo. Q6_K's activation rows have one
// d per superblock (|q| <= 2047), so its superblocks sum in int32 (Factors<Q6_K>).
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics start from an undefined vector and warn wherever they are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "backend/cpu/r16_kquant_layout.h"

#include "backend/cpu/simd_config.h"

#if defined(AKUNU_CPU_VNNI512)

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/dequantize.h"
#include "backend/cpu/kquant_unsigned.h"
#include "backend/cpu/r16_panel_gemm.h"
#include "backend/cpu/repacked_gemm_loop.h"
#include "core/kquant_blocks.h"
#include "core/quant_blocks.h"

namespace akunu::cpu::r16k {

namespace {

constexpr int kRows = 16;
constexpr size_t kNibbleBytes = 4 * 64;  // a sub-block's nibble chunks

template <DType T> struct Geom;
template <> struct Geom<DType::Q5_0> {
    using Block = BlockQ5_0;
    static constexpr int kElems = 32, kHighBits = 1;
    static constexpr size_t kHeader = 32;
};
template <> struct Geom<DType::Q5_1> {
    using Block = BlockQ5_1;
    static constexpr int kElems = 32, kHighBits = 1;
    static constexpr size_t kHeader = 64;
};
template <> struct Geom<DType::IQ4_NL> {
    using Block = BlockIQ4_NL;
    static constexpr int kElems = 32, kHighBits = 0;
    static constexpr size_t kHeader = 32;
};
template <> struct Geom<DType::IQ4_XS> {
    using Block = BlockIQ4_XS;
    static constexpr int kElems = QK_K, kHighBits = 0;
    static constexpr size_t kHeader = 128;
};
template <> struct Geom<DType::Q4_K> {
    using Block = BlockQ4_K;
    static constexpr int kElems = QK_K, kHighBits = 0;
    static constexpr size_t kHeader = 256;
};
template <> struct Geom<DType::Q5_K> {
    using Block = BlockQ5_K;
    static constexpr int kElems = QK_K, kHighBits = 1;
    static constexpr size_t kHeader = 256;
};
template <> struct Geom<DType::Q6_K> {  // no nibble chunks: its own six-bit chunks (kSubBytes)
    using Block = BlockQ6_K;
    static constexpr int kElems = QK_K, kHighBits = 0;
    static constexpr size_t kHeader = 288;
};

template <DType T> constexpr int kSubBlocks = Geom<T>::kElems / 32;
// A sub-block's bytes: the nibble chunks and Q5's bit chunk, or Q6_K's six chunks of six-bit bytes.
template <DType T> constexpr size_t kSubBytes = T == DType::Q6_K ? 6 * 64 : kNibbleBytes + 64 * Geom<T>::kHighBits;
template <DType T> constexpr size_t kGroupBlock = Geom<T>::kHeader + kSubBlocks<T> * kSubBytes<T>;
static_assert(kGroupBlock<DType::Q5_0> == kRows * sizeof(BlockQ5_0), "r16 Q5_0 keeps the GGUF size");
static_assert(kGroupBlock<DType::Q4_K> == kRows * sizeof(BlockQ4_K), "r16 Q4_K keeps the GGUF size");
static_assert(kGroupBlock<DType::Q5_K> == kRows * sizeof(BlockQ5_K), "r16 Q5_K keeps the GGUF size");
static_assert(kGroupBlock<DType::Q6_K> == kRows * sizeof(BlockQ6_K), "r16 Q6_K keeps the GGUF size");
static_assert(kGroupBlock<DType::Q5_1> == kRows * sizeof(BlockQ5_1), "r16 Q5_1 keeps the GGUF size");
static_assert(kGroupBlock<DType::IQ4_NL> == kRows * sizeof(BlockIQ4_NL), "r16 IQ4_NL keeps the GGUF size");
static_assert(kGroupBlock<DType::IQ4_XS> == kRows * sizeof(BlockIQ4_XS), "r16 IQ4_XS keeps the GGUF size");
// The offset of the stored unsigned quants: value = factor x (u - offset).
template <DType T>
constexpr int32_t kQuantOffset = T == DType::Q5_0 ? 16 : T == DType::Q6_K ? 32 : (T == DType::IQ4_NL || T == DType::IQ4_XS) ? 128 : 0;
// IQ4's nibbles index a table of values: the layout stores the nibbles, the GEMM looks them up.
template <DType T> constexpr bool kLookup = T == DType::IQ4_NL || T == DType::IQ4_XS;

// ---- a GGUF block's quants as unsigned numbers in element order, and back ----

template <DType T> void quants_of(const typename Geom<T>::Block &w, uint8_t *u);
template <DType T> void set_quants(typename Geom<T>::Block &w, const uint8_t *u);

// Q5_0 / Q5_1: q5_quants_of (kquant_unsigned.h).
template <> void quants_of<DType::Q5_0>(const BlockQ5_0 &w, uint8_t *u) { q5_quants_of(w, u); }
template <> void set_quants<DType::Q5_0>(BlockQ5_0 &w, const uint8_t *u) { set_q5_quants(w, u); }
template <> void quants_of<DType::Q5_1>(const BlockQ5_1 &w, uint8_t *u) { q5_quants_of(w, u); }
template <> void set_quants<DType::Q5_1>(BlockQ5_1 &w, const uint8_t *u) { set_q5_quants(w, u); }

// IQ4: iq4_nibbles_of (kquant_unsigned.h).
template <> void quants_of<DType::IQ4_NL>(const BlockIQ4_NL &w, uint8_t *u) { iq4_nibbles_of(w.qs, 1, u); }
template <> void set_quants<DType::IQ4_NL>(BlockIQ4_NL &w, const uint8_t *u) { set_iq4_nibbles(w.qs, 1, u); }
template <> void quants_of<DType::IQ4_XS>(const BlockIQ4_XS &w, uint8_t *u) { iq4_nibbles_of(w.qs, 8, u); }
template <> void set_quants<DType::IQ4_XS>(BlockIQ4_XS &w, const uint8_t *u) { set_iq4_nibbles(w.qs, 8, u); }

template <> void quants_of<DType::Q4_K>(const BlockQ4_K &w, uint8_t *u) { q4k_nibbles_of(w, u); }
template <> void set_quants<DType::Q4_K>(BlockQ4_K &w, const uint8_t *u) { set_q4k_nibbles(w, u); }
template <> void quants_of<DType::Q5_K>(const BlockQ5_K &w, uint8_t *u) { q5k_quants_of(w, u); }
template <> void set_quants<DType::Q5_K>(BlockQ5_K &w, const uint8_t *u) { set_q5k_quants(w, u); }
template <> void quants_of<DType::Q6_K>(const BlockQ6_K &w, uint8_t *u) { q6k_quants_of(w, u); }
template <> void set_quants<DType::Q6_K>(BlockQ6_K &w, const uint8_t *u) { set_q6k_quants(w, u); }

// ---- the header: row l's factors in (and out of) the group-block's planes ----

template <DType T> void write_header(uint8_t *gb, int l, const typename Geom<T>::Block &w) {
    std::memcpy(gb + 2 * l, &w.d, 2);
    if constexpr (T == DType::Q5_1) {
        std::memcpy(gb + 32 + 2 * l, &w.m, 2);
    } else if constexpr (T == DType::IQ4_XS) {
        std::memcpy(gb + 32 + 2 * l, &w.scales_h, 2);
        for (int p = 0; p < 4; ++p) gb[64 + 16 * p + l] = w.scales_l[p];
    } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
        std::memcpy(gb + 32 + 2 * l, &w.dmin, 2);
        for (int p = 0; p < 12; ++p) gb[64 + 16 * p + l] = w.scales[p];
    } else if constexpr (T == DType::Q6_K) {
        for (int g = 0; g < 16; ++g) gb[32 + 16 * g + l] = (uint8_t)w.scales[g];
    }
}
template <DType T> void read_header(const uint8_t *gb, int l, typename Geom<T>::Block &w) {
    std::memcpy(&w.d, gb + 2 * l, 2);
    if constexpr (T == DType::Q5_1) {
        std::memcpy(&w.m, gb + 32 + 2 * l, 2);
    } else if constexpr (T == DType::IQ4_XS) {
        std::memcpy(&w.scales_h, gb + 32 + 2 * l, 2);
        for (int p = 0; p < 4; ++p) w.scales_l[p] = gb[64 + 16 * p + l];
    } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
        std::memcpy(&w.dmin, gb + 32 + 2 * l, 2);
        for (int p = 0; p < 12; ++p) w.scales[p] = gb[64 + 16 * p + l];
    } else if constexpr (T == DType::Q6_K) {
        for (int g = 0; g < 16; ++g) w.scales[g] = (int8_t)gb[32 + 16 * g + l];
    }
}

// Q6_K's row l of a sub-block, from (and back to) the 32 unsigned quants u of its elements: vectors
// 4 h + j (j < 3) in the low six bits of chunk 3 h + j, vector 4 h + 3 two bits a chunk above them.
void put_q6k_sub_block(uint8_t *sub, int l, const uint8_t *u) {
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 3; ++j)
            for (int b = 0; b < 4; ++b)
                sub[64 * (3 * h + j) + 4 * l + b] = (uint8_t)(u[16 * h + 4 * j + b] | ((u[16 * h + 12 + b] >> (2 * j)) & 3) << 6);
}
void get_q6k_sub_block(const uint8_t *sub, int l, uint8_t *u) {
    for (int h = 0; h < 2; ++h)
        for (int b = 0; b < 4; ++b) {
            u[16 * h + 12 + b] = 0;
            for (int j = 0; j < 3; ++j) {
                const uint8_t v = sub[64 * (3 * h + j) + 4 * l + b];
                u[16 * h + 4 * j + b] = v & 63;
                u[16 * h + 12 + b] |= (uint8_t)((v >> 6) << (2 * j));
            }
        }
}

// Row l's part of a sub-block, from the 32 unsigned quants u of its elements: the nibble bytes
// (byte j: elements j and 16 + j) in four-byte runs, one per chunk, and Q5's fifth bits (a
// little-endian word: byte b of a run is bits 8 b .. 8 b + 7).
template <DType T> void put_sub_block(uint8_t *sub, int l, const uint8_t *u) {
    if constexpr (T == DType::Q6_K) {
        put_q6k_sub_block(sub, l, u);
        return;
    }
    uint8_t nib[16];
    for (int j = 0; j < 16; ++j) nib[j] = (uint8_t)((u[j] & 15) | (u[j + 16] & 15) << 4);
    for (int c = 0; c < 4; ++c) std::memcpy(sub + 64 * c + 4 * l, nib + 4 * c, 4);
    if constexpr (Geom<T>::kHighBits > 0) {
        // Bit e of bit4 / bit5 = bit 4 / 5 of u[e]; byte b of a run gathers the bits of elements
        // b, b + 4, b + 8, ... (vectors k = 0, 1, 2, ...): one pext per byte.
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(u));
        const uint32_t bit4 = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(q, 3));
        uint32_t bits = 0;
        for (int b = 0; b < 4; ++b) bits |= _pext_u32(bit4, 0x11111111u << b) << (8 * b);
        std::memcpy(sub + kNibbleBytes + 4 * l, &bits, 4);
    }
}
template <DType T> void get_sub_block(const uint8_t *sub, int l, uint8_t *u) {
    if constexpr (T == DType::Q6_K) {
        get_q6k_sub_block(sub, l, u);
        return;
    }
    uint8_t nib[16];
    for (int c = 0; c < 4; ++c) std::memcpy(nib + 4 * c, sub + 64 * c + 4 * l, 4);
    for (int j = 0; j < 16; ++j) {
        u[j] = nib[j] & 15;
        u[j + 16] = nib[j] >> 4;
    }
    if constexpr (Geom<T>::kHighBits > 0) {
        uint32_t bits;
        std::memcpy(&bits, sub + kNibbleBytes + 4 * l, 4);
        for (int e = 0; e < 32; ++e) u[e] |= (uint8_t)(((bits >> (8 * (e % 4) + e / 4)) & 1) << 4);
    }
}

template <DType T> void repack_matrix(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t K) {
    using Block = typename Geom<T>::Block;
    constexpr int kElems = Geom<T>::kElems;
    const int64_t nb = K / kElems;
    const size_t row_bytes = (size_t)nb * sizeof(Block);
    const int64_t groups = (rows + kRows - 1) / kRows;
    uint8_t u[kElems];
    for (int64_t g = 0; g < groups; ++g) {
        const int n_rows = (int)std::min<int64_t>(kRows, rows - g * kRows);
        uint8_t *group = dst + (size_t)g * kRows * row_bytes;
        if (n_rows < kRows) std::memset(group, 0, kRows * row_bytes);  // padding rows stay zero (d = 0)
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t *gb = group + (size_t)b * kGroupBlock<T>;
            for (int l = 0; l < n_rows; ++l) {
                Block w;
                std::memcpy(&w, src + (size_t)(g * kRows + l) * row_bytes + (size_t)b * sizeof(Block), sizeof(Block));
                write_header<T>(gb, l, w);
                quants_of<T>(w, u);
                for (int s = 0; s < kSubBlocks<T>; ++s)
                    put_sub_block<T>(gb + Geom<T>::kHeader + (size_t)s * kSubBytes<T>, l, u + 32 * s);
            }
        }
    }
}

template <DType T> typename Geom<T>::Block unpack_block(const uint8_t *packed, int64_t row, int64_t b, int64_t K) {
    using Block = typename Geom<T>::Block;
    const size_t row_bytes = (size_t)(K / Geom<T>::kElems) * sizeof(Block);
    const int l = (int)(row % kRows);
    const uint8_t *gb = packed + (size_t)(row / kRows) * kRows * row_bytes + (size_t)b * kGroupBlock<T>;
    Block w{};
    read_header<T>(gb, l, w);
    uint8_t u[Geom<T>::kElems];
    for (int s = 0; s < kSubBlocks<T>; ++s) get_sub_block<T>(gb + Geom<T>::kHeader + (size_t)s * kSubBytes<T>, l, u + 32 * s);
    set_quants<T>(w, u);
    return w;
}

// Row `row` gathered back into GGUF blocks, then the GGUF row's dequantize_row: bit-exact.
template <DType T> void dequantize_matrix_row(const uint8_t *packed, int64_t row, float *dst, int64_t K) {
    constexpr int64_t kBatch = 8;
    typename Geom<T>::Block blocks[kBatch];
    const int64_t nb = K / Geom<T>::kElems;
    for (int64_t b0 = 0; b0 < nb; b0 += kBatch) {
        const int64_t n = std::min<int64_t>(kBatch, nb - b0);
        for (int64_t i = 0; i < n; ++i) blocks[i] = unpack_block<T>(packed, row, b0 + i, K);
        akunu::cpu::dequantize_row(T, blocks, dst + b0 * Geom<T>::kElems, n * Geom<T>::kElems);
    }
}

// ---- the GEMM ----

inline __m512i bcast4(const int8_t *p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
inline __m512i bytes(int v) { return _mm512_set1_epi8((char)v); }
// kIQ4Values + 128: IQ4's values as the unsigned bytes vpdpbusd takes.
struct IQ4UnsignedTable {
    alignas(16) uint8_t v[16];
    constexpr IQ4UnsignedTable() : v{} {
        for (int i = 0; i < 16; ++i) v[i] = (uint8_t)(kIQ4Values[i] + 128);
    }
};
constexpr IQ4UnsignedTable kIQ4Unsigned{};
// nib | (x & mask), one instruction.
inline __m512i or_masked(__m512i nib, __m512i x, __m512i mask) { return _mm512_ternarylogic_epi32(nib, x, mask, 0xF8); }

// Bit k of every byte of a 1-bit chunk moved to bit 4 (other bits left as they fall). 16-bit shifts
// by at most 4 never carry a neighbouring byte's bit into bit 4.
template <int K> inline __m512i bit_to_4(__m512i v) {
    if constexpr (K < 4) return _mm512_slli_epi16(v, 4 - K);
    else if constexpr (K == 4) return v;
    else return _mm512_srli_epi16(v, K - 4);
}
// Q6_K: the four vectors 4 h .. 4 h + 3 of a sub-block (u = 0..63 per byte) from its chunks
// 3 h .. 3 h + 2. Vector 4 h + 3's bit pairs sit at bits 6, 7 of the three chunks: 16-bit shifts
// bring them to 0-1, 2-3 and 4-5 (leaving a neighbouring byte's bits above them), two bit-selects
// merge them, and a mask clears bits 6, 7. 9 ops for 256 quants.
AKUNU_ALWAYS_INLINE void q6k_half_vectors(const uint8_t *sub, int h, __m512i (&v)[4]) {
    const __m512i c0 = _mm512_loadu_si512(sub + 64 * (3 * h)), c1 = _mm512_loadu_si512(sub + 64 * (3 * h + 1)),
                  c2 = _mm512_loadu_si512(sub + 64 * (3 * h + 2));
    v[0] = _mm512_and_si512(c0, bytes(63));
    v[1] = _mm512_and_si512(c1, bytes(63));
    v[2] = _mm512_and_si512(c2, bytes(63));
    // bit-select (0xE4): where the mask (third operand) is 1, the first operand's bit, else the
    // second's; the first operand is also the destination, so the mask constant is not copied.
    const __m512i low4 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(c0, 6), _mm512_srli_epi16(c1, 4), bytes(0x03), 0xE4);
    const __m512i all6 = _mm512_ternarylogic_epi32(low4, _mm512_srli_epi16(c2, 2), bytes(0x0F), 0xE4);
    v[3] = _mm512_and_si512(all6, bytes(63));
}

// A sub-block's integer dot per row, 128 x (high digits' dots) + (low digits' dots), both halves.
inline __m512i digit_sum(const __m512i (&hi)[2], const __m512i (&lo)[2]) {
    return _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(hi[0], hi[1]), 7), _mm512_add_epi32(lo[0], lo[1]));
}

// The factors of one group-block, as 16-lane float vectors (lane = row), ready per sub-block. The
// quants' offsets are already in the dots (sub_blocks starts the low digits' sums at -offset x sum(q)).
template <DType T> struct Factors;

template <> struct Factors<DType::Q5_0> {
    __m512 d;
    explicit Factors(const uint8_t *gb) : d(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb)))) {}
    // One activation row's sub-block: acc += a.d * d * (isum - 16 qsum).
    AKUNU_ALWAYS_INLINE void accumulate(const __m512i (&hi)[2], const __m512i (&lo)[2], const BlockQ8x2Act &a, __m512 &acc) const {
        const __m512i isum = digit_sum(hi, lo);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(a.d)), acc);
    }
};

template <> struct Factors<DType::Q5_1> {
    __m512 d, m;
    explicit Factors(const uint8_t *gb)
        : d(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb)))),
          m(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb + 32)))) {}
    // One activation row's block: acc += a.d * d * isum + m * a.sum.
    AKUNU_ALWAYS_INLINE void accumulate(const __m512i (&hi)[2], const __m512i (&lo)[2], const BlockQ8x2Act &a, __m512 &acc) const {
        const __m512i isum = digit_sum(hi, lo);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(a.d)), acc);
        acc = _mm512_fmadd_ps(m, _mm512_set1_ps(a.sum), acc);
    }
};

// IQ4: the looked-up bytes are kIQ4Values + 128 (offset 128).
template <> struct Factors<DType::IQ4_NL> {
    __m512 d;
    explicit Factors(const uint8_t *gb) : d(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb)))) {}
    AKUNU_ALWAYS_INLINE void accumulate(const __m512i (&hi)[2], const __m512i (&lo)[2], const BlockQ8x2Act &a, __m512 &acc) const {
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(digit_sum(hi, lo)), _mm512_mul_ps(d, _mm512_set1_ps(a.d)), acc);
    }
};

// IQ4_XS: per 32 elements the scale d (ls - 32), ls 6 bits: low 4 in nibble j % 2 of scales_l[j / 2],
// high 2 in bits 2 j of scales_h.
template <> struct Factors<DType::IQ4_XS> {
    __m512 d;
    __m512i scales_h;   // per row, as int32
    const uint8_t *scales_l;  // plane p: scales_l[p] of rows 0..15
    explicit Factors(const uint8_t *gb)
        : d(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb)))),
          scales_h(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb + 32)))),
          scales_l(gb + 64) {}
    template <int S> __m512 group_scale() const {
        const __m512i low = _mm512_and_si512(
            _mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(scales_l + 16 * (S / 2)))), 4 * (S % 2)),
            _mm512_set1_epi32(15));
        const __m512i high = _mm512_and_si512(_mm512_srli_epi32(scales_h, 2 * S), _mm512_set1_epi32(3));
        const __m512i ls = _mm512_or_si512(low, _mm512_slli_epi32(high, 4));
        return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(ls, _mm512_set1_epi32(32))));
    }
    AKUNU_ALWAYS_INLINE void accumulate(const __m512i (&hi)[2], const __m512i (&lo)[2], const BlockQ8x2Act &a, __m512 &acc,
                                        __m512 scale) const {
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(digit_sum(hi, lo)), _mm512_mul_ps(scale, _mm512_set1_ps(a.d)), acc);
    }
};

// Q4_K / Q5_K: the 6-bit sc and m of sub-blocks 0..3 and 4..7 as bytes, lane j of a vector holding
// sub-block j (mod 4) of the 16 rows; unpacked from GGUF's 12 bytes (kquant_scale_min) for 16 rows at once.
struct ScaleMinK {
    __m512 d, dmin;
    __m512i sc03, m03, sc47, m47;
    explicit ScaleMinK(const uint8_t *gb) {
        d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb)));
        dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb + 32)));
        const __m512i s03 = _mm512_loadu_si512(gb + 64), s47 = _mm512_loadu_si512(gb + 128),
                      s811 = _mm512_loadu_si512(gb + 192);
        sc03 = _mm512_and_si512(s03, bytes(63));
        m03 = _mm512_and_si512(s47, bytes(63));
        // sc_j = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4; m_j = (s[j + 4] >> 4) | (s[j] >> 6) << 4 (j >= 4)
        const __m512i top_sc = _mm512_and_si512(_mm512_srli_epi16(s03, 2), bytes(0x30));
        const __m512i top_m = _mm512_and_si512(_mm512_srli_epi16(s47, 2), bytes(0x30));
        sc47 = or_masked(top_sc, s811, bytes(15));
        m47 = or_masked(top_m, _mm512_srli_epi16(s811, 4), bytes(15));
    }
    template <int S> static __m512 lane_as_floats(__m512i v) {
        return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, S % 4)));
    }
    // One activation row's sub-block S: acc += a.d * (d sc_S) * isum - (dmin m_S) * a.sum.
    AKUNU_ALWAYS_INLINE void accumulate(const __m512i (&hi)[2], const __m512i (&lo)[2], const BlockQ8x2Act &a,
                                        __m512 &acc, __m512 scale, __m512 min) const {
        const __m512i isum = digit_sum(hi, lo);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(scale, _mm512_set1_ps(a.d)), acc);
        acc = _mm512_fnmadd_ps(min, _mm512_set1_ps(a.sum), acc);
    }
};

template <> struct Factors<DType::Q4_K> : ScaleMinK {
    using ScaleMinK::ScaleMinK;
};
template <> struct Factors<DType::Q5_K> : ScaleMinK {
    using ScaleMinK::ScaleMinK;
};

// Q6_K: value d sc_g (u - 32) per 16 elements, against activations with one d per superblock
// (quantize_row_act_q8x2_superblocks, |q| <= 2047: docs/adr/0027). The int8 scales are applied in
// integers and the whole superblock summed in int32 (exact: at most 256 x 4096 x 2047 < 2^31, as in
// r16_panel_gemm.cpp, whose integers and float steps these are), so each activation row costs one
// multiply and one FMA a superblock (tile()). On Zen 4 float multiplies and FMAs share vpdpbusd's
// pipes and vpmulld half-shares them (tools/vnni_probe.c).
template <> struct Factors<DType::Q6_K> {
    __m512 d;
    const int8_t *scales;  // plane g: the int8 scale of 16-element group g, per row
    explicit Factors(const uint8_t *gb)
        : d(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb)))),
          scales(reinterpret_cast<const int8_t *>(gb + 32)) {}
    __m512i group_scale(int g) const {
        return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(scales + 16 * g)));
    }
    // One activation row's sub-block: isum += sc_0 (isum_0 - 32 qsum_0) + sc_1 (isum_1 - 32 qsum_1).
    AKUNU_ALWAYS_INLINE void accumulate(const __m512i (&hi)[2], const __m512i (&lo)[2], __m512i &isum, __m512i scale0,
                                        __m512i scale1) const {
        const __m512i i0 = _mm512_add_epi32(_mm512_slli_epi32(hi[0], 7), lo[0]);
        const __m512i i1 = _mm512_add_epi32(_mm512_slli_epi32(hi[1], 7), lo[1]);
        isum = _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(i0, scale0), _mm512_mullo_epi32(i1, scale1)));
        // isum is needed here, not at the superblock's end: without this GCC sinks every sub-block's
        // sums to the end and spills them (with one activation row, ~50 stack loads and stores a superblock).
        __asm__("" : "+v"(isum));
    }
};

// ---- int16 panels for the prefill GEMM (r16_panel_gemm.cpp) ----

// Q6_K: one group-block as sc_g (u - 32) per weight (|value| <= 4096), 16 vectors a sub-block, vector p
// holding elements 2p, 2p + 1 of row l as the int16 pair of lane l; and d per row. vpmaddubsw
// multiplies a chunk's unsigned quants by the scale bytes (sc, 0, sc, 0) and (0, sc, 0, sc) of each
// row, giving the even and the odd elements as words; the -32 sc words are subtracted and the words
// interleaved into pairs.
void q6k_group_block_panel(const uint8_t *gb, __m512i *panel, float *row_d) {
    _mm512_storeu_ps(row_d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb))));
    const int8_t *scales = reinterpret_cast<const int8_t *>(gb + 32);
    const __m512i low_byte = _mm512_set1_epi32(0xFF), low_word = _mm512_set1_epi32(0xFFFF);
    for (int S = 0; S < 8; ++S) {
        const uint8_t *sub = gb + Geom<DType::Q6_K>::kHeader + S * kSubBytes<DType::Q6_K>;
        __m512i even[2], odd[2], offset[2];  // per half h: elements 16 h .. 16 h + 15, scale group 2 S + h
        for (int h = 0; h < 2; ++h) {
            const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(scales + 16 * (2 * S + h))));
            const __m512i sc_byte = _mm512_and_si512(sc, low_byte);
            even[h] = _mm512_or_si512(sc_byte, _mm512_slli_epi32(sc_byte, 16));
            odd[h] = _mm512_slli_epi32(even[h], 8);
            const __m512i off = _mm512_and_si512(_mm512_slli_epi32(sc, 5), low_word);
            offset[h] = _mm512_or_si512(off, _mm512_slli_epi32(off, 16));
        }
        __m512i *out = panel + 16 * S;
        // Elements 4 c .. 4 c + 3 of half h (bytes of v) into pairs 8 h + 2 c and 8 h + 2 c + 1.
        const auto put = [&](__m512i v, int h, int c) {
            const __m512i e02 = _mm512_sub_epi16(_mm512_maddubs_epi16(v, even[h]), offset[h]);
            const __m512i e13 = _mm512_sub_epi16(_mm512_maddubs_epi16(v, odd[h]), offset[h]);
            out[8 * h + 2 * c] = _mm512_mask_blend_epi16(0xAAAAAAAAu, e02, _mm512_slli_epi32(e13, 16));
            out[8 * h + 2 * c + 1] = _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_srli_epi32(e02, 16), e13);
        };
        for (int h = 0; h < 2; ++h) {
            __m512i v[4];
            q6k_half_vectors(sub, h, v);
            for (int c = 0; c < 4; ++c) put(v[c], h, c);
        }
    }
}

#ifndef AKUNU_R16_TILE_M
#define AKUNU_R16_TILE_M 4
#endif
constexpr int kTileM = AKUNU_R16_TILE_M;

// The dots of nibble chunk C of a sub-block (vectors C and 4 + C) with RM activation rows.
template <DType T, int RM, int C>
AKUNU_ALWAYS_INLINE void chunk_dots(const uint8_t *sub, __m512i bits0, const BlockQ8x2Act *const (&a)[RM],
                                    __m512i (&hi)[RM][2], __m512i (&lo)[RM][2]) {
    const __m512i w = _mm512_loadu_si512(sub + 64 * C);
    __m512i v_lo = _mm512_and_si512(w, bytes(15));
    __m512i v_hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), bytes(15));
    if constexpr (kLookup<T>) {
        const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i *>(kIQ4Unsigned.v)));
        v_lo = _mm512_shuffle_epi8(table, v_lo);
        v_hi = _mm512_shuffle_epi8(table, v_hi);
    } else if constexpr (Geom<T>::kHighBits == 1) {
        v_lo = or_masked(v_lo, bit_to_4<C>(bits0), bytes(0x10));
        v_hi = or_masked(v_hi, bit_to_4<4 + C>(bits0), bytes(0x10));
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) {
        hi[m][0] = _mm512_dpbusd_epi32(hi[m][0], v_lo, bcast4(a[m]->hi + 4 * C));
        lo[m][0] = _mm512_dpbusd_epi32(lo[m][0], v_lo, bcast4(a[m]->lo + 4 * C));
        hi[m][1] = _mm512_dpbusd_epi32(hi[m][1], v_hi, bcast4(a[m]->hi + 16 + 4 * C));
        lo[m][1] = _mm512_dpbusd_epi32(lo[m][1], v_hi, bcast4(a[m]->lo + 16 + 4 * C));
    }
}

// Q6_K: the dots of half H of a sub-block (vectors 4 H .. 4 H + 3) with RM activation rows.
template <int RM, int H>
AKUNU_ALWAYS_INLINE void q6k_half_dots(const uint8_t *sub, const BlockQ8x2Act *const (&a)[RM], __m512i (&hi)[RM][2],
                                       __m512i (&lo)[RM][2]) {
    __m512i v[4];
    q6k_half_vectors(sub, H, v);
    AKUNU_UNROLL
    for (int k = 0; k < 4; ++k) {
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) {
            hi[m][H] = _mm512_dpbusd_epi32(hi[m][H], v[k], bcast4(a[m]->hi + 16 * H + 4 * k));
            lo[m][H] = _mm512_dpbusd_epi32(lo[m][H], v[k], bcast4(a[m]->lo + 16 * H + 4 * k));
        }
    }
}

// Sub-block S of a group-block (and, recursively, the ones after it) into acc: its integer dots
// (hi[m][h] / lo[m][h]: the 16 rows' dots of elements 16 h .. 16 h + 15 with activation row m's
// high / low digit), then the format's factors.
template <DType T, int RM, int S, class Acc>
AKUNU_ALWAYS_INLINE void sub_blocks(const Factors<T> &f, const uint8_t *gb, const BlockQ8x2Act *const (&xb)[RM],
                                    Acc (&acc)[RM]) {
    const uint8_t *sub = gb + Geom<T>::kHeader + S * kSubBytes<T>;
    const BlockQ8x2Act *a[RM];
    __m512i hi[RM][2], lo[RM][2];
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) {
        a[m] = xb[m] + S;
        // The quants' offset (value = factor x (u - offset)) starts the low digits' sums at
        // -offset x (sum of q): per 16 elements where the scales are per 16 (Q6_K).
        hi[m][0] = hi[m][1] = _mm512_setzero_si512();
        constexpr int32_t kOffset = kQuantOffset<T>;
        if constexpr (T == DType::Q6_K) {
            lo[m][0] = _mm512_set1_epi32(-kOffset * a[m]->qsum_lo);
            lo[m][1] = _mm512_set1_epi32(-kOffset * (a[m]->qsum - a[m]->qsum_lo));
        } else {
            lo[m][0] = kOffset ? _mm512_set1_epi32(-kOffset * a[m]->qsum) : _mm512_setzero_si512();
            lo[m][1] = _mm512_setzero_si512();
        }
    }
    if constexpr (T == DType::Q6_K) {
        q6k_half_dots<RM, 0>(sub, a, hi, lo);
        q6k_half_dots<RM, 1>(sub, a, hi, lo);
    } else {
        const __m512i bits0 = Geom<T>::kHighBits ? _mm512_loadu_si512(sub + kNibbleBytes) : _mm512_setzero_si512();
        chunk_dots<T, RM, 0>(sub, bits0, a, hi, lo);
        chunk_dots<T, RM, 1>(sub, bits0, a, hi, lo);
        chunk_dots<T, RM, 2>(sub, bits0, a, hi, lo);
        chunk_dots<T, RM, 3>(sub, bits0, a, hi, lo);
    }
    if constexpr (T == DType::Q5_0 || T == DType::Q5_1 || T == DType::IQ4_NL) {
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) f.accumulate(hi[m], lo[m], *a[m], acc[m]);
    } else if constexpr (T == DType::IQ4_XS) {
        const __m512 scale = f.template group_scale<S>();
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) f.accumulate(hi[m], lo[m], *a[m], acc[m], scale);
    } else if constexpr (T == DType::Q6_K) {
        const __m512i scale0 = f.group_scale(2 * S), scale1 = f.group_scale(2 * S + 1);
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) f.accumulate(hi[m], lo[m], acc[m], scale0, scale1);
    } else {
        const __m512 scale = _mm512_mul_ps(f.d, ScaleMinK::lane_as_floats<S>(S < 4 ? f.sc03 : f.sc47));
        const __m512 min = _mm512_mul_ps(f.dmin, ScaleMinK::lane_as_floats<S>(S < 4 ? f.m03 : f.m47));
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) f.accumulate(hi[m], lo[m], *a[m], acc[m], scale, min);
    }
    if constexpr (S + 1 < kSubBlocks<T>) sub_blocks<T, RM, S + 1, Acc>(f, gb, xb, acc);
}

// One group of 16 rows against RM activation rows: out[m] lane l = dot(row l, activation row m).
template <DType T, int RM>
void tile(const uint8_t *group, const uint8_t *x, size_t x_row_bytes, int64_t nb, __m512 *out) {
    const BlockQ8x2Act *xr[RM];
    __m512 acc[RM];
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) {
        xr[m] = reinterpret_cast<const BlockQ8x2Act *>(x + (size_t)m * x_row_bytes);
        acc[m] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *gb = group + (size_t)b * kGroupBlock<T>;
        const BlockQ8x2Act *xb[RM];
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) xb[m] = xr[m] + b * kSubBlocks<T>;
        const Factors<T> f(gb);
        if constexpr (T == DType::Q6_K) {  // the superblock's integer sums, then a.d and d once (see Factors<Q6_K>)
            __m512i isum[RM];
            AKUNU_UNROLL
            for (int m = 0; m < RM; ++m) isum[m] = _mm512_setzero_si512();
            sub_blocks<T, RM, 0>(f, gb, xb, isum);
            AKUNU_UNROLL
            for (int m = 0; m < RM; ++m)
                acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(isum[m]), _mm512_set1_ps(xb[m]->d)), f.d, acc[m]);
        } else {
            sub_blocks<T, RM, 0>(f, gb, xb, acc);
        }
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) out[m] = acc[m];
}

template <DType T> struct TileTable {
    R16TileFn fn[kTileM];
    template <int RM> constexpr void fill() {
        fn[RM - 1] = &tile<T, RM>;
        if constexpr (RM > 1) fill<RM - 1>();
    }
    constexpr TileTable() : fn{} { fill<kTileM>(); }
};

template <DType T> void gemm_matrix_rows(const GemmArgs &a, int64_t n_begin, int64_t n_end) {
    if (has_panel(T) && a.M >= kPanelMinRows) return panel_gemm_rows(a, n_begin, n_end);
    static constexpr TileTable<T> table{};
    r16_gemm_rows<kTileM>(a, n_begin, n_end, a.K / Geom<T>::kElems, table.fn);
}

}  // namespace

bool has_panel(DType t) { return t == DType::Q6_K; }

void group_panel(DType t, const uint8_t *group, int64_t K, int16_t *panel, float *row_d) {
    if (t != DType::Q6_K) return;  // callers ask has_panel first
    for (int64_t b = 0; b < K / QK_K; ++b)
        q6k_group_block_panel(group + (size_t)b * kGroupBlock<DType::Q6_K>, reinterpret_cast<__m512i *>(panel) + 128 * b,
                              row_d + 16 * b);
}

bool handles(DType t) {
    switch (t) {
        case DType::Q5_0: case DType::Q5_1: case DType::IQ4_NL: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
        case DType::IQ4_XS: return true;
        default: return false;
    }
}

size_t repacked_bytes(DType t, int64_t rows, int64_t K) {
    const DTypeInfo *info = dtype_info((uint32_t)t);
    const size_t padded_rows = (size_t)((rows + kRows - 1) / kRows) * kRows;
    return handles(t) && info ? padded_rows * row_bytes(*info, (uint64_t)K) : 0;
}

void repack(DType t, const uint8_t *src, uint8_t *dst, int64_t rows, int64_t K) {
    switch (t) {
        case DType::Q5_0: return repack_matrix<DType::Q5_0>(src, dst, rows, K);
        case DType::Q5_1: return repack_matrix<DType::Q5_1>(src, dst, rows, K);
        case DType::IQ4_NL: return repack_matrix<DType::IQ4_NL>(src, dst, rows, K);
        case DType::IQ4_XS: return repack_matrix<DType::IQ4_XS>(src, dst, rows, K);
        case DType::Q4_K: return repack_matrix<DType::Q4_K>(src, dst, rows, K);
        case DType::Q5_K: return repack_matrix<DType::Q5_K>(src, dst, rows, K);
        case DType::Q6_K: return repack_matrix<DType::Q6_K>(src, dst, rows, K);
        default: return;
    }
}

void dequantize_row(DType t, const uint8_t *packed, int64_t row, float *dst, int64_t K) {
    switch (t) {
        case DType::Q5_0: return dequantize_matrix_row<DType::Q5_0>(packed, row, dst, K);
        case DType::Q5_1: return dequantize_matrix_row<DType::Q5_1>(packed, row, dst, K);
        case DType::IQ4_NL: return dequantize_matrix_row<DType::IQ4_NL>(packed, row, dst, K);
        case DType::IQ4_XS: return dequantize_matrix_row<DType::IQ4_XS>(packed, row, dst, K);
        case DType::Q4_K: return dequantize_matrix_row<DType::Q4_K>(packed, row, dst, K);
        case DType::Q5_K: return dequantize_matrix_row<DType::Q5_K>(packed, row, dst, K);
        case DType::Q6_K: return dequantize_matrix_row<DType::Q6_K>(packed, row, dst, K);
        default: return;
    }
}

void gemm_rows(const GemmArgs &args, int64_t n_begin, int64_t n_end) {
    switch (args.type) {
        case DType::Q5_0: return gemm_matrix_rows<DType::Q5_0>(args, n_begin, n_end);
        case DType::Q5_1: return gemm_matrix_rows<DType::Q5_1>(args, n_begin, n_end);
        case DType::IQ4_NL: return gemm_matrix_rows<DType::IQ4_NL>(args, n_begin, n_end);
        case DType::IQ4_XS: return gemm_matrix_rows<DType::IQ4_XS>(args, n_begin, n_end);
        case DType::Q4_K: return gemm_matrix_rows<DType::Q4_K>(args, n_begin, n_end);
        case DType::Q5_K: return gemm_matrix_rows<DType::Q5_K>(args, n_begin, n_end);
        case DType::Q6_K: return gemm_matrix_rows<DType::Q6_K>(args, n_begin, n_end);
        default: return;
    }
}

}  // namespace akunu::cpu::r16k

#endif  // AKUNU_CPU_VNNI512
