// The KV cache as the Metal kernels read and write it: head-major rows [kv_head][max_seq][head_dim]
// of F16 elements (KVCacheF16), or the Q8_0 value and scale planes of src/core/kv_cache_q8.h
// (KVCacheQ8: int8 values [n_kv_heads][max_seq][head_dim], then one fp16 scale per 32 dims of a
// row). The row at position p is p % max_seq (a sliding-window layer's ring).
//
// Rows are handled by SIMD groups whose lane holds dims lane + 32 i (i < dims_per_lane), so each
// 32-dim Q8_0 block is one register across the SIMD group and its scale one SIMD reduction.
//
//   Cache::Head Cache::head(cache, geometry, kv_head)      a KV head's rows, for reading:
//       float element(uint row, uint d)                     dim d of cache row `row`, as a float
//   Cache::store_row(x, cache, geometry, kv_head, row, lane, write)
//       rounds the SIMD group's row x to what the cache holds (x keeps the rounded values) and,
//       when `write`, stores it at cache row `row`
//   Cache::keys_in_hadamard_basis(), to_key_basis(x, head_dim, lane), to_query_basis(...)
//       the basis the cache keeps keys in, and a SIMD group's key or query row taken into it
//       (the Q8_0 cache's Hadamard basis, src/core/kv_cache_q8.h; F16: as they are)
#pragma once
#include "common.h"

enum {
    kKVMaxHeadDim = 256,                                  // the attention kernels' register budget
    kKVMaxDimsPerLane = kKVMaxHeadDim / AKUNU_SIMD_WIDTH,
    kKVQ8BlockDims = 32,                                  // dims per Q8_0 scale: one SIMD group's width
};

// Dims a lane holds of a row (the same for every lane: lanes past head_dim hold padding).
inline uint kv_dims_per_lane(uint head_dim) { return (head_dim + AKUNU_SIMD_WIDTH - 1) / AKUNU_SIMD_WIDTH; }

struct KVGeometry {
    uint n_kv_heads;
    uint max_seq;  // rows per KV head
    uint head_dim;
};

// Rows of all KV heads before this one.
inline ulong kv_head_first_row(KVGeometry g, uint kv_head) { return ulong(kv_head) * g.max_seq; }

struct KVCacheF16 {
    struct Head {
        device const half *rows;  // the head's row 0
        uint head_dim;
        float element(uint row, uint d) const { return float(rows[row * head_dim + d]); }
    };

    static Head head(device const uchar *cache, KVGeometry g, uint kv_head) {
        Head h;
        h.rows = (device const half *)cache + kv_head_first_row(g, kv_head) * g.head_dim;
        h.head_dim = g.head_dim;
        return h;
    }

    static bool keys_in_hadamard_basis() { return false; }
    static void to_key_basis(thread float *, uint, uint) {}
    static void to_query_basis(thread float *, uint, uint) {}

    static void store_row(thread float *x, device uchar *cache, KVGeometry g, uint kv_head, uint row, uint lane,
                          bool write) {
        device half *dst = (device half *)cache + (kv_head_first_row(g, kv_head) + row) * g.head_dim;
        for (uint i = 0; i < kv_dims_per_lane(g.head_dim); ++i) {
            const uint d = lane + AKUNU_SIMD_WIDTH * i;
            if (d >= g.head_dim) continue;
            const half h = half(x[i]);
            if (write) dst[d] = h;
            x[i] = float(h);
        }
    }
};

// head_dim is a multiple of 32 (the engine checks it when it makes a Q8_0 cache).
struct KVCacheQ8 {
    struct Head {
        device const int8_t *values;  // the head's row 0
        device const half *scales;
        uint head_dim;
        float element(uint row, uint d) const {
            return float(scales[row * (head_dim / kKVQ8BlockDims) + d / kKVQ8BlockDims]) *
                   float(values[row * head_dim + d]);
        }
    };

    // Bytes of the value plane: where the scale plane starts.
    static ulong scales_offset(KVGeometry g) { return ulong(g.n_kv_heads) * g.max_seq * g.head_dim; }

    static Head head(device const uchar *cache, KVGeometry g, uint kv_head) {
        const ulong first_row = kv_head_first_row(g, kv_head);
        Head h;
        h.values = (device const int8_t *)cache + first_row * g.head_dim;
        h.scales = (device const half *)(cache + scales_offset(g)) + first_row * (g.head_dim / kKVQ8BlockDims);
        h.head_dim = g.head_dim;
        return h;
    }

    // Keys in their Hadamard basis (kv_cache_q8.h's hadamard_kv_block): block i is register i of the
    // SIMD group, element `lane`; at stage h the lane with bit h clear holds x[e] + x[e + h], its
    // partner x[e] - x[e + h], the same float additions as the host's, so the same bits. Queries
    // the same, times 1/32 (exact).
    static bool keys_in_hadamard_basis() { return true; }
    static void to_key_basis(thread float *x, uint head_dim, uint lane) {
        for (uint i = 0; i < head_dim / kKVQ8BlockDims; ++i)
            for (ushort h = 1; h < kKVQ8BlockDims; h <<= 1) {
                const float other = simd_shuffle_xor(x[i], h);
                x[i] = (lane & h) ? other - x[i] : x[i] + other;
            }
    }
    static void to_query_basis(thread float *x, uint head_dim, uint lane) {
        to_key_basis(x, head_dim, lane);
        for (uint i = 0; i < head_dim / kKVQ8BlockDims; ++i) x[i] *= 1.0f / float(kKVQ8BlockDims);
    }

    // Each block exactly as kv_cache_q8.h's quantize_kv_block_q8 (ggml's reference): d = amax / 127,
    // q = round(x / d) (ties away from zero) as x * (1 / d), scale fp16(d); the value is scale * q.
    static void store_row(thread float *x, device uchar *cache, KVGeometry g, uint kv_head, uint row, uint lane,
                          bool write) {
        const ulong cache_row = kv_head_first_row(g, kv_head) + row;
        device int8_t *values = (device int8_t *)cache + cache_row * g.head_dim;
        device half *scales = (device half *)(cache + scales_offset(g)) + cache_row * (g.head_dim / kKVQ8BlockDims);
        for (uint i = 0; i < g.head_dim / kKVQ8BlockDims; ++i) {  // block i: register i of the SIMD group
            const float amax = simd_max(fabs(x[i]));
            const float d = amax / 127.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            const int8_t q = int8_t(round(x[i] * id));
            const half scale = half(d);
            if (write) {
                values[lane + kKVQ8BlockDims * i] = q;
                if (lane == 0) scales[i] = scale;
            }
            x[i] = float(scale) * float(q);
        }
    }
};
