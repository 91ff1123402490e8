// Inputs of the RoPE / KV-cache / attention checks (cases_rope.cpp, cases_attention.cpp): RoPE
// frequencies, KV caches pre-filled with random rows, and a CPU kernel call for references made
// of several CPU commands. Plain C++ (no shim).
#pragma once
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/cpu_kernel.h"
#include "core/kv_cache_q8.h"
#include "kernel_case.h"

namespace metal_check {

// inv_freq[i] = theta^(-2i / rope_dim), as the weight provider computes RoPE's frequencies.
inline std::vector<float> rope_inv_freq(uint32_t rope_dim, double theta = 10000.0) {
    std::vector<float> f(rope_dim / 2);
    for (uint32_t i = 0; i < f.size(); ++i) f[i] = (float)std::pow(theta, -2.0 * i / (double)rope_dim);
    return f;
}

// One layer's K or V cache, every row random (rows the kernels must not touch stay as they were):
// F16 elements, or Q8_0 planes whose rows are quantized random floats (finite scales).
inline Bytes random_kv_cache(bool q8, uint32_t n_kv_heads, uint32_t max_seq, uint32_t head_dim, uint32_t seed) {
    const size_t n_rows = (size_t)n_kv_heads * max_seq;
    const std::vector<float> x = random_floats(n_rows * head_dim, seed);
    if (!q8) {
        std::vector<uint16_t> h(x.size());
        for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_f16(x[i]);
        return to_bytes(h);
    }
    Bytes cache(akunu::kv_q8_buffer_bytes(n_kv_heads, max_seq, head_dim));
    auto *values = reinterpret_cast<int8_t *>(cache.data());
    auto *scales = reinterpret_cast<uint16_t *>(cache.data() + akunu::kv_q8_scales_offset(n_kv_heads, max_seq, head_dim));
    for (size_t r = 0; r < n_rows; ++r)
        akunu::quantize_kv_row_q8(x.data() + r * head_dim, head_dim, values + r * head_dim,
                                  scales + r * (head_dim / akunu::kKVQ8Block));
    return cache;
}

// Runs the CPU backend's kernel `name` over the whole grid on these buffers (binding order).
template <typename P>
void run_cpu_kernel(const char *name, std::vector<uint8_t *> buffers, const P &params, akunu::Dim3 grid) {
    const akunu::cpu::KernelFn fn = akunu::cpu::find_kernel(name);
    if (!fn) throw std::runtime_error(std::string("no CPU kernel '") + name + "'");
    akunu::cpu::KernelArgs a{};
    for (size_t i = 0; i < buffers.size(); ++i) a.buffers[i] = buffers[i];
    a.params = &params;
    a.grid = grid;
    fn(a, 0, (int64_t)grid.x * grid.y * grid.z);
}

}  // namespace metal_check
