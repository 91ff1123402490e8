// The CUDA backend's kernel library: the names used by DTypeDescriptor / ArchDescriptor ->
// launchers (cuda/*.cu). Same names and semantics as the CPU backend's registry.
#include <cstring>

#include "cuda/launch.h"
#include "backend/cuda/cuda_device.h"

namespace akunu::cuda {

namespace {
struct KernelEntry {
    const char *name;
    LaunchFn fn;
};

const KernelEntry kKernels[] = {
    {"embedding_f32", launch_embedding_f32},
    {"embedding_f16", launch_embedding_f16},
    {"gemm_f32", launch_gemm_f32},
    {"gemm_f16", launch_gemm_f16},
#define AKUNU_G8_ENTRIES(lower, upper, fmt) \
    {"gemm_" #lower "_g8", launch_gemm_##lower##_g8}, {"embedding_" #lower "_g8", launch_embedding_##lower##_g8},
    AKUNU_CUDA_G8_FORMATS(AKUNU_G8_ENTRIES)
#undef AKUNU_G8_ENTRIES
#define AKUNU_G8_PAIR_ENTRIES(a, fa, b, fb) {"gemm_" #a "_g8+gemm_" #b "_g8", launch_gemm_##a##_g8_pair_##b##_g8},
    AKUNU_CUDA_G8_PAIRS(AKUNU_G8_PAIR_ENTRIES)
#undef AKUNU_G8_PAIR_ENTRIES
#define AKUNU_ENTRIES(lower, upper) {"gemm_" #lower, launch_gemm_##lower}, {"embedding_" #lower, launch_embedding_##lower},
    AKUNU_CUDA_KQUANT_FORMATS(AKUNU_ENTRIES)
#undef AKUNU_ENTRIES
    {"rmsnorm_f32", launch_rmsnorm_f32},
    {"rmsnorm_add_f32", launch_rmsnorm_add_f32},
    {"head_rmsnorm_f32", launch_head_rmsnorm_f32},
    {"bias_add_f32", launch_bias_add_f32},
    {"softcap_f32", launch_softcap_f32},
    {"rope_interleaved_kv_write", launch_rope_interleaved_kv_write},
    {"rope_neox_kv_write", launch_rope_neox_kv_write},
    {"attention_f16kv", launch_attention_f16kv},
    {"attention_rope_interleaved_f16kv", launch_attention_rope_interleaved_f16kv},
    {"attention_rope_neox_f16kv", launch_attention_rope_neox_f16kv},
    {"rope_interleaved_kv_write_q8", launch_rope_interleaved_kv_write_q8},
    {"rope_neox_kv_write_q8", launch_rope_neox_kv_write_q8},
    {"attention_q8kv", launch_attention_q8kv},
    {"attention_rope_interleaved_q8kv", launch_attention_rope_interleaved_q8kv},
    {"attention_rope_neox_q8kv", launch_attention_rope_neox_q8kv},
    {"silu_mul_f32", launch_silu_mul_f32},
    {"gelu_tanh_mul_f32", launch_gelu_tanh_mul_f32},
    {"argmax_f32", launch_argmax_f32},
    {"sample_f32", launch_sample_f32},
    {"grammar_bitmask_f32", launch_grammar_bitmask_f32},
};
}  // namespace

LaunchFn find_launcher(const char *name) {
    for (const KernelEntry &e : kKernels)
        if (std::strcmp(e.name, name) == 0) return e.fn;
    return nullptr;
}

}  // namespace akunu::cuda
