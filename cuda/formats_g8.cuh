// Device side of the g8 layout (cuda/layout_g8.h): per format, the dot of one row's block with
// 32 activations, and the block dequantized to f16 for the tensor-core GEMM.
//
// Quants become floats through the exponent trick (common.cuh's byte_as_float): one byte
// permute and one add whose constant also removes the format's offset (Q4_0: 8, Q8_0: 128 after
// flipping the sign bit), so signed values cost nothing extra. For f16, a byte placed under the
// exponent bits 0x64 is the half 1024 + byte, exact, and one half2 subtract removes the bias.
#pragma once
#include "cuda/common.cuh"
#include "cuda/layout_g8.h"

namespace akunu::cuda {

// Byte b of `word` as a float, minus `bias` (2^23 + offset): exact for bytes.
__device__ __forceinline__ float byte_minus(uint32_t word, int b, float bias) {
    return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7540u + (uint32_t)b)) - bias;
}

// The low (h = 0) or high (h = 1) nibbles of four bytes, as four bytes.
__device__ __forceinline__ uint32_t nibble_bytes(uint32_t word, int h) { return (h ? word >> 4 : word) & 0x0F0F0F0Fu; }

// Sum over the 16 bytes of nibbles of a 4-bit block: low nibble of byte j is element j, high
// nibble element 16 + j; values are nibble - kOffset.
template <int kOffset>
__device__ __forceinline__ float dot_nibbles(uint4 q, const float *x) {
    constexpr float kBias = 8388608.0f + kOffset;
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t lo = nibble_bytes(w[i], 0), hi = nibble_bytes(w[i], 1);
#pragma unroll
        for (int b = 0; b < 4; ++b) {
            s = fmaf(byte_minus(lo, b, kBias), x[4 * i + b], s);
            s = fmaf(byte_minus(hi, b, kBias), x[16 + 4 * i + b], s);
        }
    }
    return s;
}

// Sum over 16 int8 quants (sign bit flipped to make q + 128 unsigned) times x[0..15].
__device__ __forceinline__ float dot_int8x16(uint4 q, const float *x) {
    constexpr float kBias = 8388608.0f + 128.0f;
    const uint32_t w[4] = {q.x ^ 0x80808080u, q.y ^ 0x80808080u, q.z ^ 0x80808080u, q.w ^ 0x80808080u};
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int b = 0; b < 4; ++b) s = fmaf(byte_minus(w[i], b, kBias), x[4 * i + b], s);
    return s;
}

// prmt.b32 with its own selector rule: bits 0..2 of a selector nibble pick one of the 8 bytes of
// {b, a}, bit 3 set replicates that byte's sign bit instead. (__byte_perm ignores bit 3, which makes
// the compiler clear it with a LOP3 before every selector it cannot see.)
__device__ __forceinline__ uint32_t prmt_b32(uint32_t a, uint32_t b, uint32_t selector) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
    return d;
}

// IQ4's table (kIQ4Values) looked up for the eight nibbles of a quant word q in the g8 IQ4 order
// (src/backend/cuda/g8_layout.cpp: nibbles 0..3 are elements 4w .. 4w + 3 of the block, nibbles
// 4..7 the elements 16 later): lo = the signed values of nibbles 0..3, hi = of nibbles 4..7, a
// byte each. A prmt picks a byte of its 8-byte pair by a selector nibble's low three bits, so every
// nibble is looked up in both table halves and its bit 3 then picks the half (the merge). The low
// half is looked up with q itself: a nibble of the high half (bit 3 set) comes out sign-replicated
// there, and the merge drops that byte; the high half with q ^ 0x88888888, the other way round.
// 12 instructions for eight values; __byte_perm's selector masks and the table-word copies below
// made it 17 (benchmarks/HISTORY.md, 2026-11-27, 8141c0c).
__device__ __forceinline__ void iq4_values8(uint32_t q, uint32_t &lo, uint32_t &hi) {
    // Two of the table words must sit in registers (a prmt takes one constant). Left as constants,
    // ptxas copies them from uniform registers before every lookup (4 moves for eight values); a zero
    // it cannot prove keeps them in registers.
    const uint32_t unproven_zero = threadIdx.x >> 10;  // blockDim.x <= 1024
    const uint32_t kT0 = 0xBFAD9881u ^ unproven_zero, kT2 = 0x26190D01u ^ unproven_zero;  // little-endian
    constexpr uint32_t kT1 = 0xF6EADDCFu, kT3 = 0x71594535u;
    const uint32_t qx = q ^ 0x88888888u;
    const uint32_t half = 0x32103210u + ((q & 0x88888888u) >> 1);  // byte k of the low (k) or high (4 + k) lookup
    const uint32_t s = q >> 16, sx = qx >> 16;
    lo = prmt_b32(prmt_b32(kT0, kT1, q), prmt_b32(kT2, kT3, qx), half);
    hi = prmt_b32(prmt_b32(kT0, kT1, s), prmt_b32(kT2, kT3, sx), half >> 16);
}

// The integer GEMV (cuda/gemv_q16.cuh) takes x as int16 pairs: xw[j] holds elements 2j (low half)
// and 2j + 1 of a 32-element block. dp2a multiplies two int16 by two bytes of a weight word and
// adds both products to an int32: .lo pairs bytes 0, 1 with xw[2i], .hi bytes 2, 3 with xw[2i + 1],
// so a word of four consecutive elements 4i..4i+3 takes one of each. Sums are exact integers.
__device__ __forceinline__ int dp2a_word(const int *xw, int i, uint32_t bytes, int acc) {
    acc = __dp2a_lo(xw[2 * i], (int)bytes, acc);
    return __dp2a_hi(xw[2 * i + 1], (int)bytes, acc);
}

// Sum of dp2a_word over n words (word j: elements 4j..4j+3 of xw's pairs) in two independent
// accumulators: a dp2a waits for the sum before it, and one chain through a block's 16 dp2a kept
// the 8B shape's Q4_0 decode 4 % slower (four chains: no faster; benchmarks/HISTORY.md, 2026-11-27).
template <int n>
__device__ __forceinline__ int dp2a_words(const int *xw, const uint32_t (&bytes)[n]) {
    constexpr int kChains = n < 2 ? n : 2;
    int acc[kChains] = {};
#pragma unroll
    for (int j = 0; j < n; ++j) acc[j % kChains] = dp2a_word(xw, j, bytes[j], acc[j % kChains]);
    int s = acc[0];
#pragma unroll
    for (int c = 1; c < kChains; ++c) s += acc[c];
    return s;
}

// Sum of nibbles x q16 over a 4-bit block (unsigned nibbles 0..15; the format removes its offset).
__device__ __forceinline__ int dp2a_nibbles(uint4 q, const int *xw) {
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    uint32_t bytes[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        bytes[i] = nibble_bytes(w[i], 0);      // elements 4i..4i+3
        bytes[4 + i] = nibble_bytes(w[i], 1);  // elements 16+4i..16+4i+3
    }
    return dp2a_words(xw, bytes);
}

// Four bytes n (0..255) -> the four halves (n + 1024 - sub) * d + m as two half2 words: a byte
// under the exponent bits 0x64 is the half 1024 + n (exact), so `sub` removes 1024 and the offset.
__device__ __forceinline__ void bytes_to_half(uint32_t bytes, __half2 sub, __half2 d, __half2 m, uint32_t *out) {
    const uint32_t a = __byte_perm(bytes, 0x64646464u, 0x5140u), b = __byte_perm(bytes, 0x64646464u, 0x5342u);
    const __half2 ha = __hfma2(__hsub2(*reinterpret_cast<const __half2 *>(&a), sub), d, m);
    const __half2 hb = __hfma2(__hsub2(*reinterpret_cast<const __half2 *>(&b), sub), d, m);
    out[0] = *reinterpret_cast<const uint32_t *>(&ha);
    out[1] = *reinterpret_cast<const uint32_t *>(&hb);
}

// Every g8 format has a Layout and, in two steps so that a kernel can issue its loads early and
// use them later:
//   the GEMV: g8_load_block<F>(group, K, kb, r) -> G8Block (row r's block kb: quants + scales),
//     block_dot(block, x, x_sum) = its dot with x[0..31] (x_sum = sum of those x, used by Q4_1's
//     offset: kNeedsXSum);
//   the integer GEMV: block_dot_q16(block, xw, x_scale, xq_sum) = the same dot with x given as
//     int16 pairs xw (x = x_scale * q, xq_sum = sum of the q);
//   the GEMM's and the embedding's 16-element halves: raw(group, K, kb, r, h) -> G8Raw (the 16
//     quant bytes holding elements 16h..16h+15 + the scales), to_half(raw, h, out) (8 half2
//     words), to_float(raw, h, out) (16 exact floats).
// (The superblock formats' raw and block types add their high bits and superblock factors.)
struct G8Raw {
    uint4 q;
    uint32_t scales;  // f16 d (low half); Q4_1, Q5_1: and f16 m (high half); IQ4_XS: f32 d (ls - 32)
};

template <int kUnits>
struct G8Block {
    uint4 q[kUnits];  // kQuantBytes / 16
    uint32_t scales;
};
// The superblock formats' block (layout_g8.h): one unit of low nibbles, the sub-scale bytes, the
// high bits (one word, or Q6_K's two) and the superblock's factor word.
template <int kHighWords>
struct G8SuperBlock {
    uint4 q[1];
    uint32_t scales;
    std::conditional_t<(kHighWords > 1), uint2, uint32_t> high;  // unused without high bits
    uint32_t super;
};
// A format's block type: its quant units and factor words.
template <class F>
using G8BlockOf = std::conditional_t<(F::Layout::kSuperBytes > 0), G8SuperBlock<(F::Layout::kHighBytes + 3) / 4>,
                                     G8Block<F::Layout::kQuantBytes / 16>>;

// Streamed weights are read once per token: loaded with an L2 evict-first policy, so the weights
// passing through L2 (4.2 GB per 8B-shape token) do not push out what is read again soon, on a
// kernel's critical path right after its wait (norm weights, activations, the KV cache).
// Measured faster than plain loads on an H100; the 256-byte L2 prefetch hint on top gained nothing
// (benchmarks/HISTORY.md, 2026-11-23, c833b96).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
    uint64_t policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}
__device__ __forceinline__ uint4 ldg_stream(const uint4 *p, uint64_t policy) {
    uint4 v;
    asm("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p), "l"(policy));
    return v;
}
__device__ __forceinline__ uint32_t ldg_stream(const uint32_t *p, uint64_t policy) {
    uint32_t v;
    asm("ld.global.nc.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(policy));
    return v;
}
__device__ __forceinline__ uint2 ldg_stream(const uint2 *p, uint64_t policy) {
    uint2 v;
    asm("ld.global.nc.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(p), "l"(policy));
    return v;
}
__device__ __forceinline__ uint32_t ldg_stream(const unsigned short *p, uint64_t policy) {
    unsigned short v;
    asm("ld.global.nc.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v) : "l"(p), "l"(policy));
    return v;
}

template <class F>
__device__ __forceinline__ G8BlockOf<F> g8_load_block(const uint8_t *grp, uint32_t K, uint32_t kb, uint32_t r) {
    using L = typename F::Layout;
    G8BlockOf<F> b;
    const uint4 *q = reinterpret_cast<const uint4 *>(grp + L::quant_offset(K, kb, r));
    const uint64_t policy = l2_evict_first_policy();
#pragma unroll
    for (int i = 0; i < L::kQuantBytes / 16; ++i) b.q[i] = ldg_stream(q + i, policy);
    if constexpr (L::kHighBytes == 8)
        b.high = ldg_stream(reinterpret_cast<const uint2 *>(grp + L::high_offset(K, kb, r)), policy);
    else if constexpr (L::kHighBytes == 4)
        b.high = ldg_stream(reinterpret_cast<const uint32_t *>(grp + L::high_offset(K, kb, r)), policy);
    if constexpr (L::kSuperBytes == 4)
        b.super = __ldg(reinterpret_cast<const uint32_t *>(grp + L::super_offset(K, kb, r)));  // read by 8 blocks
    if constexpr (L::kScaleBytes == 4)
        b.scales = ldg_stream(reinterpret_cast<const uint32_t *>(grp + L::scale_offset(kb, r)), policy);
    else
        b.scales = ldg_stream(reinterpret_cast<const unsigned short *>(grp + L::scale_offset(kb, r)), policy);
    return b;
}

__device__ __forceinline__ float half_lo(uint32_t scales) { return __half2float(__ushort_as_half((unsigned short)scales)); }
__device__ __forceinline__ float half_hi(uint32_t scales) { return __half2float(__ushort_as_half((unsigned short)(scales >> 16))); }

struct G8FmtQ4_0 {
    using Raw = G8Raw;
    using Layout = G8Q4_0;
    static constexpr bool kNeedsXSum = false;
    __device__ static float block_dot(const G8Block<1> &b, const float *x, float) {
        return dot_nibbles<8>(b.q[0], x) * half_lo(b.scales);
    }
    __device__ static float block_dot_q16(const G8Block<1> &b, const int *xw, float x_scale, int xq_sum) {
        return (float)(dp2a_nibbles(b.q[0], xw) - 8 * xq_sum) * (half_lo(b.scales) * x_scale);
    }
    __device__ static G8Raw raw(const uint8_t *grp, uint32_t K, uint32_t kb, uint32_t r, int) {
        return {__ldg(reinterpret_cast<const uint4 *>(grp + Layout::quant_offset(K, kb, r))),
                __ldg(reinterpret_cast<const unsigned short *>(grp + Layout::scale_offset(kb, r)))};
    }
    __device__ static void to_half(const G8Raw &v, int h, uint32_t *out) {
        const __half2 d2 = __half2half2(__ushort_as_half((unsigned short)v.scales));
        const __half2 sub = __float2half2_rn(1032.f), zero = __float2half2_rn(0.f);  // 1024 + 8
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) bytes_to_half(nibble_bytes(w[i], h), sub, d2, zero, out + 2 * i);
    }
    __device__ static void to_float(const G8Raw &v, int h, float *out) {
        const float d = __half2float(__ushort_as_half((unsigned short)v.scales));
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int b = 0; b < 4; ++b)
                out[4 * i + b] = byte_minus(nibble_bytes(w[i], h), b, 8388616.0f) * d;
    }
};

struct G8FmtQ4_1 {
    using Raw = G8Raw;
    using Layout = G8Q4_1;
    static constexpr bool kNeedsXSum = true;
    // sum (n d + m) x = d sum n x + m sum x
    __device__ static float block_dot(const G8Block<1> &b, const float *x, float x_sum) {
        return fmaf(dot_nibbles<0>(b.q[0], x), half_lo(b.scales), half_hi(b.scales) * x_sum);
    }
    __device__ static float block_dot_q16(const G8Block<1> &b, const int *xw, float x_scale, int xq_sum) {
        return fmaf((float)dp2a_nibbles(b.q[0], xw), half_lo(b.scales), half_hi(b.scales) * (float)xq_sum) * x_scale;
    }
    __device__ static G8Raw raw(const uint8_t *grp, uint32_t K, uint32_t kb, uint32_t r, int) {
        return {__ldg(reinterpret_cast<const uint4 *>(grp + Layout::quant_offset(K, kb, r))),
                __ldg(reinterpret_cast<const uint32_t *>(grp + Layout::scale_offset(kb, r)))};
    }
    __device__ static void to_half(const G8Raw &v, int h, uint32_t *out) {
        const __half2 both = *reinterpret_cast<const __half2 *>(&v.scales);
        const __half2 d2 = __low2half2(both), m2 = __high2half2(both), sub = __float2half2_rn(1024.f);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) bytes_to_half(nibble_bytes(w[i], h), sub, d2, m2, out + 2 * i);
    }
    __device__ static void to_float(const G8Raw &v, int h, float *out) {
        const float2 dm = __half22float2(*reinterpret_cast<const __half2 *>(&v.scales));
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int b = 0; b < 4; ++b)
                out[4 * i + b] = byte_minus(nibble_bytes(w[i], h), b, 8388608.0f) * dm.x + dm.y;
    }
};

struct G8FmtQ8_0 {
    using Raw = G8Raw;
    using Layout = G8Q8_0;
    static constexpr bool kNeedsXSum = false;
    __device__ static float block_dot(const G8Block<2> &b, const float *x, float) {
        return (dot_int8x16(b.q[0], x) + dot_int8x16(b.q[1], x + 16)) * half_lo(b.scales);
    }
    __device__ static float block_dot_q16(const G8Block<2> &b, const int *xw, float x_scale, int) {
        const uint32_t w[8] = {b.q[0].x, b.q[0].y, b.q[0].z, b.q[0].w, b.q[1].x, b.q[1].y, b.q[1].z, b.q[1].w};
        return (float)dp2a_words(xw, w) * (half_lo(b.scales) * x_scale);  // signed bytes: elements 4i..4i+3
    }
    __device__ static G8Raw raw(const uint8_t *grp, uint32_t K, uint32_t kb, uint32_t r, int h) {
        return {__ldg(reinterpret_cast<const uint4 *>(grp + Layout::quant_offset(K, kb, r)) + h),
                __ldg(reinterpret_cast<const unsigned short *>(grp + Layout::scale_offset(kb, r)))};
    }
    __device__ static void to_half(const G8Raw &v, int, uint32_t *out) {
        const __half2 d2 = __half2half2(__ushort_as_half((unsigned short)v.scales));
        const __half2 sub = __float2half2_rn(1152.f), zero = __float2half2_rn(0.f);  // 1024 + 128
        const uint32_t w[4] = {v.q.x ^ 0x80808080u, v.q.y ^ 0x80808080u, v.q.z ^ 0x80808080u, v.q.w ^ 0x80808080u};
#pragma unroll
        for (int i = 0; i < 4; ++i) bytes_to_half(w[i], sub, d2, zero, out + 2 * i);
    }
    __device__ static void to_float(const G8Raw &v, int, float *out) {
        const float d = __half2float(__ushort_as_half((unsigned short)v.scales));
        const uint32_t w[4] = {v.q.x ^ 0x80808080u, v.q.y ^ 0x80808080u, v.q.z ^ 0x80808080u, v.q.w ^ 0x80808080u};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int b = 0; b < 4; ++b) out[4 * i + b] = byte_minus(w[i], b, 8388736.0f) * d;
    }
};

// --- the superblock formats (layout_g8.h: sub-scale bytes, f16 superblock factors) ----------

__device__ __forceinline__ float2 super_factors(uint32_t super) {
    return __half22float2(*reinterpret_cast<const __half2 *>(&super));
}
// Q4_K / Q5_K: D = d sc and Mn = -(dmin m), f32 products as gguf-py forms them. (Bytes become
// floats through byte_as_float's exponent trick: an integer conversion instruction runs at a
// quarter of the rate, in a loop that decode keeps busy.)
__device__ __forceinline__ float2 scale_min_factors(uint32_t scales, uint32_t super) {
    const float2 dm = super_factors(super);
    return make_float2(__fmul_rn(dm.x, byte_as_float(scales, 0)), -__fmul_rn(dm.y, byte_as_float(scales, 1)));
}
__device__ __forceinline__ uint32_t ldg_u16(const uint8_t *p) { return __ldg(reinterpret_cast<const unsigned short *>(p)); }
__device__ __forceinline__ uint32_t ldg_u32(const uint8_t *p) { return __ldg(reinterpret_cast<const uint32_t *>(p)); }

// Q4_K: value = D n + Mn, Q4_1's arithmetic in f32.
struct G8FmtQ4_K {
    using Layout = G8Q4_K;
    static constexpr bool kNeedsXSum = true;
    struct Raw {
        uint4 q;
        uint32_t scales, super;
    };
    __device__ static float block_dot(const G8SuperBlock<0> &b, const float *x, float x_sum) {
        const float2 f = scale_min_factors(b.scales, b.super);
        return fmaf(dot_nibbles<0>(b.q[0], x), f.x, f.y * x_sum);
    }
    __device__ static float block_dot_q16(const G8SuperBlock<0> &b, const int *xw, float x_scale, int xq_sum) {
        const float2 f = scale_min_factors(b.scales, b.super);
        return fmaf((float)dp2a_nibbles(b.q[0], xw), f.x, f.y * (float)xq_sum) * x_scale;
    }
    __device__ static Raw raw(const uint8_t *grp, uint32_t K, uint32_t kb, uint32_t r, int) {
        return {__ldg(reinterpret_cast<const uint4 *>(grp + Layout::quant_offset(K, kb, r))),
                ldg_u16(grp + Layout::scale_offset(kb, r)), ldg_u32(grp + Layout::super_offset(K, kb, r))};
    }
    __device__ static void to_half(const Raw &v, int h, uint32_t *out) {
        const float2 f = scale_min_factors(v.scales, v.super);
        const __half2 d2 = __float2half2_rn(f.x), m2 = __float2half2_rn(f.y), sub = __float2half2_rn(1024.f);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) bytes_to_half(nibble_bytes(w[i], h), sub, d2, m2, out + 2 * i);
    }
    // D n + Mn rounded twice, as gguf-py's (d sc) q - dmin m.
    __device__ static void to_float(const Raw &v, int h, float *out) {
        const float2 f = scale_min_factors(v.scales, v.super);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int b = 0; b < 4; ++b) out[4 * i + b] = __fadd_rn(__fmul_rn(byte_minus(nibble_bytes(w[i], h), b, 8388608.0f), f.x), f.y);
    }
};

// Q5_K: Q4_K's nibbles with the 5th bits of word i's elements (low half h = 0: 4i..4i+3, high:
// 16+4i..) moved to bit 4 of their bytes.
__device__ __forceinline__ uint32_t q5_bytes(uint32_t w, uint32_t high, int i, int h) {
    return nibble_bytes(w, h) | ((h ? high >> i : high << (4 - i)) & 0x10101010u);
}
struct G8FmtQ5_K {
    using Layout = G8Q5_K;
    static constexpr bool kNeedsXSum = true;
    struct Raw {
        uint4 q;
        uint32_t scales, high, super;
    };
    __device__ static float block_dot(const G8SuperBlock<1> &b, const float *x, float x_sum) {
        const uint32_t w[4] = {b.q[0].x, b.q[0].y, b.q[0].z, b.q[0].w};
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t lo = q5_bytes(w[i], b.high, i, 0), hi = q5_bytes(w[i], b.high, i, 1);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                s = fmaf(byte_minus(lo, k, 8388608.0f), x[4 * i + k], s);
                s = fmaf(byte_minus(hi, k, 8388608.0f), x[16 + 4 * i + k], s);
            }
        }
        const float2 f = scale_min_factors(b.scales, b.super);
        return fmaf(s, f.x, f.y * x_sum);
    }
    __device__ static float block_dot_q16(const G8SuperBlock<1> &b, const int *xw, float x_scale, int xq_sum) {
        const uint32_t w[4] = {b.q[0].x, b.q[0].y, b.q[0].z, b.q[0].w};
        uint32_t bytes[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            bytes[i] = q5_bytes(w[i], b.high, i, 0);      // elements 4i..4i+3
            bytes[4 + i] = q5_bytes(w[i], b.high, i, 1);  // 16+4i..16+4i+3
        }
        const int s = dp2a_words(xw, bytes);
        const float2 f = scale_min_factors(b.scales, b.super);
        return fmaf((float)s, f.x, f.y * (float)xq_sum) * x_scale;
    }
    __device__ static Raw raw(const uint8_t *grp, uint32_t K, uint32_t kb, uint32_t r, int) {
        return {__ldg(reinterpret_cast<const uint4 *>(grp + Layout::quant_offset(K, kb, r))),
                ldg_u16(grp + Layout::scale_offset(kb, r)), ldg_u32(grp + Layout::high_offset(K, kb, r)),
                ldg_u32(grp + Layout::super_offset(K, kb, r))};
    }
    __device__ static void to_half(const Raw &v, int h, uint32_t *out) {
        const float2 f = scale_min_factors(v.scales, v.super);
        const __half2 d2 = __float2half2_rn(f.x), m2 = __float2half2_rn(f.y), sub = __float2half2_rn(1024.f);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) bytes_to_half(q5_bytes(w[i], v.high, i, h), sub, d2, m2, out + 2 * i);
    }
    // D u + Mn rounded twice, as gguf-py's (d sc) q - dmin m.
    __device__ static void to_float(const Raw &v, int h, float *out) {
        const float2 f = scale_min_factors(v.scales, v.super);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int b = 0; b < 4; ++b) out[4 * i + b] = __fadd_rn(__fmul_rn(byte_minus(q5_bytes(w[i], v.high, i, h), b, 8388608.0f), f.x), f.y);
    }
};

// Q6_K: value = D (q - 32), D = d sc per 16 elements (an f32 product, as gguf-py's). The stored
// 6 bits are q ^ 32, i.e. q - 32 in two's complement; the high bits of word i's elements sit at
// bits 2i, 2i + 1 of the half's high word. Moved to bits 2..7 of their bytes (nibble at 2..5, high
// bits at 6, 7) they are the signed bytes 4 (q - 32), which dp2a takes without a sign extension;
// the float paths take q itself.
__device__ __forceinline__ uint32_t q6_times4(uint32_t w, uint32_t high, int i, int h) {
    return ((h ? w >> 2 : w << 2) & 0x3C3C3C3Cu) | ((high << (6 - 2 * i)) & 0xC0C0C0C0u);
}
__device__ __forceinline__ uint32_t q6_unsigned(uint32_t w, uint32_t high, int i, int h) {  // q, 0..63
    return (nibble_bytes(w, h) | ((i == 3 ? high >> 2 : high << (4 - 2 * i)) & 0x30303030u)) ^ 0x20202020u;
}
__device__ __forceinline__ float q6_factor(uint32_t scales, uint32_t super, int h) {  // d sc_h
    return __fmul_rn(super_factors(super).x, byte_minus(scales ^ 0x8080u, h, 8388736.0f));
}
struct G8FmtQ6_K {
    using Layout = G8Q6_K;
    static constexpr bool kNeedsXSum = false;
    struct Raw {  // the whole block's nibbles and scales, one half's high word
        uint4 q;
        uint32_t scales, high, super;
    };
    __device__ static float block_dot(const G8SuperBlock<2> &b, const float *x, float) {
        const uint32_t w[4] = {b.q[0].x, b.q[0].y, b.q[0].z, b.q[0].w};
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t lo = q6_unsigned(w[i], b.high.x, i, 0), hi = q6_unsigned(w[i], b.high.y, i, 1);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                s0 = fmaf(byte_minus(lo, k, 8388640.0f), x[4 * i + k], s0);  // q - 32
                s1 = fmaf(byte_minus(hi, k, 8388640.0f), x[16 + 4 * i + k], s1);
            }
        }
        return fmaf(s0, q6_factor(b.scales, b.super, 0), s1 * q6_factor(b.scales, b.super, 1));
    }
    __device__ static float block_dot_q16(const G8SuperBlock<2> &b, const int *xw, float x_scale, int) {
        const uint32_t w[4] = {b.q[0].x, b.q[0].y, b.q[0].z, b.q[0].w};
        uint32_t lo[4], hi[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            lo[i] = q6_times4(w[i], b.high.x, i, 0);  // elements 4i..4i+3
            hi[i] = q6_times4(w[i], b.high.y, i, 1);  // 16+4i..16+4i+3
        }
        const int s0 = dp2a_words(xw, lo), s1 = dp2a_words(xw + 8, hi);  // 4 x the sums
        return fmaf((float)s0, q6_factor(b.scales, b.super, 0), (float)s1 * q6_factor(b.scales, b.super, 1)) *
               (0.25f * x_scale);
    }
    __device__ static Raw raw(const uint8_t *grp, uint32_t K, uint32_t kb, uint32_t r, int h) {
        return {__ldg(reinterpret_cast<const uint4 *>(grp + Layout::quant_offset(K, kb, r))),
                ldg_u16(grp + Layout::scale_offset(kb, r)), ldg_u32(grp + Layout::high_offset(K, kb, r) + 4 * h),
                ldg_u32(grp + Layout::super_offset(K, kb, r))};
    }
    // q + 1024 - (1024 + 32) = q - 32.
    __device__ static void to_half(const Raw &v, int h, uint32_t *out) {
        const __half2 d2 = __float2half2_rn(q6_factor(v.scales, v.super, h));
        const __half2 sub = __float2half2_rn(1056.f), zero = __float2half2_rn(0.f);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) bytes_to_half(q6_unsigned(w[i], v.high, i, h), sub, d2, zero, out + 2 * i);
    }
    __device__ static void to_float(const Raw &v, int h, float *out) {
        const float d = q6_factor(v.scales, v.super, h);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int b = 0; b < 4; ++b) out[4 * i + b] = byte_minus(q6_unsigned(w[i], v.high, i, h), b, 8388640.0f) * d;
    }
};

// Q5_1: 32 unsigned 5-bit quants a block, one byte each, and its f16 factors (d, m) as stored:
// value = d u + m. (Q5_0 runs as G8FmtQ8_0: layout_g8.h.)
struct G8FmtQ5_1 {
    using Layout = G8Q5_1;
    using L = G8Q5_1;
    static constexpr bool kNeedsXSum = true;
    using Raw = G8Raw;
    using Scales = uint32_t;
    __device__ static float2 factors(Scales s) { return make_float2(half_lo(s), half_hi(s)); }
    __device__ static float block_dot(const G8Block<2> &b, const float *x, float x_sum) {
        const uint32_t w[8] = {b.q[0].x, b.q[0].y, b.q[0].z, b.q[0].w, b.q[1].x, b.q[1].y, b.q[1].z, b.q[1].w};
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int k = 0; k < 4; ++k) s = fmaf(byte_minus(w[i], k, 8388608.0f), x[4 * i + k], s);
        const float2 f = factors(b.scales);
        return fmaf(s, f.x, f.y * x_sum);
    }
    __device__ static float block_dot_q16(const G8Block<2> &b, const int *xw, float x_scale, int xq_sum) {
        const uint32_t w[8] = {b.q[0].x, b.q[0].y, b.q[0].z, b.q[0].w, b.q[1].x, b.q[1].y, b.q[1].z, b.q[1].w};
        const int s = dp2a_words(xw, w);  // bytes 0..31: signed and unsigned alike
        const float2 f = factors(b.scales);
        return fmaf((float)s, f.x, f.y * (float)xq_sum) * x_scale;
    }
    __device__ static Raw raw(const uint8_t *grp, uint32_t K, uint32_t kb, uint32_t r, int h) {
        return {__ldg(reinterpret_cast<const uint4 *>(grp + L::quant_offset(K, kb, r)) + h),
                __ldg(reinterpret_cast<const Scales *>(grp + L::scale_offset(kb, r)))};
    }
    __device__ static void to_half(const Raw &v, int, uint32_t *out) {
        const float2 f = factors(v.scales);
        const __half2 d2 = __float2half2_rn(f.x), m2 = __float2half2_rn(f.y), sub = __float2half2_rn(1024.f);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) bytes_to_half(w[i], sub, d2, m2, out + 2 * i);
    }
    // d u + m rounded twice, as gguf-py's.
    __device__ static void to_float(const Raw &v, int, float *out) {
        const float2 f = factors(v.scales);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int b = 0; b < 4; ++b) out[4 * i + b] = __fadd_rn(__fmul_rn(byte_minus(w[i], b, 8388608.0f), f.x), f.y);
    }
};

// IQ4_NL (f16 d, the file's block) and IQ4_XS (f32 d (ls - 32) per block of 32): nibbles index
// kIQ4Values; iq4_values8 gives the signed values dp2a takes, and flipping their sign bits value
// + 128 as unsigned bytes for the float paths.
template <class L>
struct G8FmtIQ4 {
    using Layout = L;
    static constexpr bool kNeedsXSum = false;
    using Raw = G8Raw;
    __device__ static float factor(uint32_t scales) {
        if constexpr (L::kScaleBytes == 4) return __uint_as_float(scales);
        else return half_lo(scales);
    }
    // value + 128 of the low (h = 0) or high nibbles of the four bytes of q.
    __device__ static uint32_t iq4_unsigned(uint32_t q, int h) {
        uint32_t lo, hi;
        iq4_values8(q, lo, hi);
        return (h ? hi : lo) ^ 0x80808080u;
    }
    __device__ static float block_dot(const G8Block<1> &b, const float *x, float) {
        const uint32_t w[4] = {b.q[0].x, b.q[0].y, b.q[0].z, b.q[0].w};
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            uint32_t lo, hi;
            iq4_values8(w[i], lo, hi);
            lo ^= 0x80808080u;
            hi ^= 0x80808080u;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                s = fmaf(byte_minus(lo, k, 8388736.0f), x[4 * i + k], s);
                s = fmaf(byte_minus(hi, k, 8388736.0f), x[16 + 4 * i + k], s);
            }
        }
        return s * factor(b.scales);
    }
    __device__ static float block_dot_q16(const G8Block<1> &b, const int *xw, float x_scale, int) {
        const uint32_t w[4] = {b.q[0].x, b.q[0].y, b.q[0].z, b.q[0].w};
        uint32_t bytes[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) iq4_values8(w[i], bytes[i], bytes[4 + i]);  // elements 4i.., 16+4i..
        return (float)dp2a_words(xw, bytes) * (factor(b.scales) * x_scale);
    }
    __device__ static Raw raw(const uint8_t *grp, uint32_t K, uint32_t kb, uint32_t r, int) {
        const uint32_t scales = L::kScaleBytes == 4
                                    ? __ldg(reinterpret_cast<const uint32_t *>(grp + L::scale_offset(kb, r)))
                                    : (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(grp + L::scale_offset(kb, r)));
        return {__ldg(reinterpret_cast<const uint4 *>(grp + L::quant_offset(K, kb, r))), scales};
    }
    __device__ static void to_half(const Raw &v, int h, uint32_t *out) {
        const __half2 d2 = __float2half2_rn(factor(v.scales));
        const __half2 sub = __float2half2_rn(1152.f), zero = __float2half2_rn(0.f);  // 1024 + 128
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) bytes_to_half(iq4_unsigned(w[i], h), sub, d2, zero, out + 2 * i);
    }
    __device__ static void to_float(const Raw &v, int h, float *out) {
        const float d = factor(v.scales);
        const uint32_t w[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int b = 0; b < 4; ++b) out[4 * i + b] = byte_minus(iq4_unsigned(w[i], h), b, 8388736.0f) * d;
    }
};
using G8FmtIQ4_NL = G8FmtIQ4<G8IQ4_NL>;
using G8FmtIQ4_XS = G8FmtIQ4<G8IQ4_XS>;

}  // namespace akunu::cuda
