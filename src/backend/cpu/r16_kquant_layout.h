// The r16 layout of the other 4- to 6-bit formats (Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K, IQ4_XS)
// on AVX-512 VNNI builds: the same 16-row groups and vpdpbusd dots against two-digit int8 activations
// (BlockQ8x2Act) as Q4_0 / Q4_1 / Q8_0's r16 (r16_layout.cpp), with the formats' extra bits and
// per-16 / per-32 scales. r16_layout.cpp's entry points (repack_weights, gemm_rows_repacked, ...)
// forward these dtypes here. Layout: r16_kquant_layout.cpp.
#pragma once
#include <cstdint>

#include "backend/cpu/gemm_tiles.h"

namespace akunu::cpu::r16k {

bool handles(DType t);
// Per matrix of `rows` GGUF rows of K elements, padded to whole 16-row groups: 16 x the GGUF
// row's bytes per group, exactly (the same size as the GGUF rows it holds).
size_t repacked_bytes(DType t, int64_t rows, int64_t K);
void repack(DType t, const uint8_t *src, uint8_t *dst, int64_t rows, int64_t K);
void dequantize_row(DType t, const uint8_t *packed, int64_t row, float *dst, int64_t K);
void gemm_rows(const GemmArgs &args, int64_t n_begin, int64_t n_end);

// The prefill GEMM's int16 weight panels (r16_panel_gemm.cpp), for the dtypes has_panel names (Q6_K):
// one 16-row group of K elements as K / 2 vectors of 64 bytes (64-byte aligned; vector p: elements
// 2p, 2p + 1 of row l as the int16 pair of 32-bit lane l), each weight's per-16 scale applied and
// offset removed, and row_d[K / 256][16] the superblocks' d per row.
bool has_panel(DType t);
void group_panel(DType t, const uint8_t *group, int64_t K, int16_t *panel, float *row_d);

}  // namespace akunu::cpu::r16k
