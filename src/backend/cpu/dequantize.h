// Dequantization of one weight row (GGUF blocks) to floats, for every weight dtype the CPU backend
// runs: the embedding lookup (embedding.cpp), the repacked layouts' way back to floats
// (dequantize_row_repacked) and the testing bindings. dequantize.cpp holds the float dtypes, Q4_0,
// Q4_1 and Q8_0 and hands the group-scaled dtypes to kquant_kernels.cpp.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace akunu::cpu {

// Dequantize `k` elements (one row; k a multiple of the block size) of dtype `t` into dst.
// Bit-exact with gguf-py's dequantize for every dtype cpu_supports_dtype (dtypes.h) accepts.
void dequantize_row(DType t, const void *src, float *dst, int64_t k);

}  // namespace akunu::cpu
