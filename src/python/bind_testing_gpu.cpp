// akunu._testing's GPU seams: whether this build has the CUDA / Metal backend and a usable device
// (a missing driver just means False), for tests that run only on a GPU, and the counters of the
// CUDA paths taken (src/backend/create_device.cpp; 0 in builds without CUDA), so tests can tell
// which path ran.
#include <nanobind/nanobind.h>

#include <cstdint>

#include "python/bind_testing.h"

namespace nb = nanobind;

namespace akunu {
int cuda_device_count();  // src/backend/create_device.cpp
bool metal_available();
uint64_t cuda_q16_handoffs();
uint64_t cuda_settled_accumulates();
uint64_t cuda_cublas_gemms();
uint64_t cuda_pair_gemvs();
}

void bind_testing_gpu(nb::module_ &m) {
    m.def("cuda_available", [] { return akunu::cuda_device_count() > 0; },
          "True when akunu was built with CUDA and a CUDA device is present.");
    m.def("cuda_device_count", [] { return akunu::cuda_device_count(); }, "Number of usable CUDA devices.");
    m.def("cuda_q16_handoffs", [] { return akunu::cuda_q16_handoffs(); },
          "CUDA decode GEMVs launched so far with their input quantized by the command before.");
    m.def("cuda_settled_accumulates", [] { return akunu::cuda_settled_accumulates(); },
          "CUDA accumulating GEMMs launched so far whose output the command before them cannot write.");
    m.def("cuda_cublas_gemms", [] { return akunu::cuda_cublas_gemms(); },
          "F16 / BF16 prefill GEMMs run through cuBLAS so far (0 when it is missing or switched off).");
    m.def("cuda_pair_gemvs", [] { return akunu::cuda_pair_gemvs(); },
          "Decode GEMVs of pair commands (Q/K/V of two weight dtypes) run as one launch so far.");
    m.def("metal_available", [] { return akunu::metal_available(); },
          "True when akunu was built with Metal and an Apple GPU it supports is present.");
}
