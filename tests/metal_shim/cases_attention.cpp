// Attention over the KV cache against the CPU kernels (attention_f16kv / attention_q8kv), and the
// decode form that does the QK-norm + RoPE + KV-write work itself against the CPU's commands in
// sequence (head_rmsnorm_f32 when qk_norm, rope_*_kv_write*, attention_*): its output, the cache
// rows it appends, and qkv, which it must leave as it was (the CPU commands rotate a copy).
#include "core/kernel_params.h"
#include "kernel_case.h"
#include "kv_inputs.h"

using namespace metal_check;

namespace {

struct AttentionShape {
    uint32_t head_dim, n_heads, n_kv_heads, rows, position, max_seq, window;
    float softcap;
    float q_scale;  // q's values lie in [-q_scale, q_scale]: larger makes the softmax peakier
};

std::string shape_label(const AttentionShape &s) {
    std::string l = " head_dim=" + std::to_string(s.head_dim) + " heads=" + std::to_string(s.n_heads) + "/" +
                    std::to_string(s.n_kv_heads) + " rows=" + std::to_string(s.rows) + " pos=" +
                    std::to_string(s.position) + " max_seq=" + std::to_string(s.max_seq);
    if (s.window) l += " window=" + std::to_string(s.window);
    if (s.softcap > 0.f) l += " softcap=" + std::to_string((int)s.softcap);
    return l;
}

akunu::AttentionParams attention_params(const AttentionShape &s, uint32_t q_stride, uint32_t out_stride) {
    akunu::AttentionParams p{};
    p.position = s.position;
    p.kv_len = s.position + s.rows;
    p.rows = s.rows;
    p.n_heads = s.n_heads;
    p.n_kv_heads = s.n_kv_heads;
    p.head_dim = s.head_dim;
    p.max_seq = s.max_seq;
    p.q_stride = q_stride;
    p.out_stride = out_stride;
    p.scale = 1.0f / std::sqrt((float)s.head_dim);
    p.window = s.window;
    p.softcap = s.softcap;
    return p;
}

uint32_t qkv_stride(const AttentionShape &s) { return (s.n_heads + 2 * s.n_kv_heads) * s.head_dim + 4; }

uint32_t seed_of(const AttentionShape &s) {
    return s.head_dim * 7 + s.n_heads * 5 + s.n_kv_heads * 3 + s.rows + s.position + s.max_seq + s.window;
}

// The cache and output comparisons: F16 caches within a rounding of an element (a key computed
// in another order of float operations may round to the neighbouring half), Q8_0 byte for byte.
Output cache_output(int buffer, bool q8) { return q8 ? Output{buffer, Element::Raw} : Output{buffer, Element::F16, 1e-3}; }

void add_attention_cases(std::vector<KernelCase> &cases) {
    const AttentionShape shapes[] = {
        {64, 4, 4, 1, 0, 64, 0, 0.f, 1.f},      // no GQA, the first token: a single key
        {64, 4, 2, 5, 40, 64, 0, 0.f, 3.f},     // GQA 2, a prompt chunk after 40 positions
        {128, 8, 2, 1, 40, 64, 0, 0.f, 3.f},    // GQA 4, decode
        {128, 4, 1, 5, 0, 64, 0, 0.f, 3.f},     // GQA 4, the first chunk (causal within it)
        {64, 8, 2, 5, 40, 64, 16, 0.f, 3.f},    // sliding window
        {128, 4, 2, 1, 40, 64, 0, 1.5f, 8.f},   // softcap, scores well past it
        {64, 4, 2, 5, 40, 20, 16, 2.f, 6.f},    // window in a ring (keys 25..44: rows 5..19, 0..4), softcap
        {64, 2, 1, 1, 1000, 1024, 0, 0.f, 3.f},  // a long context: many key tiles per SIMD group
        {80, 4, 2, 5, 40, 64, 0, 0.f, 3.f},     // head_dim not a multiple of 32 (F16 only)
    };
    for (const char *kernel : {"attention_f16kv", "attention_q8kv"}) {
        const bool q8 = std::string(kernel) == "attention_q8kv";
        for (const AttentionShape &s : shapes) {
            if (q8 && s.head_dim % akunu::kKVQ8Block != 0) continue;
            const uint32_t q_dim = s.n_heads * s.head_dim, out_stride = q_dim + 8;
            const akunu::AttentionParams p = attention_params(s, qkv_stride(s), out_stride);
            const uint32_t seed = seed_of(s);
            KernelCase c;
            c.label = std::string(kernel) + shape_label(s);
            c.kernel = c.cpu_kernel = kernel;
            c.buffers = {to_bytes(random_floats((size_t)s.rows * p.q_stride, seed, s.q_scale)),
                         random_kv_cache(q8, s.n_kv_heads, s.max_seq, s.head_dim, seed + 1),
                         random_kv_cache(q8, s.n_kv_heads, s.max_seq, s.head_dim, seed + 2),
                         to_bytes(random_floats((size_t)s.rows * out_stride, seed + 3))};
            c.params = params_bytes(p);
            c.grid = {s.n_heads, s.rows, 1};
            c.outputs = {{3, Element::F32, 1e-5}};
            cases.push_back(c);
        }
    }
}

struct RopeAttentionShape {
    AttentionShape attention;  // rows = 1
    uint32_t rope_dim;
    bool qk_norm;
};

void add_rope_attention_cases(std::vector<KernelCase> &cases) {
    const RopeAttentionShape shapes[] = {
        {{64, 4, 4, 1, 0, 64, 0, 0.f, 1.f}, 64, false},     // no GQA, the first token: its own key only
        {{128, 4, 2, 1, 40, 64, 0, 0.f, 3.f}, 128, true},   // GQA 2, QK-norm
        {{64, 8, 2, 1, 45, 20, 16, 2.f, 6.f}, 64, false},   // GQA 4, window in a ring (keys 30..45: rows 10..19, 0..5), softcap
        {{128, 4, 1, 1, 40, 64, 0, 0.f, 3.f}, 64, true},    // GQA 4, partial rotary, QK-norm
        {{64, 2, 1, 1, 300, 512, 0, 0.f, 3.f}, 32, true},   // a longer context, partial rotary
        {{80, 4, 2, 1, 40, 64, 0, 0.f, 3.f}, 80, false},    // head_dim not a multiple of 32 (F16 only)
    };
    struct Names {
        const char *fused, *rope, *attention;
    };
    const Names kernels[] = {
        {"attention_rope_interleaved_f16kv", "rope_interleaved_kv_write", "attention_f16kv"},
        {"attention_rope_neox_f16kv", "rope_neox_kv_write", "attention_f16kv"},
        {"attention_rope_interleaved_q8kv", "rope_interleaved_kv_write_q8", "attention_q8kv"},
        {"attention_rope_neox_q8kv", "rope_neox_kv_write_q8", "attention_q8kv"},
    };
    for (const Names &k : kernels) {
        const bool q8 = std::string(k.fused).find("_q8kv") != std::string::npos;
        for (const RopeAttentionShape &rs : shapes) {
            const AttentionShape &s = rs.attention;
            if (q8 && s.head_dim % akunu::kKVQ8Block != 0) continue;
            akunu::RopeAttentionParams p{};
            p.attention = attention_params(s, qkv_stride(s), s.n_heads * s.head_dim);
            p.rope_dim = rs.rope_dim;
            p.qk_norm = rs.qk_norm ? 1 : 0;
            p.norm_eps = 1e-6f;
            const uint32_t seed = seed_of(s) + rs.rope_dim;
            KernelCase c;
            c.label = std::string(k.fused) + shape_label(s) + " rope_dim=" + std::to_string(rs.rope_dim) +
                      (rs.qk_norm ? " qk_norm" : "");
            c.kernel = k.fused;
            c.buffers = {to_bytes(random_floats(p.attention.q_stride, seed, s.q_scale)),
                         random_kv_cache(q8, s.n_kv_heads, s.max_seq, s.head_dim, seed + 1),
                         random_kv_cache(q8, s.n_kv_heads, s.max_seq, s.head_dim, seed + 2),
                         to_bytes(random_floats((size_t)s.n_heads * s.head_dim, seed + 3)),
                         to_bytes(rope_inv_freq(rs.rope_dim))};
            if (rs.qk_norm) {
                c.buffers.push_back(to_bytes(random_floats(s.head_dim, seed + 4)));
                c.buffers.push_back(to_bytes(random_floats(s.head_dim, seed + 5)));
            }
            c.params = params_bytes(p);
            c.grid = {s.n_heads, 1, 1};
            c.reference = [p, k](std::vector<Bytes> &b) {
                Bytes qkv = b[0];  // the CPU commands rotate it in place; the fused kernel must not
                const akunu::AttentionParams &a = p.attention;
                if (p.qk_norm) {
                    akunu::HeadNormParams n{};
                    n.rows = 1;
                    n.n_heads = a.n_heads;
                    n.n_kv_heads = a.n_kv_heads;
                    n.head_dim = a.head_dim;
                    n.stride = a.q_stride;
                    n.eps = p.norm_eps;
                    run_cpu_kernel("head_rmsnorm_f32", {qkv.data(), b[5].data(), b[6].data()}, n, {1, 1, 1});
                }
                akunu::RopeKVParams r{};
                r.position = a.position;
                r.rows = 1;
                r.n_heads = a.n_heads;
                r.n_kv_heads = a.n_kv_heads;
                r.head_dim = a.head_dim;
                r.rope_dim = p.rope_dim;
                r.max_seq = a.max_seq;
                r.qkv_stride = a.q_stride;
                run_cpu_kernel(k.rope, {qkv.data(), b[1].data(), b[2].data(), b[4].data()}, r, {1, 1, 1});
                run_cpu_kernel(k.attention, {qkv.data(), b[1].data(), b[2].data(), b[3].data()}, a, {a.n_heads, 1, 1});
            };
            c.outputs = {{0, Element::Raw}, cache_output(1, q8), cache_output(2, q8), {3, Element::F32, 1e-5}};
            cases.push_back(c);
        }
    }
}

}  // namespace

AKUNU_KERNEL_CASES(attention) {
    std::vector<KernelCase> cases;
    add_attention_cases(cases);
    add_rope_attention_cases(cases);
    return cases;
}
