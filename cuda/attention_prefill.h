// The tensor-core prefill attention of cuda/attention_prefill.cu, used by attention_f16kv's
// launcher (cuda/attention.cu) for commands of several query rows.
#pragma once
#include "cuda/launch.h"

namespace akunu::cuda {

// Launches the command when the tensor-core kernel covers it (rows >= 2, head_dim 16, 32, 64 or
// 128, aligned rows) and returns true; false leaves it to the one-row kernel.
bool launch_attention_prefill(const LaunchArgs &a);

}  // namespace akunu::cuda
