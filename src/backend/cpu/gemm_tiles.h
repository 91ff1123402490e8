// The row-range GEMM under every CPU GEMM kernel (gemm.cpp): y (+)= W . X over a range of weight
// rows, for decode (M = 1, weight-streaming bound) and prefill (M = S, compute bound) alike.
// gemm_tiles.cpp runs GGUF rows of F32, F16, BF16, Q8_0, Q4_0 and Q4_1 in register tiles and hands
// the repacked layouts (repacked_layout.h) and the group-scaled dtypes (kquant_kernels.h) on.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace akunu::cpu {

// y[m * y_stride + n] (+)= dot(W row n, X row m) for n in [n_begin, n_end), m in [0, M).
//  - W rows are `w_row_bytes` apart (GGUF: row n of a [N, K] weight is K elements of dtype t).
//  - X rows are `x_row_bytes` apart, in act_format_for(t) (act_quant.h): float[K] or
//    BlockQ16Act[K/32] (repacked: as quantize_row_act_repacked, repacked_layout.h, writes them).
//  - accumulate: add into y instead of overwriting (fuses the residual add).
// Loop order keeps a block of weight rows hot in cache while all M activation rows stream by.
struct GemmArgs {
    DType type;
    const uint8_t *w;
    size_t w_row_bytes;
    const uint8_t *x;
    size_t x_row_bytes;
    float *y;
    size_t y_stride;  // floats between output rows
    int64_t K;
    int64_t M;
    bool accumulate;
    // W is in this build's repacked layout (repacked_layout.h) instead of GGUF rows; w_row_bytes
    // is still the GGUF row size (a group of G rows spans G * w_row_bytes bytes).
    bool repacked = false;
};
void gemm_rows(const GemmArgs &args, int64_t n_begin, int64_t n_end);

}  // namespace akunu::cpu
