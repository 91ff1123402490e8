#include <cmath>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd_config.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

namespace {

// The scalar rule: the first index whose logit beats every one before it, starting from x[0]. NaNs
// never win (x[i] > best is false), and a NaN x[0] wins outright.
uint32_t argmax_scalar(const float *x, uint32_t n) {
    uint32_t best = 0;
    float best_value = x[0];
    for (uint32_t i = 1; i < n; ++i)
        if (x[i] > best_value) {
            best_value = x[i];
            best = i;
        }
    return best;
}

#if defined(AKUNU_CPU_AVX2)
// The same index in two vector passes (a 128k-token vocabulary: ~100 us of a token scalar, the
// compare chain being one long dependency): the largest logit that is not NaN, then the first index
// holding it. max_ps(v, m) returns m where v is NaN, so NaNs drop out of the maximum.
uint32_t argmax_avx2(const float *x, uint32_t n) {
    if (std::isnan(x[0]) || n < 32) return argmax_scalar(x, n);
    __m256 m[4] = {_mm256_set1_ps(-INFINITY), _mm256_set1_ps(-INFINITY), _mm256_set1_ps(-INFINITY),
                   _mm256_set1_ps(-INFINITY)};
    uint32_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; ++k) m[k] = _mm256_max_ps(_mm256_loadu_ps(x + i + 8 * k), m[k]);
    __m256 mv = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
    float lanes[8];
    _mm256_storeu_ps(lanes, mv);
    float best = lanes[0];
    for (int k = 1; k < 8; ++k) best = lanes[k] > best ? lanes[k] : best;
    for (uint32_t j = i; j < n; ++j) best = x[j] > best ? x[j] : best;
    // x[0] is not NaN, so the maximum is at least x[0] and some index holds it.
    const __m256 target = _mm256_set1_ps(best);
    for (i = 0; i + 8 <= n; i += 8) {
        const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), target, _CMP_EQ_OQ));
        if (hits) return i + (uint32_t)__builtin_ctz((unsigned)hits);
    }
    for (; i < n; ++i)
        if (x[i] == best) return i;
    return 0;  // not reached
}
#endif

}  // namespace

// Single unit: index of the largest logit (the first one on ties) into the token slot.
void argmax_kernel(const KernelArgs &a, int64_t, int64_t) {
    const ArgmaxParams &p = params_of<ArgmaxParams>(a);
    const float *x = reinterpret_cast<const float *>(a.buffers[0]);
#if defined(AKUNU_CPU_AVX2)
    *reinterpret_cast<uint32_t *>(a.buffers[1]) = argmax_avx2(x, p.n);
#else
    *reinterpret_cast<uint32_t *>(a.buffers[1]) = argmax_scalar(x, p.n);
#endif
}

}  // namespace akunu::cpu
