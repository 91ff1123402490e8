// Causal attention over the KV cache (the CPU's src/backend/cpu/attention.cpp, the CUDA
// cuda/attention*.cu), and its decode form that also does the QK-norm + RoPE + KV-write work.
//
// One threadgroup per (query head, query row). A lane holds the dims lane + 32 i of q, of each key
// and value it reads and of its accumulator (kv_cache.h), so a score is one simd_sum. Each SIMD
// group takes every n_simd-th tile of kKeyTile keys and runs its own online softmax over them
// (running max m, sum l of e^(s - m), accumulator sum e^(s - m) V): one rescale per tile, no
// barrier in the loop. The SIMD groups' states are merged once at the end through threadgroup
// memory, which is sized by head_dim and the SIMD groups, never by the context.
//
// Threads per group: a multiple of 32, at most 32 * kAttentionMaxSimdGroups; head_dim at most
// kKVMaxHeadDim (256).
#include "common.h"
#include "kv_cache.h"
#include "rope_pairs.h"

enum {
    kAttentionMaxSimdGroups = 4,
    kKeyTile = 8,  // keys a SIMD group scores before it rescales its state
    // Threadgroup memory (floats): the SIMD groups' (m, l) pairs and accumulators for the merge,
    // then, for the decode form, the normalized q and k heads and the rotated q.
    kMergeMLAt = 0,
    kMergeAccAt = kMergeMLAt + 2 * kAttentionMaxSimdGroups,
    kAttentionScratch = kMergeAccAt + kAttentionMaxSimdGroups * kKVMaxHeadDim,
    kStashQAt = kAttentionScratch,
    kStashKAt = kStashQAt + kKVMaxHeadDim,
    kQRotatedAt = kStashKAt + kKVMaxHeadDim,
    kAttentionRopeScratch = kQRotatedAt + kKVMaxHeadDim,
};

// Lower than any score (softcapped or not), yet finite: e^(AKUNU_NO_SCORE - m) is 0 without an
// infinity, which fast math does not promise to handle.
#define AKUNU_NO_SCORE (-FLT_MAX)

namespace {

// A SIMD group's softmax state over the keys it has seen; acc holds the lane's dims.
struct OnlineSoftmax {
    float m;
    float l;
    float acc[kKVMaxDimsPerLane];

    void start() {
        m = AKUNU_NO_SCORE;
        l = 0.0f;
        for (uint i = 0; i < kKVMaxDimsPerLane; ++i) acc[i] = 0.0f;
    }
    // Makes m the maximum of m and `score`, rescaling what was summed under the old m.
    void raise_max(float score) {
        const float new_m = max(m, score);
        const float correction = exp(m - new_m);  // 0 while nothing was summed (m = AKUNU_NO_SCORE)
        l *= correction;
        for (uint i = 0; i < kKVMaxDimsPerLane; ++i) acc[i] *= correction;
        m = new_m;
    }
};

inline float capped_score(float s, float softcap) {
    return softcap > 0.0f ? softcap * precise::tanh(s * (1.0f / softcap)) : s;
}

// Scores n_keys cached keys from cache row first_row on (wrapping at max_seq: a window's ring)
// into each SIMD group's state. q holds the lane's dims, already multiplied by the scale.
template <typename Head>
inline void attend_cached_keys(thread OnlineSoftmax &st, thread const float *q, Head k_head, Head v_head,
                               uint first_row, uint n_keys, uint max_seq, uint head_dim, float softcap, uint lane,
                               uint simd_index, uint n_simd) {
    const uint dims = kv_dims_per_lane(head_dim);
    for (uint t0 = simd_index * kKeyTile; t0 < n_keys; t0 += n_simd * kKeyTile) {
        float s[kKeyTile];
        uint rows[kKeyTile];
        float tile_max = AKUNU_NO_SCORE;
        for (uint k = 0; k < kKeyTile; ++k) {
            s[k] = AKUNU_NO_SCORE;
            rows[k] = 0;
            if (t0 + k >= n_keys) continue;  // the same for the whole SIMD group
            uint row = first_row + t0 + k;   // < 2 max_seq: a head's keys fit its rows
            if (row >= max_seq) row -= max_seq;
            rows[k] = row;
            float partial = 0.0f;
            for (uint i = 0; i < dims; ++i) {
                const uint d = lane + AKUNU_SIMD_WIDTH * i;
                if (d < head_dim) partial += q[i] * k_head.element(row, d);
            }
            s[k] = capped_score(simd_sum(partial), softcap);
            tile_max = max(tile_max, s[k]);
        }
        st.raise_max(tile_max);
        for (uint k = 0; k < kKeyTile; ++k) {
            if (t0 + k >= n_keys) continue;
            const float w = exp(s[k] - st.m);
            st.l += w;
            for (uint i = 0; i < dims; ++i) {
                const uint d = lane + AKUNU_SIMD_WIDTH * i;
                if (d < head_dim) st.acc[i] += w * v_head.element(rows[k], d);
            }
        }
    }
}

// Merges the SIMD groups' states and writes the head's output: out[d] = sum_s acc_s[d] e^(m_s - M)
// / sum_s l_s e^(m_s - M). scratch: the kernel's threadgroup memory (its merge areas).
template <typename Shared>
inline void merge_and_store(thread const OnlineSoftmax &st, device float *out, uint head_dim, Shared scratch,
                            uint tid, uint n_threads, uint lane, uint simd_index) {
    const uint n_simd = n_threads / AKUNU_SIMD_WIDTH;
    Shared merge_ml = scratch + kMergeMLAt;    // [simd group][m, l]
    Shared merge_acc = scratch + kMergeAccAt;  // [simd group][kKVMaxHeadDim]
    if (lane == 0) {
        merge_ml[2 * simd_index] = st.m;
        merge_ml[2 * simd_index + 1] = st.l;
    }
    for (uint i = 0; i < kv_dims_per_lane(head_dim); ++i) {
        const uint d = lane + AKUNU_SIMD_WIDTH * i;
        if (d < head_dim) merge_acc[simd_index * kKVMaxHeadDim + d] = st.acc[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float M = AKUNU_NO_SCORE;
    for (uint s = 0; s < n_simd; ++s) M = max(M, merge_ml[2 * s]);
    float weight[kAttentionMaxSimdGroups];
    float L = 0.0f;
    for (uint s = 0; s < n_simd; ++s) {
        const float l_s = merge_ml[2 * s + 1];
        weight[s] = l_s > 0.0f ? exp(merge_ml[2 * s] - M) : 0.0f;  // a SIMD group without keys adds nothing
        L += l_s * weight[s];
    }
    const float inv_L = 1.0f / L;
    for (uint d = tid; d < head_dim; d += n_threads) {
        float o = 0.0f;
        for (uint s = 0; s < n_simd; ++s) o += merge_acc[s * kKVMaxHeadDim + d] * weight[s];
        out[d] = o * inv_L;
    }
}

// The keys query row r sees: positions first..n_ctx - 1 (causal; the last `window` of them with a
// sliding window).
struct KeyRange {
    uint first;
    uint n_ctx;
};
inline KeyRange visible_keys(constant AttentionParams &p, uint r) {
    KeyRange k;
    k.n_ctx = min(p.position + r + 1, p.kv_len);
    k.first = (p.window != 0 && k.n_ctx > p.window) ? k.n_ctx - p.window : 0;
    return k;
}

// Unit (head h, query row r) of the attention command.
template <typename Cache, typename Shared>
inline void attention_unit(device const float *qkv, device const uchar *k_cache, device const uchar *v_cache,
                           device float *out, constant AttentionParams &p, Shared scratch, uint h, uint r, uint tid,
                           uint n_threads, uint lane, uint simd_index) {
    const uint hd = p.head_dim;
    const KeyRange keys = visible_keys(p, r);
    device const float *q_src = qkv + r * p.q_stride + h * hd;
    float q[kKVMaxDimsPerLane];
    for (uint i = 0; i < kv_dims_per_lane(hd); ++i) {
        const uint d = lane + AKUNU_SIMD_WIDTH * i;
        q[i] = d < hd ? q_src[d] * p.scale : 0.0f;
    }
    const KVGeometry g = {p.n_kv_heads, p.max_seq, hd};
    const uint kv_head = h / (p.n_heads / p.n_kv_heads);
    OnlineSoftmax st;
    st.start();
    attend_cached_keys(st, q, Cache::head(k_cache, g, kv_head), Cache::head(v_cache, g, kv_head),
                       keys.first % p.max_seq, keys.n_ctx - keys.first, p.max_seq, hd, p.softcap, lane, simd_index,
                       n_threads / AKUNU_SIMD_WIDTH);
    merge_and_store(st, out + r * p.out_stride + h * hd, hd, scratch, tid, n_threads, lane, simd_index);
}

// One SIMD group copies a head from qkv into `stash` (threadgroup memory), RMS-normalized by
// `norm_w` when qk_norm (HeadNormParams' semantics: x / sqrt(mean(x^2) + eps) * w).
template <typename Shared>
inline void stash_head(device const float *src, device const float *norm_w, bool qk_norm, float eps, uint head_dim,
                       Shared stash, uint lane) {
    float inv = 1.0f;
    if (qk_norm) {
        float sum = 0.0f;
        for (uint d = lane; d < head_dim; d += AKUNU_SIMD_WIDTH) sum += src[d] * src[d];
        inv = 1.0f / sqrt(simd_sum(sum) / float(head_dim) + eps);
    }
    for (uint d = lane; d < head_dim; d += AKUNU_SIMD_WIDTH) stash[d] = qk_norm ? src[d] * inv * norm_w[d] : src[d];
}

// The decode attention that does the RoPE + KV-write command's work itself (RopeAttentionParams):
// query head h, one query row at `position`. Its query and the token's own key come from qkv
// (QK-norm, then RoPE, and for the Q8_0 cache the keys' Hadamard basis, as the separate commands
// do); qkv stays as it was. The token's key and
// value are rounded to what the cache holds, appended to the cache by the group of the first query
// head of their KV head, and attended from registers: the groups of one dispatch may run at once,
// so no group reads the cache row another is writing; the older rows it reads no group writes.
template <typename Pairs, typename Cache, typename Shared>
inline void attention_rope_unit(device const float *qkv, device uchar *k_cache, device uchar *v_cache,
                                device float *out, device const float *inv_freq, device const float *q_norm_w,
                                device const float *k_norm_w, constant RopeAttentionParams &rp, Shared scratch, uint h,
                                uint tid, uint n_threads, uint lane, uint simd_index) {
    constant AttentionParams &p = rp.attention;
    const uint hd = p.head_dim, dims = kv_dims_per_lane(hd);
    const uint n_simd = n_threads / AKUNU_SIMD_WIDTH;
    const uint group_heads = p.n_heads / p.n_kv_heads, kv_head = h / group_heads;
    const uint position = p.position;
    const KeyRange keys = visible_keys(p, 0);
    const bool has_own = keys.n_ctx == position + 1;  // the token's key is the last one it sees
    device const float *q_src = qkv + h * hd;
    device const float *k_src = qkv + p.n_heads * hd + kv_head * hd;
    device const float *v_src = qkv + (p.n_heads + p.n_kv_heads) * hd + kv_head * hd;
    const uint own_simd = n_simd > 1 ? 1 : 0;  // builds the token's K and V while SIMD group 0 builds q
    Shared stash_q = scratch + kStashQAt, stash_k = scratch + kStashKAt, q_rotated = scratch + kQRotatedAt;

    // RoPE pairs dims that other lanes hold: the normalized heads go through threadgroup memory.
    if (simd_index == 0) stash_head(q_src, q_norm_w, rp.qk_norm != 0, rp.norm_eps, hd, stash_q, lane);
    if (simd_index == own_simd) stash_head(k_src, k_norm_w, rp.qk_norm != 0, rp.norm_eps, hd, stash_k, lane);
    threadgroup_barrier(mem_flags::mem_threadgroup);

    for (uint d = tid; d < hd; d += n_threads)
        q_rotated[d] = rotated_dim<Pairs>(stash_q, d, rp.rope_dim, position, inv_freq) * p.scale;
    const KVGeometry g = {p.n_kv_heads, p.max_seq, hd};
    float own_k[kKVMaxDimsPerLane], own_v[kKVMaxDimsPerLane];
    if (simd_index == own_simd) {
        for (uint i = 0; i < dims; ++i) {
            const uint d = lane + AKUNU_SIMD_WIDTH * i;
            own_k[i] = d < hd ? rotated_dim<Pairs>(stash_k, d, rp.rope_dim, position, inv_freq) : 0.0f;
            own_v[i] = d < hd ? v_src[d] : 0.0f;
        }
        Cache::to_key_basis(own_k, hd, lane);
        const bool appends = h % group_heads == 0;
        const uint own_row = position % p.max_seq;
        Cache::store_row(own_k, k_cache, g, kv_head, own_row, lane, appends);
        Cache::store_row(own_v, v_cache, g, kv_head, own_row, lane, appends);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    float q[kKVMaxDimsPerLane];
    for (uint i = 0; i < dims; ++i) {
        const uint d = lane + AKUNU_SIMD_WIDTH * i;
        q[i] = d < hd ? q_rotated[d] : 0.0f;
    }
    Cache::to_query_basis(q, hd, lane);
    OnlineSoftmax st;
    st.start();
    const uint n_cached = keys.n_ctx - keys.first - (has_own ? 1 : 0);
    attend_cached_keys(st, q, Cache::head(k_cache, g, kv_head), Cache::head(v_cache, g, kv_head),
                       keys.first % p.max_seq, n_cached, p.max_seq, hd, p.softcap, lane, simd_index, n_simd);
    if (has_own && simd_index == own_simd) {
        float partial = 0.0f;
        for (uint i = 0; i < dims; ++i) partial += q[i] * own_k[i];  // padding dims are 0 in both
        const float s = capped_score(simd_sum(partial), p.softcap);
        st.raise_max(s);
        const float w = exp(s - st.m);
        st.l += w;
        for (uint i = 0; i < dims; ++i) st.acc[i] += w * own_v[i];
    }
    merge_and_store(st, out + h * hd, hd, scratch, tid, n_threads, lane, simd_index);
}

}  // namespace

// buffers: 0 q (inside qkv) [rows, q_stride], 1 k_cache, 2 v_cache, 3 out [rows, out_stride];
// group = (query head, query row). F16 cache:
kernel void attention_f16kv(device const float *qkv [[buffer(0)]], device const uchar *k_cache [[buffer(1)]],
                            device const uchar *v_cache [[buffer(2)]], device float *out [[buffer(3)]],
                            constant AttentionParams &p [[buffer(4)]], AKUNU_THREAD_ARGS) {
    threadgroup float scratch[kAttentionScratch];
    attention_unit<KVCacheF16>(qkv, k_cache, v_cache, out, p, scratch, group.x, group.y, thread_position.x,
                               group_size.x, simd_lane, simd_index);
}

// The same over the Q8_0 cache.
kernel void attention_q8kv(device const float *qkv [[buffer(0)]], device const uchar *k_cache [[buffer(1)]],
                           device const uchar *v_cache [[buffer(2)]], device float *out [[buffer(3)]],
                           constant AttentionParams &p [[buffer(4)]], AKUNU_THREAD_ARGS) {
    threadgroup float scratch[kAttentionScratch];
    attention_unit<KVCacheQ8>(qkv, k_cache, v_cache, out, p, scratch, group.x, group.y, thread_position.x,
                              group_size.x, simd_lane, simd_index);
}

// Decode (one query row): buffers 0 qkv [1, q_stride] (Q, K, V; left as it was), 1 k_cache,
// 2 v_cache, 3 out [1, out_stride], 4 inv_freq F32 [rope_dim / 2], then when qk_norm 5 q weight
// F32 [head_dim], 6 k weight; group = query head. Interleaved pairs, F16 cache:
kernel void attention_rope_interleaved_f16kv(device const float *qkv [[buffer(0)]], device uchar *k_cache [[buffer(1)]],
                                             device uchar *v_cache [[buffer(2)]], device float *out [[buffer(3)]],
                                             device const float *inv_freq [[buffer(4)]],
                                             device const float *q_norm_w [[buffer(5)]],
                                             device const float *k_norm_w [[buffer(6)]],
                                             constant RopeAttentionParams &rp [[buffer(7)]], AKUNU_THREAD_ARGS) {
    threadgroup float scratch[kAttentionRopeScratch];
    attention_rope_unit<RopeInterleaved, KVCacheF16>(qkv, k_cache, v_cache, out, inv_freq, q_norm_w, k_norm_w, rp,
                                                     scratch, group.x, thread_position.x, group_size.x, simd_lane,
                                                     simd_index);
}

// NeoX pairs, F16 cache.
kernel void attention_rope_neox_f16kv(device const float *qkv [[buffer(0)]], device uchar *k_cache [[buffer(1)]],
                                      device uchar *v_cache [[buffer(2)]], device float *out [[buffer(3)]],
                                      device const float *inv_freq [[buffer(4)]],
                                      device const float *q_norm_w [[buffer(5)]],
                                      device const float *k_norm_w [[buffer(6)]],
                                      constant RopeAttentionParams &rp [[buffer(7)]], AKUNU_THREAD_ARGS) {
    threadgroup float scratch[kAttentionRopeScratch];
    attention_rope_unit<RopeNeoX, KVCacheF16>(qkv, k_cache, v_cache, out, inv_freq, q_norm_w, k_norm_w, rp, scratch,
                                              group.x, thread_position.x, group_size.x, simd_lane, simd_index);
}

// Interleaved pairs, Q8_0 cache.
kernel void attention_rope_interleaved_q8kv(device const float *qkv [[buffer(0)]], device uchar *k_cache [[buffer(1)]],
                                            device uchar *v_cache [[buffer(2)]], device float *out [[buffer(3)]],
                                            device const float *inv_freq [[buffer(4)]],
                                            device const float *q_norm_w [[buffer(5)]],
                                            device const float *k_norm_w [[buffer(6)]],
                                            constant RopeAttentionParams &rp [[buffer(7)]], AKUNU_THREAD_ARGS) {
    threadgroup float scratch[kAttentionRopeScratch];
    attention_rope_unit<RopeInterleaved, KVCacheQ8>(qkv, k_cache, v_cache, out, inv_freq, q_norm_w, k_norm_w, rp,
                                                    scratch, group.x, thread_position.x, group_size.x, simd_lane,
                                                    simd_index);
}

// NeoX pairs, Q8_0 cache.
kernel void attention_rope_neox_q8kv(device const float *qkv [[buffer(0)]], device uchar *k_cache [[buffer(1)]],
                                     device uchar *v_cache [[buffer(2)]], device float *out [[buffer(3)]],
                                     device const float *inv_freq [[buffer(4)]],
                                     device const float *q_norm_w [[buffer(5)]],
                                     device const float *k_norm_w [[buffer(6)]],
                                     constant RopeAttentionParams &rp [[buffer(7)]], AKUNU_THREAD_ARGS) {
    threadgroup float scratch[kAttentionRopeScratch];
    attention_rope_unit<RopeNeoX, KVCacheQ8>(qkv, k_cache, v_cache, out, inv_freq, q_norm_w, k_norm_w, rp, scratch,
                                             group.x, thread_position.x, group_size.x, simd_lane, simd_index);
}
