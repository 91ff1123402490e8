// Activation quantization (act_quant.h): float rows -> BlockQ16Act for the integer dot products,
// the scalar reference and the AVX2 version (identical bytes), and the kernels quantize_act_q16 /
// quantize_act_q8x2 (_panel) that quantize one activation row per work unit.
#include "backend/cpu/act_quant.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/kernels.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/simd_config.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

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

// Unit = one activation row -> int16 blocks (BlockQ16Act) for the integer dot products.
void act_quant_q16_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const ActQuantParams &p = params_of<ActQuantParams>(a);
    const float *x = reinterpret_cast<const float *>(a.buffers[0]);
    for (int64_t r = begin; r < end; ++r)
        quantize_row_act(x + (size_t)r * p.x_stride, reinterpret_cast<BlockQ16Act *>(a.buffers[1] + (size_t)r * p.out_row_bytes),
                         p.K);
}

#if defined(AKUNU_CPU_VNNI512)
namespace {
// Rows [begin, end) -> two-digit int8 blocks (BlockQ8x2Act): a d per block, or (superblocks) a d per
// 256 elements and each row followed by its int16 values (the rows r16k::panel_gemm_rows reads).
void quantize_rows_q8x2(const KernelArgs &a, int64_t begin, int64_t end, bool superblocks) {
    const ActQuantParams &p = params_of<ActQuantParams>(a);
    const float *x = reinterpret_cast<const float *>(a.buffers[0]);
    for (int64_t r = begin; r < end; ++r) {
        BlockQ8x2Act *row = reinterpret_cast<BlockQ8x2Act *>(a.buffers[1] + (size_t)r * p.out_row_bytes);
        const float *xr = x + (size_t)r * p.x_stride;
        if (superblocks) quantize_row_act_q8x2_superblocks(xr, row, p.K, q8x2_row_int16(row, p.K));
        else quantize_row_act_q8x2(xr, row, p.K);
    }
}
}  // namespace

// Unit = one activation row, for the r16 layout's GEMMs: blocks with their own d, or (_superblocks)
// a d per 256 elements and the int16 values.
void act_quant_q8x2_kernel(const KernelArgs &a, int64_t begin, int64_t end) { quantize_rows_q8x2(a, begin, end, false); }
void act_quant_q8x2_superblocks_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    quantize_rows_q8x2(a, begin, end, true);
}
#endif

}  // namespace akunu::cpu
