// RoPE on Q and K in place, then K and V appended to the head-major F16 cache at the token's
// position. The position comes from the patch (device memory) in decode replays.
#include <algorithm>

#include "cuda/common.cuh"
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
            const size_t dst = ((size_t)(head - p.n_heads) * p.max_seq + pos) * p.head_dim;
            k_cache[dst + i0] = __float2half_rn(x0);
            k_cache[dst + i1] = __float2half_rn(x1);
        }
    }
    const uint32_t tail = p.head_dim - p.rope_dim;  // un-rotated K dims
    for (uint32_t t = t0; t < kv_dim; t += stride) {
        const uint32_t h = t / p.head_dim, d = t % p.head_dim;
        const size_t dst = ((size_t)h * p.max_seq + pos) * p.head_dim + d;
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

}  // namespace

void launch_rope_interleaved_kv_write(const LaunchArgs &a) { launch_rope<Interleaved>(a, "rope_interleaved_kv_write"); }
void launch_rope_neox_kv_write(const LaunchArgs &a) { launch_rope<NeoX>(a, "rope_neox_kv_write"); }

}  // namespace akunu::cuda
