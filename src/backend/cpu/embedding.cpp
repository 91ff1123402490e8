#include <algorithm>

#include "backend/cpu/dequantize.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/repacked_layout.h"
#include "backend/cpu/simd_config.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

// Unit = one token row: dequantize the token's table row into the residual stream.
namespace {
template <DType T, bool kRepacked>
void embedding_units(const KernelArgs &a, int64_t begin, int64_t end) {
    const EmbeddingParams &p = params_of<EmbeddingParams>(a);
    const uint32_t *ids = reinterpret_cast<const uint32_t *>(a.buffers[0]);
    const uint8_t *table = a.buffers[1];
    float *out = reinterpret_cast<float *>(a.buffers[2]);
    for (int64_t r = begin; r < end; ++r) {
        uint32_t id = std::min(ids[r], p.vocab_size - 1);  // ids were validated on the host
        float *row = out + (size_t)r * p.dim;
        if constexpr (kRepacked)
            dequantize_row_repacked(T, table, id, row, p.dim);
        else
            dequantize_row(T, table + (size_t)id * p.row_bytes, row, p.dim);
        if (p.scale != 0.f)
            for (uint32_t i = 0; i < p.dim; ++i) row[i] *= p.scale;
    }
}

}  // namespace

template <DType T> void embedding_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    embedding_units<T, false>(a, begin, end);
}
template <DType T> void embedding_repacked_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    embedding_units<T, true>(a, begin, end);
}

template void embedding_kernel<DType::F32>(const KernelArgs &, int64_t, int64_t);
template void embedding_kernel<DType::F16>(const KernelArgs &, int64_t, int64_t);
template void embedding_kernel<DType::BF16>(const KernelArgs &, int64_t, int64_t);
template void embedding_kernel<DType::Q8_0>(const KernelArgs &, int64_t, int64_t);
template void embedding_kernel<DType::Q4_0>(const KernelArgs &, int64_t, int64_t);
template void embedding_kernel<DType::Q4_1>(const KernelArgs &, int64_t, int64_t);
#define AKUNU_INSTANTIATE(name) template void embedding_kernel<DType::name>(const KernelArgs &, int64_t, int64_t);
AKUNU_KQUANT_DTYPES(AKUNU_INSTANTIATE)
#undef AKUNU_INSTANTIATE
template void embedding_repacked_kernel<DType::Q4_0>(const KernelArgs &, int64_t, int64_t);
template void embedding_repacked_kernel<DType::Q4_1>(const KernelArgs &, int64_t, int64_t);
template void embedding_repacked_kernel<DType::Q8_0>(const KernelArgs &, int64_t, int64_t);
// The group-scaled dtypes: r16 (r16_kquant_layout.h) or, on AVX2 builds, r8 (r8_kquant_layout.h).
template void embedding_repacked_kernel<DType::Q5_0>(const KernelArgs &, int64_t, int64_t);
template void embedding_repacked_kernel<DType::Q5_1>(const KernelArgs &, int64_t, int64_t);
template void embedding_repacked_kernel<DType::IQ4_NL>(const KernelArgs &, int64_t, int64_t);
template void embedding_repacked_kernel<DType::Q4_K>(const KernelArgs &, int64_t, int64_t);
template void embedding_repacked_kernel<DType::Q5_K>(const KernelArgs &, int64_t, int64_t);
template void embedding_repacked_kernel<DType::Q6_K>(const KernelArgs &, int64_t, int64_t);
template void embedding_repacked_kernel<DType::IQ4_XS>(const KernelArgs &, int64_t, int64_t);

}  // namespace akunu::cpu
