// Device factory: the only place that knows which backends were compiled in.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_device.h"
#include "core/device.h"
#include "core/errors.h"
#ifdef AKUNU_HAS_CUDA
#include "backend/cuda/cublas_runtime.h"
#include "backend/cuda/cuda_device.h"
#endif
#ifdef AKUNU_HAS_METAL
#include "backend/metal/metal_device.h"
#endif

namespace akunu {

// Usable CUDA devices (0 when the CUDA backend is not built, or there is no driver or GPU).
int cuda_device_count() {
#ifdef AKUNU_HAS_CUDA
    return cuda::device_count();
#else
    return 0;
#endif
}

// Whether the Metal backend is built and an Apple GPU it supports is present. For tests.
bool metal_available() {
#ifdef AKUNU_HAS_METAL
    return metal::metal_device_available();
#else
    return false;
#endif
}

// GEMV commands launched (or captured) so far with their input handed off quantized by the
// command before them (cuda/q16_activation.cuh); 0 without the CUDA backend. For tests.
uint64_t cuda_q16_handoffs() {
#ifdef AKUNU_HAS_CUDA
    return cuda::q16_handoffs_launched();
#else
    return 0;
#endif
}

// Accumulating GEMMs launched (or captured) so far whose output the command before them cannot
// write (CUDA's LaunchArgs::output_settled: their kernels may read it before their wait); 0 without
// the CUDA backend. For tests.
uint64_t cuda_settled_accumulates() {
#ifdef AKUNU_HAS_CUDA
    return cuda::settled_accumulates_launched();
#else
    return 0;
#endif
}

// F16 / BF16 GEMMs run through cuBLAS so far (src/backend/cuda/cublas_runtime.h); 0 without the
// CUDA backend. For tests.
uint64_t cuda_cublas_gemms() {
#ifdef AKUNU_HAS_CUDA
    return cuda::cublas_gemms_launched();
#else
    return 0;
#endif
}

// Pair commands' (two weight dtypes) decode GEMVs run as one launch so far (cuda/gemm.cu); 0 without
// the CUDA backend. For tests.
uint64_t cuda_pair_gemvs() {
#ifdef AKUNU_HAS_CUDA
    return cuda::pair_gemvs_launched();
#else
    return 0;
#endif
}

const std::vector<std::string> &built_backends() {
    static const std::vector<std::string> names = {
        "cpu",
#ifdef AKUNU_HAS_CUDA
        "cuda",
#endif
#ifdef AKUNU_HAS_METAL
        "metal",
#endif
    };
    return names;
}

namespace {
// "'auto', 'cpu', 'cuda'": the names create_device accepts in this build.
std::string accepted_backends() {
    std::string out = "'auto'";
    for (const std::string &name : built_backends()) out += ", '" + name + "'";
    return out;
}
}  // namespace

std::unique_ptr<Device> create_device(const std::string &backend, int threads) {
    if (backend == "cpu") return std::make_unique<cpu::CpuDevice>(threads);
    if (backend == "auto") {
#ifdef AKUNU_HAS_CUDA
        if (cuda_device_count() > 0) return std::make_unique<cuda::CudaDevice>(0);
#endif
#ifdef AKUNU_HAS_METAL
        if (metal::metal_device_available()) return std::make_unique<metal::MetalDevice>();
#endif
        return std::make_unique<cpu::CpuDevice>(threads);
    }
    if (backend == "cuda") {
#ifdef AKUNU_HAS_CUDA
        if (cuda_device_count() == 0)
            throw UnsupportedError("backend 'cuda': no CUDA device found (no NVIDIA GPU, or no driver)");
        return std::make_unique<cuda::CudaDevice>(0);
#else
        throw UnsupportedError("backend 'cuda' is not available: this build of akunu has no CUDA backend "
                               "(built without nvcc); built in: " + accepted_backends());
#endif
    }
    if (backend == "metal") {
#ifdef AKUNU_HAS_METAL
        return std::make_unique<metal::MetalDevice>();  // UnsupportedError when no usable Apple GPU
#else
        throw UnsupportedError("backend 'metal' is not available: this build of akunu has no Metal backend "
                               "(Apple GPUs only, built on macOS); built in: " + accepted_backends());
#endif
    }
    throw std::invalid_argument("unknown backend '" + backend + "': this build of akunu has " + accepted_backends());
}

}  // namespace akunu
