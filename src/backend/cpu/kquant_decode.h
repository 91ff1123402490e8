// Block decoders for kquant_kernels.cpp: one Format<T> per dtype turns a GGUF block into int8
// quants in element order plus a scale and a min per 16 elements, such that
//     value[e] = scale[e / 16] * q[e] - min[e / 16]
// is, operation for operation in float32, what gguf-py's dequantize computes (scale and min are
// already the products d * sub_scale and dmin * sub_min, rounded to float as gguf-py rounds them;
// Q5_1's "+ m" is "- (-m)", the same IEEE operation). So dequantization from a decoded block is
// bit-exact, and the GEMM can run integer dots on q.
//
// Layout facts: core/kquant_blocks.h. Every format has a scalar decode; the common ones (Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS) also an AVX2 one producing the same bytes.
#pragma once
#include <cstdint>
#include <cstring>

#include "backend/cpu/convert.h"
#include "backend/cpu/simd_config.h"
#include "core/dtype.h"
#include "core/kquant_blocks.h"

namespace akunu::cpu::kquant {

// Slot of 16-element group g in Decoded::scale / min. Superblocks store their 16 groups in the
// lane order of the AVX2 dot's group sums (kquant_kernels.cpp): vector A (slots 0..7) holds groups
// 0, 2, 4, 6 | 1, 3, 5, 7 and vector B (slots 8..15) groups 8, 10, 12, 14 | 9, 11, 13, 15, i.e. the
// first / second 16 elements of 32-element groups 0..3 and 4..7. 32-element blocks: slot g.
template <int N> constexpr int group_slot(int g) { return N == QK_K ? 8 * (g / 8) + 4 * (g % 2) + (g / 2) % 4 : g; }

template <int N> struct Decoded {
    static constexpr int kElems = N;
    alignas(32) int8_t q[N];
    alignas(32) float scale[N / 16];  // by group_slot
    alignas(32) float min[N / 16];
};

inline uint16_t read_u16(const uint8_t *p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
#if defined(AKUNU_CPU_AVX2)
// Exact for every finite, infinite and subnormal half; a signalling NaN comes out quiet, which no
// result can tell apart (a NaN scale makes NaN values either way).
inline float read_fp16(const uint8_t *p) { return _cvtsh_ss(read_u16(p)); }
#else
inline float read_fp16(const uint8_t *p) { return fp16_to_f32(read_u16(p)); }
#endif

template <int N> inline void set_group16(Decoded<N> &o, int g, float scale, float min) {
    o.scale[group_slot<N>(g)] = scale;
    o.min[group_slot<N>(g)] = min;
}
// Per-32 factors written to both 16-element groups.
template <int N> inline void set_group32(Decoded<N> &o, int j, float scale, float min) {
    set_group16(o, 2 * j, scale, min);
    set_group16(o, 2 * j + 1, scale, min);
}

#if defined(AKUNU_CPU_AVX2)
inline __m256i and8(__m256i v, int mask) { return _mm256_and_si256(v, _mm256_set1_epi8((char)mask)); }
// 16 nibble bytes -> 32 bytes in Q4_0 element order (low nibbles, then high nibbles) through `table`.
// (One 32-byte store: the GEMM reloads it as one vector, and store forwarding needs matching sizes.
// For the same reason the decoders below write scale / min as whole vectors.)
inline void iq4_lookup16(const uint8_t *qs, int8_t *out) {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i *>(kIQ4Values));
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
    const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0f)), hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f));
    _mm256_store_si256(reinterpret_cast<__m256i *>(out), _mm256_set_m128i(_mm_shuffle_epi8(table, hi), _mm_shuffle_epi8(table, lo)));
}

// 8 int8 factors (low half of v) -> d * factor as floats.
inline __m256 scaled_i8(__m128i v, float d) { return _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))); }

// Superblock factors to group_slot order: per 16-element group (g0_7 = groups 0..7, g8_15 = 8..15) ...
inline void store_groups16(float *dst, __m256 g0_7, __m256 g8_15) {
    const __m256i idx = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    _mm256_store_ps(dst, _mm256_permutevar8x32_ps(g0_7, idx));
    _mm256_store_ps(dst + 8, _mm256_permutevar8x32_ps(g8_15, idx));
}
// ... or per 32-element group j = 0..7 (both halves get it).
inline void store_groups32(float *dst, __m256 g) {
    _mm256_store_ps(dst, _mm256_permutevar8x32_ps(g, _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3)));
    _mm256_store_ps(dst + 8, _mm256_permutevar8x32_ps(g, _mm256_setr_epi32(4, 5, 6, 7, 4, 5, 6, 7)));
}
#endif

template <DType T> struct Format;

// ---- 32-element blocks ----

// Q5_0 / Q5_1: the 5th bit of element e is bit e of the u32 qh.
template <int kOffset> inline void decode_q5_quants(const uint8_t *qh_bytes, const uint8_t *qs, int8_t *q) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
#if defined(AKUNU_CPU_AVX2)
    // Byte e gets byte e / 8 of qh, then its bit e % 8 becomes 0x10 (compare against a bit mask).
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f)), _mm_and_si128(v, _mm_set1_epi8(0x0f)));
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                                                                              2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i high = and8(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bits), bits), 0x10);
    _mm256_store_si256(reinterpret_cast<__m256i *>(q), _mm256_sub_epi8(_mm256_or_si256(nib, high), _mm256_set1_epi8(kOffset)));
    return;
#endif
    for (int j = 0; j < 16; ++j) {
        q[j] = (int8_t)(((qs[j] & 15) | ((qh >> j) & 1) << 4) - kOffset);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - kOffset);
    }
}

template <> struct Format<DType::Q5_0> {
    using Block = BlockQ5_0;
    using Dec = Decoded<32>;
    static constexpr bool kGroup16 = false, kHasMin = false, kMin16 = false;
    static void decode(const uint8_t *p, Decoded<32> &o) {
        decode_q5_quants<16>(p + 2, p + 6, o.q);
        set_group32(o, 0, read_fp16(p), 0.0f);
    }
};

template <> struct Format<DType::Q5_1> {
    using Block = BlockQ5_1;
    using Dec = Decoded<32>;
    static constexpr bool kGroup16 = false, kHasMin = true, kMin16 = false;
    static void decode(const uint8_t *p, Decoded<32> &o) {
        decode_q5_quants<0>(p + 4, p + 8, o.q);
        set_group32(o, 0, read_fp16(p), -read_fp16(p + 2));
    }
};

template <> struct Format<DType::IQ4_NL> {
    using Block = BlockIQ4_NL;
    using Dec = Decoded<32>;
    static constexpr bool kGroup16 = false, kHasMin = false, kMin16 = false;
    static void decode(const uint8_t *p, Decoded<32> &o) {
#if defined(AKUNU_CPU_AVX2)
        iq4_lookup16(p + 2, o.q);
#else
        for (int j = 0; j < 16; ++j) {
            o.q[j] = kIQ4Values[p[2 + j] & 15];
            o.q[j + 16] = kIQ4Values[p[2 + j] >> 4];
        }
#endif
        set_group32(o, 0, read_fp16(p), 0.0f);
    }
};

// ---- 256-element superblocks ----
// Each format: factors(p, o) writes scale / min; decode(p, o) = factors + all quants
// (decode_superblock). With AVX2,
// quants(p, sink) hands the int8 quants of block j (elements 32 j ..) to sink(j, vector) in
// registers: the GEMM dots them, or widens them once for many activation rows, without first
// storing the int8 copy.

#if defined(AKUNU_CPU_AVX2)
// Store the quants of each block (decode's use of quants()).
template <class F> inline void store_quants(const uint8_t *p, Decoded<QK_K> &o) {
    F::quants(p, [&](int j, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i *>(o.q + 32 * j), v); });
}
// Q2_K / Q3_K low bits: element 128 h + 32 s + l is bits 2s..2s+1 of qs[32 h + l]; sink(4 h + s, bits).
template <class Sink> inline void two_bit_blocks(const uint8_t *qs, Sink &&sink) {
    AKUNU_UNROLL
    for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qs + 32 * h));
        AKUNU_UNROLL
        for (int s = 0; s < 4; ++s) sink(4 * h + s, and8(_mm256_srli_epi16(v, 2 * s), 3));
    }
}
// Q4_K / Q5_K nibbles: element 64 c + 32 h + l is nibble h of qs[32 c + l]; sink(2 c + h, nibbles).
template <class Sink> inline void k_nibble_blocks(const uint8_t *qs, Sink &&sink) {
    AKUNU_UNROLL
    for (int c = 0; c < 4; ++c) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qs + 32 * c));
        sink(2 * c, and8(w, 0x0f));
        sink(2 * c + 1, and8(_mm256_srli_epi16(w, 4), 0x0f));
    }
}
#endif

// decode(p, o) of a superblock format F: factors, then every quant (F::quants through registers
// with AVX2, else F::quants_scalar, the plain reading of the layout).
template <class F> inline void decode_superblock(const uint8_t *p, Decoded<QK_K> &o) {
    F::factors(p, o);
#if defined(AKUNU_CPU_AVX2)
    store_quants<F>(p, o);
#else
    F::quants_scalar(p, o.q);
#endif
}

inline void decode_2bit_scalar(const uint8_t *qs, int8_t *q) {
    for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s)
            for (int l = 0; l < 32; ++l) q[128 * h + 32 * s + l] = (int8_t)((qs[32 * h + l] >> (2 * s)) & 3);
}

template <> struct Format<DType::Q2_K> {
    using Block = BlockQ2_K;
    using Dec = Decoded<256>;
    static constexpr bool kGroup16 = true, kHasMin = true, kMin16 = true;
    static void factors(const uint8_t *p, Dec &o) {
        const BlockQ2_K *b = reinterpret_cast<const BlockQ2_K *>(p);
        const float d = read_fp16(p + 80), dmin = read_fp16(p + 82);
#if defined(AKUNU_CPU_AVX2)
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b->scales));
        const __m128i lo = _mm_and_si128(sc, _mm_set1_epi8(15)), hi = _mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(15));
        store_groups16(o.scale, scaled_i8(lo, d), scaled_i8(_mm_srli_si128(lo, 8), d));
        store_groups16(o.min, scaled_i8(hi, dmin), scaled_i8(_mm_srli_si128(hi, 8), dmin));
#else
        for (int g = 0; g < 16; ++g) set_group16(o, g, d * (float)(b->scales[g] & 15), dmin * (float)(b->scales[g] >> 4));
#endif
    }
#if defined(AKUNU_CPU_AVX2)
    template <class Sink> static void quants(const uint8_t *p, Sink &&sink) { two_bit_blocks(p + 16, sink); }
#endif
    static void quants_scalar(const uint8_t *p, int8_t *q) { decode_2bit_scalar(p + 16, q); }
    static void decode(const uint8_t *p, Dec &o) { decode_superblock<Format>(p, o); }
};

template <> struct Format<DType::Q3_K> {
    using Block = BlockQ3_K;
    using Dec = Decoded<256>;
    static constexpr bool kGroup16 = true, kHasMin = false, kMin16 = false;
    static void factors(const uint8_t *p, Dec &o) {
        const BlockQ3_K *b = reinterpret_cast<const BlockQ3_K *>(p);
        const float d = read_fp16(p + 108);
#if defined(AKUNU_CPU_AVX2)
        // The 16 6-bit scales as bytes, through u64 / u32 arithmetic (same fields as the scalar loop).
        uint64_t lo;
        uint32_t hi;
        std::memcpy(&lo, b->scales, 8);
        std::memcpy(&hi, b->scales + 8, 4);
        const uint64_t m4 = 0x0f0f0f0f0f0f0f0full, m2 = 0x03030303u;
        const uint64_t hi0_7 = (hi & m2) | (uint64_t)((hi >> 2) & m2) << 32, hi8_15 = ((hi >> 4) & m2) | (uint64_t)((hi >> 6) & m2) << 32;
        const __m128i sc = _mm_sub_epi8(_mm_set_epi64x((long long)(((lo >> 4) & m4) | hi8_15 << 4), (long long)((lo & m4) | hi0_7 << 4)),
                                        _mm_set1_epi8(32));
        store_groups16(o.scale, scaled_i8(sc, d), scaled_i8(_mm_srli_si128(sc, 8), d));
        _mm256_store_ps(o.min, _mm256_setzero_ps());
        _mm256_store_ps(o.min + 8, _mm256_setzero_ps());
#else
        for (int g = 0; g < 16; ++g) {
            const int lo = (b->scales[g % 8] >> (4 * (g / 8))) & 15;
            const int hi = (b->scales[8 + g % 4] >> (2 * (g / 4))) & 3;
            set_group16(o, g, d * (float)((lo | hi << 4) - 32), 0.0f);
        }
#endif
    }
#if defined(AKUNU_CPU_AVX2)
    // The high bit *clear* subtracts 4 (gguf-py: "the offset is zero when the bitmask is 1"):
    // q = low | 4 * bit(j of hmask[l]) - 4.
    template <class Sink> static void quants(const uint8_t *p, Sink &&sink) {
        const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
        two_bit_blocks(p + 32, [&](int j, __m256i low) {
            const __m256i bit4 = _mm256_slli_epi16(and8(_mm256_srli_epi16(hb, j), 1), 2);
            sink(j, _mm256_sub_epi8(_mm256_or_si256(low, bit4), _mm256_set1_epi8(4)));
        });
    }
#endif
    static void quants_scalar(const uint8_t *p, int8_t *q) {
        const uint8_t *hmask = p;
        decode_2bit_scalar(p + 32, q);
        for (int e = 0; e < QK_K; ++e) q[e] = (int8_t)(q[e] - (((hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4));
    }
    static void decode(const uint8_t *p, Dec &o) { decode_superblock<Format>(p, o); }
};

// Q4_K / Q5_K factors: 6-bit scale and min per 32-element group.
inline void decode_k_scale_min(const uint8_t *p, Decoded<256> &o) {
    const float d = read_fp16(p), dmin = read_fp16(p + 2);
#if defined(AKUNU_CPU_AVX2)
    // kquant_scale_min on four groups at once: the 12 bytes as three u32 words.
    uint32_t w[3];
    std::memcpy(w, p + 4, 12);
    const uint32_t sc_lo = w[0] & 0x3f3f3f3fu, m_lo = w[1] & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 6) & 0x03030303u) << 4;
    const __m256 sc = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)sc_hi, (int)sc_lo))));
    const __m256 mn = _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)m_hi, (int)m_lo))));
    store_groups32(o.scale, sc);
    store_groups32(o.min, mn);
#else
    for (int j = 0; j < 8; ++j) {
        int sc = 0, m = 0;
        kquant_scale_min(p + 4, j, &sc, &m);
        set_group32(o, j, d * (float)sc, dmin * (float)m);
    }
#endif
}

inline void decode_k_nibbles_scalar(const uint8_t *qs, int8_t *q) {
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            q[64 * c + l] = (int8_t)(qs[32 * c + l] & 15);
            q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
        }
}

template <> struct Format<DType::Q4_K> {
    using Block = BlockQ4_K;
    using Dec = Decoded<256>;
    static constexpr bool kGroup16 = false, kHasMin = true, kMin16 = false;
    static void factors(const uint8_t *p, Dec &o) { decode_k_scale_min(p, o); }
#if defined(AKUNU_CPU_AVX2)
    template <class Sink> static void quants(const uint8_t *p, Sink &&sink) { k_nibble_blocks(p + 16, sink); }
#endif
    static void quants_scalar(const uint8_t *p, int8_t *q) { decode_k_nibbles_scalar(p + 16, q); }
    static void decode(const uint8_t *p, Dec &o) { decode_superblock<Format>(p, o); }
};

template <> struct Format<DType::Q5_K> {
    using Block = BlockQ5_K;
    using Dec = Decoded<256>;
    static constexpr bool kGroup16 = false, kHasMin = true, kMin16 = false;
    static void factors(const uint8_t *p, Dec &o) { decode_k_scale_min(p, o); }
#if defined(AKUNU_CPU_AVX2)
    // 5th bit of element 32 j + l: bit j of qh[l] (qh at 16), moved to bit 4 inside its byte.
    template <class Sink> static void quants(const uint8_t *p, Sink &&sink) {
        const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 16));
        k_nibble_blocks(p + 48, [&](int j, __m256i low) {
            sink(j, _mm256_or_si256(low, _mm256_slli_epi16(and8(_mm256_srli_epi16(hb, j), 1), 4)));
        });
    }
#endif
    static void quants_scalar(const uint8_t *p, int8_t *q) {
        const uint8_t *qh = p + 16;
        decode_k_nibbles_scalar(p + 48, q);
        for (int e = 0; e < QK_K; ++e) q[e] = (int8_t)(q[e] | ((qh[e % 32] >> (e / 32)) & 1) << 4);
    }
    static void decode(const uint8_t *p, Dec &o) { decode_superblock<Format>(p, o); }
};

template <> struct Format<DType::Q6_K> {
    using Block = BlockQ6_K;
    using Dec = Decoded<256>;
    static constexpr bool kGroup16 = true, kHasMin = false, kMin16 = false;
    static void factors(const uint8_t *p, Dec &o) {
        const BlockQ6_K *b = reinterpret_cast<const BlockQ6_K *>(p);
        const float d = read_fp16(p + 208);
#if defined(AKUNU_CPU_AVX2)
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b->scales));
        store_groups16(o.scale, scaled_i8(sc, d), scaled_i8(_mm_srli_si128(sc, 8), d));
        _mm256_store_ps(o.min, _mm256_setzero_ps());
        _mm256_store_ps(o.min + 8, _mm256_setzero_ps());
#else
        for (int g = 0; g < 16; ++g) set_group16(o, g, d * (float)b->scales[g], 0.0f);
#endif
    }
#if defined(AKUNU_CPU_AVX2)
    // Element 128 h + 32 s + l: nibble s / 2 of ql[64 h + 32 (s % 2) + l], bits 2s of qh[32 h + l]
    // (moved to bits 4..5 of their own byte: 16-bit shifts, then a byte mask).
    template <class Sink> static void quants(const uint8_t *p, Sink &&sink) {
        AKUNU_UNROLL
        for (int h = 0; h < 2; ++h) {
            const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 64 * h));
            const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 64 * h + 32));
            const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 128 + 32 * h));
            const __m256i k32 = _mm256_set1_epi8(32);
            sink(4 * h + 0, _mm256_sub_epi8(_mm256_or_si256(and8(a, 0x0f), and8(_mm256_slli_epi16(hi, 4), 0x30)), k32));
            sink(4 * h + 1, _mm256_sub_epi8(_mm256_or_si256(and8(c, 0x0f), and8(_mm256_slli_epi16(hi, 2), 0x30)), k32));
            sink(4 * h + 2, _mm256_sub_epi8(_mm256_or_si256(and8(_mm256_srli_epi16(a, 4), 0x0f), and8(hi, 0x30)), k32));
            sink(4 * h + 3, _mm256_sub_epi8(_mm256_or_si256(and8(_mm256_srli_epi16(c, 4), 0x0f), and8(_mm256_srli_epi16(hi, 2), 0x30)), k32));
        }
    }
#endif
    static void quants_scalar(const uint8_t *p, int8_t *q) {
        const BlockQ6_K *b = reinterpret_cast<const BlockQ6_K *>(p);
        for (int e = 0; e < QK_K; ++e) {
            const int h = e / 128, r = e % 128;
            const int lo = (b->ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
            const int hi = (b->qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
            q[e] = (int8_t)((lo | hi << 4) - 32);
        }
    }
    static void decode(const uint8_t *p, Dec &o) { decode_superblock<Format>(p, o); }
};

template <> struct Format<DType::IQ4_XS> {
    using Block = BlockIQ4_XS;
    using Dec = Decoded<256>;
    static constexpr bool kGroup16 = false, kHasMin = false, kMin16 = false;
    static void factors(const uint8_t *p, Dec &o) {
        const BlockIQ4_XS *b = reinterpret_cast<const BlockIQ4_XS *>(p);
        const float d = read_fp16(p);
        const unsigned scales_h = b->scales_h;
#if defined(AKUNU_CPU_AVX2)
        uint32_t sl;
        std::memcpy(&sl, b->scales_l, 4);
        uint64_t hi = 0;  // byte j: bits 2j..2j+1 of scales_h
        for (int j = 0; j < 8; ++j) hi |= (uint64_t)((scales_h >> (2 * j)) & 3) << (8 * j);
        // Byte j of the low bits: nibble j % 2 of byte j / 2 (interleave the low and high nibbles).
        const __m128i lo = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)(sl & 0x0f0f0f0fu)), _mm_cvtsi32_si128((int)((sl >> 4) & 0x0f0f0f0fu)));
        const __m128i ls = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(_mm_cvtsi64_si128((long long)hi), 4)), _mm_set1_epi8(32));
        store_groups32(o.scale, scaled_i8(ls, d));
        _mm256_store_ps(o.min, _mm256_setzero_ps());
        _mm256_store_ps(o.min + 8, _mm256_setzero_ps());
#else
        for (int j = 0; j < 8; ++j) {
            const int ls = (((b->scales_l[j / 2] >> (4 * (j % 2))) & 15) | ((scales_h >> (2 * j)) & 3) << 4) - 32;
            set_group32(o, j, d * (float)ls, 0.0f);
        }
#endif
    }
#if defined(AKUNU_CPU_AVX2)
    template <class Sink> static void quants(const uint8_t *p, Sink &&sink) {
        const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i *>(kIQ4Values));
        AKUNU_UNROLL
        for (int j = 0; j < 8; ++j) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 8 + 16 * j));
            const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0f)), hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f));
            sink(j, _mm256_set_m128i(_mm_shuffle_epi8(table, hi), _mm_shuffle_epi8(table, lo)));
        }
    }
#endif
    static void quants_scalar(const uint8_t *p, int8_t *q) {
        for (int j = 0; j < 8; ++j)
            for (int l = 0; l < 16; ++l) {
                q[32 * j + l] = kIQ4Values[p[8 + 16 * j + l] & 15];
                q[32 * j + 16 + l] = kIQ4Values[p[8 + 16 * j + l] >> 4];
            }
    }
    static void decode(const uint8_t *p, Dec &o) { decode_superblock<Format>(p, o); }
};

}  // namespace akunu::cpu::kquant
