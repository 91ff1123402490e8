// The decode attention of cuda/attention_decode.cu (one query row, split-K), used by
// attention_f16kv's launcher (cuda/attention.cu) for one-row commands; the RoPE variants'
// launchers live with it (cuda/launch.h).
#pragma once
#include "core/kernel_params.h"
#include "cuda/launch.h"

namespace akunu::cuda {

// Throws UnsupportedError naming `name` unless head_dim % 8 == 0, head_dim <= 1024 and the heads
// form whole GQA groups.
void check_attention_shape(const AttentionParams &p, const char *name);

// Launches one-row attention_f16kv (q already rotated, the token's K/V already in the cache).
void launch_attention_decode(const LaunchArgs &a, const AttentionParams &p);
// The same over the Q8_0 cache (attention_q8kv): the tensor-core kernel at every depth; throws
// UnsupportedError for the shapes it does not cover.
void launch_attention_decode_q8(const LaunchArgs &a, const AttentionParams &p);

}  // namespace akunu::cuda
