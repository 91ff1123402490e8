// Decode attention (one query row) over the head-major F16 KV cache: split-K flash decoding in
// which every warp runs its own online softmax over its keys. Replays at long contexts
// (LaunchArgs::context) go to the tensor-core kernel of cuda/attention_decode_gqa.cu
// instead, where it covers the shape (docs/adr/0012-cuda-long-context-decode-attention.md).
//
// Why this shape: at decode the work per head is tiny (tg128: 16-144 keys) and the kernel's time
// is its chain of dependent steps, not its arithmetic. Staging K and V per chunk and running each
// chunk's scores, max, exp-sum and V sums as block-wide phases makes that chain a dozen barriers
// long. Here a lane owns kDpl consecutive dims of q, of the keys and of its accumulator; a warp
// takes every kWarps-th key of the split, kB keys per step (one butterfly reduction per step gives
// every lane the step's scores), so there is no block barrier until the warps' states are merged
// once at the end. (The block-phase kernel this replaced, its clock probes and the A/B on an H100:
// benchmarks/HISTORY.md, 2026-11-22, 157e407.)
//
// Grid: (n_heads, 1, n_splits), blocks of 4, 8 or 16 warps by head_dim (launch_decode_warps). The
// grid is fixed when a graph is captured, the context is not: each launch uses as many splits as
// give each at least min_keys keys (the others exit), and the last split of a head to finish merges
// the splits' (max, sum, accumulator) triples; on Hopper a head's splits can form a thread-block
// cluster and merge through distributed shared memory instead (merge_splits_cluster, opt-in:
// AKUNU_CUDA_ATTN_CLUSTER=1).
//
// The RoPE variant (attention_rope_*_f16kv, RopeAttentionParams) does the RoPE + KV-write
// command's work too: every warp norms (QK-norm) and rotates its query head straight from qkv; the
// split holding the token's own key builds that key and value (warp 0) and uses them in place of
// cache rows, and one block per KV head appends them to the cache. Every cache row a block reads
// is then older than the previous kernel, so the first batch of K and V is loaded before the wait
// for that kernel (PDL), and the angles are computed then too.
//
// The Q8_0 cache's decode (attention_q8kv, attention_rope_*_q8kv) always runs the tensor-core
// kernel, which dequantizes its staged chunks (cuda/kv_cache_q8.cuh); this kernel reads F16 only.
#include <cooperative_groups.h>

#include <string>

#include "cuda/attention_decode.h"
#include "cuda/attention_decode_gqa.h"
#include "cuda/attention_decode_parts.cuh"
#include "cuda/common.cuh"
#include "cuda/q16_activation.cuh"
#include "cuda/rope_pairs.cuh"

namespace akunu::cuda {

namespace {

constexpr int kMaxSplits = 32;
constexpr uint32_t kMaxClusterSplits = 16;  // splits of a head merged inside a thread-block cluster

// kDpl halves of a cache row, as loaded (kDpl / 2 words); lanes past head_dim hold zeros.
template <int kDpl>
struct RowSlice {
    uint32_t w[kDpl / 2];
};

template <int kDpl>
__device__ __forceinline__ RowSlice<kDpl> load_slice(const __half *row, bool valid) {
    RowSlice<kDpl> s;
    if constexpr (kDpl == 2) {
        s.w[0] = valid ? __ldg(reinterpret_cast<const unsigned *>(row)) : 0u;
    } else if constexpr (kDpl == 4) {
        const uint2 v = valid ? __ldg(reinterpret_cast<const uint2 *>(row)) : make_uint2(0u, 0u);
        s.w[0] = v.x;
        s.w[1] = v.y;
    } else {
#pragma unroll
        for (int u = 0; u < kDpl / 8; ++u) {
            const uint4 v = valid ? __ldg(reinterpret_cast<const uint4 *>(row) + u) : make_uint4(0u, 0u, 0u, 0u);
            s.w[4 * u] = v.x;
            s.w[4 * u + 1] = v.y;
            s.w[4 * u + 2] = v.z;
            s.w[4 * u + 3] = v.w;
        }
    }
    return s;
}

template <int kDpl>
__device__ __forceinline__ float2 slice_pair(const RowSlice<kDpl> &s, int i) {
    return __half22float2(*reinterpret_cast<const __half2 *>(&s.w[i]));
}

// Hopper: the splits of a head form one thread-block cluster; each block leaves its (m, l,
// accumulator) in its own shared memory at `res`, and block 0 of the cluster merges them through
// distributed shared memory. Inactive splits call cluster_merge_wait() instead: every block of a
// cluster arrives at both of its barriers.
__device__ __forceinline__ void cluster_merge_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cooperative_groups::this_cluster().sync();  // the splits' results are in shared memory
    cooperative_groups::this_cluster().sync();  // block 0 has read them: all may exit
#endif
}
__device__ void merge_splits_cluster(float *res, float *__restrict__ out, uint32_t hd, uint32_t active,
                                     XQ16Chunk *xq_out, uint32_t out_base, const float *out_norm_w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    if (cluster.block_rank() == 0)
        merge_splits([&](uint32_t s, uint32_t i) { return cluster.map_shared_rank(res, s)[i]; }, out, hd, active, xq_out,
                     out_base, out_norm_w);
    cluster.sync();
#endif
}

// A warp's online softmax state over its keys: max m, sum l, and the lane's dims of sum p_j V_j.
template <int kDpl>
struct WarpState {
    float m = -INFINITY, l = 0.f;
    float acc[kDpl] = {};

    // Adds keys with scores s[b] (-inf: no key) and value slices v[b].
    template <int kB>
    __device__ __forceinline__ void add(const float (&s)[kB], const RowSlice<kDpl> (&v)[kB]) {
        float new_m = m;
#pragma unroll
        for (int b = 0; b < kB; ++b) new_m = fmaxf(new_m, s[b]);
        if (new_m == -INFINITY) return;  // warp-uniform: no key yet
        const float corr = expf(m - new_m);  // 0 while m = -inf
        l *= corr;
#pragma unroll
        for (int i = 0; i < kDpl; ++i) acc[i] *= corr;
#pragma unroll
        for (int b = 0; b < kB; ++b) {
            const float p = expf(s[b] - new_m);  // 0 for s = -inf
            l += p;
#pragma unroll
            for (int i = 0; i < kDpl / 2; ++i) {
                const float2 f = slice_pair(v[b], i);
                acc[2 * i] = fmaf(p, f.x, acc[2 * i]);
                acc[2 * i + 1] = fmaf(p, f.y, acc[2 * i + 1]);
            }
        }
        m = new_m;
    }
};

// Scores of kB keys against the lane's q dims, summed over the warp (every lane gets all kB).
template <int kDpl, int kB>
__device__ __forceinline__ void warp_scores(const float (&q)[kDpl], const RowSlice<kDpl> (&k)[kB], const bool (&valid)[kB],
                                            float softcap, float (&s)[kB]) {
#pragma unroll
    for (int b = 0; b < kB; ++b) {
        float t = 0.f;
#pragma unroll
        for (int i = 0; i < kDpl / 2; ++i) {
            const float2 f = slice_pair(k[b], i);
            t = fmaf(q[2 * i], f.x, t);
            t = fmaf(q[2 * i + 1], f.y, t);
        }
        s[b] = t;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int b = 0; b < kB; ++b) s[b] += __shfl_xor_sync(0xffffffffu, s[b], o);
#pragma unroll
    for (int b = 0; b < kB; ++b) {
        if (softcap > 0.f) s[b] = softcap * tanhf(s[b] / softcap);  // Gemma 2
        if (!valid[b]) s[b] = -INFINITY;
    }
}

// kDpl: head dims per lane (head_dim <= 32 kDpl); kB: keys per warp per step; kWarps: warps per block.
// Plain by-value parameters, unlike the other kernels (measured slower with __grid_constant__: common.cuh).
template <class Pairs, int kDpl, int kB, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    attention_decode_kernel(const float *__restrict__ q_all, __half *__restrict__ k_cache, __half *__restrict__ v_cache,
                            float *__restrict__ out, float *__restrict__ partial, AttentionParams p, RopeInputs ri,
                            PatchContext pc, uint32_t n_splits, unsigned *__restrict__ done_splits,
                            uint32_t min_keys, bool in_cluster, XQ16Chunk *__restrict__ xq_out,
                            const float *__restrict__ out_norm_w) {
    constexpr bool kRope = !std::is_same<Pairs, NoRope>::value;
    extern __shared__ float smem[];
    const uint32_t hd = p.head_dim;
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, d0 = lane * kDpl;
    const bool lane_has_dims = d0 < hd;
    float *merge_s = smem;                       // [kWarps][hd + 2]: each warp's (m, l, acc)
    float *stash = merge_s + kWarps * (hd + 2);  // [kWarps][hd]: rotate_head's scratch

    const uint32_t h = blockIdx.x, split = blockIdx.z;
    // The patched position is written before the replay starts (no earlier command writes it).
    const uint32_t position = resolve_position(p.position, pc);
    const uint32_t kv_len = resolve_kv_len(p.kv_len, pc);
    const uint32_t n_ctx = min(position + 1, kv_len);
    const uint32_t first = (p.window != 0 && n_ctx > p.window) ? n_ctx - p.window : 0;  // sliding window
    const uint32_t n_keys = n_ctx - first;
    const uint32_t active = min(n_splits, max(1u, (n_keys + min_keys - 1) / min_keys));
    if (split >= active) {  // block-uniform: before any barrier
        if (in_cluster && active > 1) cluster_merge_wait();
        return;
    }
    const uint32_t per_split = (n_keys + active - 1) / active;
    const uint32_t k_begin = first + min(split * per_split, n_keys), k_end = min(k_begin + per_split, n_ctx);
    const uint32_t group = p.n_heads / p.n_kv_heads, kv_head = h / group;
    const size_t head_base = (size_t)kv_head * p.max_seq * hd;
    const __half *K = k_cache + head_base + d0, *V = v_cache + head_base + d0;
    // The token's own key (RoPE variant): position n_ctx - 1, built here, not read from the cache.
    const bool has_own = kRope && k_begin < k_end && k_end == n_ctx && n_ctx == position + 1;
    const uint32_t cache_end = has_own ? k_end - 1 : k_end;

    // A warp step: keys j0, j0 + kWarps, ... (kB of them) below cache_end. Two steps are in flight
    // (a ring of two register buffers): both loaded before the wait in the RoPE variant, so at
    // tg128's short contexts a split's keys cost no memory round trip after it.
    constexpr uint32_t kStep = kB * kWarps;
    struct Step {
        RowSlice<kDpl> k[kB], v[kB];
        bool valid[kB];
    } ring[2];
    const auto load_step = [&](Step &st, uint32_t j0) {
#pragma unroll
        for (int b = 0; b < kB; ++b) {
            const uint32_t j = j0 + (uint32_t)b * kWarps;
            st.valid[b] = j < cache_end;
            const size_t row = kv_cache_row(j, p.max_seq);
            st.k[b] = load_slice<kDpl>(K + row * hd, st.valid[b] && lane_has_dims);
            st.v[b] = load_slice<kDpl>(V + row * hd, st.valid[b] && lane_has_dims);
        }
    };
    const uint32_t j_first = k_begin + warp;
    float2 cs[kDpl];
    if constexpr (kRope) {  // older rows than the previous kernel's: load before its end
        load_step(ring[0], j_first);
        load_step(ring[1], j_first + kStep);
#pragma unroll
        for (int i = 0; i < kDpl; ++i) {
            const uint32_t d = d0 + i;
            cs[i] = make_float2(1.f, 0.f);
            if (d < ri.rope_dim) rope_sincos(position, ri.inv_freq[Pairs::pair_of(d, ri.rope_dim)], &cs[i].y, &cs[i].x);
        }
    }
    pdl_enter();

    float q[kDpl];
    const float *q_src = q_all + (size_t)h * hd;
    RowSlice<kDpl> own_k[1], own_v[1];  // the token's K (rotated) and V as halves (warp 0 of has_own)
    if constexpr (kRope) {
        rotate_head<Pairs, kDpl>(q, q_src, ri.q_norm, ri, cs, hd, p.scale, stash + warp * hd);
        if (has_own && warp == 0) {
            const uint32_t q_dim = p.n_heads * hd, kv_dim = p.n_kv_heads * hd;
            float k_own[kDpl];
            rotate_head<Pairs, kDpl>(k_own, q_all + q_dim + kv_head * hd, ri.k_norm, ri, cs, hd, 1.f, stash);
            const float *v_src = q_all + q_dim + kv_dim + kv_head * hd;
#pragma unroll
            for (int i = 0; i < kDpl / 2; ++i) {
                const __half2 kh = __floats2half2_rn(k_own[2 * i], k_own[2 * i + 1]);
                const __half2 vh = lane_has_dims ? __floats2half2_rn(v_src[d0 + 2 * i], v_src[d0 + 2 * i + 1])
                                                 : __floats2half2_rn(0.f, 0.f);
                own_k[0].w[i] = *reinterpret_cast<const uint32_t *>(&kh);
                own_v[0].w[i] = *reinterpret_cast<const uint32_t *>(&vh);
            }
            if (h % group == 0 && lane_has_dims) {  // one block per KV head appends the cache row
                const size_t row = head_base + (size_t)kv_cache_row(n_ctx - 1, p.max_seq) * hd + d0;
#pragma unroll
                for (int i = 0; i < kDpl / 2; ++i) {
                    reinterpret_cast<uint32_t *>(k_cache + row)[i] = own_k[0].w[i];
                    reinterpret_cast<uint32_t *>(v_cache + row)[i] = own_v[0].w[i];
                }
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < kDpl; ++i) q[i] = lane_has_dims ? q_src[d0 + i] * p.scale : 0.f;
        load_step(ring[0], j_first);
        load_step(ring[1], j_first + kStep);
    }

    WarpState<kDpl> st;
    const auto run_step = [&](Step &step, uint32_t j0) {  // then refills `step` two steps ahead
        float s[kB];
        warp_scores<kDpl, kB>(q, step.k, step.valid, p.softcap, s);
        st.template add<kB>(s, step.v);
        load_step(step, j0 + 2 * kStep);
    };
    for (uint32_t j0 = j_first; j0 < cache_end; j0 += 2 * kStep) {
        run_step(ring[0], j0);
        if (j0 + kStep < cache_end) run_step(ring[1], j0 + kStep);
    }
    if (has_own && warp == 0) {  // the own key, last of the split
        const bool own_valid[1] = {true};
        float s[1];
        warp_scores<kDpl, 1>(q, own_k, own_valid, p.softcap, s);
        st.template add<1>(s, own_v);
    }

    // Merge the warps' states: (M, L, acc) of the block.
    float *mine = merge_s + warp * (hd + 2);
    if (lane == 0) {
        mine[0] = st.m;
        mine[1] = st.l;
    }
    if (lane_has_dims)
#pragma unroll
        for (int i = 0; i < kDpl; ++i) mine[2 + d0 + i] = st.acc[i];
    __syncthreads();
    // One split: only the warps holding output dims have work left (whole warps: shuffles follow).
    if (active == 1 && warp * 32 >= hd) return;
    // The block's max M, the warps' weights e^(m_w - M) and L = sum l_w e^(m_w - M): lane w of every
    // warp takes warp w's state, shuffles do the rest. (Every thread looping over all kWarps states,
    // a chain of loads and exps issued by each of the 16 warps, took 1.8 us of an 8B-shape layer's
    // 5.1 us attention on an H100: benchmarks/HISTORY.md, "2026-11-28, 01c51f5".)
    const float m_w = lane < (uint32_t)kWarps ? merge_s[lane * (hd + 2)] : -INFINITY;
    const float l_w = lane < (uint32_t)kWarps ? merge_s[lane * (hd + 2) + 1] : 0.f;
    const float M = warp_max(m_w);
    const float my_wt = l_w > 0.f ? expf(m_w - M) : 0.f;
    const float L = warp_sum(l_w * my_wt);
    float wt[kWarps];
#pragma unroll
    for (int w = 0; w < kWarps; ++w) wt[w] = __shfl_sync(0xffffffffu, my_wt, w);
    const auto block_acc = [&](uint32_t d) {
        float t = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) t += merge_s[w * (hd + 2) + 2 + d] * wt[w];
        return t;
    };
    if (active == 1) {
        const float inv = 1.0f / L;
        for (uint32_t d = threadIdx.x; d < hd; d += kWarps * 32) {
            const float o = block_acc(d) * inv;
            out[(size_t)h * hd + d] = o;
            if (xq_out) store_q16_block(xq_out, h * hd + d - lane, o, out_norm_w);  // warp-uniform: hd % 32 == 0
        }
        return;
    }
    // The split's (m, l, accumulator): in this block's shared memory for the cluster merge (after
    // the warps' states), else in the workspace's partials.
    float *res = in_cluster ? stash : partial + ((size_t)h * n_splits + split) * (hd + 2);
    if (threadIdx.x == 0) {
        res[0] = M;
        res[1] = L;
    }
    for (uint32_t d = threadIdx.x; d < hd; d += kWarps * 32) res[2 + d] = block_acc(d);
    if (in_cluster) {
        merge_splits_cluster(res, out + (size_t)h * hd, hd, active, xq_out, h * hd, out_norm_w);
        return;
    }
    // The last split of this head to finish merges all of them: no second kernel launch. As in a
    // grid barrier, thread 0's fences order the block's writes (seen through the barrier) before
    // its arrival, and the others' writes before the last block's reads.
    __syncthreads();
    __shared__ bool is_last;
    if (threadIdx.x == 0) {
        __threadfence();
        is_last = atomicAdd(&done_splits[h], 1u) == active - 1;
        if (is_last) {
            __threadfence();
            done_splits[h] = 0;  // ready for the next layer / replay
        }
    }
    __syncthreads();
    if (is_last) {  // the other splits' partials are read past L1
        const float *parts = partial + (size_t)h * n_splits * (hd + 2);
        merge_splits([&](uint32_t s, uint32_t i) { return __ldcg(parts + s * (hd + 2) + i); }, out + (size_t)h * hd, hd,
                     active, xq_out, h * hd, out_norm_w);
    }
}

// Fewest keys per split of a decode head in blocks of 4 warps (8 and 16 take the keys their
// registers hold, launch_decode). A split costs the head's merge (an atomic and a round of loads,
// or the cluster's barriers), so short contexts use few; where a layer's whole attention is
// small (n_heads x head_dim <= 1024, SmolLM2) tg128 runs one block per head with no merge. Both
// thresholds come from tg128 A/Bs on an H100 (benchmarks/HISTORY.md, 2026-11-22, 4d4946a and
// 157e407).
constexpr uint32_t kMinKeysPerSplit = 32;
constexpr uint32_t kSmallAttentionQDim = 1024;
constexpr uint32_t kSmallAttentionMinKeys = 128;

// Where the cluster merge (when switched on) is used. On an H100 it paid at head_dim 64 only, and
// lost at head_dim 128 (benchmarks/HISTORY.md, 2026-11-22, 157e407), until the GEMVs around it
// got faster: since 590392c (2026-11-23) the global merge wins at head_dim 64 too, hence off by
// default.
bool cluster_wanted(uint32_t head_dim) { return head_dim <= 64; }

// Whether a grid of `heads` clusters of `size` blocks (over 8: a non-portable size, which
// Hopper allows) of `kernel` can run: the binary this device runs has the merge (built for
// sm_90 or later), and each cluster fits the SMs of one GPC at once.
template <typename Kernel>
bool cluster_fits(Kernel kernel, uint32_t threads, uint32_t heads, uint32_t size, size_t smem) {
    cudaFuncAttributes fa{};
    if (cudaFuncGetAttributes(&fa, kernel) != cudaSuccess || fa.binaryVersion < 90) {
        cudaGetLastError();
        return false;
    }
    if (size > 8 && cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(heads, 1, size);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = size;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    const bool ok = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) == cudaSuccess && clusters > 0;
    cudaGetLastError();
    return ok;
}

template <class Pairs, int kDpl, int kB, int kWarps>
void launch_decode(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri) {
    const auto kernel = attention_decode_kernel<Pairs, kDpl, kB, kWarps>;
    const uint32_t hd = p.head_dim;
    const size_t smem = (size_t)kWarps * (2 * hd + 2) * sizeof(float);
    // A block of 8 or 16 warps takes at least the keys of its two register steps per warp, all
    // loaded before the wait (launch_decode_warps); blocks of 4 follow kMinKeysPerSplit's rule.
    uint32_t min_keys = kWarps > 4 ? 2u * kB * kWarps
                        : p.n_heads * hd <= kSmallAttentionQDim ? kSmallAttentionMinKeys
                        : kMinKeysPerSplit;
    if (a.workspace->attention_min_keys) min_keys = a.workspace->attention_min_keys;
    // Enough (head, split) blocks to fill the chip twice, within the workspace; on Hopper a head's
    // splits merge inside a cluster when they fit one.
    uint32_t n_splits = std::min<uint32_t>(kMaxSplits, ceil_div_u(2u * a.workspace->sm_count, p.n_heads));
    bool in_cluster = false;
    const uint32_t cluster = std::min(n_splits, kMaxClusterSplits);
    if (a.workspace->clusters && cluster > 1 && cluster_wanted(hd) &&
        cluster_fits(kernel, kWarps * 32, p.n_heads, cluster, smem)) {
        n_splits = cluster;
        in_cluster = true;
    }
    // The workspace's last 128 floats and last counter belong to argmax_f32.
    while (!in_cluster && n_splits > 1 && (size_t)p.n_heads * n_splits * (hd + 2) > a.workspace->floats - 128)
        --n_splits;
    if (!in_cluster && n_splits > 1 && p.n_heads >= a.workspace->n_counters) n_splits = 1;
    const auto *q = reinterpret_cast<const float *>(a.buffers[0]);
    auto *k = reinterpret_cast<__half *>(a.buffers[1]);
    auto *v = reinterpret_cast<__half *>(a.buffers[2]);
    auto *out = reinterpret_cast<float *>(a.buffers[3]);
    // The o_proj GEMV after it may take the output quantized (cuda/q16_activation.cuh): one row,
    // whole 32-element blocks per head, and exactly the row that GEMV reads.
    const Q16Handoff &ho = a.q16_out;
    const bool hand_off = p.rows == 1 && hd % 32 == 0 && ho.offered_for(out, p.n_heads * hd);
    launch_pdl_clustered(kernel, dim3(p.n_heads, 1, n_splits), kWarps * 32, smem, dim3(1, 1, in_cluster ? n_splits : 1),
                         a, q, k, v, out, a.workspace->data, p, ri, a.patch, n_splits, a.workspace->counters, min_keys,
                         in_cluster, hand_off ? static_cast<XQ16Chunk *>(ho.chunks) : nullptr,
                         hand_off ? ho.norm_w : nullptr);
    if (hand_off) *ho.written = true;
}

// Warps per block. More warps hold more keys in registers before the wait (two steps of kB keys
// each), and with min_keys set to that, tg128's contexts (16-144 keys) run one split per head: no
// merge round trip through L2. 16 warps at head_dim 128 and 8 at head_dim 64 measured fastest on an
// H100 (benchmarks/HISTORY.md, 2026-11-23, c833b96). Wider heads keep 4 (their registers would not
// leave room for more). AKUNU_CUDA_ATTN_WARPS=4/8/16 overrides (A/B timing).
template <class Pairs, int kDpl, int kB>
void launch_decode_warps(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri) {
    uint32_t warps = a.workspace->attention_warps;
    if (warps == 0) warps = kDpl == 4 ? 16 : kDpl == 2 ? 8 : 4;
    if constexpr (kDpl <= 4) {  // head_dim <= 128 (wider heads: too many registers for more warps)
        if (warps >= 16) return launch_decode<Pairs, kDpl, kB, 16>(a, p, ri);
        if (warps >= 8) return launch_decode<Pairs, kDpl, kB, 8>(a, p, ri);
    }
    return launch_decode<Pairs, kDpl, kB, 4>(a, p, ri);
}

// Head dims per lane: the fewest that cover head_dim with 32 lanes; keys per warp step: ~32 / dims.
template <class Pairs>
void launch_for_head_dim(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri) {
    const uint32_t hd = p.head_dim;
    if (hd <= 64) return launch_decode_warps<Pairs, 2, 8>(a, p, ri);
    if (hd <= 128) return launch_decode_warps<Pairs, 4, 4>(a, p, ri);
    if (hd <= 256) return launch_decode_warps<Pairs, 8, 4>(a, p, ri);
    if (hd <= 512) return launch_decode_warps<Pairs, 16, 2>(a, p, ri);
    return launch_decode_warps<Pairs, 32, 1>(a, p, ri);
}

[[noreturn]] void throw_q8_shape(const AttentionParams &p, const char *name) {
    throw UnsupportedError(std::string(name) + " on CUDA needs head_dim 64 or 128 and at most 16 query heads per KV " +
                           "head, got head_dim " + std::to_string(p.head_dim) + ", " + std::to_string(p.n_heads) +
                           " heads over " + std::to_string(p.n_kv_heads));
}

template <class Pairs>
void launch_rope_decode(const LaunchArgs &a, const char *name, KVCacheDType cache) {
    const RopeAttentionParams &rp = params_of<RopeAttentionParams>(a);
    check_attention_shape(rp.attention, name);
    if (rp.attention.rows != 1 || rp.rope_dim % 2 != 0 || rp.rope_dim > rp.attention.head_dim)
        throw AkunuError(std::string("internal: ") + name + " takes one query row and an even rope_dim <= head_dim");
    RopeInputs ri;
    ri.inv_freq = reinterpret_cast<const float *>(a.buffers[4]);
    if (rp.qk_norm) {
        ri.q_norm = reinterpret_cast<const float *>(a.buffers[5]);
        ri.k_norm = reinterpret_cast<const float *>(a.buffers[6]);
    }
    ri.rope_dim = rp.rope_dim;
    ri.norm_eps = rp.norm_eps;
    constexpr DecodeRope kRope = std::is_same<Pairs, NeoX>::value ? DecodeRope::NeoX : DecodeRope::Interleaved;
    if (cache == KVCacheDType::Q8_0) {  // read by the tensor-core kernel only, at every depth
        if (!launch_attention_decode_gqa(a, rp.attention, ri, kRope, cache)) throw_q8_shape(rp.attention, name);
    } else if (!(a.context != ContextLength::Short && launch_attention_decode_gqa(a, rp.attention, ri, kRope, cache))) {
        launch_for_head_dim<Pairs>(a, rp.attention, ri);
    }
    check_launch(name);
}

}  // namespace

void check_attention_shape(const AttentionParams &p, const char *name) {
    if (p.head_dim % 8 != 0 || p.head_dim > 1024 || p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads)
        throw UnsupportedError(std::string(name) +
                               " on CUDA needs head_dim % 8 == 0, head_dim <= 1024 and whole GQA groups");
}

void launch_attention_decode(const LaunchArgs &a, const AttentionParams &p) {
    if (a.context != ContextLength::Short && launch_attention_decode_gqa(a, p, RopeInputs{}, DecodeRope::None, KVCacheDType::F16)) return;
    launch_for_head_dim<NoRope>(a, p, RopeInputs{});
}

void launch_attention_decode_q8(const LaunchArgs &a, const AttentionParams &p) {
    if (!launch_attention_decode_gqa(a, p, RopeInputs{}, DecodeRope::None, KVCacheDType::Q8_0))
        throw_q8_shape(p, "attention_q8kv");
}

void launch_attention_rope_interleaved_f16kv(const LaunchArgs &a) {
    launch_rope_decode<Interleaved>(a, "attention_rope_interleaved_f16kv", KVCacheDType::F16);
}
void launch_attention_rope_neox_f16kv(const LaunchArgs &a) {
    launch_rope_decode<NeoX>(a, "attention_rope_neox_f16kv", KVCacheDType::F16);
}
void launch_attention_rope_interleaved_q8kv(const LaunchArgs &a) {
    launch_rope_decode<Interleaved>(a, "attention_rope_interleaved_q8kv", KVCacheDType::Q8_0);
}
void launch_attention_rope_neox_q8kv(const LaunchArgs &a) {
    launch_rope_decode<NeoX>(a, "attention_rope_neox_q8kv", KVCacheDType::Q8_0);
}

}  // namespace akunu::cuda
