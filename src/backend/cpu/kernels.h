// Every CPU kernel, one file per kernel family (same file names as the other backends).
#pragma once
#include "backend/cpu/cpu_kernel.h"
#include "core/dtype.h"

namespace akunu::cpu {

template <DType T> void embedding_kernel(const KernelArgs &a, int64_t begin, int64_t end);  // embedding.cpp
template <DType T> void gemm_kernel(const KernelArgs &a, int64_t begin, int64_t end);       // gemm.cpp
// Weights in the build's load-time repacked layout, r8 or r16 (repacked_layout.h).
template <DType T> void embedding_repacked_kernel(const KernelArgs &a, int64_t begin, int64_t end);  // embedding.cpp
template <DType T> void gemm_repacked_kernel(const KernelArgs &a, int64_t begin, int64_t end);       // gemm.cpp
void act_quant_q16_kernel(const KernelArgs &a, int64_t begin, int64_t end);                  // act_quant.cpp
void act_quant_q8x2_kernel(const KernelArgs &a, int64_t begin, int64_t end);        // act_quant.cpp (AVX-512 VNNI builds)
void act_quant_q8x2_superblocks_kernel(const KernelArgs &a, int64_t begin, int64_t end);  // act_quant.cpp (AVX-512 VNNI builds)
void rmsnorm_kernel(const KernelArgs &a, int64_t begin, int64_t end);                        // norm.cpp
void rmsnorm_add_kernel(const KernelArgs &a, int64_t begin, int64_t end);                    // norm.cpp
void head_rmsnorm_kernel(const KernelArgs &a, int64_t begin, int64_t end);                   // norm.cpp
void bias_add_kernel(const KernelArgs &a, int64_t begin, int64_t end);                       // bias.cpp
void softcap_kernel(const KernelArgs &a, int64_t begin, int64_t end);                        // softcap.cpp
void gelu_tanh_mul_kernel(const KernelArgs &a, int64_t begin, int64_t end);                  // activation.cpp
void rope_interleaved_kv_write_kernel(const KernelArgs &a, int64_t begin, int64_t end);      // rope.cpp
void rope_neox_kv_write_kernel(const KernelArgs &a, int64_t begin, int64_t end);             // rope.cpp
void rope_interleaved_kv_write_q8_kernel(const KernelArgs &a, int64_t begin, int64_t end);   // rope.cpp
void rope_neox_kv_write_q8_kernel(const KernelArgs &a, int64_t begin, int64_t end);          // rope.cpp
void attention_f16kv_kernel(const KernelArgs &a, int64_t begin, int64_t end);                // attention.cpp
void attention_q8kv_kernel(const KernelArgs &a, int64_t begin, int64_t end);                 // attention.cpp
void silu_mul_kernel(const KernelArgs &a, int64_t begin, int64_t end);                       // activation.cpp
void argmax_kernel(const KernelArgs &a, int64_t begin, int64_t end);                         // argmax.cpp
void sample_kernel(const KernelArgs &a, int64_t begin, int64_t end);                         // sample.cpp
void grammar_bitmask_kernel(const KernelArgs &a, int64_t begin, int64_t end);                // grammar_bitmask.cpp

}  // namespace akunu::cpu
