// The r8 layout of Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS on AVX2 builds without AVX-512 VNNI: the same 8-row groups, int16
// activations (BlockQ16Act) and madd dots as r8's Q4_0 / Q4_1 (r8_layout.cpp), with the K-quants'
// superblock factors. r8_layout.cpp's entry points (repack_weights, gemm_rows_repacked, ...) forward
// these dtypes here. Layout: r8_kquant_layout.cpp. (AVX-512 VNNI builds have r16_kquant_layout.h.)
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/gemm_tiles.h"

namespace akunu::cpu::r8k {

// False on builds without AVX2 (their K-quants stay GGUF rows).
bool handles(DType t);
// Per matrix of `rows` GGUF rows of K elements, padded to whole 8-row groups: 8 x the GGUF row's
// bytes per group, exactly.
size_t repacked_bytes(DType t, int64_t rows, int64_t K);
void repack(DType t, const uint8_t *src, uint8_t *dst, int64_t rows, int64_t K);
// Row `row`, bit-exact with dequantize_row of the GGUF row.
void dequantize_row(DType t, const uint8_t *packed, int64_t row, float *dst, int64_t K);
void gemm_rows(const GemmArgs &args, int64_t n_begin, int64_t n_end);

}  // namespace akunu::cpu::r8k
