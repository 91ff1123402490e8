// The GPU's device-to-device copy bandwidth, the ceiling issue 30's and 31's read rates are measured
// against: cudaMemcpy of 1 GiB between two device buffers, best of 10 after 3 warm-ups, counted as
// read + write (2 x 1 GiB a copy), as the torch copies of benchmarks/HISTORY.md's entries were.
//   nvcc -O2 -o /tmp/copy_bandwidth tools/cuda_copy_bandwidth.cu && /tmp/copy_bandwidth
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t err_ = (call);                                                   \
        if (err_ != cudaSuccess) {                                                   \
            std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(err_));      \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main() {
    const size_t n = size_t(1) << 30;
    void *src = nullptr, *dst = nullptr;
    CHECK(cudaMalloc(&src, n));
    CHECK(cudaMalloc(&dst, n));
    CHECK(cudaMemset(src, 1, n));
    CHECK(cudaMemset(dst, 0, n));
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < 3; ++i) CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
    float best_ms = 1e30f;
    for (int i = 0; i < 10; ++i) {
        CHECK(cudaEventRecord(start));
        CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0.f;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (ms < best_ms) best_ms = ms;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("%s: device-to-device copy of 1 GiB, best of 10: %.3f ms, %.0f GB/s read + write\n", prop.name, best_ms,
                2.0 * n / best_ms / 1e6);
    return 0;
}
