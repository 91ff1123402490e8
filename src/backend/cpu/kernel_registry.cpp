// The CPU backend's kernel library: names used by DTypeDescriptor / ArchDescriptor -> functions.
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd_config.h"

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
    {"embedding_q4_0_repacked", embedding_repacked_kernel<DType::Q4_0>},
    {"embedding_q4_1_repacked", embedding_repacked_kernel<DType::Q4_1>},
    {"gemm_q4_0_repacked", gemm_repacked_kernel<DType::Q4_0>},
    {"gemm_q4_1_repacked", gemm_repacked_kernel<DType::Q4_1>},
    {"gemm_q8_0_repacked", gemm_repacked_kernel<DType::Q8_0>},
    {"embedding_q8_0_repacked", embedding_repacked_kernel<DType::Q8_0>},
    {"embedding_q5_0", embedding_kernel<DType::Q5_0>},
    {"embedding_q5_1", embedding_kernel<DType::Q5_1>},
    {"embedding_iq4_nl", embedding_kernel<DType::IQ4_NL>},
    {"embedding_q2_k", embedding_kernel<DType::Q2_K>},
    {"embedding_q3_k", embedding_kernel<DType::Q3_K>},
    {"embedding_q4_k", embedding_kernel<DType::Q4_K>},
    {"embedding_q5_k", embedding_kernel<DType::Q5_K>},
    {"embedding_q6_k", embedding_kernel<DType::Q6_K>},
    {"embedding_iq4_xs", embedding_kernel<DType::IQ4_XS>},
    {"gemm_q5_0", gemm_kernel<DType::Q5_0>},
    {"gemm_q5_1", gemm_kernel<DType::Q5_1>},
    {"gemm_iq4_nl", gemm_kernel<DType::IQ4_NL>},
    {"gemm_q2_k", gemm_kernel<DType::Q2_K>},
    {"gemm_q3_k", gemm_kernel<DType::Q3_K>},
    {"gemm_q4_k", gemm_kernel<DType::Q4_K>},
    {"gemm_q5_k", gemm_kernel<DType::Q5_K>},
    {"gemm_q6_k", gemm_kernel<DType::Q6_K>},
    {"gemm_iq4_xs", gemm_kernel<DType::IQ4_XS>},
    {"quantize_act_q16", act_quant_q16_kernel},
    // The group-scaled dtypes: r16 (r16_kquant_layout.h) or, on AVX2 builds, r8 (r8_kquant_layout.h).
    {"gemm_q5_0_repacked", gemm_repacked_kernel<DType::Q5_0>},
    {"gemm_q5_1_repacked", gemm_repacked_kernel<DType::Q5_1>},
    {"gemm_iq4_nl_repacked", gemm_repacked_kernel<DType::IQ4_NL>},
    {"gemm_q4_k_repacked", gemm_repacked_kernel<DType::Q4_K>},
    {"gemm_q5_k_repacked", gemm_repacked_kernel<DType::Q5_K>},
    {"gemm_q6_k_repacked", gemm_repacked_kernel<DType::Q6_K>},
    {"gemm_iq4_xs_repacked", gemm_repacked_kernel<DType::IQ4_XS>},
    {"embedding_q5_0_repacked", embedding_repacked_kernel<DType::Q5_0>},
    {"embedding_q5_1_repacked", embedding_repacked_kernel<DType::Q5_1>},
    {"embedding_iq4_nl_repacked", embedding_repacked_kernel<DType::IQ4_NL>},
    {"embedding_q4_k_repacked", embedding_repacked_kernel<DType::Q4_K>},
    {"embedding_q5_k_repacked", embedding_repacked_kernel<DType::Q5_K>},
    {"embedding_q6_k_repacked", embedding_repacked_kernel<DType::Q6_K>},
    {"embedding_iq4_xs_repacked", embedding_repacked_kernel<DType::IQ4_XS>},
#if defined(AKUNU_CPU_VNNI512)
    {"quantize_act_q8x2", act_quant_q8x2_kernel},
    {"quantize_act_q8x2_superblocks", act_quant_q8x2_superblocks_kernel},
#endif
    {"rmsnorm_f32", rmsnorm_kernel},
    {"rmsnorm_add_f32", rmsnorm_add_kernel},
    {"head_rmsnorm_f32", head_rmsnorm_kernel},
    {"bias_add_f32", bias_add_kernel},
    {"softcap_f32", softcap_kernel},
    {"rope_interleaved_kv_write", rope_interleaved_kv_write_kernel},
    {"rope_neox_kv_write", rope_neox_kv_write_kernel},
    {"attention_f16kv", attention_f16kv_kernel},
    {"rope_interleaved_kv_write_q8", rope_interleaved_kv_write_q8_kernel},
    {"rope_neox_kv_write_q8", rope_neox_kv_write_q8_kernel},
    {"attention_q8kv", attention_q8kv_kernel},
    {"silu_mul_f32", silu_mul_kernel},
    {"gelu_tanh_mul_f32", gelu_tanh_mul_kernel},
    {"argmax_f32", argmax_kernel},
    {"sample_f32", sample_kernel},
    {"grammar_bitmask_f32", grammar_bitmask_kernel},
};
}  // namespace

KernelFn find_kernel(const char *name) {
    for (const KernelEntry &e : kKernels)
        if (std::strcmp(e.name, name) == 0) return e.fn;
    return nullptr;
}

}  // namespace akunu::cpu
