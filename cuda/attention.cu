// Causal attention of several query rows over the head-major F16 KV cache
// (cache[kv_head][position][head_dim]), optionally limited to a sliding window of keys and with
// soft-capped scores (AttentionParams): the fallback of prefill where the tensor-core kernel of
// cuda/attention_prefill.cu does not apply (other head sizes). One-row commands (decode) go to
// cuda/attention_decode.cu. The Q8_0 cache's commands (attention_q8kv) go to the tensor-core
// kernels only.
//
// One block per (head, query row). A block walks its keys in chunks (up to 128 keys, at most 32 KB
// each of K and V) with an online softmax: the chunk's K and V rows are copied to shared memory
// (cp.async, K and V as two groups), groups of lanes score its keys as soon as K has landed (q in
// shared memory, each key row read 16 bytes per lane by several lanes at once), then the threads
// accumulate p_j * V_j, each owning a pair of output dims.
#include <string>

#include "cuda/attention_decode.h"
#include "cuda/attention_prefill.h"
#include "cuda/common.cuh"

namespace akunu::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kChunk = kThreads;          // most keys per chunk: one score per thread
constexpr uint32_t kStageHalves = 16384;  // K and V staged per chunk: 32 KB each

__host__ __device__ inline uint32_t chunk_keys(uint32_t head_dim) {
    return kStageHalves / head_dim < (uint32_t)kChunk ? kStageHalves / head_dim : (uint32_t)kChunk;
}
constexpr int kMaxPairsPerThread = 4;  // head_dim <= 1024 (checked at load)

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

__global__ void __launch_bounds__(kThreads)
    attention_rows_kernel(const float *__restrict__ q_all, const __half *__restrict__ k_cache,
                          const __half *__restrict__ v_cache, float *__restrict__ out,
                          const __grid_constant__ AttentionParams p, const __grid_constant__ PatchContext pc) {
    extern __shared__ float smem[];
    const uint32_t hd = p.head_dim;
    float *q_s = smem;            // [hd]        q * scale
    float *scores = q_s + hd;     // [kChunk]    softmax numerators of the chunk
    float *red = scores + kChunk;  // [32]        reductions
    float *acc_s = red + 32;      // [groups*hd] per-group accumulators, merged at the end
    const uint32_t chunk = chunk_keys(hd);
    // [chunk*hd] halves each: the chunk's K and V rows (16-byte aligned: every count above is a
    // multiple of 4)
    __half *k_s = reinterpret_cast<__half *>(acc_s + VMap(hd).groups * hd);
    __half *v_s = k_s + chunk * hd;

    pdl_enter();
    const uint32_t h = blockIdx.x, r = blockIdx.y, tid = threadIdx.x;
    const uint32_t position = resolve_position(p.position, pc);
    const uint32_t kv_len = resolve_kv_len(p.kv_len, pc);
    const uint32_t n_ctx = min(position + r + 1, kv_len);  // causal: row r sees 0..position + r
    // Sliding window: only the last `window` of those keys.
    const uint32_t k_begin = (p.window != 0 && n_ctx > p.window) ? n_ctx - p.window : 0, k_end = n_ctx;

    const uint32_t kv_head = h / (p.n_heads / p.n_kv_heads);
    const size_t head_base = (size_t)kv_head * p.max_seq * hd;
    const __half *K = k_cache + head_base, *V = v_cache + head_base;
    // A chunk's rows into k_s / v_s (two cp.async groups: K, then V).
    const auto stage_chunk = [&](uint32_t c0, uint32_t n) {
        for (uint32_t i = tid; i < n * (hd / 8); i += kThreads) {
            const uint32_t j = i / (hd / 8), d = 8 * (i % (hd / 8));
            cp_async16(k_s + j * hd + d, K + (size_t)kv_cache_row(c0 + j, p.max_seq) * hd + d, 16);
        }
        cp_async_commit();
        for (uint32_t i = tid; i < n * (hd / 8); i += kThreads) {
            const uint32_t j = i / (hd / 8), d = 8 * (i % (hd / 8));
            cp_async16(v_s + j * hd + d, V + (size_t)kv_cache_row(c0 + j, p.max_seq) * hd + d, 16);
        }
        cp_async_commit();
    };

    const float *q = q_all + (size_t)r * p.q_stride + (size_t)h * hd;
    for (uint32_t d = tid; d < hd; d += kThreads) q_s[d] = q[d] * p.scale;
    __syncthreads();

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
        stage_chunk(c0, n);
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
    float *o = out + (size_t)r * p.out_stride + (size_t)h * hd;
    const float inv = 1.0f / l;
    for (uint32_t d = tid; d < hd; d += kThreads) o[d] = group_total(d) * inv;
}

}  // namespace

void launch_attention_f16kv(const LaunchArgs &a) {
    const AttentionParams &p = params_of<AttentionParams>(a);
    check_attention_shape(p, "attention_f16kv");
    if (p.rows == 1) {
        launch_attention_decode(a, p);
    } else if (!launch_attention_prefill(a, KVCacheDType::F16)) {  // the tensor-core kernel (cuda/attention_prefill.cu) first
        const uint32_t hd = p.head_dim;
        const uint32_t pairs = hd / 2, groups = pairs <= (uint32_t)kThreads ? kThreads / pairs : 1;
        const size_t smem = (hd + kChunk + 32 + groups * hd) * sizeof(float) + 2 * chunk_keys(hd) * hd * sizeof(__half);
        if (!allow_dynamic_smem(attention_rows_kernel, smem))  // up to ~77 KB (head_dim 1024)
            throw UnsupportedError("attention_f16kv on CUDA: head_dim " + std::to_string(hd) +
                                   " needs more shared memory than this GPU has");
        launch_pdl(attention_rows_kernel, dim3(p.n_heads, p.rows), kThreads, smem, a,
                   reinterpret_cast<const float *>(a.buffers[0]), reinterpret_cast<const __half *>(a.buffers[1]),
                   reinterpret_cast<const __half *>(a.buffers[2]), reinterpret_cast<float *>(a.buffers[3]), p, a.patch);
    }
    check_launch("attention_f16kv");
}

// Over the Q8_0 cache both the decode and the prefill run on the tensor cores (cuda/kv_cache_q8.cuh
// dequantizes their staged chunks); the shapes those kernels cover are the only ones the loader
// accepts (ChipConfig::q8_kv_head_dims, q8_kv_max_group).
void launch_attention_q8kv(const LaunchArgs &a) {
    const AttentionParams &p = params_of<AttentionParams>(a);
    check_attention_shape(p, "attention_q8kv");
    if (p.rows == 1)
        launch_attention_decode_q8(a, p);
    else if (!launch_attention_prefill(a, KVCacheDType::Q8_0))
        throw UnsupportedError("attention_q8kv on CUDA needs head_dim 64 or 128, got " + std::to_string(p.head_dim));
    check_launch("attention_q8kv");
}

}  // namespace akunu::cuda
