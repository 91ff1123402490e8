// Random but valid GGUF weight rows of every dtype the Metal kernels read, for the kernel checks
// (embedding tables, GEMM weights). Plain C++, independent of the shim.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace metal_check {

using Bytes = std::vector<uint8_t>;

// `rows` rows of `cols` elements of `dtype` ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0",
// "q5_1", "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs"), back to back, reproducible
// per seed. Float dtypes hold values uniform in [-1, 1]. Quantized blocks are random bytes (every
// quant and packed sub-scale pattern occurs) whose f16 scale / min fields are overwritten by
// finite values of magnitude 0.01..0.1 and random sign, so every decoded value is finite and
// moderate. cols must be a multiple of the dtype's block size; throws on an unknown dtype.
Bytes random_weight_rows(const std::string &dtype, size_t rows, size_t cols, uint32_t seed);

// The 15 dtype names above, in that order.
const std::vector<std::string> &weight_dtypes();

// Bytes of one row of `cols` elements of `dtype` (the row_bytes the kernels take).
size_t weight_row_bytes(const std::string &dtype, size_t cols);

// Elements per block of `dtype` (1 for the float dtypes).
size_t weight_block_elements(const std::string &dtype);

}  // namespace metal_check
