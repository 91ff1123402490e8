// The gated FFN activations, act(gate) * up, as the CPU computes them (src/backend/cpu/
// activation.cpp, vec_math.h): for activation.metal, and for a GEMV epilogue that fuses them
// (kGemmOutputSiluMul / kGemmOutputGeluTanhMul; CUDA's counterpart: cuda/activations.cuh).
// The precise math functions: Metal's fast ones would differ from the CPU's by more.
#pragma once
#include "common.h"

struct SiLU {
    static float apply(float g) { return g / (1.0f + precise::exp(-g)); }
};

// GELU's tanh approximation (Gemma's gelu_pytorch_tanh): x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))).
struct GeluTanh {
    static float apply(float g) {
        const float k = 0.7978845608028654f;  // sqrt(2 / pi)
        return 0.5f * g * (1.0f + precise::tanh(k * (g + 0.044715f * g * g * g)));
    }
};

// act(gate) * up for a GemmOutputOp other than kGemmOutputPlain.
inline float gated_output(uint op, float gate, float up) {
    return (op == kGemmOutputGeluTanhMul ? GeluTanh::apply(gate) : SiLU::apply(gate)) * up;
}
