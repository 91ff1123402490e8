#include <algorithm>

#include "backend/cpu/gemm_tiles.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/simd_config.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

// Unit = `rows_per_unit` consecutive weight rows across the command's parts (fused Q/K/V or
// gate/up); each unit multiplies its rows by all M activation rows.
namespace {
template <DType T, bool kRepacked>
void gemm_units(const KernelArgs &a, int64_t begin, int64_t end) {
    const GemmParams &p = params_of<GemmParams>(a);
    int64_t row_begin = begin * p.rows_per_unit, row_end = end * p.rows_per_unit;
    int64_t part_start = 0;
    for (uint32_t part = 0; part < p.n_parts; ++part) {
        const int64_t part_end = part_start + p.N[part];
        const int64_t lo = std::max(row_begin, part_start), hi = std::min(row_end, part_end);
        if (lo < hi) {
            GemmArgs g;
            g.type = T;
            g.w = a.buffers[2 + part];
            g.w_row_bytes = p.w_row_bytes[part];
            g.x = a.buffers[0];
            g.x_row_bytes = p.x_row_bytes;
            g.y = reinterpret_cast<float *>(a.buffers[1]) + p.y_col[part];
            g.y_stride = p.y_stride;
            g.K = p.K;
            g.M = p.M;
            g.accumulate = p.accumulate != 0;
            g.repacked = kRepacked;
            gemm_rows(g, lo - part_start, hi - part_start);
        }
        part_start = part_end;
    }
}

}  // namespace

template <DType T> void gemm_kernel(const KernelArgs &a, int64_t begin, int64_t end) { gemm_units<T, false>(a, begin, end); }
template <DType T> void gemm_repacked_kernel(const KernelArgs &a, int64_t begin, int64_t end) { gemm_units<T, true>(a, begin, end); }

template void gemm_kernel<DType::F32>(const KernelArgs &, int64_t, int64_t);
template void gemm_kernel<DType::F16>(const KernelArgs &, int64_t, int64_t);
template void gemm_kernel<DType::BF16>(const KernelArgs &, int64_t, int64_t);
template void gemm_kernel<DType::Q8_0>(const KernelArgs &, int64_t, int64_t);
template void gemm_kernel<DType::Q4_0>(const KernelArgs &, int64_t, int64_t);
template void gemm_kernel<DType::Q4_1>(const KernelArgs &, int64_t, int64_t);
#define AKUNU_INSTANTIATE(name) template void gemm_kernel<DType::name>(const KernelArgs &, int64_t, int64_t);
AKUNU_KQUANT_DTYPES(AKUNU_INSTANTIATE)
#undef AKUNU_INSTANTIATE
template void gemm_repacked_kernel<DType::Q4_0>(const KernelArgs &, int64_t, int64_t);
template void gemm_repacked_kernel<DType::Q4_1>(const KernelArgs &, int64_t, int64_t);
template void gemm_repacked_kernel<DType::Q8_0>(const KernelArgs &, int64_t, int64_t);
// The group-scaled dtypes: r16 (r16_kquant_layout.h) or, on AVX2 builds, r8 (r8_kquant_layout.h).
template void gemm_repacked_kernel<DType::Q5_0>(const KernelArgs &, int64_t, int64_t);
template void gemm_repacked_kernel<DType::Q5_1>(const KernelArgs &, int64_t, int64_t);
template void gemm_repacked_kernel<DType::IQ4_NL>(const KernelArgs &, int64_t, int64_t);
template void gemm_repacked_kernel<DType::Q4_K>(const KernelArgs &, int64_t, int64_t);
template void gemm_repacked_kernel<DType::Q5_K>(const KernelArgs &, int64_t, int64_t);
template void gemm_repacked_kernel<DType::Q6_K>(const KernelArgs &, int64_t, int64_t);
template void gemm_repacked_kernel<DType::IQ4_XS>(const KernelArgs &, int64_t, int64_t);

}  // namespace akunu::cpu
