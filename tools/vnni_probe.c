// What a 512-bit vpdpbusd leaves room for on this CPU: the time of 16 independent vpdpbusd alone and
// with other instructions mixed in (each kind in 4 independent chains, so latency never decides).
// The r16 GEMMs (src/backend/cpu/r16_layout.cpp, r16_kquant_layout.cpp) are vpdpbusd plus such
// instructions; docs/experiments.md ("CPU: where the Q6_K prefill GEMM's time goes") has a run.
//   gcc -O3 -march=native tools/vnni_probe.c -o /tmp/vnni_probe && /tmp/vnni_probe [GHz]
// Cycles assume the given clock (default 3.67 GHz); the ratios between rows do not depend on it.
// Run it on an idle machine: another busy thread on the same core halves every row. The float
// rows multiply by 1 so that no value becomes subnormal (which would slow them for another reason).
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

// Inline asm, so that the compiler can neither share one product between chains nor drop a chain.
static inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}
static inline __m512i maddwd(__m512i acc, __m512i a, __m512i b) {
    __m512i r;
    __asm__("vpmaddwd %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
    return _mm512_add_epi32(acc, r);
}
static inline __m512i maddubsw(__m512i acc, __m512i a, __m512i b) {
    __m512i r;
    __asm__("vpmaddubsw %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
    return _mm512_add_epi16(acc, r);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { kIters = 50000000 };
static double ghz = 3.67;

// 16 vpdpbusd chains, plus `extra` rounds of the other kind over 4 chains.
#define PROBE(name, extra, STEP)                                                                        \
    do {                                                                                                \
        __m512i d[16], c[4];                                                                            \
        __m512 f[4];                                                                                    \
        for (int i = 0; i < 16; ++i) d[i] = _mm512_set1_epi32(i);                                       \
        for (int i = 0; i < 4; ++i) c[i] = _mm512_set1_epi32(i), f[i] = _mm512_set1_ps((float)i);       \
        __m512i a = _mm512_set1_epi32(0x01010101), b = _mm512_set1_epi32(0x02020202);                   \
        __m512 s = _mm512_set1_ps(1.0f);                                                              \
        const double t0 = now();                                                                        \
        for (long it = 0; it < kIters; ++it) {                                                          \
            for (int i = 0; i < 16; ++i) d[i] = dpbusd(d[i], a, b);                                     \
            for (int e = 0; e < (extra); ++e)                                                           \
                for (int i = 0; i < 4; ++i) { STEP; }                                                   \
            __asm__ volatile("" : "+v"(a), "+v"(b), "+v"(s));                                           \
        }                                                                                               \
        const double t = now() - t0;                                                                    \
        __m512i sum = _mm512_setzero_si512();                                                           \
        for (int i = 0; i < 16; ++i) sum = _mm512_add_epi32(sum, d[i]);                                 \
        for (int i = 0; i < 4; ++i) sum = _mm512_add_epi32(sum, _mm512_add_epi32(c[i], _mm512_castps_si512(f[i]))); \
        printf("16 vpdpbusd + %-30s %6.2f ns  %5.1f cycles  (%d)\n", name, t / kIters * 1e9,            \
               t / kIters * ghz * 1e9, _mm512_reduce_add_epi32(sum));                                   \
    } while (0)

int main(int argc, char **argv) {
    if (argc > 1) ghz = atof(argv[1]);
    PROBE("nothing", 0, (void)0);
    PROBE("8 vpaddd", 2, c[i] = _mm512_add_epi32(c[i], a));
    PROBE("16 vpaddd", 4, c[i] = _mm512_add_epi32(c[i], a));
    PROBE("8 vpslld", 2, c[i] = _mm512_slli_epi32(c[i], 1));
    PROBE("8 vpternlogd", 2, c[i] = _mm512_ternarylogic_epi32(c[i], a, b, 0xF8));
    PROBE("8 vcvtdq2ps", 2, c[i] = _mm512_castps_si512(_mm512_cvtepi32_ps(c[i])));
    PROBE("8 broadcasts from a GPR", 2, c[i] = _mm512_add_epi32(c[i], _mm512_set1_epi32((int)it + i)));
    PROBE("8 vmulps", 2, f[i] = _mm512_mul_ps(f[i], s));
    PROBE("8 vfmadd", 2, f[i] = _mm512_fmadd_ps(f[i], s, s));
    PROBE("8 vpmulld", 2, c[i] = _mm512_mullo_epi32(c[i], a));
    PROBE("16 vpmulld", 4, c[i] = _mm512_mullo_epi32(c[i], a));
    PROBE("8 vpmaddwd (+vpaddd)", 2, c[i] = maddwd(c[i], a, b));
    PROBE("16 vpmaddwd (+vpaddd)", 4, c[i] = maddwd(c[i], a, b));
    PROBE("8 vpmaddubsw (+vpaddw)", 2, c[i] = maddubsw(c[i], a, b));
    // What the unpacking of a decode GEMV (one activation row) is made of, and byte-exact
    // alternatives to 16-bit shifts (ADR 0028).
    PROBE("16 vpandd", 4, c[i] = _mm512_and_si512(c[i], a));
    PROBE("16 vpsrlw", 4, c[i] = _mm512_srli_epi16(c[i], 3));
    PROBE("16 vpternlogd", 4, c[i] = _mm512_ternarylogic_epi32(c[i], a, b, 0xF8));
    PROBE("8 gf2p8affineqb", 2, c[i] = _mm512_gf2p8affine_epi64_epi8(c[i], a, 0));
    PROBE("8 vpmultishiftqb", 2, c[i] = _mm512_multishift_epi64_epi8(a, c[i]));
    return 0;
}
