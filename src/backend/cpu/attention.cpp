#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/vec_math.h"
#include "core/kernel_params.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(AKUNU_FORCE_SCALAR)
#include <immintrin.h>
#define AKUNU_ATTN_AVX2 1
#endif

namespace akunu::cpu {

namespace {

// q . k for one cached F16 key.
inline float dot_f32_f16(const float *q, const uint16_t *k, uint32_t n) {
    uint32_t i = 0;
    float sum = 0.f;
#if AKUNU_ATTN_AVX2
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        __m256 kv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(k + i)));
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, acc);
    }
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_hadd_ps(s, s);
    s = _mm_hadd_ps(s, s);
    sum = _mm_cvtss_f32(s);
#endif
    for (; i < n; ++i) sum += q[i] * fp16_to_f32(k[i]);
    return sum;
}

// out += w * v for one cached F16 value.
inline void axpy_f16(float *out, float w, const uint16_t *v, uint32_t n) {
    uint32_t i = 0;
#if AKUNU_ATTN_AVX2
    const __m256 wv = _mm256_set1_ps(w);
    for (; i + 8 <= n; i += 8) {
        __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(v + i)));
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(wv, vv, _mm256_loadu_ps(out + i)));
    }
#endif
    for (; i < n; ++i) out[i] += w * fp16_to_f32(v[i]);
}

// out[0..n) = sum_j w[j] * v_j over n_keys cached F16 rows v_j (stride n apart). The output is
// accumulated in registers, 64 elements (8 AVX2 registers) at a time, so a key costs its loads,
// conversions and FMAs only: an axpy per key would also load and store all of out.
inline void weighted_sum_f16(float *out, const float *w, const uint16_t *V, uint32_t n_keys, uint32_t n) {
    uint32_t i = 0;
#if AKUNU_ATTN_AVX2
    for (; i + 64 <= n; i += 64) {
        __m256 acc[8];
        for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
        const uint16_t *v = V + i;
        for (uint32_t j = 0; j < n_keys; ++j, v += n) {
            const __m256 wj = _mm256_set1_ps(w[j]);
            for (int c = 0; c < 8; ++c)
                acc[c] = _mm256_fmadd_ps(wj, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(v + 8 * c))),
                                         acc[c]);
        }
        for (int c = 0; c < 8; ++c) _mm256_storeu_ps(out + i + 8 * c, acc[c]);
    }
#endif
    if (i == n) return;
    std::fill(out + i, out + n, 0.f);
    for (uint32_t j = 0; j < n_keys; ++j) axpy_f16(out + i, w[j], V + (size_t)j * n + i, n - i);
}

}  // namespace

// Unit = (head, query row). Query row r sits at position + r and sees cache rows 0..position + r
// (causal), or only the last `window` of them (sliding window). Exact softmax in two passes over
// the scores, which are soft-capped first when the model says so.
void attention_f16kv_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const AttentionParams &p = params_of<AttentionParams>(a);
    const uint16_t *k_cache = reinterpret_cast<const uint16_t *>(a.buffers[1]);
    const uint16_t *v_cache = reinterpret_cast<const uint16_t *>(a.buffers[2]);
    const uint32_t group = p.n_heads / p.n_kv_heads;
    thread_local std::vector<float> scores;
    for (int64_t unit = begin; unit < end; ++unit) {
        const uint32_t h = (uint32_t)(unit % p.n_heads), r = (uint32_t)(unit / p.n_heads);
        const uint32_t n_ctx = std::min(p.position + r + 1, p.kv_len);
        const uint32_t first = (p.window && n_ctx > p.window) ? n_ctx - p.window : 0;
        const float *q = reinterpret_cast<const float *>(a.buffers[0]) + (size_t)r * p.q_stride + h * p.head_dim;
        float *out = reinterpret_cast<float *>(a.buffers[3]) + (size_t)r * p.out_stride + h * p.head_dim;
        const size_t head_base = (size_t)(h / group) * p.max_seq * p.head_dim;
        const uint16_t *K = k_cache + head_base + (size_t)first * p.head_dim;
        const uint16_t *V = v_cache + head_base + (size_t)first * p.head_dim;
        const uint32_t n_keys = n_ctx - first;

        if (scores.size() < n_keys) scores.resize(n_keys);
        float max_score = -INFINITY;
        for (uint32_t j = 0; j < n_keys; ++j) {
            scores[j] = dot_f32_f16(q, K + (size_t)j * p.head_dim, p.head_dim) * p.scale;
            max_score = std::max(max_score, scores[j]);
        }
        if (p.softcap > 0.f) {  // tanh is monotonic: the capped maximum is the capped max_score
            const float inv_cap = 1.0f / p.softcap;
            for (uint32_t j = 0; j < n_keys; ++j) scores[j] = p.softcap * std::tanh(scores[j] * inv_cap);
            max_score = p.softcap * std::tanh(max_score * inv_cap);
        }
        const float inv = 1.0f / exp_shifted_sum(scores.data(), max_score, scores.data(), n_keys);
        for (uint32_t j = 0; j < n_keys; ++j) scores[j] *= inv;
        weighted_sum_f16(out, scores.data(), V, n_keys, p.head_dim);
    }
}

}  // namespace akunu::cpu
