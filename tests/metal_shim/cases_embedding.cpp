// Every embedding kernel against the CPU kernel of the same name: each dtype's table row decoded
// in full (so these cases exercise every chunk of every format decoder in formats.h and
// formats_kquant.h), repeated ids, an id past the vocabulary (clamped), and the embedding scale.
#include <cmath>

#include "core/kernel_params.h"
#include "kernel_case.h"
#include "random_weights.h"

using namespace metal_check;

AKUNU_KERNEL_CASES(embedding) {
    const uint32_t vocab = 11;
    // A prompt: repeated ids, the first and last rows, and one far past the vocabulary (clamped).
    const std::vector<uint32_t> prompt = {3, 0, 3, vocab - 1, 4000000000u, 7, 3};
    // A decode step: one token (the command's id offset is patched to it; the kernel reads ids[0]).
    const std::vector<uint32_t> one_token = {9};
    std::vector<KernelCase> cases;
    uint32_t seed = 1;
    for (const std::string &dtype : weight_dtypes()) {
        // Row lengths real models use: 64 / 256 (32-element blocks) or 256 / 512 (superblocks), and
        // 2304 (Gemma-2 2B): 144 chunks, more than the group's 128 threads, so some threads take two.
        const bool superblocks = weight_block_elements(dtype) == 256;
        const uint32_t small = superblocks ? 256 : 64, medium = superblocks ? 512 : 256, large = 2304;
        struct Shape {
            uint32_t dim;
            float scale;  // 1: Llama; sqrt(dim): Gemma; 0: "no scale" (the CPU skips the multiply)
            const std::vector<uint32_t> &ids;
        };
        const Shape shapes[] = {
            {small, 1.0f, one_token},
            {small, 1.0f, prompt},
            {small, 0.0f, prompt},
            {medium, std::sqrt((float)medium), prompt},
            {large, std::sqrt((float)large), prompt},
        };
        for (const Shape &s : shapes) {
            akunu::EmbeddingParams p{};
            p.dim = s.dim;
            p.rows = (uint32_t)s.ids.size();
            p.vocab_size = vocab;
            p.row_bytes = (uint32_t)weight_row_bytes(dtype, s.dim);
            p.scale = s.scale;
            KernelCase c;
            c.label = "embedding_" + dtype + " dim=" + std::to_string(s.dim) + " rows=" + std::to_string(p.rows) +
                      " scale=" + std::to_string(s.scale).substr(0, 5);
            c.kernel = c.cpu_kernel = "embedding_" + dtype;
            c.buffers = {to_bytes(s.ids), random_weight_rows(dtype, vocab, s.dim, seed),
                         to_bytes(random_floats((size_t)p.rows * s.dim, seed + 1000))};
            ++seed;
            c.params = params_bytes(p);
            c.grid = {p.rows, 1, 1};
            // Both sides decode the same bits with the same float operations.
            c.outputs = {{2, Element::F32, 1e-6}};
            cases.push_back(c);
        }
    }
    return cases;
}
