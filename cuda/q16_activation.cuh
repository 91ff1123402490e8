// A decode activation row in the integer GEMV's quantized form, written by the kernel that
// produces the row, so that the GEMV reading it next copies it instead of quantizing it.
//
// Why: every block of a decode GEMV needs the whole input row right after its wait for the
// previous kernel, and quantizing it there (loading the floats, and the norm weights of a fused
// input norm, then the per-block max and sum shuffles) is a chain of latencies with HBM idle. The
// producer holds the values in registers already and owns whole 32-element blocks, so it
// quantizes them on the way out; the GEMV's blocks then copy 76 bytes per 32 elements (the
// quantized block, its scale, its sum and its sum of squares) in one round trip. The decision and
// its measurements: docs/adr/0014-cuda-quantized-row-handoff.md (AKUNU_CUDA_Q16_HANDOFF=0 turns it
// off). At the Llama-3.2-1B shape only attention hands off to o_proj: its o_proj and down are too
// small for 32-row items, its gate_up's runs too short.
//
// Who hands off (CudaDevice::launch_command offers, the kernel decides; cuda/gemm.cu, cuda/
// attention_decode.cu): decode attention (a head's outputs, head_dim % 32 == 0); a plain GEMV
// output in 32-row items (o_proj, down: four g8 groups per block where the grid still fits); a
// gated gate/up output whose one-wave grid walks runs of 4 consecutive 8-row items per block.
//
// The quantization is the integer GEMV's own (cuda/gemv_q16.cuh, ADR 0002): int16 with one scale
// per 32-element block, d = max|v| / 32767, q = roundf(v * (1 / d)), so a linked and an unlinked
// GEMV compute the same integers. With the consumer's input RMSNorm fused, v = x * norm_w (the
// producer is given norm_w) and the chunk carries each block's sum of x^2, from which the GEMV
// takes 1 / rms(x).
#pragma once
#include "cuda/common.cuh"

namespace akunu::cuda {

// The q of one quantized 32-element block as 16 words of int16 pairs: word j holds elements 2j
// (low half) and 2j + 1.
struct XQ16Block {
    int w[16];
};

// Four consecutive blocks (128 elements): the unit a GEMV warp reads per step, so a warp's steps
// are whole chunks (16-byte pieces, copied with vector loads).
struct XQ16Chunk {
    XQ16Block q[4];
    float d[4];    // scale of each block
    int sum[4];    // sum of each block's q (the offsets of Q4_0 / Q4_1 need it)
    float ss[4];   // sum of x^2 over each block (before norm_w): the consumer's input norm
};
static_assert(sizeof(XQ16Chunk) % 16 == 0, "chunks are copied in 16-byte pieces");
constexpr uint32_t kXQ16ChunkPieces = sizeof(XQ16Chunk) / 16;

__host__ __device__ __forceinline__ uint32_t xq16_chunks(uint32_t K) { return (K / 32 + 3) / 4; }

// The quantization itself, shared by the producers here and the GEMV's own (quantize_warp_x), so
// both give the same integers: from a block's max |v|, the scale d and its inverse; then each q.
struct Q16Scale {
    float d, inv;
};
__device__ __forceinline__ Q16Scale q16_scale(float amax) {
    const float d = amax / 32767.f;
    return {d, d != 0.f ? 1.0f / d : 0.f};
}
__device__ __forceinline__ int q16_quantize(float v, float inv) { return (int)roundf(__fmul_rn(v, inv)); }

// The 32 lanes of a warp hold elements base .. base + 31 of the row (lane i: element base + i;
// base % 32 == 0): quantize them into their block, times the lane's norm weight nw when `normed`.
// Every lane of the warp must call it.
__device__ __forceinline__ void store_q16_block(XQ16Chunk *__restrict__ chunks, uint32_t base, float x, float nw,
                                                bool normed) {
    const uint32_t lane = threadIdx.x & 31, kb = base / 32;
    const float v = normed ? x * nw : x;
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const Q16Scale sc = q16_scale(amax);
    const int q = q16_quantize(v, sc.inv);
    int sum = q;
    float ss = x * x;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
        ss += __shfl_xor_sync(0xffffffffu, ss, o);
    }
    XQ16Chunk &c = chunks[kb / 4];
    reinterpret_cast<short *>(c.q[kb % 4].w)[lane] = (short)q;
    if (lane == 0) {
        c.d[kb % 4] = sc.d;
        c.sum[kb % 4] = sum;
        c.ss[kb % 4] = ss;
    }
}
// The same with the norm weights (or null) read here: for producers whose epilogue is not on a
// critical path worth loading them early for.
__device__ __forceinline__ void store_q16_block(XQ16Chunk *__restrict__ chunks, uint32_t base, float x,
                                                const float *__restrict__ norm_w) {
    store_q16_block(chunks, base, x, norm_w ? norm_w[base + (threadIdx.x & 31)] : 1.f, norm_w != nullptr);
}

// Warp `warp` of a GEMV of kWarps warps reads chunks warp, warp + kWarps, ... (its steps): copies
// them from the producer's row into its shared-memory slice with cp.async: every piece in flight at
// once, no registers taken beside the weight ring, and through L1 (an SM's blocks all read the same
// chunks): faster than loads into registers (4 pieces a lane per round trip), while cp.async.cg
// (L2 only) is slower than both (ADR 0014). Returns the lane's share of the sum of x^2 over the
// warp's blocks below n_blocks (the warps' shares add up to the row's).
template <int kWarps>
__device__ __forceinline__ float copy_q16_chunks(const XQ16Chunk *__restrict__ src, uint32_t n_blocks, uint32_t steps,
                                                 XQ16Chunk *mine) {
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint4 *from = reinterpret_cast<const uint4 *>(src);
    uint4 *to = reinterpret_cast<uint4 *>(mine);
    const uint32_t pieces = steps * kXQ16ChunkPieces, n_chunks = (n_blocks + 3) / 4;
    for (uint32_t t = lane; t < pieces; t += 32) {
        const uint32_t s = t / kXQ16ChunkPieces, chunk = warp + s * kWarps;
        const bool real = chunk < n_chunks;
        cp_async16_l1(to + t, from + (real ? (size_t)chunk * kXQ16ChunkPieces + t % kXQ16ChunkPieces : 0), real ? 16 : 0);
    }
    cp_async_commit();
    cp_async_wait_all();
    __syncwarp();
    // Lane (kq = lane / 8, sub = lane % 8) adds block kq of the steps sub, sub + 8, ...
    const uint32_t kq = lane >> 3;
    float ss = 0.f;
    for (uint32_t s = lane & 7; s < steps; s += 8)
        if ((warp + s * kWarps) * 4 + kq < n_blocks) ss += mine[s].ss[kq];
    return ss;
}

}  // namespace akunu::cuda
