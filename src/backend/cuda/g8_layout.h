// Load-time repack of every quantized format but Q2_K / Q3_K into the CUDA "g8" layout
// (cuda/layout_g8.h), in the shape DTypeDescriptor::repacked_bytes / repack expect.
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace akunu::cuda {

// Bytes of a [rows, cols] matrix of `t` in g8 (rows rounded up to a whole group of 8).
size_t g8_bytes(DType t, size_t rows, size_t cols);
// Writes the g8 form of the GGUF rows at `src` to `dst` (g8_bytes(t, rows, cols) bytes).
void g8_repack(DType t, const void *src, void *dst, size_t rows, size_t cols);

}  // namespace akunu::cuda
