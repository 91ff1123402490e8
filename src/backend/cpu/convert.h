// Scalar fp16 / bf16 <-> f32 conversions of the CPU backend, for the row kernels' scalar paths
// (dequantize.cpp, gemm_tiles.cpp, attention.cpp, kquant_decode.h), the KV write (rope.cpp) and
// the CUDA backend's load-time repacking; the vector conversions live in the kernels using them.
#pragma once
#include <cstdint>

namespace akunu::cpu {

// fp16/bf16 <-> f32 scalar conversions (bit-exact, round-to-nearest-even on the way down).
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);

}  // namespace akunu::cpu
