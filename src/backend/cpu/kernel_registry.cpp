// The CPU backend's kernel library: names used by DTypeDescriptor / ArchDescriptor -> functions.
#include <cstring>

#include "backend/cpu/kernels.h"

namespace akunu::cpu {

namespace {
struct KernelEntry {
    const char *name;
    KernelFn fn;
};

const KernelEntry kKernels[] = {
    {"embedding_f32", embedding_kernel<DType::F32>},
    {"embedding_f16", embedding_kernel<DType::F16>},
    {"embedding_bf16", embedding_kernel<DType::BF16>},
    {"embedding_q8_0", embedding_kernel<DType::Q8_0>},
    {"embedding_q4_0", embedding_kernel<DType::Q4_0>},
    {"embedding_q4_1", embedding_kernel<DType::Q4_1>},
    {"gemm_f32", gemm_kernel<DType::F32>},
    {"gemm_f16", gemm_kernel<DType::F16>},
    {"gemm_bf16", gemm_kernel<DType::BF16>},
    {"gemm_q8_0", gemm_kernel<DType::Q8_0>},
    {"gemm_q4_0", gemm_kernel<DType::Q4_0>},
    {"gemm_q4_1", gemm_kernel<DType::Q4_1>},
    {"embedding_q4_0_r8", embedding_r8_kernel<DType::Q4_0>},
    {"embedding_q4_1_r8", embedding_r8_kernel<DType::Q4_1>},
    {"gemm_q4_0_r8", gemm_r8_kernel<DType::Q4_0>},
    {"gemm_q4_1_r8", gemm_r8_kernel<DType::Q4_1>},
    {"gemm_q8_0_r8", gemm_r8_kernel<DType::Q8_0>},
    {"embedding_q8_0_r8", embedding_r8_kernel<DType::Q8_0>},
    {"quantize_act_q16", act_quant_q16_kernel},
    {"rmsnorm_f32", rmsnorm_kernel},
    {"rmsnorm_add_f32", rmsnorm_add_kernel},
    {"head_rmsnorm_f32", head_rmsnorm_kernel},
    {"bias_add_f32", bias_add_kernel},
    {"softcap_f32", softcap_kernel},
    {"rope_interleaved_kv_write", rope_interleaved_kv_write_kernel},
    {"rope_neox_kv_write", rope_neox_kv_write_kernel},
    {"attention_f16kv", attention_f16kv_kernel},
    {"silu_mul_f32", silu_mul_kernel},
    {"gelu_tanh_mul_f32", gelu_tanh_mul_kernel},
    {"argmax_f32", argmax_kernel},
};
}  // namespace

KernelFn find_kernel(const char *name) {
    for (const KernelEntry &e : kKernels)
        if (std::strcmp(e.name, name) == 0) return e.fn;
    return nullptr;
}

}  // namespace akunu::cpu
