// Warp-level tensor-core primitives (mma.sync m16n8k16, f16 inputs, f32 accumulators) shared by
// the prefill GEMM tiles (cuda/gemm_tiles.cuh), prefill attention (cuda/attention_prefill.cu) and
// the long-context decode attention (cuda/attention_decode_gqa.cu).
//
// Fragment layouts (PTX ISA, g = lane / 4, t = lane % 4): A (16 x 16, row-major) a[0] = rows g,
// cols 2t..2t+1; a[1] rows g + 8; a[2], a[3] the same at cols + 8. B (16 x 8, k x n) b[0] = k
// 2t..2t+1, n g; b[1] k + 8. C (16 x 8) c[0], c[1] = row g, cols 2t, 2t+1; c[2], c[3] row g + 8.
#pragma once
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

namespace akunu::cuda {

__device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const __half *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
// c[4] += a (16 x 16, row-major) . b (16 x 8, column-major)
__device__ __forceinline__ void mma_16816(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// ldmatrix with each 8 x 8 matrix transposed: from a row-major [k][n] tile, the B fragments.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, const __half *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

constexpr float kLog2e = 1.4426950408889634f;

// One step of a warp's online softmax over a 16-row tile, on C fragments: s[j] holds the scores
// of n-tile j (8 keys; -inf where masked), m / l this thread's rows g and g + 8 (l: only its own
// columns, the quad sums it at the end), o[j] the output fragments. Rescales l and o to the new
// row maxima and leaves the probabilities e^(s - m) in s, ready to be packed as the A fragments
// of P V. Used by the prefill and the long-context decode attention.
template <int kScoreTiles, int kOutTiles>
__device__ __forceinline__ void online_softmax_step(float (&s)[kScoreTiles][4], float (&m)[2], float (&l)[2],
                                                    float (&o)[kOutTiles][4]) {
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) mx[c >> 1] = fmaxf(mx[c >> 1], s[j][c]);
    float corr[2], base[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
        const float m_new = fmaxf(m[i], mx[i]);
        base[i] = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing visible yet stays 0
        corr[i] = exp2f((m[i] - base[i]) * kLog2e);  // 0 while m is -inf
        m[i] = m_new;
        l[i] *= corr[i];
    }
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            s[j][c] = exp2f((s[j][c] - base[c >> 1]) * kLog2e);
            l[c >> 1] += s[j][c];
        }
#pragma unroll
    for (int j = 0; j < kOutTiles; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[j][c] *= corr[c >> 1];
}

}  // namespace akunu::cuda
