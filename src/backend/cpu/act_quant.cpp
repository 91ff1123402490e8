#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/simd_config.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

// Unit = one activation row -> int16 blocks (BlockQ16Act) for the integer dot products.
void act_quant_q16_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const ActQuantParams &p = params_of<ActQuantParams>(a);
    const float *x = reinterpret_cast<const float *>(a.buffers[0]);
    for (int64_t r = begin; r < end; ++r)
        quantize_row_act(x + (size_t)r * p.x_stride, reinterpret_cast<BlockQ16Act *>(a.buffers[1] + (size_t)r * p.out_row_bytes),
                         p.K);
}

#if defined(AKUNU_CPU_VNNI512)
// Unit = one activation row -> two-digit int8 blocks (BlockQ8x2Act) for the r16 layout's GEMM.
void act_quant_q8x2_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const ActQuantParams &p = params_of<ActQuantParams>(a);
    const float *x = reinterpret_cast<const float *>(a.buffers[0]);
    for (int64_t r = begin; r < end; ++r)
        quantize_row_act_q8x2(x + (size_t)r * p.x_stride,
                              reinterpret_cast<BlockQ8x2Act *>(a.buffers[1] + (size_t)r * p.out_row_bytes), p.K);
}
#endif

}  // namespace akunu::cpu
