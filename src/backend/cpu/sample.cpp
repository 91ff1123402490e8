#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/kernel_params.h"
#include "core/sampling_rule.h"

namespace akunu::cpu {

// Single unit: the host reference of the sampling rule over the last `repeat_window` tokens of
// (the buffer's latest tokens, then this replay's earlier draws), of which the buffer's last
// recent_generated and the draws were generated.
void sample_kernel(const KernelArgs &a, int64_t, int64_t) {
    const SampleParams &p = params_of<SampleParams>(a);
    float *logits = reinterpret_cast<float *>(a.buffers[0]);
    uint32_t *out = reinterpret_cast<uint32_t *>(a.buffers[1]);
    const uint8_t *state = a.buffers[2];
    SamplingRule rule;
    std::memcpy(&rule, state, sizeof rule);
    const uint32_t *recent = reinterpret_cast<const uint32_t *>(state + kSamplingRecentOffset);

    thread_local std::vector<uint32_t> window;  // reused from token to token
    window.assign(recent, recent + rule.recent_count);
    window.insert(window.end(), out - p.chain_index, out);
    const size_t keep = std::min<size_t>(window.size(), rule.repeat_window);
    const size_t generated = std::min<size_t>(keep, (size_t)rule.recent_generated + p.chain_index);
    *out = sample_token(rule, logits, p.n, window.data() + (window.size() - keep), (uint32_t)keep, (uint32_t)generated,
                        p.position);
}

}  // namespace akunu::cpu
