// Causal attention over the head-major F16 KV cache (cache[kv_head][position][head_dim]),
// optionally limited to a sliding window of keys and with soft-capped scores (AttentionParams).
//
// One block per (head, query row, split). A block walks its keys in chunks (up to 128 keys, at
// most 32 KB each of K and V) with an online softmax: the chunk's K and V rows are copied to
// shared memory (cp.async, K and V as two groups), groups of lanes score its keys as soon as K has
// landed (q in shared memory, each key row read 16 bytes per lane by several lanes at once), then
// the threads accumulate p_j * V_j, each owning a pair of output dims. Every global load of a
// chunk is thus issued at its start instead of one dependent round trip per key. Decode (one query
// row) splits the keys across blocks (flash-decoding: kv_len can be thousands while there are only
// n_heads rows of work); the last split of a head to finish (an atomic count per head) merges the
// partial (max, sum, acc) triples, so decode attention is one kernel (on Hopper, where it pays, a
// head's splits form a thread-block cluster and merge through distributed shared memory instead:
// combine_splits_cluster). Prefill runs one split per (head, row) where the tensor-core kernel of
// cuda/attention_prefill.cu does not apply (other head sizes).
//
// The decode variant with RoPE (attention_rope_*_f16kv, RopeAttentionParams) also does the RoPE +
// KV-write command's work: every block norms (QK-norm) and rotates its query head from qkv; the
// split whose keys include the token's own builds that key and value in shared memory and uses
// them in place of cache rows, and one of its blocks per KV head appends them to the cache.
// Nothing reads the new cache row during this launch, so no block waits for another, and every
// row a block does read from the cache is older than the previous kernel: its first chunk is
// staged before the wait for that kernel (PDL).
#include <cooperative_groups.h>

#include <string>

#include "cuda/attention_prefill.h"
#include "cuda/common.cuh"
#include "cuda/rope_pairs.cuh"

namespace akunu::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kChunk = kThreads;     // most keys per chunk: one score per thread
constexpr uint32_t kStageHalves = 16384;  // K and V staged per chunk: 32 KB each

__host__ __device__ inline uint32_t chunk_keys(uint32_t head_dim) {
    return kStageHalves / head_dim < (uint32_t)kChunk ? kStageHalves / head_dim : (uint32_t)kChunk;
}
constexpr int kMaxPairsPerThread = 4;  // head_dim <= 1024 (checked at load)
constexpr int kMaxSplits = 32;
// Fewest keys per split of a decode head. A split costs the head's merge (an atomic, then two
// rounds of loads), so short splits pay only where a layer's attention is large enough to need the
// parallelism. H100 tg128 t/s with splits of >= 16 / 32 / 64 keys / no split: Llama-3.2-1B shape
// (32 heads x 64) 1529 / 1514 / 1515 / 1508, 8B (32 x 128) 415 / 413 / 410 / 400, SmolLM2 (9 x 64)
// 1806 / 1815 / 1843 / 1885; another call, 16 against one chunk (128 keys): SmolLM2 1817 / 1901,
// Qwen3-0.6B shape (16 x 128) 1426 / 1263.
constexpr uint32_t kMinKeysPerSplit = 16;
constexpr uint32_t kSmallAttentionQDim = 1024;  // n_heads * head_dim up to this: one chunk per split
constexpr uint32_t kMaxClusterSplits = 16;      // splits of a head merged inside a thread-block cluster

// Output-pair mapping of the V accumulation: `groups` sets of `pairs` threads take keys
// round-robin, so small heads still use the whole block.
struct VMap {
    uint32_t pairs, groups, group, pair0;
    bool active;
    __device__ VMap(uint32_t head_dim) {
        pairs = head_dim / 2;
        if (pairs <= (uint32_t)kThreads) {
            groups = kThreads / pairs;
            group = threadIdx.x / pairs;
            pair0 = threadIdx.x % pairs;
            active = threadIdx.x < groups * pairs;
        } else {
            groups = 1;
            group = 0;
            pair0 = threadIdx.x;
            active = true;
        }
    }
};

// The plain kernel: q already rotated in qkv, the token's K/V already in the cache.
struct NoRope {};

// What the RoPE variant reads besides AttentionParams.
struct RopeInputs {
    const float *inv_freq = nullptr;  // [rope_dim / 2]
    const float *q_norm = nullptr;    // QK-norm weights [head_dim]; null: no QK-norm
    const float *k_norm = nullptr;
    uint32_t rope_dim = 0;
    float norm_eps = 0.f;
};

// x_s = rope(norm(src)) * scale for one head, in shared memory: the work of the QK-norm and RoPE
// commands (the same float operations, so the CPU's values). Ends with a barrier.
template <class Pairs>
__device__ void load_rotated_head(float *x_s, const float *__restrict__ src, const float *__restrict__ norm_w,
                                  const RopeInputs &ri, uint32_t hd, uint32_t pos, float scale, float *red) {
    float sum_sq = 0.f;
    for (uint32_t d = threadIdx.x; d < hd; d += kThreads) {
        const float v = src[d];
        x_s[d] = v;
        sum_sq += v * v;
    }
    if (norm_w) {
        const float inv = 1.0f / sqrtf(block_reduce<false>(sum_sq, red) / (float)hd + ri.norm_eps);
        for (uint32_t d = threadIdx.x; d < hd; d += kThreads) x_s[d] = x_s[d] * inv * norm_w[d];
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < ri.rope_dim / 2; i += kThreads) {
        const uint32_t i0 = Pairs::first(i, ri.rope_dim), i1 = Pairs::second(i, ri.rope_dim);
        float s, c;
        rope_sincos(pos, ri.inv_freq[i], &s, &c);
        const float a = x_s[i0], b = x_s[i1];
        x_s[i0] = (a * c - b * s) * scale;
        x_s[i1] = (a * s + b * c) * scale;
    }
    for (uint32_t d = ri.rope_dim + threadIdx.x; d < hd; d += kThreads) x_s[d] *= scale;  // partial rotary
    __syncthreads();
}

// Warp 0's part of a merge: lane s holds split s's (m, l) (an empty or inactive split: -inf, 0);
// sets weight[s] = e^(m_s - M) for the active splits and *inv_sum = 1 / sum_s l_s e^(m_s - M).
__device__ __forceinline__ void split_weights(float m, float l, uint32_t active, float *weight, float *inv_sum) {
    const uint32_t s = threadIdx.x;
    const float M = warp_max(m);
    const float e = l > 0.f ? expf(m - M) : 0.f;
    const float L = warp_sum(l * e);
    if (s < active) weight[s] = e;
    if (s == 0) *inv_sum = 1.0f / L;
}

// Merges the splits of one head: out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M). Run by
// the head's last block; the other splits' partials are read past L1 (__ldcg). Warp 0 reads every
// split's (m, l) at once (an empty split has m = -inf, l = 0: weight 0), so the merge costs two
// rounds of loads, not a dependent load per split.
__device__ void combine_splits(const float *partial, float *__restrict__ out, uint32_t h, uint32_t hd,
                               uint32_t n_splits, uint32_t active) {
    __shared__ float weight[kMaxSplits];  // e^(m_s - M)
    __shared__ float inv_sum;             // 1 / sum_s l_s e^(m_s - M)
    const float *base = partial + (size_t)h * n_splits * (hd + 2);
    if (threadIdx.x < 32) {
        const uint32_t s = threadIdx.x;
        const float m = s < active ? __ldcg(base + s * (hd + 2)) : -INFINITY;
        const float l = s < active ? __ldcg(base + s * (hd + 2) + 1) : 0.f;
        split_weights(m, l, active, weight, &inv_sum);
    }
    __syncthreads();
    for (uint32_t d = threadIdx.x; d < hd; d += kThreads) {
        float t = 0.f;
#pragma unroll 8
        for (uint32_t s = 0; s < active; ++s) t += __ldcg(base + s * (hd + 2) + 2 + d) * weight[s];
        out[(size_t)h * hd + d] = t * inv_sum;
    }
}

// Hopper: the splits of a head form one thread-block cluster and merge through distributed shared
// memory instead of global partials, a fence and an atomic. Each block leaves its (m, l,
// accumulator) in its own shared memory at `res`, laid out as a partial of combine_splits; block 0
// of the cluster reads every active split's and writes the head's output, in combine_splits' order
// of operations. Inactive splits call cluster_merge_wait() instead: every block of a cluster
// arrives at both of its barriers.
__device__ __forceinline__ void cluster_merge_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cooperative_groups::this_cluster().sync();  // the splits' results are in shared memory
    cooperative_groups::this_cluster().sync();  // block 0 has read them: all may exit
#endif
}
__device__ void combine_splits_cluster(float *res, float *__restrict__ out, uint32_t hd, uint32_t active) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    if (cluster.block_rank() == 0) {
        __shared__ float weight[kMaxClusterSplits];
        __shared__ float inv_sum;
        if (threadIdx.x < 32) {
            const uint32_t s = threadIdx.x;
            const float *peer = s < active ? cluster.map_shared_rank(res, s) : nullptr;
            split_weights(peer ? peer[0] : -INFINITY, peer ? peer[1] : 0.f, active, weight, &inv_sum);
        }
        __syncthreads();
        for (uint32_t d = threadIdx.x; d < hd; d += kThreads) {
            float t = 0.f;
            for (uint32_t s = 0; s < active; ++s) t += cluster.map_shared_rank(res, s)[2 + d] * weight[s];
            out[d] = t * inv_sum;
        }
    }
    cluster.sync();
#endif
}

// Pairs: NoRope, or the rotation (Interleaved / NeoX) of the RoPE variant (decode only).
template <class Pairs>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float *__restrict__ q_all, __half *__restrict__ k_cache, __half *__restrict__ v_cache,
                     float *__restrict__ out, float *__restrict__ partial, AttentionParams p, RopeInputs ri,
                     PatchContext pc, uint32_t n_splits, unsigned *__restrict__ done_splits, uint32_t min_keys,
                     bool in_cluster) {
    constexpr bool kRope = !std::is_same<Pairs, NoRope>::value;
    extern __shared__ float smem[];
    const uint32_t hd = p.head_dim;
    float *q_s = smem;               // [hd]        q * scale
    float *scores = q_s + hd;        // [kChunk]    softmax numerators of the chunk
    float *red = scores + kChunk;    // [32]        reductions
    float *acc_s = red + 32;         // [groups*hd] per-group accumulators, merged at the end
    const uint32_t chunk = chunk_keys(hd);
    // [chunk*hd] halves each: the chunk's K and V rows (16-byte aligned: every count above is a
    // multiple of 4), then (RoPE variant) the token's own K and V rows [hd] each
    __half *k_s = reinterpret_cast<__half *>(acc_s + VMap(hd).groups * hd);
    __half *v_s = k_s + chunk * hd;
    __half *new_k = v_s + chunk * hd;
    __half *new_v = new_k + hd;

    const uint32_t h = blockIdx.x, r = blockIdx.y, split = blockIdx.z, tid = threadIdx.x;
    // The patched position is written before the replay starts (no earlier command writes it).
    const uint32_t position = resolve_position(p.position, pc);
    const uint32_t kv_len = resolve_kv_len(p.kv_len, pc);
    const uint32_t n_ctx = min(position + r + 1, kv_len);  // causal: row r sees 0..position + r
    // Sliding window: only the last `window` of those keys.
    const uint32_t first = (p.window != 0 && n_ctx > p.window) ? n_ctx - p.window : 0;
    const uint32_t n_keys = n_ctx - first;
    // The grid is fixed when a graph is captured, the context is not: use only as many splits as
    // give each at least min_keys keys, so very short contexts skip the partials and the merge,
    // while longer ones still spread the serial V walk over many blocks.
    const uint32_t active = min(n_splits, max(1u, (n_keys + min_keys - 1) / min_keys));
    if (split >= active) {  // block-uniform: before any barrier
        if (in_cluster && active > 1) cluster_merge_wait();
        return;
    }
    const uint32_t per_split = (n_keys + active - 1) / active;
    const uint32_t k_begin = first + min(split * per_split, n_keys), k_end = min(k_begin + per_split, n_ctx);

    const uint32_t group = p.n_heads / p.n_kv_heads, kv_head = h / group;
    const size_t head_base = (size_t)kv_head * p.max_seq * hd;
    const __half *K = k_cache + head_base, *V = v_cache + head_base;
    // The token's own key (RoPE variant): position n_ctx - 1, built here, not read from the cache.
    const uint32_t own_key = kRope && k_begin < n_ctx && n_ctx - 1 < k_end ? n_ctx - 1 : ~0u;

    // A chunk's cache rows into k_s / v_s (two cp.async groups: K, then V), but for the own key.
    const auto stage_chunk = [&](uint32_t c0, uint32_t n) {
        for (uint32_t i = tid; i < n * (hd / 8); i += kThreads) {
            const uint32_t j = i / (hd / 8), d = 8 * (i % (hd / 8));
            if (c0 + j != own_key) cp_async16(k_s + j * hd + d, K + (size_t)(c0 + j) * hd + d, 16);
        }
        cp_async_commit();
        for (uint32_t i = tid; i < n * (hd / 8); i += kThreads) {
            const uint32_t j = i / (hd / 8), d = 8 * (i % (hd / 8));
            if (c0 + j != own_key) cp_async16(v_s + j * hd + d, V + (size_t)(c0 + j) * hd + d, 16);
        }
        cp_async_commit();
    };
    // In the RoPE variant every cache row this block reads was written by an earlier token's
    // command, so the first chunk's copies start before the wait for the previous kernel (PDL).
    if (kRope && k_begin < k_end) stage_chunk(k_begin, min(chunk, k_end - k_begin));
    pdl_enter();

    const float *q = q_all + (size_t)r * p.q_stride + (size_t)h * hd;
    if constexpr (kRope) {
        load_rotated_head<Pairs>(q_s, q, ri.q_norm, ri, hd, position, p.scale, red);
        if (own_key != ~0u) {  // block-uniform
            const float *row = q_all + (size_t)r * p.q_stride;
            const uint32_t q_dim = p.n_heads * hd, kv_dim = p.n_kv_heads * hd;
            float *k_f = acc_s;  // free until the final merge
            load_rotated_head<Pairs>(k_f, row + q_dim + kv_head * hd, ri.k_norm, ri, hd, own_key, 1.f, red);
            const float *v_src = row + q_dim + kv_dim + kv_head * hd;
            const bool appends = h % group == 0;  // one block per KV head writes the cache row
            for (uint32_t d = tid; d < hd; d += kThreads) {
                new_k[d] = __float2half_rn(k_f[d]);
                new_v[d] = __float2half_rn(v_src[d]);
                if (appends) {
                    k_cache[head_base + (size_t)own_key * hd + d] = new_k[d];
                    v_cache[head_base + (size_t)own_key * hd + d] = new_v[d];
                }
            }
            __syncthreads();
        }
    } else {
        for (uint32_t d = tid; d < hd; d += kThreads) q_s[d] = q[d] * p.scale;
        __syncthreads();
    }

    const VMap vm(hd);
    float2 acc[kMaxPairsPerThread];
#pragma unroll
    for (int i = 0; i < kMaxPairsPerThread; ++i) acc[i] = make_float2(0.f, 0.f);
    float m = -INFINITY, l = 0.f;

    // Scoring: `lanes` adjacent lanes per key (a power of two, <= 32), each reading 16 bytes of
    // the staged key row at a time.
    uint32_t lanes = 1;
    while (lanes * 2 <= 32 && lanes * 2 <= hd / 8) lanes *= 2;
    const uint32_t keys_per_pass = kThreads / lanes, slot = tid / lanes, sub = tid % lanes;

    for (uint32_t c0 = k_begin; c0 < k_end; c0 += chunk) {
        const uint32_t n = min(chunk, k_end - c0);
        if (!kRope || c0 != k_begin) stage_chunk(c0, n);
        if (own_key - c0 < n) {  // the own key's rows come from shared memory
            const uint32_t j = own_key - c0;
            for (uint32_t d = tid; d < hd; d += kThreads) {
                k_s[j * hd + d] = new_k[d];
                v_s[j * hd + d] = new_v[d];
            }
        }
        cp_async_wait_group<1>();  // this thread's K copies have landed
        __syncthreads();           // everyone's
#pragma unroll 4
        for (uint32_t j0 = 0; j0 < n; j0 += keys_per_pass) {
            const uint32_t j = j0 + slot;
            float dot = 0.f;
            if (j < n) {
                const uint4 *kr = reinterpret_cast<const uint4 *>(k_s + j * hd);
                for (uint32_t d8 = sub; d8 < hd / 8; d8 += lanes) {
                    const uint4 v = kr[d8];
                    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&w[i]));
                        dot = fmaf(q_s[8 * d8 + 2 * i], f.x, dot);
                        dot = fmaf(q_s[8 * d8 + 2 * i + 1], f.y, dot);
                    }
                }
            }
            for (uint32_t o = lanes / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
            if (sub == 0 && j < n) scores[j] = p.softcap > 0.f ? p.softcap * tanhf(dot / p.softcap) : dot;  // Gemma 2
        }
        __syncthreads();
        const float s = tid < n ? scores[tid] : -INFINITY;
        const float new_m = fmaxf(m, block_reduce<true>(s, red));
        const float e = tid < n ? expf(s - new_m) : 0.f;
        scores[tid] = e;
        const float chunk_sum = block_reduce<false>(e, red);  // its barriers publish `scores`
        const float corr = expf(m - new_m);                   // 0 on the first chunk (m = -inf)
        l = l * corr + chunk_sum;
        m = new_m;
        cp_async_wait_all();
        __syncthreads();  // every thread's V copies have landed
        if (vm.active) {
#pragma unroll
            for (int i = 0; i < kMaxPairsPerThread; ++i) {
                acc[i].x *= corr;
                acc[i].y *= corr;
            }
#pragma unroll 4
            for (uint32_t j = vm.group; j < n; j += vm.groups) {
                const float w = scores[j];
                const __half2 *vr = reinterpret_cast<const __half2 *>(v_s + j * hd);
#pragma unroll
                for (int i = 0; i < kMaxPairsPerThread; ++i) {
                    const uint32_t pair = vm.pair0 + (uint32_t)kThreads * i;
                    if (pair < vm.pairs) {
                        const float2 f = __half22float2(vr[pair]);
                        acc[i].x = fmaf(w, f.x, acc[i].x);
                        acc[i].y = fmaf(w, f.y, acc[i].y);
                    }
                }
            }
        }
        __syncthreads();  // `scores` and `v_s` are rewritten by the next chunk
    }

    // Merge the key groups' accumulators.
    if (vm.active) {
#pragma unroll
        for (int i = 0; i < kMaxPairsPerThread; ++i) {
            const uint32_t pair = vm.pair0 + (uint32_t)kThreads * i;
            if (pair < vm.pairs) {
                acc_s[vm.group * hd + 2 * pair] = acc[i].x;
                acc_s[vm.group * hd + 2 * pair + 1] = acc[i].y;
            }
        }
    }
    __syncthreads();
    const auto group_total = [&](uint32_t d) {  // output dim d summed over the key groups
        float t = 0.f;
        for (uint32_t g = 0; g < vm.groups; ++g) t += acc_s[g * hd + d];
        return t;
    };
    if (active == 1) {
        float *o = out + (size_t)r * p.out_stride + (size_t)h * hd;
        const float inv = 1.0f / l;
        for (uint32_t d = tid; d < hd; d += kThreads) o[d] = group_total(d) * inv;
        return;
    }
    // The split's (m, l, accumulator): in this block's shared memory for the cluster merge (q_s
    // and the start of `scores`, both free now), else in the workspace's partials.
    float *res = in_cluster ? q_s : partial + ((size_t)h * n_splits + split) * (hd + 2);
    if (tid == 0) {
        res[0] = m;
        res[1] = l;  // 0 for an empty split
    }
    for (uint32_t d = tid; d < hd; d += kThreads) res[2 + d] = group_total(d);
    if (in_cluster) {
        combine_splits_cluster(res, out + (size_t)h * hd, hd, active);
        return;
    }
    // The last split of this head to finish merges all of them: no second kernel launch.
    __threadfence();
    __syncthreads();
    __shared__ bool is_last;
    if (tid == 0) is_last = atomicAdd(&done_splits[h], 1u) == active - 1;
    __syncthreads();
    if (is_last) {
        __threadfence();
        combine_splits(partial, out, h, hd, n_splits, active);
        if (tid == 0) done_splits[h] = 0;  // ready for the next layer / replay
    }
}

// Where the cluster merge pays, measured on an H100 (tg128 t/s, cluster / global merge): heads of
// many short splits in small blocks (Llama-3.2-1B shape, 32 x 64: 1681 / 1627). With blocks of
// ~68 KB (head_dim 128: 8B shape 418 / 436, Qwen3-0.6B shape 1421 / 1435) or one-chunk splits,
// rarely more than one active at short contexts (SmolLM2, 9 x 64: 1388 / 1652), the cluster launch
// lost more than the merge saved (each cluster must find room on the SMs of one GPC).
bool cluster_wanted(uint32_t min_keys, size_t smem) { return min_keys == kMinKeysPerSplit && smem <= 48 * 1024; }

// Whether a grid of `heads` clusters of `size` blocks (over 8: a non-portable size, which
// Hopper allows) of `kernel` can run: the binary this device runs has the merge (built for
// sm_90 or later), and each cluster fits the SMs of one GPC at once.
template <typename Kernel>
bool cluster_fits(Kernel kernel, uint32_t heads, uint32_t size, size_t smem) {
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
    cfg.blockDim = dim3(kThreads);
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

// Validates the shape, then launches the decode (split-K) or the one-split prefill grid.
template <class Pairs>
void launch_attention(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri, const char *name) {
    const uint32_t hd = p.head_dim;
    const uint32_t pairs = hd / 2, groups = pairs <= (uint32_t)kThreads ? kThreads / pairs : 1;
    const size_t smem = (hd + kChunk + 32 + groups * hd) * sizeof(float) + (2 * chunk_keys(hd) + 2) * hd * sizeof(__half);
    if (!allow_dynamic_smem(attention_kernel<Pairs>, smem))  // up to ~77 KB (head_dim 1024)
        throw UnsupportedError(std::string(name) + " on CUDA: head_dim " + std::to_string(hd) +
                               " needs more shared memory than this GPU has");

    // Decode: enough (head, split) blocks to fill the chip twice, within the workspace; on Hopper
    // a head's splits merge inside a cluster when they fit one (combine_splits_cluster).
    const uint32_t min_keys = p.n_heads * hd <= kSmallAttentionQDim ? chunk_keys(hd) : kMinKeysPerSplit;
    uint32_t n_splits = 1;
    bool in_cluster = false;
    if (p.rows == 1) {
        n_splits = std::min<uint32_t>(kMaxSplits, ceil_div_u(2u * a.workspace->sm_count, p.n_heads));
        const uint32_t cluster = std::min(n_splits, kMaxClusterSplits);
        if (a.workspace->clusters && cluster > 1 && cluster_wanted(min_keys, smem) &&
            cluster_fits(attention_kernel<Pairs>, p.n_heads, cluster, smem)) {
            n_splits = cluster;
            in_cluster = true;
        }
        // The workspace's last 128 floats and last counter belong to argmax_f32.
        while (!in_cluster && n_splits > 1 && (size_t)p.n_heads * n_splits * (hd + 2) > a.workspace->floats - 128)
            --n_splits;
    }
    const auto *q = reinterpret_cast<const float *>(a.buffers[0]);
    auto *k = reinterpret_cast<__half *>(a.buffers[1]);
    auto *v = reinterpret_cast<__half *>(a.buffers[2]);
    auto *out = reinterpret_cast<float *>(a.buffers[3]);
    if (!in_cluster && n_splits > 1 && p.n_heads >= a.workspace->n_counters) n_splits = 1;
    dim3 grid(p.n_heads, p.rows, n_splits);
    launch_pdl_clustered(attention_kernel<Pairs>, grid, kThreads, smem, dim3(1, 1, in_cluster ? n_splits : 1), a, q,
                         k, v, out, a.workspace->data, p, ri, a.patch, n_splits, a.workspace->counters, min_keys,
                         in_cluster);
    check_launch(name);
}

void check_shape(const AttentionParams &p, const char *name) {
    if (p.head_dim % 8 != 0 || p.head_dim > 2u * kThreads * kMaxPairsPerThread || p.n_kv_heads == 0 ||
        p.n_heads % p.n_kv_heads)
        throw UnsupportedError(std::string(name) +
                               " on CUDA needs head_dim % 8 == 0, head_dim <= 1024 and whole GQA groups");
}

template <class Pairs>
void launch_rope_attention(const LaunchArgs &a, const char *name) {
    const RopeAttentionParams &rp = params_of<RopeAttentionParams>(a);
    check_shape(rp.attention, name);
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
    launch_attention<Pairs>(a, rp.attention, ri, name);
}

}  // namespace

void launch_attention_f16kv(const LaunchArgs &a) {
    const AttentionParams &p = params_of<AttentionParams>(a);
    check_shape(p, "attention_f16kv");
    if (launch_attention_prefill(a)) {  // several rows: the tensor-core kernel (cuda/attention_prefill.cu)
        check_launch("attention_f16kv");
        return;
    }
    launch_attention<NoRope>(a, p, RopeInputs{}, "attention_f16kv");
}

void launch_attention_rope_interleaved_f16kv(const LaunchArgs &a) {
    launch_rope_attention<Interleaved>(a, "attention_rope_interleaved_f16kv");
}
void launch_attention_rope_neox_f16kv(const LaunchArgs &a) { launch_rope_attention<NeoX>(a, "attention_rope_neox_f16kv"); }

}  // namespace akunu::cuda
