// Gated activations, gate and up side by side in each row (the CPU's src/backend/cpu/
// activation.cpp, CUDA's cuda/activation.cu):
//   silu_mul_f32       out = silu(gate) * up
//   gelu_tanh_mul_f32  out = gelu(gate) * up, GELU's tanh approximation (Gemma)
// One threadgroup per row.
#include "activations.h"
#include "common.h"

namespace {
template <typename Act>
inline void gated_row(device const float *gate_up, device float *out, uint ffn_dim, uint tid, uint n_threads) {
    device const float *up = gate_up + ffn_dim;
    for (uint i = tid; i < ffn_dim; i += n_threads) out[i] = Act::apply(gate_up[i]) * up[i];
}
}  // namespace

// buffers: 0 gate_up [rows, 2 * ffn_dim] (gate then up), 1 out [rows, ffn_dim]; group = row
kernel void silu_mul_f32(device const float *gate_up [[buffer(0)]], device float *out [[buffer(1)]],
                         constant GatedActParams &p [[buffer(2)]], AKUNU_THREAD_ARGS) {
    gated_row<SiLU>(gate_up + group.x * 2 * p.ffn_dim, out + group.x * p.ffn_dim, p.ffn_dim, thread_position.x,
                    group_size.x);
}

kernel void gelu_tanh_mul_f32(device const float *gate_up [[buffer(0)]], device float *out [[buffer(1)]],
                              constant GatedActParams &p [[buffer(2)]], AKUNU_THREAD_ARGS) {
    gated_row<GeluTanh>(gate_up + group.x * 2 * p.ffn_dim, out + group.x * p.ffn_dim, p.ffn_dim, thread_position.x,
                        group_size.x);
}
