// cuBLAS, loaded at run time, for the F16 prefill GEMMs (docs/adr/0010; BF16 matrices are F16 on
// CUDA, converted at load).
//
// The module links no cuBLAS: dlopen on first use keeps `import akunu` working on machines without
// it (CPU-only ones, or a CUDA driver without the toolkit's libraries), and then the GEMMs fall
// back to akunu's own tensor-core tiles (cuda/gemm_tiles.cuh). Quantized formats never come here:
// their own kernels dequantize tiles on the fly and beat a dequantize-then-cuBLAS round trip.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace akunu::cuda {

class CublasGemm {
public:
    // Nothing is loaded yet; AKUNU_CUDA_CUBLAS=0 in the environment keeps it unloaded for good.
    explicit CublasGemm(cudaStream_t stream);
    ~CublasGemm();
    CublasGemm(const CublasGemm &) = delete;
    CublasGemm &operator=(const CublasGemm &) = delete;

    // Loads the library and creates the handle the first time (never during a graph capture:
    // only M > 1 GEMMs ask, and those run eagerly). False when it is missing or switched off.
    bool ready() const;

    // y[M, N] (+)= x[M, K] . W[N, K]^T with x and W f16 (row strides in elements), y f32 (y_ld
    // floats a row), f32 accumulation, on the stream it was made for.
    void gemm(const void *w, size_t w_ld, const void *x, size_t x_ld, float *y, size_t y_ld, uint32_t M, uint32_t N,
              uint32_t K, bool accumulate) const;

    // Room for a quantized prefill GEMM's f16 copies (cuda/gemm.cu, launch_dequant_library_gemm):
    // kScratchBytes of device memory, allocated on the first call. Null when cuBLAS is not ready,
    // while the stream is being captured, or when the allocation fails (the caller then runs
    // akunu's tiles).
    static constexpr size_t kScratchBytes = 128u << 20;
    void *scratch() const;

private:
    struct Api;
    cudaStream_t stream_;
    mutable bool tried_ = false;
    mutable std::unique_ptr<Api> api_;  // resolved entry points and the handle; null until loaded
    mutable void *workspace_ = nullptr;
    mutable void *scratch_ = nullptr;
    mutable bool scratch_tried_ = false;
};

// GEMMs run through cuBLAS so far, all devices (a test's proof that the path is taken).
uint64_t cublas_gemms_launched();

}  // namespace akunu::cuda
