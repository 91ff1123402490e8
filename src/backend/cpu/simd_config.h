// Compile-time SIMD selection and floating-point contraction control shared by the CPU row kernels
// (dequantize.cpp, act_quant.cpp, gemm_tiles.cpp, kquant_kernels.cpp, the r8 / r16 layouts).
#pragma once

// AVX2+FMA+F16C (AVX-512 machines use it too). AKUNU_FORCE_SCALAR disables SIMD, to test the
// scalar fallback (what every other target runs) on a SIMD machine.
#if !defined(AKUNU_FORCE_SCALAR) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define AKUNU_CPU_AVX2 1
#include <immintrin.h>
// AVX-512 with VNNI (Zen 4, Ice Lake and later): Q4_0 / Q4_1 / Q8_0 take the r16 layout and its
// vpdpbusd kernels (r16_layout.cpp) instead of r8.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define AKUNU_CPU_VNNI512 1
#endif

namespace akunu::cpu {
// Sum of the eight lanes.
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
}  // namespace akunu::cpu
#endif

// Dequantization and activation quantization must round exactly like gguf-py / llama.cpp's
// reference code: `d * q + m` must not become an FMA, and `x * id` must be rounded to float before
// roundf. GCC contracts across statements (and vector intrinsics) by default in gnu++ mode, so
// those functions opt out explicitly. The GEMM kernels want FMAs and are left alone.
#if defined(__clang__)
#define AKUNU_NO_FP_CONTRACT
#define AKUNU_NO_FP_CONTRACT_SCOPE _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define AKUNU_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#define AKUNU_NO_FP_CONTRACT_SCOPE
#else
#define AKUNU_NO_FP_CONTRACT
#define AKUNU_NO_FP_CONTRACT_SCOPE
#endif

// Tile helpers whose accumulators must stay in registers: GCC stops inlining large unrolled bodies,
// and a helper called out of line passes its accumulator arrays through memory.
#if defined(__GNUC__)
#define AKUNU_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define AKUNU_ALWAYS_INLINE inline
#endif

// Tile loops have compile-time trip counts; unrolling them keeps accumulators in registers.
#if defined(__GNUC__)
#define AKUNU_UNROLL _Pragma("GCC unroll 16")
#else
#define AKUNU_UNROLL
#endif

namespace akunu::cpu {
// "avx512vnni", "avx2" or "scalar": what this file's macros chose for the engine's sources
// (simd_config.cpp; code compiled with other flags, such as the Python module, must ask this).
const char *compiled_simd_level();
}  // namespace akunu::cpu
