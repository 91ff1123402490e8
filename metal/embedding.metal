// Token embedding lookup (the CPU's src/backend/cpu/embedding.cpp): dequantize the token's table
// row into the residual stream, times the model's embedding scale. One threadgroup per token row;
// its threads stride over the row's 16-element chunks (formats.h), so every dtype shares one body.
#include "common.h"
#include "formats.h"
#include "formats_kquant.h"

namespace {
template <typename Format>
inline void embedding_row(device const uint *ids, device const uchar *table, device float *out,
                          constant EmbeddingParams &p, uint row, uint tid, uint n_threads) {
    // Ids were validated on the host; clamp anyway so a bad one can never read past the table.
    const uint id = min(ids[row], p.vocab_size - 1);
    device const uchar *src = table + ulong(id) * p.row_bytes;
    device float *dst = out + ulong(row) * p.dim;
    // A scale of 0 means none (the CPU skips the multiply; x * 1 is x exactly).
    const float scale = p.scale != 0.0f ? p.scale : 1.0f;
    const uint chunks_per_block = Format::kBlockElements / 16;
    for (uint c = tid; c < p.dim / 16; c += n_threads) {
        float v[16];
        Format::dequantize_chunk(src + (c / chunks_per_block) * Format::kBlockBytes, c % chunks_per_block, v);
        for (uint i = 0; i < 16; ++i) dst[16 * c + i] = v[i] * scale;
    }
}
}  // namespace

// buffers: 0 token ids u32 (offset patched per token when decoding), 1 table [vocab, row_bytes],
// 2 out [rows, dim]; group = row
#define AKUNU_EMBEDDING_KERNEL(name, Format)                                                            \
    kernel void name(device const uint *ids [[buffer(0)]], device const uchar *table [[buffer(1)]],       \
                     device float *out [[buffer(2)]], constant EmbeddingParams &p [[buffer(3)]],         \
                     AKUNU_THREAD_ARGS) {                                                                 \
        embedding_row<Format>(ids, table, out, p, group.x, thread_position.x, group_size.x);              \
    }

AKUNU_EMBEDDING_KERNEL(embedding_f32, FormatF32)
AKUNU_EMBEDDING_KERNEL(embedding_f16, FormatF16)
AKUNU_EMBEDDING_KERNEL(embedding_bf16, FormatBF16)
AKUNU_EMBEDDING_KERNEL(embedding_q8_0, FormatQ8_0)
AKUNU_EMBEDDING_KERNEL(embedding_q4_0, FormatQ4_0)
AKUNU_EMBEDDING_KERNEL(embedding_q4_1, FormatQ4_1)
AKUNU_EMBEDDING_KERNEL(embedding_q5_0, FormatQ5_0)
AKUNU_EMBEDDING_KERNEL(embedding_q5_1, FormatQ5_1)
AKUNU_EMBEDDING_KERNEL(embedding_iq4_nl, FormatIQ4_NL)
AKUNU_EMBEDDING_KERNEL(embedding_q2_k, FormatQ2_K)
AKUNU_EMBEDDING_KERNEL(embedding_q3_k, FormatQ3_K)
AKUNU_EMBEDDING_KERNEL(embedding_q4_k, FormatQ4_K)
AKUNU_EMBEDDING_KERNEL(embedding_q5_k, FormatQ5_K)
AKUNU_EMBEDDING_KERNEL(embedding_q6_k, FormatQ6_K)
AKUNU_EMBEDDING_KERNEL(embedding_iq4_xs, FormatIQ4_XS)
#undef AKUNU_EMBEDDING_KERNEL
