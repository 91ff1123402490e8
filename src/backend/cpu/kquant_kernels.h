// CPU kernels for the weight dtypes whose blocks carry per-group scales: Q5_0, Q5_1 and IQ4_NL
// (32-element blocks) and the 256-element superblocks Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS.
// dequantize_row (dequantize.cpp) and gemm_rows (gemm_tiles.cpp) hand these dtypes here.
//
// Every such block is first decoded (kquant_decode.h) into int8 quants and one scale and one min
// per 16 elements, value = scale * q - min; dequantization is exactly that arithmetic (gguf-py's),
// and the GEMM runs Q8_0-style integer dots of those int8 quants against the int16 activation
// blocks (BlockQ16Act, docs/adr/0002), applying the group scales and mins per 32-element block.
#pragma once
#include <cstdint>

#include "backend/cpu/gemm_tiles.h"

// X(name) for every dtype of this file (DType::name): instantiations, registry and dtype tables.
#define AKUNU_KQUANT_DTYPES(X) X(Q5_0) X(Q5_1) X(IQ4_NL) X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K) X(IQ4_XS)

namespace akunu::cpu {

// True for the dtypes this file runs.
bool kquant_handles(DType t);

// Dequantize k elements (k a multiple of the block size); bit-exact with gguf-py's dequantize.
void kquant_dequantize_row(DType t, const void *src, float *dst, int64_t k);

// gemm_rows (gemm_tiles.h) for these dtypes: GGUF rows, Q16Act activations.
void kquant_gemm_rows(const GemmArgs &args, int64_t n_begin, int64_t n_end);

}  // namespace akunu::cpu
