// Activation quantization for the integer dot products (docs/adr/0002): a float activation row
// -> the quantized blocks a weight dtype's dot takes (core/quant_blocks.h), and which format that is.
// The row quantizer and the kernels running it per row: act_quant.cpp; the r16 layout's
// BlockQ8x2Act quantizer: r16_layout.cpp.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/quant_blocks.h"

namespace akunu::cpu {

// Activation quantization for the integer dot products: k floats -> k/32 BlockQ16Act.
// Per block, in float32: d = max|x| / 32767, q = roundf(x * (1 / d)) (ties away from zero; d = 0
// gives q = 0), sum = d * sum(q); q stored in the block's element order (see quant_blocks.h).
// SIMD and scalar produce identical bytes.
void quantize_row_act(const float *x, BlockQ16Act *dst, int64_t k);

// Activation quantization for the r16 layout (AVX-512 VNNI builds only): k floats -> k/32
// BlockQ8x2Act. Per block: d = max|x| / 16383, q = x / d rounded to nearest even, split into the
// digits hi = q >> 7 and lo = q & 127; qsum = sum(q), sum = d * qsum.
void quantize_row_act_q8x2(const float *x, BlockQ8x2Act *dst, int64_t k);
// The same blocks with one d per 256 elements (a K-quant superblock), for the dtypes whose r16 GEMMs
// sum a superblock in int32 and scale it once (r16k::has_panel, Q6_K: docs/adr/0027): d = max|x| /
// 2047 over the superblock, stored in each of its 8 blocks; and the k q as int16 in q16, for the
// prefill GEMM over int16 weight panels (r16_panel_gemm.cpp). k: a multiple of 256.
constexpr float kQ8x2SuperblockMax = 2047.0f;
void quantize_row_act_q8x2_superblocks(const float *x, BlockQ8x2Act *dst, int64_t k, int16_t *q16);
// Where a row of k / 32 BlockQ8x2Act that carries its int16 values keeps them: right after the blocks.
inline int16_t *q8x2_row_int16(BlockQ8x2Act *row, int64_t k) { return reinterpret_cast<int16_t *>(row + k / QK_ACT); }
inline const int16_t *q8x2_row_int16(const BlockQ8x2Act *row, int64_t k) {
    return reinterpret_cast<const int16_t *>(row + k / QK_ACT);
}

// What the dot product of a dtype wants as its activation row, on GGUF rows.
enum class ActFormat { F32, Q16Act };
ActFormat act_format_for(DType weight_type);

}  // namespace akunu::cpu
