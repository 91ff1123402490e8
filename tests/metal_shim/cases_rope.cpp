// RoPE + KV-cache append against the CPU kernels of the same names: qkv rotated in place, and the
// token rows of the cache (F16 elements; the Q8_0 planes byte for byte, their quantization being
// deterministic). The caches start random, so a row written in the wrong place shows.
#include "core/kernel_params.h"
#include "kernel_case.h"
#include "kv_inputs.h"

using namespace metal_check;

namespace {

struct RopeShape {
    uint32_t head_dim, rope_dim, n_heads, n_kv_heads, rows, position, max_seq;
};

}  // namespace

AKUNU_KERNEL_CASES(rope) {
    const RopeShape shapes[] = {
        {64, 64, 4, 4, 1, 0, 64},     // no GQA, the first token
        {64, 32, 4, 2, 5, 40, 64},    // partial rotary, GQA 2, a prompt chunk
        {128, 128, 8, 2, 5, 40, 64},  // GQA 4
        {128, 64, 4, 1, 1, 40, 64},   // partial rotary, GQA 4, decode
        {64, 64, 4, 2, 5, 45, 16},    // a window's ring: positions 45..49 go to rows 13..15, 0..1
        {80, 80, 4, 2, 5, 40, 64},    // head_dim not a multiple of 32 (F16 only: Q8_0 needs whole blocks)
    };
    std::vector<KernelCase> cases;
    for (const char *kernel :
         {"rope_interleaved_kv_write", "rope_neox_kv_write", "rope_interleaved_kv_write_q8", "rope_neox_kv_write_q8"}) {
        const bool q8 = std::string(kernel).find("_q8") != std::string::npos;
        for (const RopeShape &s : shapes) {
            if (q8 && s.head_dim % akunu::kKVQ8Block != 0) continue;
            akunu::RopeKVParams p{};
            p.position = s.position;
            p.rows = s.rows;
            p.n_heads = s.n_heads;
            p.n_kv_heads = s.n_kv_heads;
            p.head_dim = s.head_dim;
            p.rope_dim = s.rope_dim;
            p.max_seq = s.max_seq;
            p.qkv_stride = (s.n_heads + 2 * s.n_kv_heads) * s.head_dim + 4;  // strided rows
            const uint32_t seed = s.head_dim + s.rope_dim + s.n_heads + s.rows + s.position + s.max_seq;
            KernelCase c;
            c.label = std::string(kernel) + " head_dim=" + std::to_string(s.head_dim) + " rope_dim=" +
                      std::to_string(s.rope_dim) + " heads=" + std::to_string(s.n_heads) + "/" +
                      std::to_string(s.n_kv_heads) + " rows=" + std::to_string(s.rows) + " pos=" +
                      std::to_string(s.position) + " max_seq=" + std::to_string(s.max_seq);
            c.kernel = c.cpu_kernel = kernel;
            c.buffers = {to_bytes(random_floats((size_t)s.rows * p.qkv_stride, seed, 2.0f)),
                         random_kv_cache(q8, s.n_kv_heads, s.max_seq, s.head_dim, seed + 1),
                         random_kv_cache(q8, s.n_kv_heads, s.max_seq, s.head_dim, seed + 2),
                         to_bytes(rope_inv_freq(s.rope_dim))};
            c.params = params_bytes(p);
            c.grid = {s.rows, 1, 1};
            const Output cache_out = q8 ? Output{0, Element::Raw} : Output{0, Element::F16, 1e-3};
            Output k = cache_out, v = cache_out;
            k.buffer = 1;
            v.buffer = 2;
            c.outputs = {{0, Element::F32, 1e-6}, k, v};
            cases.push_back(c);
        }
    }
    return cases;
}
