// The memory system's plain read bandwidth on the CPU: every core's thread (OMP_NUM_THREADS to choose, as
// compare.py's --threads) streams its share of a 1 GiB huge-page buffer (larger than any last-level cache)
// with AVX2 loads, 15 passes; prints each pass and the best in GB/s.
// The ceiling that a decode GEMV streaming its weights from DRAM is measured against
// (benchmarks/HISTORY.md, issue 3).
//   gcc -O2 -mavx2 -fopenmp tools/read_bandwidth.c -o /tmp/read_bandwidth && /tmp/read_bandwidth
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static volatile unsigned g_sink;  // the loads' result goes here, so they are not optimized away

int main(void) {
    const size_t n = (size_t)1 << 30;
    char *buf = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) return 1;
    madvise(buf, n, MADV_HUGEPAGE);  // advisory, as the engine's weight buffers
    memset(buf, 1, n);
    const int threads = omp_get_max_threads();
    const size_t share = n / (size_t)threads / 128 * 128;
    double best = 0;
    for (int pass = 0; pass < 15; ++pass) {
        unsigned sink = 0;
        const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(^ : sink)
        {
            const size_t lo = share * (size_t)omp_get_thread_num(), hi = lo + share;
            // Four independent accumulators, so the loads are not chained through one register.
            __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
            for (size_t i = lo; i < hi; i += 128) {
                a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(buf + i)));
                a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(buf + i + 32)));
                a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(buf + i + 64)));
                a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(buf + i + 96)));
            }
            const __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
            sink ^= (unsigned)_mm256_extract_epi32(a, 0);
        }
        const double gbs = (double)(share * (size_t)threads) / (omp_get_wtime() - t0) / 1e9;
        g_sink ^= sink;
        if (gbs > best) best = gbs;
        printf("%.1f ", gbs);
    }
    printf("\nbest read %.1f GB/s (%d threads)\n", best, threads);
    return 0;
}
