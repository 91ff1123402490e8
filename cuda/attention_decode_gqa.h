// Decode attention at long contexts on the tensor cores (cuda/attention_decode_gqa.cu): one block
// per (KV head, split of the keys) for every query head of the GQA group. Used by the decode
// launchers of cuda/attention_decode.cu when the replay's context is long (LaunchArgs::context).
#pragma once
#include "core/kernel_params.h"
#include "core/kv_cache.h"
#include "cuda/launch.h"

namespace akunu::cuda {

struct RopeInputs;

// How the kernel gets its query (and, with RoPE, the token's own key and value).
enum class DecodeRope { None, Interleaved, NeoX };

// Whether the kernel covers the shape: head_dim 64 or 128, at most 16 query heads per KV head.
bool gqa_decode_covers(uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim);

// Launches one-row attention over a cache of `cache`'s dtype when the kernel covers the shape and
// returns true; false leaves it to the caller. rope == None: q is already rotated in qkv and the
// token's K/V are in the cache; otherwise the kernel rotates the group's queries and appends the
// token's K/V itself (ri: the RoPE inputs).
bool launch_attention_decode_gqa(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri, DecodeRope rope,
                                 KVCacheDType cache);

}  // namespace akunu::cuda
