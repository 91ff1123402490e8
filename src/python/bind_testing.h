// akunu._core._testing: the test and benchmark seams (re-exported as akunu._testing). Not API:
// they reach below the Model into single kernels and commands, and change with the engine.
// One bind_testing_* function per job, each in its own file; module.cpp creates the submodule.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <vector>

void bind_testing_kernels(nanobind::module_ &m);     // CPU row kernels (bind_testing_kernels.cpp)
void bind_testing_device(nanobind::module_ &m);      // one command on a device of any backend
void bind_testing_bench(nanobind::module_ &m);       // one kernel as a timed dispatch table
void bind_testing_gpu(nanobind::module_ &m);         // CUDA / Metal presence, the CUDA path counters
void bind_testing_checkpoint(nanobind::module_ &m);  // the loader's MLX conversion
void bind_testing_memory(nanobind::module_ &m);      // the memory plan's available-memory seams
void bind_testing_sanitizer(nanobind::module_ &m);   // AKUNU_SANITIZE builds: which, and their self-test

namespace akunu::testing {

// A vector handed to numpy: the capsule frees it with the array.
template <class T> nanobind::capsule owner_of(std::vector<T> *v) {
    return nanobind::capsule(v, [](void *p) noexcept { delete static_cast<std::vector<T> *>(p); });
}

using FloatVector = nanobind::ndarray<const float, nanobind::ndim<1>, nanobind::c_contig, nanobind::device::cpu>;
using FloatMatrix = nanobind::ndarray<const float, nanobind::ndim<2>, nanobind::c_contig, nanobind::device::cpu>;
using IdVector = nanobind::ndarray<const uint32_t, nanobind::ndim<1>, nanobind::c_contig, nanobind::device::cpu>;

}  // namespace akunu::testing
