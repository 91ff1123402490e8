// grammar_bitmask_f32: logits[i] = -inf where the grammar's mask clears bit i (before the argmax or
// the sampler, so neither picks a forbidden token).
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

// One thread per mask word (32 tokens); a word of ones (most words, in most grammar states where
// few tokens are forbidden, or none are allowed) costs one load.
__global__ void grammar_bitmask_kernel(float *__restrict__ logits, const uint32_t *__restrict__ mask,
                                       const __grid_constant__ GrammarBitmaskParams p) {
    pdl_enter();
    const uint32_t words = (p.n + 31) / 32;
    for (uint32_t w = blockIdx.x * blockDim.x + threadIdx.x; w < words; w += gridDim.x * blockDim.x) {
        const uint32_t word = mask[w];
        if (word == 0xFFFFFFFFu) continue;
        const uint32_t first = w * 32, last = min(first + 32, p.n);
        for (uint32_t i = first; i < last; ++i)
            if (!((word >> (i - first)) & 1u)) logits[i] = -INFINITY;
    }
}

}  // namespace

void launch_grammar_bitmask_f32(const LaunchArgs &a) {
    const GrammarBitmaskParams &p = params_of<GrammarBitmaskParams>(a);
    const unsigned words = (p.n + 31) / 32, blocks = std::max(1u, (words + 255) / 256);
    launch_pdl(grammar_bitmask_kernel, blocks, 256, 0, a, reinterpret_cast<float *>(a.buffers[0]),
               reinterpret_cast<const uint32_t *>(a.buffers[1]), p);
    check_launch("grammar_bitmask_f32");
}

}  // namespace akunu::cuda
