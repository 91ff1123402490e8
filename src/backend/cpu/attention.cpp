#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/convert.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_helpers.h"
#include "backend/cpu/simd_config.h"
#include "backend/cpu/vec_math.h"
#include "core/kernel_params.h"
#include "core/kv_cache_q8.h"

namespace akunu::cpu {

namespace {

// q . k for one cached F16 key.
inline float dot_f32_f16(const float *q, const uint16_t *k, uint32_t n) {
    uint32_t i = 0;
    float sum = 0.f;
#if AKUNU_CPU_AVX2
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

// scores[j] = q . key j over n_keys cached F16 keys. Eight keys at a time share the loads of q and
// one horizontal reduction, which otherwise costs about as much as a key's FMAs.
inline void dots_f32_f16(const float *q, const uint16_t *K, uint32_t n_keys, uint32_t n, float *scores) {
    uint32_t j = 0;
#if AKUNU_CPU_AVX2
    if (n % 8 == 0) {
        for (; j + 8 <= n_keys; j += 8) {
            __m256 acc[8];
            for (int k = 0; k < 8; ++k) acc[k] = _mm256_setzero_ps();
            for (uint32_t i = 0; i < n; i += 8) {
                const __m256 qi = _mm256_loadu_ps(q + i);
                for (int k = 0; k < 8; ++k) {
                    const uint16_t *key = K + (size_t)(j + k) * n + i;
                    acc[k] = _mm256_fmadd_ps(qi, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(key))), acc[k]);
                }
            }
            // hadd(hadd(a0, a1), hadd(a2, a3)) holds keys 0..3's partial sums in its low half and again in its
            // high half (likewise keys 4..7): the low halves of both beside each other plus the high halves.
            const __m256 s03 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
            const __m256 s47 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
            _mm256_storeu_ps(scores + j, _mm256_add_ps(_mm256_permute2f128_ps(s03, s47, 0x20), _mm256_permute2f128_ps(s03, s47, 0x31)));
        }
    }
#endif
    for (; j < n_keys; ++j) scores[j] = dot_f32_f16(q, K + (size_t)j * n, n);
}

// out += w * v for one cached F16 value.
inline void axpy_f16(float *out, float w, const uint16_t *v, uint32_t n) {
    uint32_t i = 0;
#if AKUNU_CPU_AVX2
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
#if AKUNU_CPU_AVX2
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

#if AKUNU_CPU_AVX2
// Eight int8 cache values as floats.
inline __m256 load_q8x8(const int8_t *v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(v))));
}
#endif

// q . k for one cached Q8_0 key: per 32-block, scale * (q . values).
inline float dot_f32_q8(const float *q, const int8_t *k, const uint16_t *scales, uint32_t n) {
#if AKUNU_CPU_AVX2
    __m256 acc = _mm256_setzero_ps();
    for (uint32_t b = 0; b < n / kKVQ8Block; ++b, q += kKVQ8Block, k += kKVQ8Block) {
        __m256 block = _mm256_mul_ps(_mm256_loadu_ps(q), load_q8x8(k));
        for (int c = 1; c < 4; ++c) block = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * c), load_q8x8(k + 8 * c), block);
        acc = _mm256_fmadd_ps(block, _mm256_set1_ps(fp16_scale(scales[b])), acc);
    }
    return hsum(acc);
#else
    float sum = 0.f;
    for (uint32_t b = 0; b < n / kKVQ8Block; ++b, q += kKVQ8Block, k += kKVQ8Block) {
        float block = 0.f;
        for (uint32_t i = 0; i < kKVQ8Block; ++i) block += q[i] * (float)k[i];
        sum += fp16_to_f32(scales[b]) * block;
    }
    return sum;
#endif
}

// scores[j] = q . key j over n_keys cached Q8_0 keys. Four keys at a time share the loads of q
// and one horizontal reduction, which otherwise costs about as much as a key's FMAs.
inline void dots_f32_q8(const float *q, const int8_t *K, const uint16_t *scales, uint32_t n_keys, uint32_t n,
                        float *scores) {
    const uint32_t blocks_per_row = n / kKVQ8Block;
    uint32_t j = 0;
#if AKUNU_CPU_AVX2
    for (; j + 4 <= n_keys; j += 4) {
        __m256 acc[4];
        for (int k = 0; k < 4; ++k) acc[k] = _mm256_setzero_ps();
        for (uint32_t b = 0; b < blocks_per_row; ++b) {
            __m256 qb[4];
            for (int c = 0; c < 4; ++c) qb[c] = _mm256_loadu_ps(q + b * kKVQ8Block + 8 * c);
            for (int k = 0; k < 4; ++k) {
                const int8_t *kb = K + (size_t)(j + k) * n + b * kKVQ8Block;
                __m256 block = _mm256_mul_ps(qb[0], load_q8x8(kb));
                for (int c = 1; c < 4; ++c) block = _mm256_fmadd_ps(qb[c], load_q8x8(kb + 8 * c), block);
                const float d = fp16_scale(scales[(size_t)(j + k) * blocks_per_row + b]);
                acc[k] = _mm256_fmadd_ps(block, _mm256_set1_ps(d), acc[k]);
            }
        }
        // Lane i of the low half of hadd(hadd(acc0, acc1), hadd(acc2, acc3)), plus the high half: key i's sum.
        const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
        _mm_storeu_ps(scores + j, _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)));
    }
#endif
    for (; j < n_keys; ++j)
        scores[j] = dot_f32_q8(q, K + (size_t)j * n, scales + (size_t)j * blocks_per_row, n);
}

// weighted_sum_f16 over cached Q8_0 rows: block b of row j adds w[j] * scale_jb * values. The
// 64-element slices keep their 8 accumulators in registers as the F16 version does.
inline void weighted_sum_q8(float *out, const float *w, const int8_t *V, const uint16_t *scales, uint32_t n_keys,
                            uint32_t n) {
    const uint32_t blocks_per_row = n / kKVQ8Block;
    uint32_t i = 0;
#if AKUNU_CPU_AVX2
    for (; i + 2 * kKVQ8Block <= n; i += 2 * kKVQ8Block) {
        __m256 acc[8];
        for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
        const int8_t *v = V + i;
        const uint16_t *d = scales + i / kKVQ8Block;
        for (uint32_t j = 0; j < n_keys; ++j, v += n, d += blocks_per_row) {
            const __m256 w0 = _mm256_set1_ps(w[j] * fp16_scale(d[0])), w1 = _mm256_set1_ps(w[j] * fp16_scale(d[1]));
            for (int c = 0; c < 4; ++c) acc[c] = _mm256_fmadd_ps(w0, load_q8x8(v + 8 * c), acc[c]);
            for (int c = 4; c < 8; ++c) acc[c] = _mm256_fmadd_ps(w1, load_q8x8(v + 8 * c), acc[c]);
        }
        for (int c = 0; c < 8; ++c) _mm256_storeu_ps(out + i + 8 * c, acc[c]);
    }
    for (; i + kKVQ8Block <= n; i += kKVQ8Block) {  // an odd last block (head_dim 96, 160, ...)
        __m256 acc[4];
        for (int c = 0; c < 4; ++c) acc[c] = _mm256_setzero_ps();
        const int8_t *v = V + i;
        const uint16_t *d = scales + i / kKVQ8Block;
        for (uint32_t j = 0; j < n_keys; ++j, v += n, d += blocks_per_row) {
            const __m256 wd = _mm256_set1_ps(w[j] * fp16_scale(d[0]));
            for (int c = 0; c < 4; ++c) acc[c] = _mm256_fmadd_ps(wd, load_q8x8(v + 8 * c), acc[c]);
        }
        for (int c = 0; c < 4; ++c) _mm256_storeu_ps(out + i + 8 * c, acc[c]);
    }
#endif
    if (i == n) return;
    std::fill(out + i, out + n, 0.f);
    for (uint32_t j = 0; j < n_keys; ++j) {
        const int8_t *v = V + (size_t)j * n;
        const uint16_t *d = scales + (size_t)j * blocks_per_row;
        for (uint32_t b = i / kKVQ8Block; b < blocks_per_row; ++b) {
            const float wd = w[j] * fp16_to_f32(d[b]);
            for (uint32_t e = b * kKVQ8Block; e < (b + 1) * kKVQ8Block; ++e) out[e] += wd * (float)v[e];
        }
    }
}

// One KV head's cached keys and values from row `first` on, as the attention loop reads them:
// scores(q, n, s): s[j] = q . key j for j < n; weighted_sum(out, w, n) = sum_j w[j] * value j.
class F16Head {
public:
    F16Head(const KernelArgs &a, const AttentionParams &p, uint32_t kv_head, uint32_t first)
        : K_(reinterpret_cast<const uint16_t *>(a.buffers[1]) + kv_row(kv_head, first, p.max_seq) * p.head_dim),
          V_(reinterpret_cast<const uint16_t *>(a.buffers[2]) + kv_row(kv_head, first, p.max_seq) * p.head_dim),
          n_(p.head_dim) {}
    void scores(const float *q, uint32_t n_keys, float *out) const { dots_f32_f16(q, K_, n_keys, n_, out); }
    void weighted_sum(float *out, const float *w, uint32_t n_keys) const { weighted_sum_f16(out, w, V_, n_keys, n_); }

private:
    const uint16_t *K_, *V_;
    uint32_t n_;
};

// The same over the Q8_0 cache's value and scale planes (kv_cache_q8.h), read in place.
class Q8Head {
public:
    Q8Head(const KernelArgs &a, const AttentionParams &p, uint32_t kv_head, uint32_t first)
        : n_(p.head_dim), blocks_(p.head_dim / kKVQ8Block) {
        const size_t row = kv_row(kv_head, first, p.max_seq);
        const size_t scales_at = kv_q8_scales_offset(p.n_kv_heads, p.max_seq, p.head_dim);
        K_ = reinterpret_cast<const int8_t *>(a.buffers[1]) + row * n_;
        V_ = reinterpret_cast<const int8_t *>(a.buffers[2]) + row * n_;
        Kd_ = reinterpret_cast<const uint16_t *>(a.buffers[1] + scales_at) + row * blocks_;
        Vd_ = reinterpret_cast<const uint16_t *>(a.buffers[2] + scales_at) + row * blocks_;
    }
    void scores(const float *q, uint32_t n_keys, float *out) const { dots_f32_q8(q, K_, Kd_, n_keys, n_, out); }
    void weighted_sum(float *out, const float *w, uint32_t n_keys) const {
        weighted_sum_q8(out, w, V_, Vd_, n_keys, n_);
    }

private:
    const int8_t *K_, *V_;
    const uint16_t *Kd_, *Vd_;
    uint32_t n_, blocks_;
};

// Unit = (head, query row). Query row r sits at position + r and sees the keys of positions
// 0..position + r (causal), or only the last `window` of them (sliding window). Key p is cache row
// p % max_seq: a sliding-window layer's ring may hold a window in two runs of rows (the oldest
// keys at its end, the newest from row 0). Exact softmax in two passes over the scores, which are
// soft-capped first when the model says so.
template <class Head>
void attention(const KernelArgs &a, int64_t begin, int64_t end) {
    const AttentionParams &p = params_of<AttentionParams>(a);
    const uint32_t group = p.n_heads / p.n_kv_heads;
    thread_local std::vector<float> scores, wrapped_out;
    for (int64_t unit = begin; unit < end; ++unit) {
        const uint32_t h = (uint32_t)(unit % p.n_heads), r = (uint32_t)(unit / p.n_heads);
        const uint32_t n_ctx = std::min(p.position + r + 1, p.kv_len);
        const uint32_t first = (p.window && n_ctx > p.window) ? n_ctx - p.window : 0;
        const float *q = reinterpret_cast<const float *>(a.buffers[0]) + (size_t)r * p.q_stride + h * p.head_dim;
        float *out = reinterpret_cast<float *>(a.buffers[3]) + (size_t)r * p.out_stride + h * p.head_dim;
        const uint32_t n_keys = n_ctx - first;
        const uint32_t first_row = first % p.max_seq, n_run = std::min(n_keys, p.max_seq - first_row);
        const Head run(a, p, h / group, first_row), wrapped(a, p, h / group, 0);  // keys n_run.. at row 0

        if (scores.size() < n_keys) scores.resize(n_keys);
        run.scores(q, n_run, scores.data());
        if (n_run < n_keys) wrapped.scores(q, n_keys - n_run, scores.data() + n_run);
        float max_score = -INFINITY;
        for (uint32_t j = 0; j < n_keys; ++j) {
            scores[j] *= p.scale;
            max_score = std::max(max_score, scores[j]);
        }
        if (p.softcap > 0.f) {  // tanh is monotonic: the capped maximum is the capped max_score
            const float inv_cap = 1.0f / p.softcap;
            for (uint32_t j = 0; j < n_keys; ++j) scores[j] = p.softcap * std::tanh(scores[j] * inv_cap);
            max_score = p.softcap * std::tanh(max_score * inv_cap);
        }
        const float inv = 1.0f / exp_shifted_sum(scores.data(), max_score, scores.data(), n_keys);
        for (uint32_t j = 0; j < n_keys; ++j) scores[j] *= inv;
        run.weighted_sum(out, scores.data(), n_run);
        if (n_run < n_keys) {
            wrapped_out.resize(p.head_dim);
            wrapped.weighted_sum(wrapped_out.data(), scores.data() + n_run, n_keys - n_run);
            for (uint32_t d = 0; d < p.head_dim; ++d) out[d] += wrapped_out[d];
        }
    }
}

}  // namespace

void attention_f16kv_kernel(const KernelArgs &a, int64_t begin, int64_t end) { attention<F16Head>(a, begin, end); }
void attention_q8kv_kernel(const KernelArgs &a, int64_t begin, int64_t end) { attention<Q8Head>(a, begin, end); }

}  // namespace akunu::cpu
