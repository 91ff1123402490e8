// The load-time repacked weight layout of this build: "r16" where the compiler targets AVX-512
// VNNI (r16_layout.cpp, r16_kquant_layout.cpp), "r8" everywhere else (r8_layout.cpp). Repacking,
// the GEMM over it, the activation row it wants and the way back to floats; the layouts below.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/gemm_tiles.h"
#include "core/dtype.h"

namespace akunu::cpu {

// The activation row the repacked layout of this build wants for weights of dtype t (BlockQ16Act for
// r8; BlockQ8x2Act for r16, followed by the same values as int16 where the prefill GEMM takes int16
// panels, r16k::has_panel): its size for K elements, and the conversion.
size_t repacked_act_row_bytes(DType t, int64_t K);
void quantize_row_act_repacked(DType t, const float *x, void *dst, int64_t k);

// gemm_rows for args.repacked (r8_layout.cpp or r16_layout.cpp).
void gemm_rows_repacked(const GemmArgs &args, int64_t n_begin, int64_t n_end);

// ---- Load-time repacking of Q4_0, Q4_1 and Q8_0 (r16 builds and r8 builds with AVX2: also Q5_0, Q5_1,
// IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS) ----
// r8: rows are taken in groups of 8 (the last group padded with zero rows); a group is stored block
// by block, each group-block being
//   Q4_0: fp16 d[8] | nibbles[128]                    (144 bytes = 8 GGUF blocks)
//   Q4_1: fp16 d[8] | fp16 m[8] | nibbles[128]        (160 bytes)
//   Q8_0: fp16 d[8] | int8 qs[256]                    (272 bytes, same as 8 GGUF blocks)
// The 128 nibble bytes are 4 chunks of 32; in chunk c, the 16-bit word 2 * l + h holds in its
// nibble k (bits 4k..4k+3) the weight of row l (of the group) that multiplies int16 activation
// qs[2 * (4c + k) + h] of the activation block, so one 32-byte load, three shifts and masks give
// four int16 vectors whose madd with a broadcast activation pair yields one int32 per row.
// Q4_0 nibbles are stored XOR 8 (read as signed 4-bit numbers they are nibble - 8).
// Q8_0's 256 quant bytes are 8 chunks of 32; in chunk c, the 16-bit word 2 * l + h holds in its
// low byte row l's weight for activation qs[4c + h] and in its high byte the one for qs[4c + 2 + h]
// (two shifts sign-extend them to int16; a madd against a broadcast activation pair per byte).
//
// r16: rows are taken in groups of 16 (the last padded with zero rows), each group-block being
//   Q4_0: fp16 d[16] | quants[256]                   (288 bytes = 16 GGUF blocks)
//   Q4_1: fp16 d[16] | fp16 m[16] | quants[256]      (320 bytes)
//   Q8_0: fp16 d[16] | quants[512]                   (544 bytes)
// The quants are 64-byte chunks, row l owning bytes 4l .. 4l + 3 of each, so one vpdpbusd of a
// chunk against four broadcast activation bytes yields one int32 per row. Q4: chunk c byte 4l + j
// is row l's GGUF byte 4c + j unchanged (low nibble: element 4c + j, high: 16 + 4c + j; unsigned,
// Q4_0's value being nibble - 8). Q8_0: 8 chunks, chunk c byte 4l + j is row l's element 4c + j
// as an unsigned byte, int8 + 128.
// r16 builds also repack Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS the same way, their bits above the nibble in
// chunks of bit planes and their factors in planes of 16 (r16_kquant_layout.cpp; as many bytes as GGUF); r8
// builds with AVX2 the same dtypes, their factors in planes of 8 (r8_kquant_layout.cpp, docs/adr/0029).
bool has_repacked_layout(DType t);
// Rows per group (8 or 16): repacking a slice of whole groups, rows [Gi, Gj), of a matrix writes
// exactly bytes [Gi, Gj) * row_bytes of the repacked matrix, so slices can be repacked in parallel.
int repack_row_group(DType t);
size_t repacked_bytes(DType t, int64_t rows, int64_t K);
void repack_weights(DType t, const void *src, void *dst, int64_t rows, int64_t K);
// Row `row` of a repacked matrix, dequantized (bit-exact with dequantize_row of the GGUF row).
void dequantize_row_repacked(DType t, const void *packed, int64_t row, float *dst, int64_t K);

}  // namespace akunu::cpu
