// The Q8_0 KV cache on the GPU (layout and reference math: core/kv_cache_q8.h): the planes of one
// layer's K or V buffer, a warp's Hadamard transform of a key or query block and its quantization
// of a 32-element block (bit for bit the host reference), and the dequantization of staged values into the f16 tiles that the tensor-core
// attention kernels read with ldmatrix.
//
// Why dequantize into shared memory rather than into the mma fragments: the P V product takes V
// by keys (ldmatrix .trans), four byte gathers and four scales per fragment from int8 rows; one
// pass of 16-byte loads and half2 arithmetic per staged chunk keeps both mma loops as they are for
// the F16 cache (docs/adr/0011-q8-kv-cache.md).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "core/kv_cache_q8.h"
#include "cuda/common.cuh"

namespace akunu::cuda {

// A 4- or 8-byte global -> shared copy (cp.async .ca: the sizes below 16 bytes); src_bytes = 0
// writes zeros.
template <int kBytes>
__device__ __forceinline__ void cp_async_small(void *smem, const void *gmem, uint32_t src_bytes) {
    static_assert(kBytes == 4 || kBytes == 8, "cp.async copies 4, 8 or 16 bytes");
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(a), "l"(gmem), "n"(kBytes), "r"(src_bytes));
}

// One layer's K (or V) buffer of the Q8_0 cache: the int8 values and the fp16 scale plane.
struct Q8Planes {
    int8_t *values;
    __half *scales;

    __host__ __device__ Q8Planes(void *buffer, uint32_t n_kv_heads, uint32_t max_seq, uint32_t head_dim)
        : values(static_cast<int8_t *>(buffer)),
          scales(reinterpret_cast<__half *>(static_cast<uint8_t *>(buffer) +
                                            kv_q8_scales_offset(n_kv_heads, max_seq, head_dim))) {}
    // Row (kv_head, row) of the cache: its head_dim values and head_dim / 32 scales.
    __device__ int8_t *row_values(uint32_t kv_head, uint32_t row, uint32_t max_seq, uint32_t head_dim) const {
        return values + kv_row(kv_head, row, max_seq) * head_dim;
    }
    __device__ __half *row_scales(uint32_t kv_head, uint32_t row, uint32_t max_seq, uint32_t head_dim) const {
        return scales + kv_row(kv_head, row, max_seq) * (head_dim / kKVQ8Block);
    }
};

// kv_cache_q8.h's Hadamard transform of a row a warp holds kDpl consecutive elements a lane (a
// 32-element block in 32 / kDpl lanes): the stages below kDpl within a lane's registers, the others
// across lanes, where the lane with bit h clear holds x[i] + x[i + h] and its partner x[i] - x[i + h]
// (the same float additions as hadamard_kv_block, so the same bits).
template <int kDpl>
__device__ __forceinline__ void hadamard_row_warp(float (&x)[kDpl]) {
    const uint32_t lane = threadIdx.x & 31;
#pragma unroll
    for (int h = 1; h < kDpl; h <<= 1)
#pragma unroll
        for (int i = 0; i < kDpl; ++i)
            if ((i & h) == 0) {
                const float a = x[i], b = x[i + h];
                x[i] = a + b;
                x[i + h] = a - b;
            }
#pragma unroll
    for (uint32_t h = kDpl; h < kKVQ8Block; h <<= 1) {
        const uint32_t lane_bit = h / kDpl;
#pragma unroll
        for (int i = 0; i < kDpl; ++i) {
            const float other = __shfl_xor_sync(0xffffffffu, x[i], lane_bit);
            x[i] = (lane & lane_bit) ? other - x[i] : x[i] + other;
        }
    }
}

// The same for one block, element i in lane i.
__device__ __forceinline__ float hadamard_block_warp(float x) {
    float row[1] = {x};
    hadamard_row_warp<1>(row);
    return row[0];
}

// Lane i of a warp holds element i of a 32-element block: writes q[i] and (lane 0) the block's
// scale, as quantize_kv_block_q8 does on the host (IEEE division and multiply, roundf's ties away
// from zero), so the CPU and the GPU fill the cache with the same bytes.
__device__ __forceinline__ void quantize_block_q8_warp(float x, int8_t *q, __half *scale) {
    const float amax = warp_max(fabsf(x));
    const float d = __fdiv_rn(amax, 127.f);
    const float id = d != 0.f ? __fdiv_rn(1.f, d) : 0.f;
    q[threadIdx.x & 31] = (int8_t)roundf(__fmul_rn(x, id));
    if ((threadIdx.x & 31) == 0) *scale = __float2half_rn(d);
}

// A warp holding a row of 32 * kDpl dims, kDpl consecutive ones per lane, quantizes it into q
// (its int8 values) and scales (one per 32 dims): every block at once, a block's amax reduced over
// its 32 / kDpl lanes. The same bytes as quantize_kv_block_q8 (a maximum does not depend on order).
template <int kDpl>
__device__ __forceinline__ void quantize_row_q8_warp(const float (&x)[kDpl], int8_t *q, __half *scales) {
    static_assert(kDpl == 2 || kDpl == 4, "a lane's values are one 2- or 4-byte store");
    constexpr uint32_t kLanes = 32 / kDpl;  // lanes per block
    float amax = 0.f;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) amax = fmaxf(amax, fabsf(x[i]));
#pragma unroll
    for (uint32_t o = 1; o < kLanes; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = __fdiv_rn(amax, 127.f);
    const float id = d != 0.f ? __fdiv_rn(1.f, d) : 0.f;
    const uint32_t lane = threadIdx.x & 31;
    uint32_t packed = 0;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) packed |= ((uint32_t)(uint8_t)(int8_t)roundf(__fmul_rn(x[i], id))) << (8 * i);
    if constexpr (kDpl == 4)
        reinterpret_cast<uint32_t *>(q)[lane] = packed;
    else
        reinterpret_cast<uint16_t *>(q)[lane] = (uint16_t)packed;
    if (lane % kLanes == 0) scales[lane / kLanes] = __float2half_rn(d);
}

// 16 int8 values times their block's scale into 16 halves (two 16-byte stores). The bytes become
// halves without a conversion instruction (those run at a quarter rate): x + 128 in a half's
// mantissa is the half 1024 + 128 + x, exact, then one subtraction and the scale's multiply.
__device__ __forceinline__ void dequantize16_q8(const uint4 q, __half2 scale, __half *dst) {
    const uint32_t w[4] = {q.x ^ 0x80808080u, q.y ^ 0x80808080u, q.z ^ 0x80808080u, q.w ^ 0x80808080u};
    const __half2 bias = __float2half2_rn(1152.f);
    uint32_t out[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t lo = __byte_perm(w[i], 0x64646464u, 0x5140u), hi = __byte_perm(w[i], 0x64646464u, 0x7362u);
        const __half2 a = __hmul2(__hsub2(*reinterpret_cast<const __half2 *>(&lo), bias), scale);
        const __half2 b = __hmul2(__hsub2(*reinterpret_cast<const __half2 *>(&hi), bias), scale);
        out[2 * i] = *reinterpret_cast<const uint32_t *>(&a);
        out[2 * i + 1] = *reinterpret_cast<const uint32_t *>(&b);
    }
    reinterpret_cast<uint4 *>(dst)[0] = make_uint4(out[0], out[1], out[2], out[3]);
    reinterpret_cast<uint4 *>(dst)[1] = make_uint4(out[4], out[5], out[6], out[7]);
}

// A chunk of kKeys cache rows of K and V staged as Q8_0 (values and scales, cp.async) and then
// dequantized into f16 rows of LD halves. Staged rows past `valid` are zeros (value 0, scale 0).
template <int HD, int kKeys>
struct Q8Chunk {
    // K rows padded by 16 bytes: the 8 rows of a warp's 8-byte fragment loads (read_key_fragments)
    // then spread over every bank.
    static constexpr int kKeyStride = HD + 16;
    int8_t kq[kKeys][kKeyStride];
    int8_t vq[kKeys][HD];
    __align__(8) __half kd[kKeys][HD / 32];
    __align__(8) __half vd[kKeys][HD / 32];

    // Rows r0..r0 + n of the chunk, the cache rows of positions first + r0.. (rows at or past
    // `valid` are zeros), copied by n_threads threads of which this is thread `tid`; `row_of` maps
    // a position to its cache row. One cp.async group is the caller's to commit.
    template <class RowOf>
    __device__ void stage(const Q8Planes &K, const Q8Planes &V, uint32_t kv_head, uint32_t max_seq, uint32_t first,
                          uint32_t valid, RowOf row_of, uint32_t r0, uint32_t n, uint32_t tid, uint32_t n_threads) {
        static_assert(HD == 64 || HD == 128, "a row's scales are one 4- or 8-byte copy");
        for (uint32_t i = tid; i < n * HD / 16; i += n_threads) {
            const uint32_t j = r0 + i / (HD / 16), d = 16 * (i % (HD / 16));
            const bool ok = j < valid;
            const uint32_t row = row_of(first + (ok ? j : 0));
            cp_async16(&kq[j][d], K.row_values(kv_head, row, max_seq, HD) + d, ok ? 16 : 0);
            cp_async16(&vq[j][d], V.row_values(kv_head, row, max_seq, HD) + d, ok ? 16 : 0);
        }
        // Scales: a row's HD / 32 halves (8 bytes for head_dim 128, 4 for 64) in one copy, so that a
        // ring's wrap or any first row keeps the copy aligned.
        for (uint32_t i = tid; i < n; i += n_threads) {
            const uint32_t j = r0 + i;
            const bool ok = j < valid;
            const uint32_t row = row_of(first + (ok ? j : 0));
            cp_async_small<HD / 16>(&kd[j][0], K.row_scales(kv_head, row, max_seq, HD), ok ? HD / 16 : 0);
            cp_async_small<HD / 16>(&vd[j][0], V.row_scales(kv_head, row, max_seq, HD), ok ? HD / 16 : 0);
        }
    }

    // Rows r0..r0 + n of the staged chunk into f16 rows ks[j][0..HD) (ks null: V only) and
    // vs[j][0..HD), by n_threads threads (after their copies landed and a barrier over those
    // threads; the caller's next barrier publishes the rows).
    template <int LD>
    __device__ void dequantize(__half (*ks)[LD], __half (*vs)[LD], uint32_t r0, uint32_t n, uint32_t tid,
                               uint32_t n_threads) const {
        for (uint32_t i = tid; i < n * HD / 16; i += n_threads) {
            const uint32_t j = r0 + i / (HD / 16), d = 16 * (i % (HD / 16));
            if (ks) dequantize16_q8(*reinterpret_cast<const uint4 *>(&kq[j][d]), __half2half2(kd[j][d / 32]), &ks[j][d]);
            dequantize16_q8(*reinterpret_cast<const uint4 *>(&vq[j][d]), __half2half2(vd[j][d / 32]), &vs[j][d]);
        }
    }

    // The B fragments of S = Q K^T for key row j and the 32-dim block b straight from the staged
    // int8 values, unscaled (the integers are exact in f16; the caller applies the block's scale to
    // the f32 scores): frag[0] for k-step 2b, frag[1] for 2b + 1. The query's dims are permuted to
    // match (q8_fragment_column): lane (g, t)'s four k indices of both steps are dims 8t..8t+7 of
    // the block, one 8-byte load.
    __device__ void read_key_fragments(uint32_t j, uint32_t b, uint32_t t, uint32_t (&frag)[2][2]) const {
        const uint2 w = *reinterpret_cast<const uint2 *>(&kq[j][32 * b + 8 * t]);
        const __half2 bias = __float2half2_rn(1152.f);
        const uint32_t words[2] = {w.x ^ 0x80808080u, w.y ^ 0x80808080u};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint32_t lo = __byte_perm(words[h], 0x64646464u, 0x5140u);
            const uint32_t hi = __byte_perm(words[h], 0x64646464u, 0x7362u);
            const __half2 a = __hsub2(*reinterpret_cast<const __half2 *>(&lo), bias);
            const __half2 c = __hsub2(*reinterpret_cast<const __half2 *>(&hi), bias);
            frag[h][0] = *reinterpret_cast<const uint32_t *>(&a);
            frag[h][1] = *reinterpret_cast<const uint32_t *>(&c);
        }
    }
};

// Where dim d of a query goes in the mma's k order when K's fragments come from read_key_fragments:
// within each 32-dim block, dim 8t + 4h + 2u + v is k index 16h + 8u + 2t + v (k-step 2b + h, the
// fragment half u, lane t, element v). Pairs (v = 0, 1) stay adjacent.
__host__ __device__ constexpr uint32_t q8_fragment_column(uint32_t d) {
    const uint32_t r = d % 32, t = r / 8, h = (r / 4) % 2, u = (r / 2) % 2, v = r % 2;
    return d - r + 16 * h + 8 * u + 2 * t + v;
}
static_assert(q8_fragment_column(0) == 0 && q8_fragment_column(1) == 1 && q8_fragment_column(2) == 8 &&
                  q8_fragment_column(4) == 16 && q8_fragment_column(8) == 2 && q8_fragment_column(31) == 31 &&
                  q8_fragment_column(45) == 32 + 19,
              "a permutation of each 32-dim block");

}  // namespace akunu::cuda
