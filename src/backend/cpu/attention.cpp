#include <algorithm>
#include <cmath>
#include <type_traits>
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

// out[0..n) += sum_j w[j] * v_j over n_keys cached F16 rows v_j (stride n apart). The output is
// accumulated in registers, 64 elements (8 AVX2 registers) at a time, so a key costs its loads,
// conversions and FMAs only: an axpy per key would also load and store all of out.
inline void weighted_sum_f16(float *out, const float *w, const uint16_t *V, uint32_t n_keys, uint32_t n) {
    uint32_t i = 0;
#if AKUNU_CPU_AVX2
    for (; i + 64 <= n; i += 64) {
        __m256 acc[8];
        for (int c = 0; c < 8; ++c) acc[c] = _mm256_loadu_ps(out + i + 8 * c);
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

// weighted_sum_f16 over cached Q8_0 rows (out += ...): block b of row j adds w[j] * scale_jb * values. The
// 64-element slices keep their 8 accumulators in registers as the F16 version does.
inline void weighted_sum_q8(float *out, const float *w, const int8_t *V, const uint16_t *scales, uint32_t n_keys,
                            uint32_t n) {
    const uint32_t blocks_per_row = n / kKVQ8Block;
    uint32_t i = 0;
#if AKUNU_CPU_AVX2
    for (; i + 2 * kKVQ8Block <= n; i += 2 * kKVQ8Block) {
        __m256 acc[8];
        for (int c = 0; c < 8; ++c) acc[c] = _mm256_loadu_ps(out + i + 8 * c);
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
        for (int c = 0; c < 4; ++c) acc[c] = _mm256_loadu_ps(out + i + 8 * c);
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
    for (uint32_t j = 0; j < n_keys; ++j) {
        const int8_t *v = V + (size_t)j * n;
        const uint16_t *d = scales + (size_t)j * blocks_per_row;
        for (uint32_t b = i / kKVQ8Block; b < blocks_per_row; ++b) {
            const float wd = w[j] * fp16_to_f32(d[b]);
            for (uint32_t e = b * kKVQ8Block; e < (b + 1) * kKVQ8Block; ++e) out[e] += wd * (float)v[e];
        }
    }
}

// The same for T query heads of one GQA group at once (T = 2 or 4), so that each K and V element
// is loaded and converted once for the T heads and only the FMAs are per head: a Q8_0 value costs
// two conversions and a scale, an F16 one a conversion, against one FMA per head.
#if AKUNU_CPU_AVX2
// Eight 8-lane partial sums -> their eight sums, in order.
inline void sum_eight(const __m256 (&acc)[8], float *out) {
    const __m256 s03 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    const __m256 s47 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(s03, s47, 0x20), _mm256_permute2f128_ps(s03, s47, 0x31)));
}

// s[g][j] = q[g] . key j, 8 / T keys at a time: T x 8 / T partial sums, one reduction.
template <int T>
void dots_f16_heads(const float *const *q, const uint16_t *K, uint32_t n_keys, uint32_t n, float *const *s) {
    constexpr int KB = 8 / T;
    uint32_t j = 0;
    if (n % 8 == 0) {
        for (; j + KB <= n_keys; j += KB) {
            __m256 acc[8];
            for (int x = 0; x < 8; ++x) acc[x] = _mm256_setzero_ps();
            for (uint32_t i = 0; i < n; i += 8) {
                __m256 kv[KB];
                for (int k = 0; k < KB; ++k)
                    kv[k] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(K + (size_t)(j + k) * n + i)));
                for (int g = 0; g < T; ++g) {
                    const __m256 qg = _mm256_loadu_ps(q[g] + i);
                    for (int k = 0; k < KB; ++k) acc[g * KB + k] = _mm256_fmadd_ps(qg, kv[k], acc[g * KB + k]);
                }
            }
            float sums[8];
            sum_eight(acc, sums);
            for (int g = 0; g < T; ++g)
                for (int k = 0; k < KB; ++k) s[g][j + k] = sums[g * KB + k];
        }
    }
    for (; j < n_keys; ++j)
        for (int g = 0; g < T; ++g) s[g][j] = dot_f32_f16(q[g], K + (size_t)j * n, n);
}

// The same over Q8_0 keys: each key's values are scaled by its block's d as they are converted.
template <int T>
void dots_q8_heads(const float *const *q, const int8_t *K, const uint16_t *scales, uint32_t n_keys, uint32_t n,
                   float *const *s) {
    constexpr int KB = 8 / T;
    const uint32_t blocks_per_row = n / kKVQ8Block;
    uint32_t j = 0;
    for (; j + KB <= n_keys; j += KB) {
        __m256 acc[8];
        for (int x = 0; x < 8; ++x) acc[x] = _mm256_setzero_ps();
        for (uint32_t b = 0; b < blocks_per_row; ++b) {
            __m256 d[KB];
            for (int k = 0; k < KB; ++k) d[k] = _mm256_set1_ps(fp16_scale(scales[(size_t)(j + k) * blocks_per_row + b]));
            for (uint32_t e = b * kKVQ8Block; e < (b + 1) * kKVQ8Block; e += 8) {
                __m256 kv[KB];
                for (int k = 0; k < KB; ++k) kv[k] = _mm256_mul_ps(load_q8x8(K + (size_t)(j + k) * n + e), d[k]);
                for (int g = 0; g < T; ++g) {
                    const __m256 qg = _mm256_loadu_ps(q[g] + e);
                    for (int k = 0; k < KB; ++k) acc[g * KB + k] = _mm256_fmadd_ps(qg, kv[k], acc[g * KB + k]);
                }
            }
        }
        float sums[8];
        sum_eight(acc, sums);
        for (int g = 0; g < T; ++g)
            for (int k = 0; k < KB; ++k) s[g][j + k] = sums[g * KB + k];
    }
    for (; j < n_keys; ++j)
        for (int g = 0; g < T; ++g)
            s[g][j] = dot_f32_q8(q[g], K + (size_t)j * n, scales + (size_t)j * blocks_per_row, n);
}

// out[g][0..n) += sum_j w[g][j] * v_j, 16 elements of the T outputs in registers at a time.
template <int T>
void weighted_sum_f16_heads(float *const *out, const float *const *w, const uint16_t *V, uint32_t n_keys, uint32_t n) {
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 acc[T][2];
        for (int g = 0; g < T; ++g)
            for (int c = 0; c < 2; ++c) acc[g][c] = _mm256_loadu_ps(out[g] + i + 8 * c);
        const uint16_t *v = V + i;
        for (uint32_t j = 0; j < n_keys; ++j, v += n) {
            const __m256 v0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(v)));
            const __m256 v1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(v + 8)));
            for (int g = 0; g < T; ++g) {
                const __m256 wg = _mm256_set1_ps(w[g][j]);
                acc[g][0] = _mm256_fmadd_ps(wg, v0, acc[g][0]);
                acc[g][1] = _mm256_fmadd_ps(wg, v1, acc[g][1]);
            }
        }
        for (int g = 0; g < T; ++g)
            for (int c = 0; c < 2; ++c) _mm256_storeu_ps(out[g] + i + 8 * c, acc[g][c]);
    }
    if (i < n)
        for (int g = 0; g < T; ++g)
            for (uint32_t j = 0; j < n_keys; ++j) axpy_f16(out[g] + i, w[g][j], V + (size_t)j * n + i, n - i);
}

// The same over Q8_0 values, half a block at a time (head_dim is whole blocks).
template <int T>
void weighted_sum_q8_heads(float *const *out, const float *const *w, const int8_t *V, const uint16_t *scales,
                           uint32_t n_keys, uint32_t n) {
    const uint32_t blocks_per_row = n / kKVQ8Block;
    for (uint32_t i = 0; i < n; i += 16) {
        __m256 acc[T][2];
        for (int g = 0; g < T; ++g)
            for (int c = 0; c < 2; ++c) acc[g][c] = _mm256_loadu_ps(out[g] + i + 8 * c);
        const int8_t *v = V + i;
        const uint16_t *d = scales + i / kKVQ8Block;
        for (uint32_t j = 0; j < n_keys; ++j, v += n, d += blocks_per_row) {
            const __m256 dj = _mm256_set1_ps(fp16_scale(*d));
            const __m256 v0 = _mm256_mul_ps(load_q8x8(v), dj), v1 = _mm256_mul_ps(load_q8x8(v + 8), dj);
            for (int g = 0; g < T; ++g) {
                const __m256 wg = _mm256_set1_ps(w[g][j]);
                acc[g][0] = _mm256_fmadd_ps(wg, v0, acc[g][0]);
                acc[g][1] = _mm256_fmadd_ps(wg, v1, acc[g][1]);
            }
        }
        for (int g = 0; g < T; ++g)
            for (int c = 0; c < 2; ++c) _mm256_storeu_ps(out[g] + i + 8 * c, acc[g][c]);
    }
}
#endif

// One KV head's cached keys and values from row `first` on, as the attention loop reads them:
// scores<T>(q, j0, n, s): s[g][j] = q[g] . key j0 + j for j < n and T query heads g;
// weighted_sum<T>(out, w, j0, n): out[g] += sum_j w[g][j] * value j0 + j. T is 1, 2 or 4.
class F16Head {
public:
    F16Head(const KernelArgs &a, const AttentionParams &p, uint32_t kv_head, uint32_t first)
        : K_(reinterpret_cast<const uint16_t *>(a.buffers[1]) + kv_row(kv_head, first, p.max_seq) * p.head_dim),
          V_(reinterpret_cast<const uint16_t *>(a.buffers[2]) + kv_row(kv_head, first, p.max_seq) * p.head_dim),
          n_(p.head_dim) {}
    template <int T>
    void scores(const float *const *q, uint32_t j0, uint32_t n_keys, float *const *s) const {
        const uint16_t *K = K_ + (size_t)j0 * n_;
#if AKUNU_CPU_AVX2
        if constexpr (T > 1) return dots_f16_heads<T>(q, K, n_keys, n_, s);
#endif
        for (int g = 0; g < T; ++g) dots_f32_f16(q[g], K, n_keys, n_, s[g]);
    }
    template <int T>
    void weighted_sum(float *const *out, const float *const *w, uint32_t j0, uint32_t n_keys) const {
        const uint16_t *V = V_ + (size_t)j0 * n_;
#if AKUNU_CPU_AVX2
        if constexpr (T > 1) return weighted_sum_f16_heads<T>(out, w, V, n_keys, n_);
#endif
        for (int g = 0; g < T; ++g) weighted_sum_f16(out[g], w[g], V, n_keys, n_);
    }

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
    template <int T>
    void scores(const float *const *q, uint32_t j0, uint32_t n_keys, float *const *s) const {
        const int8_t *K = K_ + (size_t)j0 * n_;
        const uint16_t *Kd = Kd_ + (size_t)j0 * blocks_;
#if AKUNU_CPU_AVX2
        if constexpr (T > 1) return dots_q8_heads<T>(q, K, Kd, n_keys, n_, s);
#endif
        for (int g = 0; g < T; ++g) dots_f32_q8(q[g], K, Kd, n_keys, n_, s[g]);
    }
    template <int T>
    void weighted_sum(float *const *out, const float *const *w, uint32_t j0, uint32_t n_keys) const {
        const int8_t *V = V_ + (size_t)j0 * n_;
        const uint16_t *Vd = Vd_ + (size_t)j0 * blocks_;
#if AKUNU_CPU_AVX2
        if constexpr (T > 1) return weighted_sum_q8_heads<T>(out, w, V, Vd, n_keys, n_);
#endif
        for (int g = 0; g < T; ++g) weighted_sum_q8(out[g], w[g], V, Vd, n_keys, n_);
    }

private:
    const int8_t *K_, *V_;
    const uint16_t *Kd_, *Vd_;
    uint32_t n_, blocks_;
};

// Keys per block of the GQA-group loop: a block's K (or V) rows stay in L1 (16 KB as F16) while
// every query head of the group reads them. A multiple of 8, as the score loops take 8 keys.
inline uint32_t keys_per_block(uint32_t head_dim) { return std::max<uint32_t>(8, (8192 / head_dim) & ~7u); }

// Query heads h0..h0 + G - 1 (one KV head's group, or a single head) of query row r. Row r sits at
// position + r and sees the keys of positions 0..position + r (causal), or only the last `window`
// of them (sliding window). Key p is cache row p % max_seq: a sliding-window layer's ring may hold
// a window in two runs of rows (the oldest keys at its end, the newest from row 0). The group's
// heads read each block of K and V while it is in L1 (in tiles of up to 4 heads that share its loads
// and conversions), so the cache streams from memory once per group instead of once per head.
// Exact softmax in two passes over the scores, which are
// soft-capped first when the model says so.
template <class Head>
void attend_heads(const KernelArgs &a, const AttentionParams &p, uint32_t h0, uint32_t G, uint32_t r) {
    thread_local std::vector<float> scores;
    const uint32_t group = p.n_heads / p.n_kv_heads;
    const uint32_t n_ctx = std::min(p.position + r + 1, p.kv_len);
    const uint32_t first = (p.window && n_ctx > p.window) ? n_ctx - p.window : 0;
    const uint32_t n_keys = n_ctx - first;
    const uint32_t first_row = first % p.max_seq, n_run = std::min(n_keys, p.max_seq - first_row);
    const Head run(a, p, h0 / group, first_row), wrapped(a, p, h0 / group, 0);  // keys n_run.. at row 0
    const uint32_t block = keys_per_block(p.head_dim);
    // Blocks of the run, then of the wrapped keys: fn(head, key offset in it, keys, offset in scores).
    const auto for_blocks = [&](auto &&fn) {
        for (uint32_t j0 = 0; j0 < n_run; j0 += block) fn(run, j0, std::min(block, n_run - j0), j0);
        for (uint32_t j0 = 0; j0 < n_keys - n_run; j0 += block)
            fn(wrapped, j0, std::min(block, n_keys - n_run - j0), n_run + j0);
    };
    const auto q_of = [&](uint32_t g) {
        return reinterpret_cast<const float *>(a.buffers[0]) + (size_t)r * p.q_stride + (h0 + g) * p.head_dim;
    };
    const auto out_of = [&](uint32_t g) {
        return reinterpret_cast<float *>(a.buffers[3]) + (size_t)r * p.out_stride + (h0 + g) * p.head_dim;
    };

    // The group's heads in tiles of 4, 2 and 1: tile(g, T) runs heads g..g + T - 1 through fn<T>.
    const auto for_tiles = [&](auto &&fn) {
        uint32_t g = 0;
        for (; g + 4 <= G; g += 4) fn(g, std::integral_constant<int, 4>{});
        for (; g + 2 <= G; g += 2) fn(g, std::integral_constant<int, 2>{});
        for (; g < G; ++g) fn(g, std::integral_constant<int, 1>{});
    };

    if (scores.size() < (size_t)G * n_keys) scores.resize((size_t)G * n_keys);
    for_blocks([&](const Head &head, uint32_t j0, uint32_t n, uint32_t at) {
        for_tiles([&](uint32_t g0, auto tile) {
            constexpr int T = decltype(tile)::value;
            const float *q[T];
            float *s[T];
            for (int g = 0; g < T; ++g) {
                q[g] = q_of(g0 + g);
                s[g] = scores.data() + (size_t)(g0 + g) * n_keys + at;
            }
            head.template scores<T>(q, j0, n, s);
        });
    });
    for (uint32_t g = 0; g < G; ++g) {
        float *s = scores.data() + (size_t)g * n_keys;
        float max_score = -INFINITY;
        for (uint32_t j = 0; j < n_keys; ++j) {
            s[j] *= p.scale;
            max_score = std::max(max_score, s[j]);
        }
        if (p.softcap > 0.f) {  // tanh is monotonic: the capped maximum is the capped max_score
            const float inv_cap = 1.0f / p.softcap;
            for (uint32_t j = 0; j < n_keys; ++j) s[j] = p.softcap * std::tanh(s[j] * inv_cap);
            max_score = p.softcap * std::tanh(max_score * inv_cap);
        }
        const float inv = 1.0f / exp_shifted_sum(s, max_score, s, n_keys);
        for (uint32_t j = 0; j < n_keys; ++j) s[j] *= inv;
        std::fill(out_of(g), out_of(g) + p.head_dim, 0.f);
    }
    for_blocks([&](const Head &head, uint32_t j0, uint32_t n, uint32_t at) {
        for_tiles([&](uint32_t g0, auto tile) {
            constexpr int T = decltype(tile)::value;
            float *o[T];
            const float *w[T];
            for (int g = 0; g < T; ++g) {
                o[g] = out_of(g0 + g);
                w[g] = scores.data() + (size_t)(g0 + g) * n_keys + at;
            }
            head.template weighted_sum<T>(o, w, j0, n);
        });
    });
}

// Unit = (head, query row), heads fastest. A whole GQA group of units in the range (the thread
// pool hands out whole groups: attention_unit_granule) runs as one attend_heads call.
template <class Head>
void attention(const KernelArgs &a, int64_t begin, int64_t end) {
    const AttentionParams &p = params_of<AttentionParams>(a);
    const uint32_t group = p.n_heads / p.n_kv_heads;
    for (int64_t unit = begin; unit < end;) {
        const uint32_t h = (uint32_t)(unit % p.n_heads), r = (uint32_t)(unit / p.n_heads);
        const uint32_t G = (h % group == 0 && unit + group <= end) ? group : 1;
        attend_heads<Head>(a, p, h, G, r);
        unit += G;
    }
}

}  // namespace

void attention_f16kv_kernel(const KernelArgs &a, int64_t begin, int64_t end) { attention<F16Head>(a, begin, end); }
void attention_q8kv_kernel(const KernelArgs &a, int64_t begin, int64_t end) { attention<Q8Head>(a, begin, end); }

int64_t attention_unit_granule(const KernelArgs &a) {
    const AttentionParams &p = params_of<AttentionParams>(a);
    return p.n_kv_heads ? std::max<uint32_t>(1, p.n_heads / p.n_kv_heads) : 1;
}

}  // namespace akunu::cpu
