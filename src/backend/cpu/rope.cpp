#include <algorithm>
#include <cmath>

#include "backend/cpu/convert.h"
#include "backend/cpu/kernels.h"
#include "core/kernel_params.h"
#include "core/kv_cache_q8.h"

namespace akunu::cpu {

namespace {

constexpr uint32_t kMaxHeadDim = 1024;  // checked at load

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

// Where a rotated K row and its V row go in the cache: F16 elements, or Q8_0 blocks in the
// value and scale planes of kv_cache_q8.h.
struct F16Rows {
    static void query(float *, uint32_t) {}
    static void store(uint8_t *cache, const RopeKVParams &p, uint32_t kv_head, uint32_t pos, const float *x) {
        uint16_t *dst = reinterpret_cast<uint16_t *>(cache) + kv_row(kv_head, pos, p.max_seq) * p.head_dim;
        for (uint32_t d = 0; d < p.head_dim; ++d) dst[d] = f32_to_fp16(x[d]);
    }
    static void store_key(uint8_t *cache, const RopeKVParams &p, uint32_t kv_head, uint32_t pos, const float *x) {
        store(cache, p, kv_head, pos, x);
    }
};
struct Q8Rows {
    // The queries in the keys' Hadamard basis (kv_cache_q8.h), in place: attention reads them there.
    static void query(float *q, uint32_t head_dim) { hadamard_query_row(q, head_dim); }
    static void store(uint8_t *cache, const RopeKVParams &p, uint32_t kv_head, uint32_t pos, const float *x) {
        const size_t row = kv_row(kv_head, pos, p.max_seq);
        const size_t scales_at = kv_q8_scales_offset(p.n_kv_heads, p.max_seq, p.head_dim);
        int8_t *values = reinterpret_cast<int8_t *>(cache) + row * p.head_dim;
        uint16_t *scales = reinterpret_cast<uint16_t *>(cache + scales_at) + row * (p.head_dim / kKVQ8Block);
        quantize_kv_row_q8(x, p.head_dim, values, scales);
    }
    // A key row is quantized in the Hadamard basis; qkv keeps the row as RoPE left it.
    static void store_key(uint8_t *cache, const RopeKVParams &p, uint32_t kv_head, uint32_t pos, const float *x) {
        float basis[kMaxHeadDim];
        std::copy(x, x + p.head_dim, basis);
        hadamard_kv_row(basis, p.head_dim);
        store(cache, p, kv_head, pos, basis);
    }
};

// Unit = one token row: rotate its Q and K heads in place (and for the Q8_0 cache take both into
// the keys' Hadamard basis), then store K and V at its position in the head-major cache (row
// position % max_seq).
template <typename Pairs, typename Rows>
void rope_kv_write(const KernelArgs &a, int64_t begin, int64_t end) {
    const RopeKVParams &p = params_of<RopeKVParams>(a);
    const float *inv_freq = reinterpret_cast<const float *>(a.buffers[3]);
    float cos_t[kMaxHeadDim / 2], sin_t[kMaxHeadDim / 2];
    const uint32_t q_dim = p.n_heads * p.head_dim, kv_dim = p.n_kv_heads * p.head_dim;
    for (int64_t r = begin; r < end; ++r) {
        const uint32_t pos = p.position + (uint32_t)r;
        for (uint32_t i = 0; i < p.rope_dim / 2; ++i) {
            const float angle = (float)pos * inv_freq[i];
            cos_t[i] = std::cos(angle);
            sin_t[i] = std::sin(angle);
        }
        float *row = reinterpret_cast<float *>(a.buffers[0]) + (size_t)r * p.qkv_stride;
        for (uint32_t h = 0; h < p.n_heads; ++h) {
            rotate<Pairs>(row + h * p.head_dim, cos_t, sin_t, p.rope_dim);
            Rows::query(row + h * p.head_dim, p.head_dim);
        }
        float *k = row + q_dim, *v = row + q_dim + kv_dim;
        const uint32_t cache_row = pos % p.max_seq;  // a sliding-window layer's cache is a ring
        for (uint32_t h = 0; h < p.n_kv_heads; ++h) {
            rotate<Pairs>(k + h * p.head_dim, cos_t, sin_t, p.rope_dim);
            Rows::store_key(a.buffers[1], p, h, cache_row, k + h * p.head_dim);
            Rows::store(a.buffers[2], p, h, cache_row, v + h * p.head_dim);
        }
    }
}

}  // namespace

void rope_interleaved_kv_write_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    rope_kv_write<Interleaved, F16Rows>(a, begin, end);
}
void rope_neox_kv_write_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    rope_kv_write<NeoX, F16Rows>(a, begin, end);
}
void rope_interleaved_kv_write_q8_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    rope_kv_write<Interleaved, Q8Rows>(a, begin, end);
}
void rope_neox_kv_write_q8_kernel(const KernelArgs &a, int64_t begin, int64_t end) {
    rope_kv_write<NeoX, Q8Rows>(a, begin, end);
}

}  // namespace akunu::cpu
