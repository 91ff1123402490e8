// Vectorized exp for the CPU kernels (softmax, SiLU): std::exp is a scalar libm call, and at one
// call per FFN element it costs more than the rest of the activation command.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__) && !defined(AKUNU_FORCE_SCALAR)
#include <immintrin.h>
#define AKUNU_VEC_MATH_AVX2 1
#endif

namespace akunu::cpu {

#if AKUNU_VEC_MATH_AVX2
// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two for accuracy),
// exp(r) on |r| <= ln2 / 2 by a degree-6 polynomial: relative error ~2e-7, close to float's.
// Inputs below -87.3 flush to 0, above 88.7 saturate to +inf, NaN stays NaN.
inline __m256 exp_avx2(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.7228f), lo = _mm256_set1_ps(-87.3365f);
    const __m256 xc = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // 2^n through the exponent bits; n in [-126, 128]: split so each factor is a normal float.
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i half = _mm256_srai_epi32(ni, 1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // NaN in, NaN out
}
#endif

// dst[i] = exp(src[i] - shift); returns the sum of the dst values. src may equal dst.
inline float exp_shifted_sum(const float *src, float shift, float *dst, uint32_t n) {
    uint32_t i = 0;
    float sum = 0.f;
#if AKUNU_VEC_MATH_AVX2
    const __m256 sh = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(src + i), sh));
        _mm256_storeu_ps(dst + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    for (float v : lanes) sum += v;
#endif
    for (; i < n; ++i) {
        dst[i] = std::exp(src[i] - shift);
        sum += dst[i];
    }
    return sum;
}

// out[i] = silu(gate[i]) * up[i] = gate / (1 + exp(-gate)) * up.
inline void silu_mul(const float *gate, const float *up, float *out, uint32_t n) {
    uint32_t i = 0;
#if AKUNU_VEC_MATH_AVX2
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
#endif
    for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace akunu::cpu
