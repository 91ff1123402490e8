// The gated FFN activations, shared by the standalone kernels (cuda/activation.cu) and the
// gate/up GEMV's epilogue (cuda/gemv.cuh).
#pragma once
#include "core/kernel_params.h"

namespace akunu::cuda {

struct SiLU {
    __device__ static float apply(float g) { return g / (1.0f + expf(-g)); }
};
struct GeluTanh {
    __device__ static float apply(float g) {
        const float k = 0.7978845608028654f;  // sqrt(2 / pi)
        return 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g)));
    }
};

// act(gate) * up for a GemmOutputOp other than kGemmOutputPlain.
__device__ __forceinline__ float gated_output(uint32_t op, float gate, float up) {
    return (op == kGemmOutputGeluTanhMul ? GeluTanh::apply(gate) : SiLU::apply(gate)) * up;
}

}  // namespace akunu::cuda
