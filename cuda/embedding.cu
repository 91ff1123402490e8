// Embedding lookup: one dequantized table row per token id into the residual stream.
#include "cuda/common.cuh"
#include "cuda/formats_g8.cuh"
#include "cuda/formats_kquant.cuh"

namespace akunu::cuda {

namespace {

// Block = one token row; thread = one half-block (16 elements) at a time, stored as four float4.
// Decode runs one row after every argmax, on the token's critical path, so the stores are float4
// from 256 threads: 128 threads with scalar stores (each warp store 32 addresses 64 bytes apart)
// took longer (benchmarks/HISTORY.md, 2026-11-23, f2e5ed1 to 77872e8).
constexpr int kEmbeddingThreads = 256;

__device__ __forceinline__ void store_half(float *dst, const float (&v)[16], float scale) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
        reinterpret_cast<float4 *>(dst)[i] =
            make_float4(v[4 * i] * scale, v[4 * i + 1] * scale, v[4 * i + 2] * scale, v[4 * i + 3] * scale);
}

template <class Fmt>
__global__ void embedding_kernel(const uint32_t *__restrict__ ids, const uint8_t *__restrict__ table,
                                 float *__restrict__ out, const __grid_constant__ EmbeddingParams p) {
    pdl_enter();
    const uint32_t r = blockIdx.x;
    const uint32_t id = min(ids[r], p.vocab_size - 1);  // ids were validated on the host
    const uint8_t *row = table + (size_t)id * p.row_bytes;
    float *dst = out + (size_t)r * p.dim;
    const float scale = p.scale != 0.f ? p.scale : 1.f;
    for (uint32_t h = threadIdx.x; h < p.dim / 16; h += blockDim.x) {
        float v[16];
        fmt_dequant_half<Fmt>(row, h / 2, h & 1, v);
        store_half(dst + 16 * h, v, scale);
    }
}

// The g8 layout (cuda/layout_g8.h): token id -> its group and row in it; same thread mapping.
template <class F>
__global__ void embedding_g8_kernel(const uint32_t *__restrict__ ids, const uint8_t *__restrict__ table,
                                    float *__restrict__ out, const __grid_constant__ EmbeddingParams p) {
    pdl_enter();
    const uint32_t r = blockIdx.x;
    const uint32_t id = min(ids[r], p.vocab_size - 1);
    const uint8_t *group = table + (size_t)(id / kG8Rows) * F::Layout::group_bytes(p.dim);
    float *dst = out + (size_t)r * p.dim;
    const float scale = p.scale != 0.f ? p.scale : 1.f;
    for (uint32_t h = threadIdx.x; h < p.dim / 16; h += blockDim.x) {
        float v[16];
        F::to_float(F::raw(group, p.dim, h / 2, id % kG8Rows, h & 1), h & 1, v);
        store_half(dst + 16 * h, v, scale);
    }
}

template <class Fmt, bool kG8>
void launch_embedding(const LaunchArgs &a, const char *name) {
    const EmbeddingParams &p = params_of<EmbeddingParams>(a);
    if (p.dim % 32 != 0) throw UnsupportedError(std::string(name) + " on CUDA needs dim % 32 == 0");
    void (*kernel)(const uint32_t *, const uint8_t *, float *, EmbeddingParams);
    if constexpr (kG8)
        kernel = embedding_g8_kernel<Fmt>;
    else
        kernel = embedding_kernel<Fmt>;
    if ((reinterpret_cast<uintptr_t>(a.buffers[2]) & 15) != 0) throw AkunuError("internal: unaligned embedding output");
    launch_pdl(kernel, p.rows, kEmbeddingThreads, 0, a, reinterpret_cast<const uint32_t *>(a.buffers[0]),
                                                         a.buffers[1], reinterpret_cast<float *>(a.buffers[2]), p);
    check_launch(name);
}

}  // namespace

void launch_embedding_f32(const LaunchArgs &a) { launch_embedding<FmtF32, false>(a, "embedding_f32"); }
void launch_embedding_f16(const LaunchArgs &a) { launch_embedding<FmtF16, false>(a, "embedding_f16"); }
#define AKUNU_DEFINE_G8(lower, upper, fmt) \
    void launch_embedding_##lower##_g8(const LaunchArgs &a) { launch_embedding<fmt, true>(a, "embedding_" #lower "_g8"); }
AKUNU_CUDA_G8_FORMATS(AKUNU_DEFINE_G8)
#undef AKUNU_DEFINE_G8
#define AKUNU_DEFINE(lower, upper) \
    void launch_embedding_##lower(const LaunchArgs &a) { launch_embedding<Fmt##upper, false>(a, "embedding_" #lower); }
AKUNU_CUDA_KQUANT_FORMATS(AKUNU_DEFINE)
#undef AKUNU_DEFINE

}  // namespace akunu::cuda
