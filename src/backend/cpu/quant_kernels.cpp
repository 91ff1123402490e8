// CPU row kernels: fp16/bf16 conversion, dequantization, activation quantization and the
// row-range GEMM used by decode (M = 1, weight-streaming bound) and prefill (M = S, compute bound).
//
// Layout facts (GGUF, see core/quant_blocks.h):
//  - Q4_0 / Q4_1: 32 elements per block; qs[j] low nibble is element j, high nibble is element
//    j + 16. So "low nibbles, then high nibbles" yields the block in element order.
//  - Q8_0: 32 signed bytes and an fp16 scale.
//  - Activations for the integer dots are BlockQ16Act: float d, float sum = d * Σq, int16 q[32]
//    in the element order the weight unpacking below produces (see quant_blocks.h).
//
// SIMD paths are chosen at compile time: AVX2+FMA+F16C (AVX-512 machines use it too; no separate
// AVX-512 or NEON path yet, those targets run the scalar code). AKUNU_FORCE_SCALAR disables SIMD
// (to test the fallback on a SIMD machine). The scalar code is the reference the SIMD code must
// match: bit for bit for dequantize_row / quantize_row_act, to float rounding for gemm_rows.
#include "backend/cpu/quant_kernels.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstring>

#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/simd_config.h"
#include "backend/cpu/tile_table.h"

namespace akunu::cpu {

// ---------------------------------------------------------------------------------------------
// Scalar conversions
// ---------------------------------------------------------------------------------------------

static inline float bits_to_f32(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
static inline uint32_t f32_to_bits(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return bits;
}

// Pure integer conversion: keeps NaN payloads (signalling NaNs stay signalling), like numpy.
float fp16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | mant << 13);  // inf / NaN
    if (exp != 0) return bits_to_f32(sign | (exp + 127 - 15) << 23 | mant << 13);
    if (mant == 0) return bits_to_f32(sign);
    // Subnormal half: shift the leading 1 up to the implicit-bit position.
    uint32_t e = 127 - 15 + 1;
    do {
        mant <<= 1;
        --e;
    } while ((mant & 0x400) == 0);
    return bits_to_f32(sign | e << 23 | (mant & 0x3ff) << 13);
}

// Round-to-nearest-even; NaN keeps its top payload bits (forced non-zero), like numpy.
uint16_t f32_to_fp16(float f) {
    const uint32_t x = f32_to_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u) return sign | 0x7c00;
        uint16_t nan = (uint16_t)(0x7c00 | ((ax >> 13) & 0x3ff));
        if (nan == 0x7c00) nan++;
        return sign | nan;
    }
    if (ax >= 0x477ff000u) return sign | 0x7c00;  // >= 65520 rounds to inf
    if (ax >= 0x38800000u) {                     // normal half (>= 2^-14)
        const uint32_t rounded = ax + 0xfff + ((ax >> 13) & 1);
        return sign | (uint16_t)((rounded - ((127u - 15u) << 23)) >> 13);
    }
    if (ax <= 0x33000000u) return sign;  // <= 2^-25 rounds (ties-to-even) to zero
    // Subnormal half: value * 2^24 rounded to an integer, ties to even.
    const uint32_t mant = (ax & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - (ax >> 23);  // 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return sign | (uint16_t)q;
}

float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

namespace {

#if defined(AKUNU_CPU_AVX2)
// Hardware conversion for scales inside the dot products (quiets sNaN; irrelevant there).
inline float fp16_scale(uint16_t h) { return _cvtsh_ss(h); }
#else
inline float fp16_scale(uint16_t h) { return fp16_to_f32(h); }
#endif

// ---------------------------------------------------------------------------------------------
// Dequantization (scalar reference; the SIMD versions below produce identical bits)
// ---------------------------------------------------------------------------------------------

[[maybe_unused]] AKUNU_NO_FP_CONTRACT void dequant_q4_0_scalar(const BlockQ4_0 *blocks, float *dst, int64_t nb) {
    AKUNU_NO_FP_CONTRACT_SCOPE
    for (int64_t b = 0; b < nb; ++b) {
        const float d = fp16_to_f32(blocks[b].d);
        for (int j = 0; j < 16; ++j) {
            dst[32 * b + j] = d * (float)((blocks[b].qs[j] & 0xf) - 8);
            dst[32 * b + j + 16] = d * (float)((blocks[b].qs[j] >> 4) - 8);
        }
    }
}

[[maybe_unused]] AKUNU_NO_FP_CONTRACT void dequant_q4_1_scalar(const BlockQ4_1 *blocks, float *dst, int64_t nb) {
    AKUNU_NO_FP_CONTRACT_SCOPE
    for (int64_t b = 0; b < nb; ++b) {
        const float d = fp16_to_f32(blocks[b].d), m = fp16_to_f32(blocks[b].m);
        for (int j = 0; j < 16; ++j) {
            const float lo = d * (float)(blocks[b].qs[j] & 0xf);
            const float hi = d * (float)(blocks[b].qs[j] >> 4);
            // When both d * q and m are NaN, x86 (and so numpy) returns the first operand's
            // NaN; the compiler may swap the operands of +, so pick it explicitly.
            dst[32 * b + j] = std::isnan(lo) ? lo : lo + m;
            dst[32 * b + j + 16] = std::isnan(hi) ? hi : hi + m;
        }
    }
}

[[maybe_unused]] AKUNU_NO_FP_CONTRACT void dequant_q8_0_scalar(const BlockQ8_0 *blocks, float *dst, int64_t nb) {
    AKUNU_NO_FP_CONTRACT_SCOPE
    for (int64_t b = 0; b < nb; ++b) {
        const float d = fp16_to_f32(blocks[b].d);
        for (int j = 0; j < 32; ++j) dst[32 * b + j] = (float)blocks[b].qs[j] * d;
    }
}

#if defined(AKUNU_CPU_AVX2)

// 16 bytes of nibbles -> 32 bytes in element order: low nibbles (elements 0..15) in the low
// 128-bit lane, high nibbles (elements 16..31) in the high lane. Values 0..15.
// Broadcasting the 16 bytes to both lanes is a pure load; a per-lane shift count (0 | 4) then
// brings the high nibbles down in the upper lane only.
inline __m256i unpack_nibbles(const uint8_t *qs) {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    const __m256i shifted = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

// fp16 scale broadcast to 8 floats: a 16-bit broadcast load and one conversion.
inline __m256 broadcast_fp16(const uint16_t *h) {
    return _mm256_cvtph_ps(_mm_set1_epi16((short)*h));
}

// 8 bytes (int8 or uint8 in a __m128i low half) -> 8 floats.
inline __m256 i8_to_f32(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
inline __m256 u8_to_f32(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }

AKUNU_NO_FP_CONTRACT void dequant_q4_0_avx2(const BlockQ4_0 *blocks, float *dst, int64_t nb) {
    AKUNU_NO_FP_CONTRACT_SCOPE
    for (int64_t b = 0; b < nb; ++b) {
        const __m256 d = _mm256_set1_ps(fp16_to_f32(blocks[b].d));  // exact (sNaN kept, like numpy)
        const __m256i q = _mm256_sub_epi8(unpack_nibbles(blocks[b].qs), _mm256_set1_epi8(8));
        const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        float *out = dst + 32 * b;
        _mm256_storeu_ps(out + 0, _mm256_mul_ps(d, i8_to_f32(lo)));
        _mm256_storeu_ps(out + 8, _mm256_mul_ps(d, i8_to_f32(_mm_srli_si128(lo, 8))));
        _mm256_storeu_ps(out + 16, _mm256_mul_ps(d, i8_to_f32(hi)));
        _mm256_storeu_ps(out + 24, _mm256_mul_ps(d, i8_to_f32(_mm_srli_si128(hi, 8))));
    }
}

AKUNU_NO_FP_CONTRACT void dequant_q4_1_avx2(const BlockQ4_1 *blocks, float *dst, int64_t nb) {
    AKUNU_NO_FP_CONTRACT_SCOPE
    for (int64_t b = 0; b < nb; ++b) {
        const __m256 d = _mm256_set1_ps(fp16_to_f32(blocks[b].d));
        const __m256 m = _mm256_set1_ps(fp16_to_f32(blocks[b].m));
        const __m256i q = unpack_nibbles(blocks[b].qs);
        const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int p = 0; p < 4; ++p) {
            const __m256 prod = _mm256_mul_ps(d, u8_to_f32(parts[p]));
            // NaN d * q wins over NaN m (see the scalar version).
            const __m256 sum = _mm256_blendv_ps(_mm256_add_ps(prod, m), prod, _mm256_cmp_ps(prod, prod, _CMP_UNORD_Q));
            _mm256_storeu_ps(dst + 32 * b + 8 * p, sum);
        }
    }
}

AKUNU_NO_FP_CONTRACT void dequant_q8_0_avx2(const BlockQ8_0 *blocks, float *dst, int64_t nb) {
    AKUNU_NO_FP_CONTRACT_SCOPE
    for (int64_t b = 0; b < nb; ++b) {
        const __m256 d = _mm256_set1_ps(fp16_to_f32(blocks[b].d));
        for (int p = 0; p < 4; ++p) {
            const __m128i q = _mm_loadl_epi64((const __m128i *)(blocks[b].qs + 8 * p));
            _mm256_storeu_ps(dst + 32 * b + 8 * p, _mm256_mul_ps(i8_to_f32(q), d));
        }
    }
}

// F16C's vcvtph2ps quiets signalling NaNs; numpy (and fp16_to_f32) keep them signalling.
// NaNs are rare, so convert in hardware and patch the lanes that need it.
void dequant_f16_avx2(const uint16_t *src, float *dst, int64_t k) {
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        const __m256 f = _mm256_cvtph_ps(h);
        _mm256_storeu_ps(dst + i, f);
        if (_mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)))
            for (int j = 0; j < 8; ++j) dst[i + j] = fp16_to_f32(src[i + j]);
    }
    for (; i < k; ++i) dst[i] = fp16_to_f32(src[i]);
}

void dequant_bf16_avx2(const uint16_t *src, float *dst, int64_t k) {
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
    }
    for (; i < k; ++i) dst[i] = bf16_to_f32(src[i]);
}

#endif  // AKUNU_CPU_AVX2

}  // namespace

void dequantize_row(DType t, const void *src, float *dst, int64_t k) {
    switch (t) {
        case DType::F32:
            std::memcpy(dst, src, (size_t)k * sizeof(float));
            return;
        case DType::F16: {
            const uint16_t *h = static_cast<const uint16_t *>(src);
#if defined(AKUNU_CPU_AVX2)
            dequant_f16_avx2(h, dst, k);
#else
            for (int64_t i = 0; i < k; ++i) dst[i] = fp16_to_f32(h[i]);
#endif
            return;
        }
        case DType::BF16: {
            const uint16_t *h = static_cast<const uint16_t *>(src);
#if defined(AKUNU_CPU_AVX2)
            dequant_bf16_avx2(h, dst, k);
#else
            for (int64_t i = 0; i < k; ++i) dst[i] = bf16_to_f32(h[i]);
#endif
            return;
        }
#if defined(AKUNU_CPU_AVX2)
        case DType::Q4_0: return dequant_q4_0_avx2(static_cast<const BlockQ4_0 *>(src), dst, k / QK4_0);
        case DType::Q4_1: return dequant_q4_1_avx2(static_cast<const BlockQ4_1 *>(src), dst, k / QK4_1);
        case DType::Q8_0: return dequant_q8_0_avx2(static_cast<const BlockQ8_0 *>(src), dst, k / QK8_0);
#else
        case DType::Q4_0: return dequant_q4_0_scalar(static_cast<const BlockQ4_0 *>(src), dst, k / QK4_0);
        case DType::Q4_1: return dequant_q4_1_scalar(static_cast<const BlockQ4_1 *>(src), dst, k / QK4_1);
        case DType::Q8_0: return dequant_q8_0_scalar(static_cast<const BlockQ8_0 *>(src), dst, k / QK8_0);
#endif
        default:
            if (kquant_handles(t)) return kquant_dequantize_row(t, src, dst, k);
            std::memset(dst, 0, (size_t)k * sizeof(float));  // callers check cpu_supports_dtype
            return;
    }
}

// ---------------------------------------------------------------------------------------------
// Activation quantization: symmetric int16 per 32-block, float scale.
//   d = amax / 32767, id = d ? 1/d : 0, q = roundf(x * id) (ties away from zero), sum = d * Σq.
// q of element e is stored at qs[act_q16_pos(e)].
// ---------------------------------------------------------------------------------------------

namespace {

constexpr float kActQMax = 32767.0f;

[[maybe_unused]] AKUNU_NO_FP_CONTRACT void quantize_block_act_scalar(const float *x, BlockQ16Act *dst) {
    AKUNU_NO_FP_CONTRACT_SCOPE
    float amax = 0.0f;
    for (int j = 0; j < QK_ACT; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / kActQMax;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int isum = 0;
    for (int j = 0; j < QK_ACT; ++j) {
        const float scaled = x[j] * id;
        // Clamp before the int conversion: guards NaN/inf inputs from UB.
        const int q = (int)std::roundf(std::min(kActQMax, std::max(-kActQMax, scaled)));
        dst->qs[act_q16_pos(j)] = (int16_t)q;
        isum += q;
    }
    dst->d = d;
    dst->sum = d * (float)isum;
}

#if defined(AKUNU_CPU_AVX2)
AKUNU_NO_FP_CONTRACT void quantize_block_act_avx2(const float *x, BlockQ16Act *dst) {
    AKUNU_NO_FP_CONTRACT_SCOPE
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    for (int p = 0; p < 4; ++p) v[p] = _mm256_loadu_ps(x + 8 * p);
    __m256 vmax = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign_bit, v[0]), _mm256_andnot_ps(sign_bit, v[1])),
                                _mm256_max_ps(_mm256_andnot_ps(sign_bit, v[2]), _mm256_andnot_ps(sign_bit, v[3])));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / kActQMax;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);

    __m256i qi[4];
    for (int p = 0; p < 4; ++p) {
        // roundf (ties away from zero): truncate, then step away from zero if |frac| >= 0.5.
        // t - trunc(t) is exact, so this matches roundf bit for bit.
        const __m256 t = _mm256_mul_ps(v[p], id);
        const __m256 tr = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 frac = _mm256_andnot_ps(sign_bit, _mm256_sub_ps(t, tr));
        const __m256 away = _mm256_or_ps(_mm256_and_ps(t, sign_bit), _mm256_set1_ps(1.0f));
        __m256 r = _mm256_add_ps(tr, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), away));
        r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-kActQMax)), _mm256_set1_ps(kActQMax));
        qi[p] = _mm256_cvttps_epi32(r);
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    const int isum = _mm_cvtsi128_si32(s4);

    // To int16 in element order (packs works per 128-bit lane, the permute undoes that):
    // n0 = x[0..15], n1 = x[16..31]. Then per lane evens to the low 8 bytes, odds to the high ones,
    // and qwords regrouped so each half holds [evens | odds] of its 16 elements.
    const __m256i n0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[0], qi[1]), 0xd8);
    const __m256i n1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[2], qi[3]), 0xd8);
    const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    const __m256i e0 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(n0, split), 0xd8);  // [x0,2..14 | x1,3..15]
    const __m256i e1 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(n1, split), 0xd8);  // [x16..30 | x17..31]
    _mm256_storeu_si256((__m256i *)dst->qs, _mm256_permute2x128_si256(e0, e1, 0x20));
    _mm256_storeu_si256((__m256i *)(dst->qs + 16), _mm256_permute2x128_si256(e0, e1, 0x31));
    dst->d = d;
    dst->sum = d * (float)isum;
}
#endif

}  // namespace

void quantize_row_act(const float *x, BlockQ16Act *dst, int64_t k) {
    for (int64_t b = 0; b < k / QK_ACT; ++b) {
#if defined(AKUNU_CPU_AVX2)
        quantize_block_act_avx2(x + b * QK_ACT, dst + b);
#else
        quantize_block_act_scalar(x + b * QK_ACT, dst + b);
#endif
    }
}

ActFormat act_format_for(DType weight_type) {
    switch (weight_type) {
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q4_1: return ActFormat::Q16Act;
        default: return kquant_handles(weight_type) ? ActFormat::Q16Act : ActFormat::F32;
    }
}

bool cpu_supports_dtype(DType t) {
    switch (t) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q4_1: return true;
        default: return kquant_handles(t);
    }
}

bool dtype_from_name(const std::string &name, DType *out) {
    static const struct {
        const char *name;
        DType type;
    } kNames[] = {{"F32", DType::F32},   {"F16", DType::F16},   {"BF16", DType::BF16},
                  {"Q8_0", DType::Q8_0}, {"Q4_0", DType::Q4_0}, {"Q4_1", DType::Q4_1},
                  {"Q5_0", DType::Q5_0}, {"Q5_1", DType::Q5_1}, {"Q2_K", DType::Q2_K},
                  {"Q3_K", DType::Q3_K}, {"Q4_K", DType::Q4_K}, {"Q5_K", DType::Q5_K},
                  {"Q6_K", DType::Q6_K}, {"IQ4_NL", DType::IQ4_NL}, {"IQ4_XS", DType::IQ4_XS}};
    std::string upper = name;
    for (char &c : upper) c = (char)std::toupper((unsigned char)c);
    for (const auto &entry : kNames) {
        if (upper == entry.name) {
            *out = entry.type;
            return true;
        }
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// GEMM over a range of weight rows
// ---------------------------------------------------------------------------------------------
//
// Both paths walk the output in tiles of RN weight rows x RM activation rows, each tile being a
// full-K dot product. Weights loaded (and unpacked / converted) once feed RM activation rows;
// activations loaded once feed RN weight rows. Around the tiles, N and M are cut into chunks of
// roughly L2 size so a chunk of weight rows stays cached while the activation chunk streams by.

namespace {

template <DType T> struct QuantBlock;
template <> struct QuantBlock<DType::Q8_0> { using type = BlockQ8_0; };
template <> struct QuantBlock<DType::Q4_0> { using type = BlockQ4_0; };
template <> struct QuantBlock<DType::Q4_1> { using type = BlockQ4_1; };

inline void store_out(float *y, float v, bool accumulate) { *y = accumulate ? *y + v : v; }

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
    const uint8_t *w_rows[RN];
    const float *x_rows[RM];
    AKUNU_UNROLL
    for (int r = 0; r < RN; ++r) w_rows[r] = w + r * a.w_row_bytes;
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) x_rows[m] = reinterpret_cast<const float *>(x + m * a.x_row_bytes);

    __m256 acc[RM][RN];
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m)
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) acc[m][r] = _mm256_setzero_ps();

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
    const WBlock *w_rows[RN];
    const BlockQ16Act *x_rows[RM];
    AKUNU_UNROLL
    for (int r = 0; r < RN; ++r) w_rows[r] = reinterpret_cast<const WBlock *>(w + r * a.w_row_bytes);
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) x_rows[m] = reinterpret_cast<const BlockQ16Act *>(x + m * a.x_row_bytes);

    __m256 acc[RM][RN];
    float min_acc[RM][RN];  // Q4_1: Σ m_w * sum_a
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m)
        AKUNU_UNROLL
        for (int r = 0; r < RN; ++r) {
            acc[m][r] = _mm256_setzero_ps();
            min_acc[m][r] = 0.0f;
        }

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
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) {
            const BlockQ16Act &ab = x_rows[m][b];
            const __m256i ae = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ab.qs));
            const __m256i ao = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ab.qs + 16));
            const __m256 ad = _mm256_set1_ps(ab.d);
            AKUNU_UNROLL
            for (int r = 0; r < RN; ++r) {
                const __m256i dots = _mm256_add_epi32(_mm256_madd_epi16(we[r], ae), _mm256_madd_epi16(wo[r], ao));
                acc[m][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), _mm256_mul_ps(wd[r], ad), acc[m][r]);
            }
        }
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


// ---------------------------------------------------------------------------------------------
// "r8" repacked Q4_0 / Q4_1 / Q8_0 (layout: quant_kernels.h, repack_weights)
// ---------------------------------------------------------------------------------------------
//
// Decode is a stream over the weights, so the inner loop is built for ops per weight byte: per
// group-block (8 rows x 32 weights) four 32-byte loads, each split by 3 shifts (+ masks) into
// four int16 vectors holding one activation pair per row; a madd against that pair broadcast
// (a pure load) gives each row's int32 partial in its own lane. Sixteen madds summed in int32
// make the block's eight row dots in one vector, so the scale work (one fp16 conversion of the
// eight row scales, one int->float conversion, a multiply and an FMA) is shared by eight rows
// and there is no horizontal reduction at all. Each group is one contiguous stretch of memory.

constexpr int kR8Rows = 8;

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

// Activation qs position -> element (inverse of act_q16_pos).
struct ActElemTable {
    int elem[QK_ACT];
    constexpr ActElemTable() : elem{} {
        for (int e = 0; e < QK_ACT; ++e) elem[act_q16_pos(e)] = e;
    }
};
constexpr ActElemTable kActElem{};

// Where the weight of group row l that multiplies activation qs[p] lives in the nibble area.
inline void r8_nibble_pos(int l, int p, int *byte, int *shift) {
    const int j = p >> 1, h = p & 1, c = j >> 2, k = j & 3;
    *byte = 32 * c + 2 * (2 * l + h) + (k >> 1);
    *shift = 4 * (k & 1);
}

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

// A row's share of a group-block is 4 bytes in each of the 4 chunks (bytes 4l..4l+3 of chunk c:
// words 2l and 2l + 1), i.e. its 32 nibbles permuted into 16 bytes: nibble t of those 16 bytes
// (byte t / 2, high half if t is odd) is the weight of element kR8Perm.elem[t].
struct R8NibblePerm {
    uint8_t elem[QK_ACT];
    constexpr R8NibblePerm() : elem{} {
        for (int t = 0; t < QK_ACT; ++t) {
            const int c = t / 8, h = (t / 4) & 1, k = t & 3;  // chunk, half of the pair, nibble in word
            elem[t] = (uint8_t)ActElemTable().elem[2 * (4 * c + k) + h];
        }
    }
};
constexpr R8NibblePerm kR8Perm{};

// kR8Perm as shuffle controls: byte t takes element elem[t] from the low (elements 0..15) or the
// high (16..31) half of the unpacked nibbles.
struct R8PermIdx {
    uint8_t idx[QK_ACT], from_hi[QK_ACT];
    constexpr R8PermIdx() : idx{}, from_hi{} {
        for (int t = 0; t < QK_ACT; ++t) {
            idx[t] = (uint8_t)(R8NibblePerm().elem[t] & 15);
            from_hi[t] = R8NibblePerm().elem[t] >= 16 ? 0xff : 0x00;
        }
    }
};
[[maybe_unused]] constexpr R8PermIdx kR8PermIdx{};

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
                alignas(16) uint8_t out[QK_ACT / 2];
#if defined(AKUNU_CPU_AVX2)
                // Nibbles in element order (lane 0: elements 0..15, lane 1: 16..31), gathered into
                // kR8Perm order by a per-lane shuffle of each half, then packed two per byte.
                const __m256i n = unpack_nibbles(w.qs);
                const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kR8PermIdx.idx));
                const __m256i from_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kR8PermIdx.from_hi));
                const __m256i gathered = _mm256_blendv_epi8(_mm256_shuffle_epi8(_mm256_permute2x128_si256(n, n, 0x00), idx),
                                                     _mm256_shuffle_epi8(_mm256_permute2x128_si256(n, n, 0x11), idx), from_hi);
                const __m256i pairs = _mm256_maddubs_epi16(gathered, _mm256_set1_epi16(0x1001));  // lo + 16 * hi
                const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(pairs, pairs), 0x08);
                _mm_store_si128(reinterpret_cast<__m128i *>(out),
                                _mm_xor_si128(_mm256_castsi256_si128(packed), _mm_set1_epi8((char)kFlip)));
#else
                uint8_t n[QK_ACT];
                for (int j = 0; j < 16; ++j) {
                    n[j] = w.qs[j] & 0xf;
                    n[j + 16] = w.qs[j] >> 4;
                }
                for (int o = 0; o < 16; ++o)
                    out[o] = (uint8_t)((n[kR8Perm.elem[2 * o]] | n[kR8Perm.elem[2 * o + 1]] << 4) ^ kFlip);
#endif
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

using R8TileFn = void (*)(const uint8_t *, const uint8_t *, size_t, int64_t, __m256 *);

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
    const size_t group_bytes = (size_t)kR8Rows * a.w_row_bytes;
    const int64_t nb = a.K / QK_ACT;
    const int64_t tile_m = kR8TileM;
    constexpr size_t kChunkBytes = 256 * 1024;  // as gemm_rows_typed
    const int64_t g_chunk = std::max<int64_t>(1, (int64_t)(kChunkBytes / group_bytes));
    const int64_t m_chunk = std::max<int64_t>(tile_m, (int64_t)(kChunkBytes / std::max<size_t>(a.x_row_bytes, 1)) / tile_m * tile_m);
    const int64_t g_begin = n_begin / kR8Rows, g_end = (n_end + kR8Rows - 1) / kR8Rows;
    __m256 out[kR8TileM];
    for (int64_t gc = g_begin; gc < g_end; gc += g_chunk) {
        const int64_t gc_end = std::min(g_end, gc + g_chunk);
        for (int64_t mc = 0; mc < a.M; mc += m_chunk) {
            const int64_t mc_end = std::min(a.M, mc + m_chunk);
            for (int64_t g = gc; g < gc_end; ++g) {
                const int64_t row0 = g * kR8Rows;
                const int lo = (int)(std::max(n_begin, row0) - row0), hi = (int)(std::min(n_end, row0 + kR8Rows) - row0);
                const uint8_t *grp = a.w + (size_t)g * group_bytes;
                for (int64_t m = mc; m < mc_end; m += tile_m) {
                    const int rm = (int)std::min<int64_t>(tile_m, mc_end - m);
                    table.fn[rm - 1](grp, a.x + (size_t)m * a.x_row_bytes, a.x_row_bytes, nb, out);
                    for (int i = 0; i < rm; ++i) {
                        float *y = a.y + (size_t)(m + i) * a.y_stride + row0;
                        if (lo == 0 && hi == kR8Rows) {
                            const __m256 v = a.accumulate ? _mm256_add_ps(_mm256_loadu_ps(y), out[i]) : out[i];
                            _mm256_storeu_ps(y, v);
                        } else {
                            alignas(32) float tmp[kR8Rows];
                            _mm256_store_ps(tmp, out[i]);
                            for (int l = lo; l < hi; ++l) store_out(y + l, tmp[l], a.accumulate);
                        }
                    }
                }
            }
        }
    }
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

void gemm_rows(const GemmArgs &args, int64_t n_begin, int64_t n_end) {
    if (n_begin >= n_end || args.M <= 0) return;
    if (args.repacked) {
        switch (args.type) {
            case DType::Q4_0: return gemm_rows_r8<DType::Q4_0>(args, n_begin, n_end);
            case DType::Q4_1: return gemm_rows_r8<DType::Q4_1>(args, n_begin, n_end);
            case DType::Q8_0: return gemm_rows_r8<DType::Q8_0>(args, n_begin, n_end);
            default: return;  // callers check has_repacked_layout
        }
    }
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

bool has_repacked_layout(DType t) { return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0; }

int repack_row_group(DType t) { return has_repacked_layout(t) ? kR8Rows : 0; }

size_t repacked_bytes(DType t, int64_t rows, int64_t K) {
    const size_t groups = (size_t)((rows + kR8Rows - 1) / kR8Rows);
    switch (t) {
        case DType::Q4_0: return groups * kR8Rows * (size_t)(K / QK4_0) * sizeof(BlockQ4_0);
        case DType::Q4_1: return groups * kR8Rows * (size_t)(K / QK4_1) * sizeof(BlockQ4_1);
        case DType::Q8_0: return groups * kR8Rows * (size_t)(K / QK8_0) * sizeof(BlockQ8_0);
        default: return 0;
    }
}

void repack_weights(DType t, const void *src, void *dst, int64_t rows, int64_t K) {
    const uint8_t *s = static_cast<const uint8_t *>(src);
    uint8_t *d = static_cast<uint8_t *>(dst);
    switch (t) {
        case DType::Q4_0: return repack_r8<DType::Q4_0>(s, d, rows, K);
        case DType::Q4_1: return repack_r8<DType::Q4_1>(s, d, rows, K);
        case DType::Q8_0: return repack_r8<DType::Q8_0>(s, d, rows, K);
        default: return;
    }
}

void dequantize_row_repacked(DType t, const void *packed, int64_t row, float *dst, int64_t K) {
    const uint8_t *p = static_cast<const uint8_t *>(packed);
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
