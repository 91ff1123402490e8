// CPU row kernels: fp16/bf16 conversion, dequantization, activation quantization and the
// row-range GEMM used by decode (M = 1, weight-streaming bound) and prefill (M = S, compute bound)
// on the file's layouts. The load-time repacked layouts of Q4_0/Q4_1/Q8_0 live in r8_layout.cpp.
//
// Layout facts (GGUF, see core/quant_blocks.h):
//  - Q4_0 / Q4_1: 32 elements per block; qs[j] low nibble is element j, high nibble is element
//    j + 16. So "low nibbles, then high nibbles" yields the block in element order.
//  - Q8_0: 32 signed bytes and an fp16 scale.
//  - Activations for the integer dots are BlockQ16Act: float d, float sum = d * Σq, int16 q[32]
//    in the element order the weight unpacking below produces (see quant_blocks.h).
//
// SIMD paths are chosen at compile time: AVX2+FMA+F16C (AVX-512 machines use it too, except for
// the repacked layout, which is r16_layout.cpp there; no NEON path yet, those targets run the
// scalar code). AKUNU_FORCE_SCALAR disables SIMD (to test the fallback on a SIMD machine). The
// scalar code is the reference the SIMD code must match: bit for bit for dequantize_row /
// quantize_row_act, to float rounding for gemm_rows.
#include "backend/cpu/quant_kernels.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstring>

#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/quant_helpers.h"
#include "backend/cpu/simd_config.h"
#include "backend/cpu/tile_table.h"
#include "core/half.h"

namespace akunu::cpu {

// ---------------------------------------------------------------------------------------------
// Scalar conversions
// ---------------------------------------------------------------------------------------------

static inline float bits_to_f32(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
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

uint16_t f32_to_fp16(float f) { return float_to_half_bits(f); }

float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

namespace {


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
