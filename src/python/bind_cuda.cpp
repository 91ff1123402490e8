// CUDA availability, for tests and users choosing a backend: True when this build has the CUDA
// backend and a CUDA device is usable (a missing driver just means False).
#include <nanobind/nanobind.h>

#include <cstdint>

namespace nb = nanobind;

namespace akunu {
int cuda_device_count();  // src/backend/create_device.cpp
uint64_t cuda_q16_handoffs();
uint64_t cuda_cublas_gemms();
}

void bind_cuda(nb::module_ &m) {
    m.def("cuda_available", [] { return akunu::cuda_device_count() > 0; },
          "True when akunu was built with CUDA and a CUDA device is present.");
    m.def("cuda_device_count", [] { return akunu::cuda_device_count(); }, "Number of usable CUDA devices.");
    m.def("_cuda_q16_handoffs", [] { return akunu::cuda_q16_handoffs(); },
          "Diagnostic: CUDA decode GEMVs launched so far with their input quantized by the command before.");
    m.def("_cuda_cublas_gemms", [] { return akunu::cuda_cublas_gemms(); },
          "Diagnostic: F16 / BF16 prefill GEMMs run through cuBLAS so far (0 when it is missing or switched off).");
}
