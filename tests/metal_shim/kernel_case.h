// One check of a Metal kernel: inputs, the command's parameters and grid, and which buffers to
// compare. kernel_check.cpp runs the kernel through the shim and the CPU backend's kernel of the
// same name (or the case's own reference) on copies of the same inputs and compares.
// Plain C++: this header must not see the shim's MSL macros.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"

namespace metal_check {

using Bytes = std::vector<uint8_t>;

enum class Element { F32, F16, U32, Raw };

struct Output {
    int buffer;
    Element element;
    // Largest allowed |metal - reference| relative to the largest |reference| value (F32, F16);
    // U32 and Raw must match exactly.
    double tolerance = 1e-5;
};

struct KernelCase {
    std::string label;       // printed: "rmsnorm_f32 dim=96 rows=3"
    std::string kernel;      // the Metal kernel
    std::string cpu_kernel;  // the CPU backend kernel giving the reference; empty: `reference`
    std::vector<Bytes> buffers;
    // Where each binding starts in its buffer, in bytes (a command's buffer offset; missing: 0).
    std::vector<size_t> offsets;
    Bytes params;
    akunu::Dim3 grid;
    std::vector<Output> outputs;
    // Computes the expected buffers in place when there is no CPU kernel of the same contract.
    std::function<void(std::vector<Bytes> &)> reference;
};

// Cases register themselves: AKUNU_KERNEL_CASES(norm) { return {...}; }
using CaseFactory = std::vector<KernelCase> (*)();
int register_cases(const char *family, CaseFactory f);
#define AKUNU_KERNEL_CASES(family)                                                                      \
    static std::vector<metal_check::KernelCase> family##_cases();                                       \
    static const int family##_registered = metal_check::register_cases(#family, &family##_cases);        \
    static std::vector<metal_check::KernelCase> family##_cases()

// --- input helpers -------------------------------------------------------------------------------
template <typename T> Bytes to_bytes(const std::vector<T> &v) {
    Bytes b(v.size() * sizeof(T));
    if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
}
template <typename T> std::vector<T> from_bytes(const Bytes &b) {
    std::vector<T> v(b.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
    return v;
}
template <typename P> Bytes params_bytes(const P &p) {
    Bytes b(sizeof(P));
    std::memcpy(b.data(), &p, sizeof(P));
    return b;
}
// n floats uniform in [-scale, scale], reproducible per seed.
std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f);
// n random bytes (raw quantized blocks; callers fix up fields that must be finite).
Bytes random_bytes(size_t n, uint32_t seed);
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace metal_check
