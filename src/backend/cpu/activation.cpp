#include <cmath>

#include "backend/cpu/kernels.h"
#include "backend/cpu/vec_math.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

// Unit = one row: out = silu(gate) * up, gate and up side by side in one row.
void silu_mul_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const GatedActParams &p = params_of<GatedActParams>(a);
    for (int64_t r = begin; r < end; ++r) {
        const float *gate = reinterpret_cast<const float *>(a.buffers[0]) + (size_t)r * 2 * p.ffn_dim;
        const float *up = gate + p.ffn_dim;
        float *out = reinterpret_cast<float *>(a.buffers[1]) + (size_t)r * p.ffn_dim;
        silu_mul(gate, up, out, p.ffn_dim);
    }
}

// Unit = one row: out = gelu(gate) * up with GELU's tanh approximation (Gemma's gelu_pytorch_tanh):
// gelu(x) = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))).
void gelu_tanh_mul_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const GatedActParams &p = params_of<GatedActParams>(a);
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    for (int64_t r = begin; r < end; ++r) {
        const float *gate = reinterpret_cast<const float *>(a.buffers[0]) + (size_t)r * 2 * p.ffn_dim;
        const float *up = gate + p.ffn_dim;
        float *out = reinterpret_cast<float *>(a.buffers[1]) + (size_t)r * p.ffn_dim;
        for (uint32_t i = 0; i < p.ffn_dim; ++i) {
            const float x = gate[i];
            out[i] = 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x))) * up[i];
        }
    }
}

}  // namespace akunu::cpu
