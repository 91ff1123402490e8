// MLX affine quantization (mlx-community checkpoints) turned into formats the backends already
// run. MLX stores each row as a little-endian bit stream of `bits`-bit integers q (element 0 in
// the lowest bits; 3- and 6-bit values may straddle bytes and words) with one scale and one bias
// per group of `group_size` elements: value = scale * q + bias.
//
//   4-bit, scales/biases exact in fp16  -> Q4_1 blocks of 32 (d = scale, m = bias; a group of
//                                          64/128 repeats its scale in 2/4 blocks): exact; 5 bits per weight
//                                          (MLX: 5 / 4.5 / 4.25 with groups 32 / 64 / 128).
//   anything else (3/6/8 bits, 4-bit with bf16 scales fp16 cannot hold)
//                                       -> dequantized to F16 (16 bits per weight: 2.7x the
//                                          memory of 6-bit, 5.3x of 3-bit), or F32 where a
//                                          value does not fit fp16.
// 8-bit has no exact Q8_0 form: Q8_0 is d * q with no bias, and MLX's bias is the group's
// min/max edge, not -128 * scale.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "weights/aligned_bytes.h"

namespace akunu {

struct MLXQuantMatrix {
    const uint8_t *packed = nullptr;  // rows * row_stride bytes
    const uint8_t *scales = nullptr;  // rows * (cols / group_size) values of scale_dtype
    const uint8_t *biases = nullptr;  // same shape and dtype as scales
    DType scale_dtype = DType::F16;   // F16, BF16 or F32
    uint32_t rows = 0;
    uint32_t cols = 0;
    uint32_t bits = 0;        // 2..8
    uint32_t group_size = 0;  // divides cols
    size_t row_stride() const { return (size_t)cols * bits / 8; }
};

struct ConvertedMatrix {
    DType dtype = DType::F32;  // Q4_1, F16 or F32, row-major [rows, cols]
    AlignedBytes bytes;
};

// The integer q of element (row, col).
uint32_t mlx_quant_value(const MLXQuantMatrix &m, uint32_t row, uint32_t col);
// scale * q + bias of element (row, col), in float.
float mlx_dequantized_value(const MLXQuantMatrix &m, uint32_t row, uint32_t col);
// Converts as described above; `m` must already be validated (shapes, sizes).
ConvertedMatrix convert_mlx_matrix(const MLXQuantMatrix &m);

}  // namespace akunu
