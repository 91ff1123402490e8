// Device-side helpers shared by the kernel families: patch resolution, warp/block reductions and
// the weight formats (one struct per dtype, block layouts from src/core/quant_blocks.h).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "core/errors.h"
#include "core/kernel_params.h"
#include "core/quant_blocks.h"
#include "cuda/launch.h"

namespace akunu::cuda {

// Kernels take their parameter structs (GemmParams, WeightPtrs, ...) as `const __grid_constant__`:
// read in place from parameter space, where a plain by-value struct whose address the body takes
// (helpers taking `const GemmParams &`) may be copied to local memory first, or compiled around
// such a copy; measured faster for the GEMVs and the other kernels on an H100. Decode attention
// keeps plain ones: __grid_constant__ there ran slower (benchmarks/HISTORY.md, 2026-11-23,
// d460708 and fcbc096; docs/adr/0014-cuda-quantized-row-handoff.md says how the hand-off's
// cp.async led here).

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

// Lets `kernel` use `bytes` of dynamic shared memory on the current device (past the 48 KB
// default that takes an opt-in per device and kernel); false when the device has less.
template <typename Kernel>
bool allow_dynamic_smem(Kernel kernel, size_t bytes) {
    if (bytes <= 48 * 1024) return true;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) == cudaSuccess) return true;
    cudaGetLastError();  // not sticky: clear it
    return false;
}

// Launches `kernel` with programmatic dependent launch (Hopper+): the next kernel of the stream
// (or graph) may be scheduled while this one runs, and waits in pdl_enter() until this one has
// finished and its writes are visible. This hides the launch gap between the ~160 small kernels
// of a decode step. Every kernel launched through here must call pdl_enter() first; a kernel that
// releases by itself (pdl_release) must do so after its pdl_wait(), never before: then a kernel
// starts only once every command but the one before it has completed, which lets GEMVs read their
// output's old values before their wait (LaunchArgs::output_settled).
// `cluster` (Hopper): the grid in thread-block clusters of that shape (1 x 1 x 1: none).
template <typename... KArgs, typename... Args>
void launch_pdl_clustered(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, dim3 cluster,
                          const LaunchArgs &a, Args &&...args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = a.stream;
    cudaLaunchAttribute attr[2];
    unsigned n = 0;
    if (a.workspace && a.workspace->pdl) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster.x * cluster.y * cluster.z > 1) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = cluster.x;
        attr[n].val.clusterDim.y = cluster.y;
        attr[n++].val.clusterDim.z = cluster.z;
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
    cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, const LaunchArgs &a, Args &&...args) {
    launch_pdl_clustered(kernel, grid, block, smem, dim3(1, 1, 1), a, std::forward<Args>(args)...);
}

// --- device: kernel entry -----------------------------------------------------------------
// pdl_wait: wait until the previous kernel has finished and its writes are visible.
// pdl_release: let the next kernel launch (its blocks take SM room as this one's free it).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// pdl_wait for a kernel that issues loads before it (weights, which no command writes): ptxas sinks
// read-only loads below an unconditional griddepcontrol.wait (H100 SASS: ACQBULK before the LDGs), so
// the wait sits behind a branch on `nonzero`, a kernel argument that is never 0 but that ptxas cannot
// fold; the loads above it stay in their own basic block, issued while the previous kernel finishes.
__device__ __forceinline__ void pdl_wait_after_loads(uint32_t nonzero) {
    if (nonzero != 0) pdl_wait();
}
__device__ __forceinline__ void pdl_enter() {
    pdl_wait();
    pdl_release();
}

// Asks L2 for the 128-byte line holding p (no registers, no wait).
__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

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
    return patches_kv_len(pc.patch) ? *pc.base_position + pc.token_index + pc.kv_span : from_params;
}

// The KV-cache row of a position: a sliding-window layer's cache is a ring of max_seq rows
// (core/kv_cache.h); every other layer's positions stay below max_seq, and pay no division.
__device__ __forceinline__ uint32_t kv_cache_row(uint32_t position, uint32_t max_seq) {
    return position < max_seq ? position : position % max_seq;
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

// --- device: asynchronous copies ----------------------------------------------------------
// 16 bytes global -> shared without registers; src_bytes = 0 writes zeros.
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, uint32_t src_bytes) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(gmem), "r"(src_bytes));
}
// The same through L1 (.ca): for rows that many blocks of an SM read at once.
__device__ __forceinline__ void cp_async16_l1(void *smem, const void *gmem, uint32_t src_bytes) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
// Waits until at most n of this thread's most recent groups are still in flight.
template <int n>
__device__ __forceinline__ void cp_async_wait_group() {
    asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory");
}

// --- device: weight formats ----------------------------------------------------------------
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

// Every format read as GGUF rows (the float formats here, the group-scaled ones in
// cuda/formats_kquant.cuh; Q4_0 / Q4_1 / Q8_0 are repacked, cuda/formats_g8.cuh) exposes, per
// 32-element block:
//   kBlockBytes                      bytes of one block of 32 weights
//   dot8(blk, i, xa, xb)             the dot over slice i (0..3) of the block: elements 4i..4i+3
//                                    (with xa) and 16+4i..16+4i+3 (with xb), the pairing of a Q4
//                                    byte's two nibbles. Four lanes cover a block, so a warp reads
//                                    8 consecutive blocks (coalesced) and 8 consecutive x chunks.
//   dequant_half(blk, h, out)        elements 16h..16h+15 as floats
// (kernels reach them through fmt_dot8 / fmt_dequant_half below, which also serve the superblock
// formats of cuda/formats_kquant.cuh)
__device__ __forceinline__ float dot4(float4 x, float a, float b, float c, float d, float s) {
    return fmaf(a, x.x, fmaf(b, x.y, fmaf(c, x.z, fmaf(d, x.w, s))));
}
__device__ __forceinline__ float hsum4(float4 x) { return (x.x + x.y) + (x.z + x.w); }

// Float formats: 32 elements are 64 (F16/BF16) or 128 (F32) contiguous bytes; rows are 16-byte
// aligned (K % 32 == 0 is checked by the launcher). The 16-bit formats share everything but how
// four values are loaded (Derived::four).
template <typename Derived>
struct Fmt16Bit {
    static constexpr int kBlockBytes = 64;
    __device__ static float dot8(const uint8_t *blk, int i, float4 xa, float4 xb) {
        const float4 a = Derived::four(blk + 8 * i), b = Derived::four(blk + 32 + 8 * i);
        return dot4(xb, b.x, b.y, b.z, b.w, dot4(xa, a.x, a.y, a.z, a.w, 0.f));
    }
    __device__ static void dequant_half(const uint8_t *blk, int h, float *out) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float4 v = Derived::four(blk + 32 * h + 8 * i);
            out[4 * i] = v.x;
            out[4 * i + 1] = v.y;
            out[4 * i + 2] = v.z;
            out[4 * i + 3] = v.w;
        }
    }
};

struct FmtF16 : Fmt16Bit<FmtF16> {
    __device__ static float4 four(const uint8_t *p) {
        const uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
        const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&v.x));
        const float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&v.y));
        return make_float4(a.x, a.y, b.x, b.y);
    }
};

struct FmtF32 {
    static constexpr int kBlockBytes = 128;
    __device__ static float dot8(const uint8_t *blk, int i, float4 xa, float4 xb) {
        const float4 a = __ldg(reinterpret_cast<const float4 *>(blk) + i);
        const float4 b = __ldg(reinterpret_cast<const float4 *>(blk + 64) + i);
        return dot4(xb, b.x, b.y, b.z, b.w, dot4(xa, a.x, a.y, a.z, a.w, 0.f));
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

// --- device: weight rows ---------------------------------------------------------------------
// The 32-element block kb of a weight row. Formats of 32-element blocks (kBlockBytes) are indexed
// directly; superblock formats (kSuperBytes: 8 blocks of 32, cuda/formats_kquant.cuh) get their
// superblock kb / 8 and the block's index kb % 8 in it.
template <class Fmt, class = void>
struct IsSuperFmt : std::false_type {};
template <class Fmt>
struct IsSuperFmt<Fmt, std::void_t<decltype(Fmt::kSuperBytes)>> : std::true_type {};

template <class Fmt>
__device__ __forceinline__ float fmt_dot8(const uint8_t *row, uint32_t kb, int i, float4 xa, float4 xb) {
    if constexpr (IsSuperFmt<Fmt>::value)
        return Fmt::dot8(row + (size_t)(kb / 8) * Fmt::kSuperBytes, (int)(kb % 8), i, xa, xb);
    else
        return Fmt::dot8(row + (size_t)kb * Fmt::kBlockBytes, i, xa, xb);
}
template <class Fmt>
__device__ __forceinline__ void fmt_dequant_half(const uint8_t *row, uint32_t kb, int h, float *out) {
    if constexpr (IsSuperFmt<Fmt>::value)
        Fmt::dequant_half(row + (size_t)(kb / 8) * Fmt::kSuperBytes, (int)(kb % 8), h, out);
    else
        Fmt::dequant_half(row + (size_t)kb * Fmt::kBlockBytes, h, out);
}

}  // namespace akunu::cuda
