// Argmax over the logits into a token slot (the first index on ties, like the CPU), and the tiny
// store that sets the replay's base position in device memory.
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

constexpr int kArgmaxThreads = 1024;

__device__ __forceinline__ void better(float &v, uint32_t &i, float v2, uint32_t i2) {
    if (v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_kernel(const float *__restrict__ x, uint32_t *__restrict__ out, ArgmaxParams p) {
    pdl_enter();
    __shared__ float vals[32];
    __shared__ uint32_t idxs[32];
    float v = -INFINITY;
    uint32_t idx = 0xFFFFFFFFu;
    for (uint32_t i = threadIdx.x; i < p.n; i += kArgmaxThreads) better(v, idx, x[i], i);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        vals[warp] = v;
        idxs[warp] = idx;
    }
    __syncthreads();
    if (warp == 0) {
        v = vals[lane];
        idx = idxs[lane];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
        if (lane == 0) *out = idx == 0xFFFFFFFFu ? 0u : idx;
    }
}

__global__ void set_u32_kernel(uint32_t *dst, uint32_t value) { *dst = value; }

}  // namespace

void launch_argmax_f32(const LaunchArgs &a) {
    const ArgmaxParams &p = params_of<ArgmaxParams>(a);
    launch_pdl(argmax_kernel, 1, kArgmaxThreads, 0, a, reinterpret_cast<const float *>(a.buffers[0]),
                                                      reinterpret_cast<uint32_t *>(a.buffers[1]), p);
    check_launch("argmax_f32");
}

void launch_set_u32(uint32_t *dst, uint32_t value, cudaStream_t stream) {
    set_u32_kernel<<<1, 1, 0, stream>>>(dst, value);
    check_launch("set_u32");
}

}  // namespace akunu::cuda
