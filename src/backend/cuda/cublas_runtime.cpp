#include "backend/cuda/cublas_runtime.h"

#include <dlfcn.h>
#include <library_types.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.h"

namespace akunu::cuda {

namespace {

// The few entry points used, declared from cuBLAS's documented C ABI (cublas_api.h), since a
// toolkit without the cuBLAS development files must still build akunu. The enum values are
// those of the header: stable across cuBLAS 11-13.
using Status = int;  // cublasStatus_t: 0 = CUBLAS_STATUS_SUCCESS
using Handle = void *;
constexpr int kOpN = 0, kOpT = 1;  // cublasOperation_t
constexpr int kCompute32F = 68;    // cublasComputeType_t CUBLAS_COMPUTE_32F
constexpr int kGemmDefault = -1;   // cublasGemmAlgo_t CUBLAS_GEMM_DEFAULT
using CreateFn = Status (*)(Handle *);
using DestroyFn = Status (*)(Handle);
using SetStreamFn = Status (*)(Handle, cudaStream_t);
using SetWorkspaceFn = Status (*)(Handle, void *, size_t);
using GemmExFn = Status (*)(Handle, int transa, int transb, int m, int n, int k, const void *alpha, const void *A,
                            cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
                            void *C, cudaDataType Ctype, int ldc, int computeType, int algo);

// 32 MiB: the workspace NVIDIA recommends for Hopper; cuBLAS never allocates while it is set.
constexpr size_t kWorkspaceBytes = 32u << 20;

std::atomic<uint64_t> g_gemms{0};

template <typename Fn>
Fn symbol(void *lib, const char *name) {
    return reinterpret_cast<Fn>(dlsym(lib, name));
}

// Candidates in order: the loader's own search (LD_LIBRARY_PATH, ld.so.cache), then the toolkit
// akunu was compiled with (AKUNU_CUDA_TOOLKIT_LIBDIR, set by CMake), each by this CUDA major's
// soname first.
std::vector<std::string> library_candidates() {
    const std::string major = std::to_string(CUDART_VERSION / 1000);
    std::vector<std::string> names = {"libcublas.so." + major, "libcublas.so"};
    std::vector<std::string> out = names;
#ifdef AKUNU_CUDA_TOOLKIT_LIBDIR
    for (const std::string &n : names) out.push_back(std::string(AKUNU_CUDA_TOOLKIT_LIBDIR) + "/" + n);
#endif
    return out;
}

}  // namespace

struct CublasGemm::Api {
    void *lib = nullptr;
    Handle handle = nullptr;
    DestroyFn destroy = nullptr;
    GemmExFn gemm_ex = nullptr;
};

uint64_t cublas_gemms_launched() { return g_gemms.load(); }

CublasGemm::CublasGemm(cudaStream_t stream) : stream_(stream) {
    const char *v = std::getenv("AKUNU_CUDA_CUBLAS");
    if (v && std::strcmp(v, "0") == 0) tried_ = true;
}

CublasGemm::~CublasGemm() {
    if (api_) {
        api_->destroy(api_->handle);
        dlclose(api_->lib);
    }
    if (workspace_) cudaFree(workspace_);
    if (scratch_) cudaFree(scratch_);
}

void *CublasGemm::scratch() const {
    // Checked first: loading the library or allocating would break a capture in progress.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
        cudaGetLastError();
        return nullptr;
    }
    if (!ready()) return nullptr;
    if (!scratch_tried_) {
        scratch_tried_ = true;
        if (cudaMalloc(&scratch_, kScratchBytes) != cudaSuccess) {
            cudaGetLastError();
            scratch_ = nullptr;
        }
    }
    return scratch_;
}

bool CublasGemm::ready() const {
    if (tried_) return api_ != nullptr;
    tried_ = true;
    void *lib = nullptr;
    for (const std::string &c : library_candidates())
        if ((lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) return false;
    auto create = symbol<CreateFn>(lib, "cublasCreate_v2");
    auto set_stream = symbol<SetStreamFn>(lib, "cublasSetStream_v2");
    auto set_workspace = symbol<SetWorkspaceFn>(lib, "cublasSetWorkspace_v2");
    auto api = std::make_unique<Api>();
    api->lib = lib;
    api->destroy = symbol<DestroyFn>(lib, "cublasDestroy_v2");
    api->gemm_ex = symbol<GemmExFn>(lib, "cublasGemmEx");
    if (!create || !set_stream || !set_workspace || !api->destroy || !api->gemm_ex || create(&api->handle) != 0) {
        dlclose(lib);
        return false;
    }
    if (cudaMalloc(&workspace_, kWorkspaceBytes) != cudaSuccess || set_stream(api->handle, stream_) != 0 ||
        set_workspace(api->handle, workspace_, kWorkspaceBytes) != 0) {
        cudaGetLastError();
        api->destroy(api->handle);
        dlclose(lib);
        if (workspace_) cudaFree(workspace_);
        workspace_ = nullptr;
        return false;
    }
    api_ = std::move(api);
    return true;
}

// Row-major y[M, N] = x[M, K] . W[N, K]^T is column-major y^T (N x M) = W^T' . x^T: A = W read
// transposed (K x N column-major, lda = w_ld), B = x (K x M column-major, ldb = x_ld).
void CublasGemm::gemm(const void *w, size_t w_ld, const void *x, size_t x_ld, float *y, size_t y_ld, uint32_t M,
                      uint32_t N, uint32_t K, bool accumulate) const {
    if (!ready()) throw AkunuError("internal: cuBLAS GEMM without cuBLAS");
    const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
    const Status s = api_->gemm_ex(api_->handle, kOpT, kOpN, (int)N, (int)M, (int)K, &alpha, w, CUDA_R_16F, (int)w_ld, x, CUDA_R_16F,
                                   (int)x_ld, &beta, y, CUDA_R_32F, (int)y_ld, kCompute32F, kGemmDefault);
    if (s != 0) throw AkunuError("cuBLAS GEMM failed (status " + std::to_string(s) + ")");
    ++g_gemms;
}

}  // namespace akunu::cuda
