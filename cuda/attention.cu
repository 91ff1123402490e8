// Causal attention over the head-major F16 KV cache (cache[kv_head][position][head_dim]),
// optionally limited to a sliding window of keys and with soft-capped scores (AttentionParams).
//
// One block per (head, query row, split). A block walks its keys in chunks (up to 128 keys, at
// most 32 KB of V) with an online softmax: the chunk's V rows are copied to shared memory
// (cp.async) while groups of lanes score its keys (q in shared memory, each key row read 16 bytes
// per lane by several lanes at once), then the threads accumulate p_j * V_j out of shared memory,
// each owning a pair of output dims. Every global load of a chunk is thus issued at its start
// instead of one dependent round trip per key. Decode (one query row) splits the keys across blocks
// (flash-decoding: kv_len can be thousands while there are only n_heads rows of work); the last
// split of a head to finish (an atomic count per head) merges the partial (max, sum, acc) triples,
// so decode attention is one kernel. Prefill runs one split per (head, row) where the tensor-core
// kernel of cuda/attention_prefill.cu does not apply (other head sizes).
#include "cuda/attention_prefill.h"
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kChunk = kThreads;     // most keys per chunk: one score per thread
constexpr uint32_t kVStageHalves = 16384;  // V staged per chunk: 32 KB

__host__ __device__ inline uint32_t chunk_keys(uint32_t head_dim) {
    return kVStageHalves / head_dim < (uint32_t)kChunk ? kVStageHalves / head_dim : (uint32_t)kChunk;
}
constexpr int kMaxPairsPerThread = 4;  // head_dim <= 1024 (checked at load)
constexpr int kMaxSplits = 32;
constexpr uint32_t kMinKeysPerSplit = 16;  // H100 tg128: 16 beat 64 / 256 / no split by 8-18 %

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

// Merges the splits of one head: out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M). Run by
// the head's last block; the other splits' partials are read past L1 (__ldcg).
__device__ void combine_splits(const float *partial, float *__restrict__ out, uint32_t h, uint32_t hd,
                               uint32_t n_splits, uint32_t active) {
    const float *base = partial + (size_t)h * n_splits * (hd + 2);
    float M = -INFINITY;
    for (uint32_t s = 0; s < active; ++s)
        if (__ldcg(base + s * (hd + 2) + 1) > 0.f) M = fmaxf(M, __ldcg(base + s * (hd + 2)));
    float L = 0.f;
    for (uint32_t s = 0; s < active; ++s) {
        const float l = __ldcg(base + s * (hd + 2) + 1);
        if (l > 0.f) L += l * expf(__ldcg(base + s * (hd + 2)) - M);
    }
    const float inv = 1.0f / L;
    for (uint32_t d = threadIdx.x; d < hd; d += kThreads) {
        float t = 0.f;
        for (uint32_t s = 0; s < active; ++s) {
            const float *ps = base + s * (hd + 2);
            const float l = __ldcg(ps + 1);
            if (l > 0.f) t += __ldcg(ps + 2 + d) * expf(__ldcg(ps) - M);
        }
        out[(size_t)h * hd + d] = t * inv;
    }
}

__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float *__restrict__ q_all, const __half *__restrict__ k_cache,
                     const __half *__restrict__ v_cache, float *__restrict__ out, float *__restrict__ partial,
                     AttentionParams p, PatchContext pc, uint32_t n_splits, unsigned *__restrict__ done_splits) {
    pdl_enter();
    extern __shared__ float smem[];
    const uint32_t hd = p.head_dim;
    float *q_s = smem;               // [hd]        q * scale
    float *scores = q_s + hd;        // [kChunk]    softmax numerators of the chunk
    float *red = scores + kChunk;    // [32]        reductions
    float *acc_s = red + 32;         // [groups*hd] per-group accumulators, merged at the end
    const uint32_t chunk = chunk_keys(hd);
    // [chunk*hd] halves: the chunk's V rows (16-byte aligned: every count above is a multiple of 4)
    __half *v_s = reinterpret_cast<__half *>(acc_s + VMap(hd).groups * hd);

    const uint32_t h = blockIdx.x, r = blockIdx.y, split = blockIdx.z, tid = threadIdx.x;
    const uint32_t position = resolve_position(p.position, pc);
    const uint32_t kv_len = resolve_kv_len(p.kv_len, pc);
    const uint32_t n_ctx = min(position + r + 1, kv_len);  // causal: row r sees 0..position + r
    // Sliding window: only the last `window` of those keys.
    const uint32_t first = (p.window != 0 && n_ctx > p.window) ? n_ctx - p.window : 0;
    const uint32_t n_keys = n_ctx - first;
    // The grid is fixed when a graph is captured, the context is not: use only as many splits as
    // give each at least kMinKeysPerSplit keys, so very short contexts skip the partials and the
    // merge, while longer ones still spread the serial V walk over many blocks.
    const uint32_t active = min(n_splits, max(1u, (n_keys + kMinKeysPerSplit - 1) / kMinKeysPerSplit));
    if (split >= active) return;  // block-uniform: before any barrier
    const uint32_t per_split = (n_keys + active - 1) / active;
    const uint32_t k_begin = first + min(split * per_split, n_keys), k_end = min(k_begin + per_split, n_ctx);

    const size_t head_base = (size_t)(h / (p.n_heads / p.n_kv_heads)) * p.max_seq * hd;
    const __half *K = k_cache + head_base, *V = v_cache + head_base;
    const float *q = q_all + (size_t)r * p.q_stride + (size_t)h * hd;
    for (uint32_t d = tid; d < hd; d += kThreads) q_s[d] = q[d] * p.scale;
    __syncthreads();

    const VMap vm(hd);
    float2 acc[kMaxPairsPerThread];
#pragma unroll
    for (int i = 0; i < kMaxPairsPerThread; ++i) acc[i] = make_float2(0.f, 0.f);
    float m = -INFINITY, l = 0.f;

    // Scoring: `lanes` adjacent lanes per key (a power of two, <= 32), each loading 16 bytes of
    // the key row at a time, so a key's loads are issued in parallel rather than one after another.
    uint32_t lanes = 1;
    while (lanes * 2 <= 32 && lanes * 2 <= hd / 8) lanes *= 2;
    const uint32_t keys_per_pass = kThreads / lanes, slot = tid / lanes, sub = tid % lanes;

    for (uint32_t c0 = k_begin; c0 < k_end; c0 += chunk) {
        const uint32_t n = min(chunk, k_end - c0);
        for (uint32_t i = tid; i < n * (hd / 8); i += kThreads) {
            const uint32_t j = i / (hd / 8), d = 8 * (i % (hd / 8));
            cp_async16(v_s + j * hd + d, V + (size_t)(c0 + j) * hd + d, 16);
        }
        cp_async_commit();
#pragma unroll 4
        for (uint32_t j0 = 0; j0 < n; j0 += keys_per_pass) {
            const uint32_t j = j0 + slot;
            float dot = 0.f;
            if (j < n) {
                const uint4 *kr = reinterpret_cast<const uint4 *>(K + (size_t)(c0 + j) * hd);
                for (uint32_t d8 = sub; d8 < hd / 8; d8 += lanes) {
                    const uint4 v = __ldg(kr + d8);
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
    if (active == 1) {
        float *o = out + (size_t)r * p.out_stride + (size_t)h * hd;
        const float inv = 1.0f / l;
        for (uint32_t d = tid; d < hd; d += kThreads) {
            float t = 0.f;
            for (uint32_t g = 0; g < vm.groups; ++g) t += acc_s[g * hd + d];
            o[d] = t * inv;
        }
    } else {
        float *part = partial + ((size_t)h * n_splits + split) * (hd + 2);
        if (tid == 0) {
            part[0] = m;
            part[1] = l;  // 0 for an empty split
        }
        for (uint32_t d = tid; d < hd; d += kThreads) {
            float t = 0.f;
            for (uint32_t g = 0; g < vm.groups; ++g) t += acc_s[g * hd + d];
            part[2 + d] = t;
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
}

}  // namespace

void launch_attention_f16kv(const LaunchArgs &a) {
    const AttentionParams &p = params_of<AttentionParams>(a);
    const uint32_t hd = p.head_dim;
    if (hd % 8 != 0 || hd > 2u * kThreads * kMaxPairsPerThread || p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads)
        throw UnsupportedError("attention_f16kv on CUDA needs head_dim % 8 == 0, head_dim <= 1024 and whole GQA groups");
    if (launch_attention_prefill(a)) {  // several rows: the tensor-core kernel (cuda/attention_prefill.cu)
        check_launch("attention_f16kv");
        return;
    }
    const uint32_t pairs = hd / 2, groups = pairs <= (uint32_t)kThreads ? kThreads / pairs : 1;
    const size_t smem = (hd + kChunk + 32 + groups * hd) * sizeof(float) + chunk_keys(hd) * hd * sizeof(__half);

    // Decode: enough (head, split) blocks to fill the chip twice, within the workspace.
    uint32_t n_splits = 1;
    if (p.rows == 1) {
        n_splits = std::min<uint32_t>(kMaxSplits, ceil_div_u(2u * a.workspace->sm_count, p.n_heads));
        // The workspace's last 128 floats and last counter belong to argmax_f32.
        while (n_splits > 1 && (size_t)p.n_heads * n_splits * (hd + 2) > a.workspace->floats - 128) --n_splits;
    }
    const auto *q = reinterpret_cast<const float *>(a.buffers[0]);
    const auto *k = reinterpret_cast<const __half *>(a.buffers[1]);
    const auto *v = reinterpret_cast<const __half *>(a.buffers[2]);
    auto *out = reinterpret_cast<float *>(a.buffers[3]);
    if (n_splits > 1 && p.n_heads >= a.workspace->n_counters) n_splits = 1;
    dim3 grid(p.n_heads, p.rows, n_splits);
    launch_pdl(attention_kernel, grid, kThreads, smem, a, q, k, v, out, a.workspace->data, p, a.patch, n_splits,
               a.workspace->counters);
    check_launch("attention_f16kv");
}

}  // namespace akunu::cuda
