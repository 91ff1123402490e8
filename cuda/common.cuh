// Device-side helpers shared by the kernel families: patch resolution, warp/block reductions and
// the weight formats (one struct per dtype, block layouts from src/core/quant_blocks.h).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/errors.h"
#include "core/kernel_params.h"
#include "core/quant_blocks.h"
#include "cuda/launch.h"

namespace akunu::cuda {

// --- host: error checks ------------------------------------------------------------------
inline void check_launch(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw AkunuError(std::string("CUDA launch of ") + what + " failed: " + cudaGetErrorString(e));
}

template <typename P>
const P &params_of(const LaunchArgs &a) {
    return *static_cast<const P *>(a.params);
}

inline unsigned ceil_div_u(uint64_t a, uint64_t b) { return (unsigned)((a + b - 1) / b); }

// --- device: the command's patch, applied at kernel entry --------------------------------
__device__ __forceinline__ bool patches_position(PatchType t) {
    return t == PatchType::Position || t == PatchType::PosAndKV;
}
__device__ __forceinline__ bool patches_kv_len(PatchType t) {
    return t == PatchType::KVSeqLen || t == PatchType::PosAndKV;
}
// The position this command runs at: the params' value, or base + token index when patched.
__device__ __forceinline__ uint32_t resolve_position(uint32_t from_params, const PatchContext &pc) {
    return patches_position(pc.patch) ? *pc.base_position + pc.token_index : from_params;
}
__device__ __forceinline__ uint32_t resolve_kv_len(uint32_t from_params, const PatchContext &pc) {
    return patches_kv_len(pc.patch) ? *pc.base_position + pc.token_index + 1 : from_params;
}

// --- device: reductions -----------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Block-wide sum/max; every thread gets the result. `red` holds >= 32 floats of shared memory.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    v = kMax ? warp_max(v) : warp_sum(v);
    __syncthreads();  // `red` may still be read by a previous reduction
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < n_warps ? red[lane] : (kMax ? -INFINITY : 0.f);
    return kMax ? warp_max(v) : warp_sum(v);
}

// --- device: weight formats ----------------------------------------------------------------
// Each format exposes, per 32-element block:
//   kBlockBytes                   bytes of one block of 32 weights
//   dot(blk, x)                   sum_j w_j x_j with x[32] in registers (fp32 accumulate)
//   dequant_half(blk, h, out)     elements 16h..16h+15 as floats
// Small integers become floats through the exponent trick: 0x4B000000 | b is 2^23 + b as a float,
// one byte permute and one add instead of a slow integer-to-float conversion.
__device__ __forceinline__ float byte_as_float(uint32_t word, int byte) {
    return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7540u + (uint32_t)byte)) - 8388608.0f;
}
// Two unaligned-safe u16 loads make one u32 (GGUF blocks are only 2-byte aligned).
__device__ __forceinline__ uint32_t load_u32_a2(const uint8_t *p) {
    const uint16_t *h = reinterpret_cast<const uint16_t *>(p);
    return (uint32_t)__ldg(h) | ((uint32_t)__ldg(h + 1) << 16);
}
__device__ __forceinline__ float load_f16(const uint8_t *p) {
    return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short *>(p))));
}

struct FmtQ4_0 {
    static constexpr int kBlockBytes = sizeof(BlockQ4_0);
    __device__ static float dot(const uint8_t *blk, const float *x) {
        const float d = load_f16(blk);
        uint32_t q[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) q[i] = load_u32_a2(blk + 2 + 4 * i);
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t lo = q[i] & 0x0F0F0F0Fu, hi = (q[i] >> 4) & 0x0F0F0F0Fu;
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                s = fmaf(byte_as_float(lo, b) - 8.f, x[4 * i + b], s);
                s = fmaf(byte_as_float(hi, b) - 8.f, x[16 + 4 * i + b], s);
            }
        }
        return s * d;
    }
    __device__ static void dequant_half(const uint8_t *blk, int h, float *out) {
        const float d = load_f16(blk);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t q = load_u32_a2(blk + 2 + 4 * i);
            const uint32_t v = h ? (q >> 4) & 0x0F0F0F0Fu : q & 0x0F0F0F0Fu;
#pragma unroll
            for (int b = 0; b < 4; ++b) out[4 * i + b] = (byte_as_float(v, b) - 8.f) * d;
        }
    }
};

struct FmtQ4_1 {
    static constexpr int kBlockBytes = sizeof(BlockQ4_1);
    static constexpr bool kNeedsXSum = true;
    // Q4_1's offset: sum_j (n_j d + m) x_j = d sum n_j x_j + m sum x_j.
    __device__ static float dot(const uint8_t *blk, const float *x) {
        const float d = load_f16(blk), m = load_f16(blk + 2);
        float s = 0.f, xs = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t q = __ldg(reinterpret_cast<const uint32_t *>(blk + 4 + 4 * i));  // 4-byte aligned
            const uint32_t lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                s = fmaf(byte_as_float(lo, b), x[4 * i + b], s);
                s = fmaf(byte_as_float(hi, b), x[16 + 4 * i + b], s);
                xs += x[4 * i + b] + x[16 + 4 * i + b];
            }
        }
        return s * d + xs * m;
    }
    __device__ static void dequant_half(const uint8_t *blk, int h, float *out) {
        const float d = load_f16(blk), m = load_f16(blk + 2);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t q = __ldg(reinterpret_cast<const uint32_t *>(blk + 4 + 4 * i));
            const uint32_t v = h ? (q >> 4) & 0x0F0F0F0Fu : q & 0x0F0F0F0Fu;
#pragma unroll
            for (int b = 0; b < 4; ++b) out[4 * i + b] = byte_as_float(v, b) * d + m;
        }
    }
};

struct FmtQ8_0 {
    static constexpr int kBlockBytes = sizeof(BlockQ8_0);
    // int8 -> float: flip the sign bit to get q + 128 as an unsigned byte, then subtract.
    __device__ static float dot(const uint8_t *blk, const float *x) {
        const float d = load_f16(blk);
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const uint32_t q = load_u32_a2(blk + 2 + 4 * i) ^ 0x80808080u;
#pragma unroll
            for (int b = 0; b < 4; ++b) s = fmaf(byte_as_float(q, b) - 128.f, x[4 * i + b], s);
        }
        return s * d;
    }
    __device__ static void dequant_half(const uint8_t *blk, int h, float *out) {
        const float d = load_f16(blk);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t q = load_u32_a2(blk + 2 + 16 * h + 4 * i) ^ 0x80808080u;
#pragma unroll
            for (int b = 0; b < 4; ++b) out[4 * i + b] = (byte_as_float(q, b) - 128.f) * d;
        }
    }
};

// Float formats: 32 elements are 64 (F16/BF16) or 128 (F32) contiguous bytes, read 16 at a time
// (rows are 16-byte aligned: K % 32 == 0 is checked by the launcher).
struct FmtF16 {
    static constexpr int kBlockBytes = 64;
    __device__ static float dot(const uint8_t *blk, const float *x) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(blk) + i);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&w[j]));
                s = fmaf(f.x, x[8 * i + 2 * j], s);
                s = fmaf(f.y, x[8 * i + 2 * j + 1], s);
            }
        }
        return s;
    }
    __device__ static void dequant_half(const uint8_t *blk, int h, float *out) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(blk + 32 * h) + i);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&w[j]));
                out[8 * i + 2 * j] = f.x;
                out[8 * i + 2 * j + 1] = f.y;
            }
        }
    }
};

struct FmtBF16 {
    static constexpr int kBlockBytes = 64;
    __device__ static float lo(uint32_t w) { return __uint_as_float(w << 16); }
    __device__ static float hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }
    __device__ static float dot(const uint8_t *blk, const float *x) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(blk) + i);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                s = fmaf(lo(w[j]), x[8 * i + 2 * j], s);
                s = fmaf(hi(w[j]), x[8 * i + 2 * j + 1], s);
            }
        }
        return s;
    }
    __device__ static void dequant_half(const uint8_t *blk, int h, float *out) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(blk + 32 * h) + i);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                out[8 * i + 2 * j] = lo(w[j]);
                out[8 * i + 2 * j + 1] = hi(w[j]);
            }
        }
    }
};

struct FmtF32 {
    static constexpr int kBlockBytes = 128;
    __device__ static float dot(const uint8_t *blk, const float *x) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float4 v = __ldg(reinterpret_cast<const float4 *>(blk) + i);
            s = fmaf(v.x, x[4 * i], s);
            s = fmaf(v.y, x[4 * i + 1], s);
            s = fmaf(v.z, x[4 * i + 2], s);
            s = fmaf(v.w, x[4 * i + 3], s);
        }
        return s;
    }
    __device__ static void dequant_half(const uint8_t *blk, int h, float *out) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float4 v = __ldg(reinterpret_cast<const float4 *>(blk + 64 * h) + i);
            out[4 * i] = v.x;
            out[4 * i + 1] = v.y;
            out[4 * i + 2] = v.z;
            out[4 * i + 3] = v.w;
        }
    }
};

}  // namespace akunu::cuda
