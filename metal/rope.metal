// RoPE + KV-cache append (the CPU's src/backend/cpu/rope.cpp, the CUDA cuda/rope.cu): one
// threadgroup per token row. The threads rotate the row's Q and K heads in qkv in place, a thread
// per rotation pair; then (Q8_0 cache) SIMD groups take the Q heads into the keys' Hadamard basis
// in place, and each SIMD group stores whole K and V heads at the token's cache row (position %
// max_seq). Threads per group: a multiple of 32.
#include "common.h"
#include "kv_cache.h"
#include "rope_pairs.h"

namespace {

template <typename Pairs, typename Cache>
inline void rope_kv_write_row(device float *qkv, device uchar *k_cache, device uchar *v_cache,
                              device const float *inv_freq, constant RopeKVParams &p, uint r, uint tid,
                              uint n_threads, uint simd_lane, uint simd_index) {
    device float *row = qkv + r * p.qkv_stride;
    const uint pos = p.position + r;
    const uint half_rope = p.rope_dim / 2;
    // The Q heads and then the K heads lie back to back at the start of the row.
    const uint n_pairs = (p.n_heads + p.n_kv_heads) * half_rope;
    for (uint t = tid; t < n_pairs; t += n_threads) {
        const uint head = t / half_rope, i = t % half_rope;
        rotate_pair<Pairs>(row + head * p.head_dim, i, p.rope_dim, rope_cos_sin(pos, inv_freq[i]));
    }
    // The rotated K heads are stored below by other threads.
    threadgroup_barrier(mem_flags::mem_device);

    const KVGeometry g = {p.n_kv_heads, p.max_seq, p.head_dim};
    const uint cache_row = pos % p.max_seq;
    device const float *k = row + p.n_heads * p.head_dim;
    device const float *v = k + p.n_kv_heads * p.head_dim;
    const uint n_simd = n_threads / AKUNU_SIMD_WIDTH;
    if (Cache::keys_in_hadamard_basis())  // the queries into the keys' basis, in place
        for (uint h = simd_index; h < p.n_heads; h += n_simd) {
            device float *q = row + h * p.head_dim;
            float x[kKVMaxDimsPerLane];
            for (uint i = 0; i < kv_dims_per_lane(p.head_dim); ++i) x[i] = q[simd_lane + AKUNU_SIMD_WIDTH * i];
            Cache::to_query_basis(x, p.head_dim, simd_lane);
            for (uint i = 0; i < kv_dims_per_lane(p.head_dim); ++i) q[simd_lane + AKUNU_SIMD_WIDTH * i] = x[i];
        }
    for (uint h = simd_index; h < 2 * p.n_kv_heads; h += n_simd) {  // K heads, then V heads
        const bool is_v = h >= p.n_kv_heads;
        const uint kv_head = is_v ? h - p.n_kv_heads : h;
        device const float *src = (is_v ? v : k) + kv_head * p.head_dim;
        float x[kKVMaxDimsPerLane];
        for (uint i = 0; i < kv_dims_per_lane(p.head_dim); ++i) {
            const uint d = simd_lane + AKUNU_SIMD_WIDTH * i;
            x[i] = d < p.head_dim ? src[d] : 0.0f;
        }
        if (!is_v) Cache::to_key_basis(x, p.head_dim, simd_lane);  // qkv keeps the RoPE'd row
        Cache::store_row(x, is_v ? v_cache : k_cache, g, kv_head, cache_row, simd_lane, true);
    }
}

}  // namespace

// buffers: 0 qkv [rows, qkv_stride] (rotated in place), 1 k_cache, 2 v_cache, 3 inv_freq F32
// [rope_dim / 2]; group = token row. F16 cache:
kernel void rope_interleaved_kv_write(device float *qkv [[buffer(0)]], device uchar *k_cache [[buffer(1)]],
                                      device uchar *v_cache [[buffer(2)]], device const float *inv_freq [[buffer(3)]],
                                      constant RopeKVParams &p [[buffer(4)]], AKUNU_THREAD_ARGS) {
    rope_kv_write_row<RopeInterleaved, KVCacheF16>(qkv, k_cache, v_cache, inv_freq, p, group.x, thread_position.x,
                                                   group_size.x, simd_lane, simd_index);
}

kernel void rope_neox_kv_write(device float *qkv [[buffer(0)]], device uchar *k_cache [[buffer(1)]],
                               device uchar *v_cache [[buffer(2)]], device const float *inv_freq [[buffer(3)]],
                               constant RopeKVParams &p [[buffer(4)]], AKUNU_THREAD_ARGS) {
    rope_kv_write_row<RopeNeoX, KVCacheF16>(qkv, k_cache, v_cache, inv_freq, p, group.x, thread_position.x,
                                            group_size.x, simd_lane, simd_index);
}

// The same into the Q8_0 cache.
kernel void rope_interleaved_kv_write_q8(device float *qkv [[buffer(0)]], device uchar *k_cache [[buffer(1)]],
                                         device uchar *v_cache [[buffer(2)]],
                                         device const float *inv_freq [[buffer(3)]],
                                         constant RopeKVParams &p [[buffer(4)]], AKUNU_THREAD_ARGS) {
    rope_kv_write_row<RopeInterleaved, KVCacheQ8>(qkv, k_cache, v_cache, inv_freq, p, group.x, thread_position.x,
                                                  group_size.x, simd_lane, simd_index);
}

kernel void rope_neox_kv_write_q8(device float *qkv [[buffer(0)]], device uchar *k_cache [[buffer(1)]],
                                  device uchar *v_cache [[buffer(2)]], device const float *inv_freq [[buffer(3)]],
                                  constant RopeKVParams &p [[buffer(4)]], AKUNU_THREAD_ARGS) {
    rope_kv_write_row<RopeNeoX, KVCacheQ8>(qkv, k_cache, v_cache, inv_freq, p, group.x, thread_position.x,
                                           group_size.x, simd_lane, simd_index);
}
