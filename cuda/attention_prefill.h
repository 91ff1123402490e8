// The tensor-core prefill attention of cuda/attention_prefill.cu, used by attention_f16kv's
// launcher (cuda/attention.cu) for commands of several query rows.
#pragma once
#include "core/kv_cache.h"
#include "cuda/launch.h"

namespace akunu::cuda {

// Launches the command when the tensor-core kernel covers it (rows >= 2, aligned rows; head_dim
// 16, 32, 64 or 128 over the F16 cache, 64 or 128 over the Q8_0 one) and returns true; false
// leaves it to the caller.
bool launch_attention_prefill(const LaunchArgs &a, KVCacheDType cache);

}  // namespace akunu::cuda
