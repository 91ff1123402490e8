// dequantize_row (dequantize.h) for F32, F16, BF16, Q4_0, Q4_1 and Q8_0; the group-scaled dtypes
// go to kquant_kernels.cpp.
//
// Layout facts (GGUF, see core/quant_blocks.h):
//  - Q4_0 / Q4_1: 32 elements per block; qs[j] low nibble is element j, high nibble is element
//    j + 16. So "low nibbles, then high nibbles" yields the block in element order.
//  - Q8_0: 32 signed bytes and an fp16 scale.
//
// The SIMD path is chosen at compile time (simd_config.h: AVX2+FMA+F16C, or the scalar code on
// every other target and under AKUNU_FORCE_SCALAR). The scalar code is the reference the AVX2 code
// must match bit for bit.
#include "backend/cpu/dequantize.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/convert.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/quant_helpers.h"
#include "backend/cpu/simd_config.h"
#include "core/quant_blocks.h"

namespace akunu::cpu {

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

}  // namespace akunu::cpu
