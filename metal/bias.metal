// bias_add_f32: x[r][i] += bias[i] (Qwen2's Q/K/V biases on the fused projection output; the
// CPU's src/backend/cpu/bias.cpp, CUDA's cuda/bias.cu). One threadgroup per row.
#include "common.h"

// buffers: 0 x [rows, stride] (in place), 1 bias [n]; group = row
kernel void bias_add_f32(device float *x [[buffer(0)]], device const float *bias [[buffer(1)]],
                         constant BiasAddParams &p [[buffer(2)]], AKUNU_THREAD_ARGS) {
    device float *row = x + group.x * p.stride;
    for (uint i = thread_position.x; i < p.n; i += group_size.x) row[i] += bias[i];
}
