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

}  // namespace akunu::cpu
