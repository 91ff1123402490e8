#include "backend/metal/metal_dtypes.h"

namespace akunu::metal {

namespace {
// Every Metal GEMM reads F32 activations and GGUF rows as stored (the mmap, zero copy): no
// activation conversion and no load-time repacking. The GEMV streams its input norm.
constexpr DTypeDescriptor describe(DType t, const char *gemm, const char *embedding) {
    DTypeDescriptor d{t, gemm, embedding, nullptr, nullptr};
    d.gemv_streams_norm = true;
    return d;
}

const DTypeDescriptor kMetalDTypes[] = {
    describe(DType::F32, "gemm_f32", "embedding_f32"),
    describe(DType::F16, "gemm_f16", "embedding_f16"),
    describe(DType::BF16, "gemm_bf16", "embedding_bf16"),
    describe(DType::Q8_0, "gemm_q8_0", "embedding_q8_0"),
    describe(DType::Q4_0, "gemm_q4_0", "embedding_q4_0"),
    describe(DType::Q4_1, "gemm_q4_1", "embedding_q4_1"),
    describe(DType::Q5_0, "gemm_q5_0", "embedding_q5_0"),
    describe(DType::Q5_1, "gemm_q5_1", "embedding_q5_1"),
    describe(DType::IQ4_NL, "gemm_iq4_nl", "embedding_iq4_nl"),
    describe(DType::Q2_K, "gemm_q2_k", "embedding_q2_k"),
    describe(DType::Q3_K, "gemm_q3_k", "embedding_q3_k"),
    describe(DType::Q4_K, "gemm_q4_k", "embedding_q4_k"),
    describe(DType::Q5_K, "gemm_q5_k", "embedding_q5_k"),
    describe(DType::Q6_K, "gemm_q6_k", "embedding_q6_k"),
    describe(DType::IQ4_XS, "gemm_iq4_xs", "embedding_iq4_xs"),
};
}  // namespace

const DTypeDescriptor *metal_dtype_lookup(DType t) {
    for (const DTypeDescriptor &d : kMetalDTypes)
        if (d.dtype == t) return &d;
    return nullptr;
}

}  // namespace akunu::metal
