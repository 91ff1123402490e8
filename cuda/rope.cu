// RoPE on Q and K in place, then K and V appended to the head-major KV cache at the token's
// position (F16, or Q8_0 blocks: rope_*_kv_write_q8). The position comes from the patch (device
// memory) in decode replays.
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/kv_cache_q8.cuh"
#include "cuda/rope_pairs.cuh"

namespace akunu::cuda {

namespace {

// Grid = (token row, slice of the row's work). Work items: every rotation pair of every Q and K
// head, then the K dims past rope_dim (partial rotary) and all of V, copied into the cache. A
// decode row's few thousand items are spread over several blocks (one SM alone is latency bound).
template <class Pairs>
__global__ void rope_kv_kernel(float *__restrict__ qkv, __half *__restrict__ k_cache, __half *__restrict__ v_cache,
                               const float *__restrict__ inv_freq, const __grid_constant__ RopeKVParams p,
                               const __grid_constant__ PatchContext pc) {
    pdl_enter();
    const uint32_t r = blockIdx.x;
    const uint32_t pos = resolve_position(p.position, pc) + r;
    const uint32_t half_rot = p.rope_dim / 2, q_dim = p.n_heads * p.head_dim, kv_dim = p.n_kv_heads * p.head_dim;
    float *row = qkv + (size_t)r * p.qkv_stride;
    const uint32_t n_pairs = (p.n_heads + p.n_kv_heads) * half_rot;
    const uint32_t t0 = blockIdx.y * blockDim.x + threadIdx.x, stride = gridDim.y * blockDim.x;
    for (uint32_t t = t0; t < n_pairs; t += stride) {
        const uint32_t head = t / half_rot, i = t % half_rot;
        float s, c;
        rope_sincos(pos, inv_freq[i], &s, &c);
        const bool is_k = head >= p.n_heads;
        float *v = is_k ? row + q_dim + (head - p.n_heads) * p.head_dim : row + head * p.head_dim;
        const uint32_t i0 = Pairs::first(i, p.rope_dim), i1 = Pairs::second(i, p.rope_dim);
        const float a = v[i0], b = v[i1];
        const float x0 = a * c - b * s, x1 = a * s + b * c;
        v[i0] = x0;
        v[i1] = x1;
        if (is_k) {
            const size_t dst = ((size_t)(head - p.n_heads) * p.max_seq + kv_cache_row(pos, p.max_seq)) * p.head_dim;
            k_cache[dst + i0] = __float2half_rn(x0);
            k_cache[dst + i1] = __float2half_rn(x1);
        }
    }
    const uint32_t tail = p.head_dim - p.rope_dim;  // un-rotated K dims
    for (uint32_t t = t0; t < kv_dim; t += stride) {
        const uint32_t h = t / p.head_dim, d = t % p.head_dim;
        const size_t dst = ((size_t)h * p.max_seq + kv_cache_row(pos, p.max_seq)) * p.head_dim + d;
        v_cache[dst] = __float2half_rn(row[q_dim + kv_dim + t]);
        if (tail && d >= p.rope_dim) k_cache[dst] = __float2half_rn(row[q_dim + t]);
    }
}

template <class Pairs>
void launch_rope(const LaunchArgs &a, const char *name) {
    const RopeKVParams &p = params_of<RopeKVParams>(a);
    // 128 threads per block, one work item each.
    const uint32_t work = std::max((p.n_heads + p.n_kv_heads) * (p.rope_dim / 2), p.n_kv_heads * p.head_dim);
    constexpr unsigned kThreads = 128;
    launch_pdl(rope_kv_kernel<Pairs>, dim3(p.rows, ceil_div_u(work, kThreads)), kThreads, 0, a,
        reinterpret_cast<float *>(a.buffers[0]), reinterpret_cast<__half *>(a.buffers[1]),
        reinterpret_cast<__half *>(a.buffers[2]), reinterpret_cast<const float *>(a.buffers[3]), p, a.patch);
    check_launch(name);
}

// The Q8_0 cache's variant: a warp per head of a row (Q heads, then K heads, then V heads). A Q or
// K head is rotated in place, its pairs spread over the lanes; a Q head is then taken into the
// keys' Hadamard basis in place, a K head (read back from qkv, transformed) or V head quantized 32
// dims at a time (a block's amax is a warp reduction).
template <class Pairs>
__global__ void rope_kv_q8_kernel(float *__restrict__ qkv, void *__restrict__ k_cache, void *__restrict__ v_cache,
                                  const float *__restrict__ inv_freq, const __grid_constant__ RopeKVParams p,
                                  const __grid_constant__ PatchContext pc) {
    pdl_enter();
    const uint32_t r = blockIdx.x, lane = threadIdx.x & 31;
    const uint32_t head = blockIdx.y * (blockDim.x / 32) + threadIdx.x / 32;  // warp-uniform
    if (head >= p.n_heads + 2 * p.n_kv_heads) return;
    const uint32_t pos = resolve_position(p.position, pc) + r, hd = p.head_dim;
    float *x = qkv + (size_t)r * p.qkv_stride + (size_t)head * hd;  // Q, K and V heads lie in this order
    if (head < p.n_heads + p.n_kv_heads) {
        for (uint32_t i = lane; i < p.rope_dim / 2; i += 32) {
            float s, c;
            rope_sincos(pos, inv_freq[i], &s, &c);
            const uint32_t i0 = Pairs::first(i, p.rope_dim), i1 = Pairs::second(i, p.rope_dim);
            const float a = x[i0], b = x[i1];
            x[i0] = a * c - b * s;
            x[i1] = a * s + b * c;
        }
        __syncwarp();  // the rotated dims, read below by other lanes
    }
    if (head < p.n_heads) {  // a query, left in the keys' Hadamard basis (kv_cache_q8.h)
        for (uint32_t b = 0; b < hd / 32; ++b)
            x[32 * b + lane] = hadamard_block_warp(x[32 * b + lane]) * kKVQ8QueryScale;
        return;
    }
    const bool is_k = head < p.n_heads + p.n_kv_heads;
    const uint32_t kv_head = head - p.n_heads - (is_k ? 0 : p.n_kv_heads), row = kv_cache_row(pos, p.max_seq);
    const Q8Planes planes(is_k ? k_cache : v_cache, p.n_kv_heads, p.max_seq, hd);
    int8_t *q = planes.row_values(kv_head, row, p.max_seq, hd);
    __half *d = planes.row_scales(kv_head, row, p.max_seq, hd);
    for (uint32_t b = 0; b < hd / 32; ++b) {  // a key in its Hadamard basis; qkv keeps the RoPE'd row
        const float value = is_k ? hadamard_block_warp(x[32 * b + lane]) : x[32 * b + lane];
        quantize_block_q8_warp(value, q + 32 * b, d + b);
    }
}

template <class Pairs>
void launch_rope_q8(const LaunchArgs &a, const char *name) {
    const RopeKVParams &p = params_of<RopeKVParams>(a);
    if (p.head_dim % kKVQ8Block != 0)
        throw UnsupportedError(std::string(name) + " needs head_dim a multiple of 32, got " + std::to_string(p.head_dim));
    constexpr unsigned kWarps = 4;
    launch_pdl(rope_kv_q8_kernel<Pairs>, dim3(p.rows, ceil_div_u(p.n_heads + 2 * p.n_kv_heads, kWarps)), kWarps * 32,
               0, a, reinterpret_cast<float *>(a.buffers[0]), static_cast<void *>(a.buffers[1]),
               static_cast<void *>(a.buffers[2]), reinterpret_cast<const float *>(a.buffers[3]), p, a.patch);
    check_launch(name);
}

}  // namespace

void launch_rope_interleaved_kv_write(const LaunchArgs &a) { launch_rope<Interleaved>(a, "rope_interleaved_kv_write"); }
void launch_rope_neox_kv_write(const LaunchArgs &a) { launch_rope<NeoX>(a, "rope_neox_kv_write"); }
void launch_rope_interleaved_kv_write_q8(const LaunchArgs &a) {
    launch_rope_q8<Interleaved>(a, "rope_interleaved_kv_write_q8");
}
void launch_rope_neox_kv_write_q8(const LaunchArgs &a) { launch_rope_q8<NeoX>(a, "rope_neox_kv_write_q8"); }

}  // namespace akunu::cuda
