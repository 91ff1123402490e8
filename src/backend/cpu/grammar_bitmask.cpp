#include <algorithm>
#include <cmath>

#include "backend/cpu/kernels.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

// Unit = 64 mask words (2048 tokens): the logits of the tokens whose bit is clear become -inf, so
// the argmax or the sampler after this command never picks a token the grammar forbids.
void grammar_bitmask_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    const GrammarBitmaskParams &p = params_of<GrammarBitmaskParams>(a);
    float *logits = reinterpret_cast<float *>(a.buffers[0]);
    const uint32_t *mask = reinterpret_cast<const uint32_t *>(a.buffers[1]);
    const uint32_t words = (p.n + 31) / 32;
    for (uint32_t w = (uint32_t)begin * 64; w < std::min<uint32_t>((uint32_t)end * 64, words); ++w) {
        const uint32_t word = mask[w];
        if (word == 0xFFFFFFFFu) continue;
        const uint32_t first = w * 32, last = std::min(first + 32, p.n);
        for (uint32_t i = first; i < last; ++i)
            if (!((word >> (i - first)) & 1u)) logits[i] = -INFINITY;
    }
}

}  // namespace akunu::cpu
