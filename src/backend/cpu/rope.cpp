#include <cmath>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_kernels.h"
#include "core/kernel_params.h"

namespace akunu::cpu {

namespace {

// Rotation pairs: interleaved (GPT-J / GGUF Llama) pairs dims (2i, 2i+1); NeoX pairs (i, i + d/2).
struct Interleaved {
    static uint32_t first(uint32_t i, uint32_t) { return 2 * i; }
    static uint32_t second(uint32_t i, uint32_t) { return 2 * i + 1; }
};
struct NeoX {
    static uint32_t first(uint32_t i, uint32_t) { return i; }
    static uint32_t second(uint32_t i, uint32_t rope_dim) { return i + rope_dim / 2; }
};

template <typename Pairs>
void rotate(float *v, const float *cos_t, const float *sin_t, uint32_t rope_dim) {
    for (uint32_t i = 0; i < rope_dim / 2; ++i) {
        float &x0 = v[Pairs::first(i, rope_dim)], &x1 = v[Pairs::second(i, rope_dim)];
        const float a = x0, b = x1;
        x0 = a * cos_t[i] - b * sin_t[i];
        x1 = a * sin_t[i] + b * cos_t[i];
    }
}

// Unit = one token row: rotate its Q and K heads in place, then store K and V at its position in
// the head-major F16 cache.
template <typename Pairs>
void rope_kv_write(const KernelArgs &a, int64_t begin, int64_t end) {
    const RopeKVParams &p = params_of<RopeKVParams>(a);
    const float *inv_freq = reinterpret_cast<const float *>(a.buffers[3]);
    uint16_t *k_cache = reinterpret_cast<uint16_t *>(a.buffers[1]);
    uint16_t *v_cache = reinterpret_cast<uint16_t *>(a.buffers[2]);
    float cos_t[512], sin_t[512];  // head_dim <= 1024 is checked at load
    const uint32_t q_dim = p.n_heads * p.head_dim, kv_dim = p.n_kv_heads * p.head_dim;
    for (int64_t r = begin; r < end; ++r) {
        const uint32_t pos = p.position + (uint32_t)r;
        for (uint32_t i = 0; i < p.rope_dim / 2; ++i) {
            const float angle = (float)pos * inv_freq[i];
            cos_t[i] = std::cos(angle);
            sin_t[i] = std::sin(angle);
        }
        float *row = reinterpret_cast<float *>(a.buffers[0]) + (size_t)r * p.qkv_stride;
        for (uint32_t h = 0; h < p.n_heads; ++h) rotate<Pairs>(row + h * p.head_dim, cos_t, sin_t, p.rope_dim);
        float *k = row + q_dim, *v = row + q_dim + kv_dim;
        for (uint32_t h = 0; h < p.n_kv_heads; ++h) {
            rotate<Pairs>(k + h * p.head_dim, cos_t, sin_t, p.rope_dim);
            const size_t dst = ((size_t)h * p.max_seq + pos) * p.head_dim;
            for (uint32_t d = 0; d < p.head_dim; ++d) {
                k_cache[dst + d] = f32_to_fp16(k[h * p.head_dim + d]);
                v_cache[dst + d] = f32_to_fp16(v[h * p.head_dim + d]);
            }
        }
    }
}

}  // namespace

void rope_interleaved_kv_write_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    rope_kv_write<Interleaved>(a, begin, end);
}
void rope_neox_kv_write_kernel(const KernelArgs &a, int64_t begin, int64_t end) { rope_kv_write<NeoX>(a, begin, end); }

}  // namespace akunu::cpu
