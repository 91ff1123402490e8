// Embedding lookup: one dequantized table row per token id into the residual stream.
#include "cuda/common.cuh"
#include "cuda/formats_kquant.cuh"

namespace akunu::cuda {

namespace {

// Block = one token row; thread = one half-block (16 elements) at a time.
template <class Fmt>
__global__ void embedding_kernel(const uint32_t *__restrict__ ids, const uint8_t *__restrict__ table,
                                 float *__restrict__ out, EmbeddingParams p) {
    pdl_enter();
    const uint32_t r = blockIdx.x;
    const uint32_t id = min(ids[r], p.vocab_size - 1);  // ids were validated on the host
    const uint8_t *row = table + (size_t)id * p.row_bytes;
    float *dst = out + (size_t)r * p.dim;
    const float scale = p.scale != 0.f ? p.scale : 1.f;
    for (uint32_t h = threadIdx.x; h < p.dim / 16; h += blockDim.x) {
        float v[16];
        fmt_dequant_half<Fmt>(row, h / 2, h & 1, v);
#pragma unroll
        for (int i = 0; i < 16; ++i) dst[16 * h + i] = v[i] * scale;
    }
}

template <class Fmt>
void launch_embedding(const LaunchArgs &a, const char *name) {
    const EmbeddingParams &p = params_of<EmbeddingParams>(a);
    if (p.dim % 32 != 0) throw UnsupportedError(std::string(name) + " on CUDA needs dim % 32 == 0");
    launch_pdl(embedding_kernel<Fmt>, p.rows, 128, 0, a, reinterpret_cast<const uint32_t *>(a.buffers[0]),
                                                         a.buffers[1], reinterpret_cast<float *>(a.buffers[2]), p);
    check_launch(name);
}

}  // namespace

void launch_embedding_f32(const LaunchArgs &a) { launch_embedding<FmtF32>(a, "embedding_f32"); }
void launch_embedding_f16(const LaunchArgs &a) { launch_embedding<FmtF16>(a, "embedding_f16"); }
void launch_embedding_bf16(const LaunchArgs &a) { launch_embedding<FmtBF16>(a, "embedding_bf16"); }
void launch_embedding_q8_0(const LaunchArgs &a) { launch_embedding<FmtQ8_0>(a, "embedding_q8_0"); }
void launch_embedding_q4_0(const LaunchArgs &a) { launch_embedding<FmtQ4_0>(a, "embedding_q4_0"); }
void launch_embedding_q4_1(const LaunchArgs &a) { launch_embedding<FmtQ4_1>(a, "embedding_q4_1"); }
#define AKUNU_DEFINE(lower, upper) \
    void launch_embedding_##lower(const LaunchArgs &a) { launch_embedding<Fmt##upper>(a, "embedding_" #lower); }
AKUNU_CUDA_KQUANT_FORMATS(AKUNU_DEFINE)
#undef AKUNU_DEFINE

}  // namespace akunu::cuda
