// Decode attention at long contexts, on the tensor cores: one block per (KV head, split of the
// keys) computes every query head of the GQA group, so each K/V row is read once per token.
//
// Why: the one-block-per-query-head kernel (cuda/attention_decode.cu) is built for tg128's short
// contexts, where its latency matters; per key it spends a warp-wide butterfly reduction and the
// group's heads read the same rows again, so at long contexts attention takes most of a decode step
// (docs/adr/0012-cuda-long-context-decode-attention.md has the measurements).
//
// Shape: the group's query heads are the 16 rows of an mma.sync m16n8k16 tile (padded with zero
// rows; q in two f16 parts, hi + lo, as the prefill kernel holds it: cuda/attention_prefill.cu).
// The block stages 16 keys a warp of K and V at a time in shared memory (cp.async, a ring of 2-4
// buffers: the next chunks load while one is used); warp w takes keys 16w..16w+15 of each chunk with its own
// online softmax (scores S = Q K^T, then P V with P's accumulator fragments as the next A
// fragments). At the end the warps' states merge in shared memory into the split's (m, l, acc) per
// head, and the last split of a KV head to finish merges the splits: each split's weight per head
// first (a lane per split, two when there are more than 32), then the outputs with vector loads
// of every split's accumulators.
//
// The Q8_0 cache (kv_cache_dtype "q8_0"): the ring stages the chunks' int8 values and scales (half
// the bytes), and each chunk is dequantized into one f16 tile that the same mma loops read
// (cuda/kv_cache_q8.cuh). Each warp stages and dequantizes only the 16 keys it reads, so its loop
// runs on warp barriers alone.
//
// Block shape: 4 warps; with the F16 cache at very long contexts (LaunchArgs::context VeryLong)
// 8 warps of 2 stages, the same shared memory: H200, tg128 at 16384 keys +6.7 % (8B shape),
// +6.8 % (1B), but 0.2-2.8 % slower at 2048-8192 keys (docs/experiments.md).
//
// The RoPE variant also does the RoPE + KV-write command's work: the warps rotate the group's
// queries (QK-norm first when the model has it), and the block holding the context's last key
// builds the token's key and value and appends them to the cache before staging its chunks.
#include "cuda/attention_decode_gqa.h"
#include "cuda/attention_decode_parts.cuh"
#include "cuda/common.cuh"
#include "cuda/kv_cache_q8.cuh"
#include "cuda/mma.cuh"

namespace akunu::cuda {

namespace {

constexpr int kRows = 16;  // query heads of a group, padded: the mma's rows
// Keys staged per step: 16 per warp.
template <int kWarps>
constexpr int chunk_keys() {
    return 16 * kWarps;
}
// Most splits per KV head: as many as fill the GPU for models of few KV heads (the Llama-3.2-1B
// shape's 8 at head_dim 64 fill an H200 at ~50), two per lane in the merge.
constexpr uint32_t kMaxSplits = 64;
constexpr uint32_t kSplitsPerLane = kMaxSplits / 32;
// Fewest keys per split: four chunks, so that a split's loads overlap its work.
template <int kWarps>
constexpr uint32_t min_keys_per_split() {
    return 4 * chunk_keys<kWarps>();
}

__device__ __forceinline__ uint32_t ceil_div_dev(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// Chunks in flight: kStages - 1 load while one is used. The F16 cache: 4 in blocks of 4 warps (at
// head_dim 128 one block of 4 x 32 KB of K and V an SM: measured faster than two blocks of 3
// stages, H100, 8B shape, tg128 at 8192 / 16384 cached keys 426.9 / 373.4 against 409.5 / 361.1
// t/s, and two blocks of 2 stages 385.0 / 349.7), 2 of twice the keys in blocks of 8 warps; the
// Q8_0 cache's three staged chunks and V tile leave room for three.
template <int HD, bool kQ8, int kWarps>
constexpr int stages() {
    return kQ8 ? 3 : kWarps == 8 ? 2 : 4;
}

// Before the key loop: the group's q rows (hi, lo) and rotate_head's stash.
template <int HD, int kWarps>
struct Prologue {
    __half q_hi[kRows][HD + 8];
    __half q_lo[kRows][HD + 8];
    float stash[kWarps][HD];
};

// Shared memory of the F16 cache: the ring of K/V chunk tiles. The prologue lives in the last tile
// (the first one staged after it); after the loop the warps' (m, l, acc) states take the tiles.
// Of the Q8_0 cache: the ring of staged Q8_0 chunks, whose K the mma reads as fragments straight
// from the int8 rows, and one f16 tile each chunk's V is dequantized into (it holds the prologue);
// after the loop the states take the ring.
template <int HD, bool kQ8, int kWarps>
struct Smem {
    static constexpr int LD = HD + 8;  // halves per row: the 8 rows of an ldmatrix hit distinct banks
    static constexpr int kStages = stages<HD, kQ8, kWarps>();
    static constexpr int kChunkKeys = chunk_keys<kWarps>();
    __half ks[kStages][kChunkKeys][LD];
    __half vs[kStages][kChunkKeys][LD];
    __device__ Prologue<HD, kWarps> &prologue() {
        return *reinterpret_cast<Prologue<HD, kWarps> *>(&ks[kStages - 1][0][0]);
    }
    __device__ float *states() { return reinterpret_cast<float *>(&ks[0][0][0]); }  // [kWarps][kRows][HD + 2]
    __device__ __half (*v_tile(uint32_t buf))[LD] { return vs[buf]; }
    static constexpr size_t kPrologueBytes = sizeof(ks[0]);
    static constexpr size_t kStateBytes = sizeof(ks) + sizeof(vs);  // one array's two halves
};
template <int HD, int kWarps>
struct Smem<HD, true, kWarps> {
    static constexpr int LD = HD + 8;
    static constexpr int kStages = stages<HD, true, kWarps>();
    static constexpr int kChunkKeys = chunk_keys<kWarps>();
    __half vs[kChunkKeys][LD];
    Q8Chunk<HD, kChunkKeys> ring[kStages];
    __device__ Prologue<HD, kWarps> &prologue() { return *reinterpret_cast<Prologue<HD, kWarps> *>(&vs[0][0]); }
    __device__ float *states() { return reinterpret_cast<float *>(&ring[0]); }
    __device__ __half (*v_tile(uint32_t))[LD] { return vs; }
    static constexpr size_t kPrologueBytes = sizeof(vs);
    static constexpr size_t kStateBytes = sizeof(ring);
};
template <int HD, bool kQ8, int kWarps>
constexpr bool smem_holds_its_phases() {
    using S = Smem<HD, kQ8, kWarps>;
    return sizeof(Prologue<HD, kWarps>) <= S::kPrologueBytes &&
           S::kStateBytes >= kWarps * kRows * (HD + 2) * sizeof(float) &&  // the warps' states
           S::kStateBytes >= kRows * (kMaxSplits + HD) * sizeof(float);   // the merge's weights and outputs
}
static_assert(smem_holds_its_phases<64, false, 4>() && smem_holds_its_phases<128, false, 4>() &&
                  smem_holds_its_phases<64, true, 4>() && smem_holds_its_phases<128, true, 4>() &&
                  smem_holds_its_phases<64, false, 8>() && smem_holds_its_phases<128, false, 8>(),
              "the prologue, the states and the merge fit");
static_assert(sizeof(Smem<128, false, 8>) == sizeof(Smem<128, false, 4>), "8 warps: the shared memory of 4");

template <class Pairs, int HD, bool kQ8, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    attention_decode_gqa_kernel(const float *__restrict__ q_all, void *__restrict__ k_cache,
                                void *__restrict__ v_cache, float *__restrict__ out, float *__restrict__ partial,
                                const __grid_constant__ AttentionParams p, const __grid_constant__ RopeInputs ri,
                                const __grid_constant__ PatchContext pc, uint32_t n_splits,
                                unsigned *__restrict__ done_splits, XQ16Chunk *__restrict__ xq_out,
                                const float *__restrict__ out_norm_w) {
    constexpr bool kRope = !std::is_same<Pairs, NoRope>::value;
    constexpr int kDpl = HD / 32;  // dims per lane when a warp holds a whole head (rotate_head)
    using S = Smem<HD, kQ8, kWarps>;
    constexpr int kChunkKeys = S::kChunkKeys;
    constexpr uint32_t kMinKeysPerSplit = min_keys_per_split<kWarps>();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    S &sm = *reinterpret_cast<S *>(smem_raw);
    Prologue<HD, kWarps> &pro = sm.prologue();
    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const uint32_t kv_head = blockIdx.x, split = blockIdx.z;
    const uint32_t group = p.n_heads / p.n_kv_heads, head0 = kv_head * group;

    const uint32_t position = resolve_position(p.position, pc);
    const uint32_t n_ctx = min(position + 1, resolve_kv_len(p.kv_len, pc));
    const uint32_t first = (p.window != 0 && n_ctx > p.window) ? n_ctx - p.window : 0;  // sliding window
    const uint32_t n_keys = n_ctx - first;
    // Splits of whole chunks, at least kMinKeysPerSplit keys each; the grid's others exit.
    const uint32_t want = min(n_splits, max(1u, n_keys / kMinKeysPerSplit));
    const uint32_t per_split = ceil_div_dev(ceil_div_dev(n_keys, want), kChunkKeys) * kChunkKeys;
    const uint32_t active = ceil_div_dev(n_keys, per_split);
    if (split >= active) return;  // block-uniform, before any barrier
    const uint32_t k_begin = first + split * per_split, k_end = min(k_begin + per_split, n_ctx);
    const size_t head_base = (size_t)kv_head * p.max_seq * HD;
    // F16 cache: this head's rows; Q8_0: the layer's planes.
    __half *K = static_cast<__half *>(k_cache) + head_base, *V = static_cast<__half *>(v_cache) + head_base;
    const Q8Planes Kq(k_cache, p.n_kv_heads, p.max_seq, HD), Vq(v_cache, p.n_kv_heads, p.max_seq, HD);
    const auto row_of = [&](uint32_t pos) { return kv_cache_row(pos, p.max_seq); };

    // Chunk c (keys k_begin + kChunkKeys c on) into its ring buffer, one commit group per chunk (an empty
    // group past the split's end, so that every thread counts the same groups).
    constexpr int kStages = S::kStages;
    const uint32_t n_chunks = ceil_div_dev(k_end - k_begin, kChunkKeys);
    const auto stage = [&](uint32_t c) {
        if (c < n_chunks) {
            const uint32_t c0 = k_begin + c * kChunkKeys, b = c % kStages;
            if constexpr (kQ8) {
                sm.ring[b].stage(Kq, Vq, kv_head, p.max_seq, c0, k_end - c0, row_of, 16 * warp, 16, lane, 32);  // the warp's keys
            } else {
                for (uint32_t i = tid; i < kChunkKeys * HD / 8; i += kWarps * 32) {
                    const uint32_t j = i / (HD / 8), d = 8 * (i % (HD / 8));
                    const bool ok = c0 + j < k_end;  // past k_end: zeros, masked below
                    const size_t src = (size_t)row_of(ok ? c0 + j : c0) * HD + d;
                    cp_async16(&sm.ks[b][j][d], K + src, ok ? 16 : 0);
                    cp_async16(&sm.vs[b][j][d], V + src, ok ? 16 : 0);
                }
            }
        }
        cp_async_commit();
    };
    // The first chunks' rows are older than the previous kernel (the QKV GEMV, or with the plain
    // variant the RoPE + KV-write command) unless they reach the newest: then load them before
    // the wait.
    const bool early = k_begin + (kStages - 1) * kChunkKeys < n_ctx;
    if (early)
        for (int c = 0; c < kStages - 1; ++c) stage(c);

    float2 cs[kDpl];
    if constexpr (kRope) {  // the angles do not depend on the previous kernel
#pragma unroll
        for (int i = 0; i < kDpl; ++i) {
            const uint32_t d = lane * kDpl + i;
            cs[i] = make_float2(1.f, 0.f);
            if (d < ri.rope_dim) rope_sincos(position, ri.inv_freq[Pairs::pair_of(d, ri.rope_dim)], &cs[i].y, &cs[i].x);
        }
    }
    pdl_enter();

    // The group's queries, scaled, as hi + lo halves in rows 0..group-1 (the rest zero).
    for (uint32_t r = warp; r < kRows; r += kWarps) {
        float x[kDpl];
        if (r < group) {
            const float *src = q_all + (size_t)(head0 + r) * HD;
            if constexpr (kRope) {
                rotate_head<Pairs, kDpl>(x, src, ri.q_norm, ri, cs, HD, p.scale, pro.stash[warp]);
                if constexpr (kQ8) {  // into the keys' Hadamard basis (kv_cache_q8.h), as rope_kv_q8_kernel does
                    hadamard_row_warp<kDpl>(x);
#pragma unroll
                    for (int i = 0; i < kDpl; ++i) x[i] *= kKVQ8QueryScale;
                }
            } else {  // the Q8_0 cache's queries are in the keys' basis already (rope_kv_q8_kernel)
#pragma unroll
                for (int i = 0; i < kDpl; ++i) x[i] = src[lane * kDpl + i] * p.scale;
            }
        } else {
#pragma unroll
            for (int i = 0; i < kDpl; ++i) x[i] = 0.f;
        }
#pragma unroll
        for (int i = 0; i < kDpl; i += 2) {
            const __half2 hi = __floats2half2_rn(x[i], x[i + 1]);
            const float2 back = __half22float2(hi);
            // Q8_0: dims in the k order of the key fragments read from int8 rows (q8_fragment_column)
            const uint32_t col = kQ8 ? q8_fragment_column(lane * kDpl + i) : lane * kDpl + i;
            *reinterpret_cast<__half2 *>(&pro.q_hi[r][col]) = hi;
            *reinterpret_cast<uint32_t *>(&pro.q_lo[r][col]) = pack_half2(x[i] - back.x, x[i + 1] - back.y);
        }
    }
    // The token's own key and value (RoPE variant): the block holding the context's last key
    // appends them to the cache; it stages them like any other row below.
    if constexpr (kRope) {
        if (k_end == n_ctx && n_ctx == position + 1) {
            const uint32_t q_dim = p.n_heads * HD, kv_dim = p.n_kv_heads * HD;
            const float *k_head = q_all + q_dim + kv_head * HD, *v_head = k_head + kv_dim;
            const uint32_t row = row_of(n_ctx - 1);
            float x[kDpl];
            if constexpr (kQ8) {  // K by warp 0, V by warp 1, each a row's blocks at once
                if (warp == 0) {
                    rotate_head<Pairs, kDpl>(x, k_head, ri.k_norm, ri, cs, HD, 1.f, pro.stash[0]);
                    hadamard_row_warp<kDpl>(x);
                    quantize_row_q8_warp<kDpl>(x, Kq.row_values(kv_head, row, p.max_seq, HD),
                                               Kq.row_scales(kv_head, row, p.max_seq, HD));
                } else if (warp == 1) {
#pragma unroll
                    for (int i = 0; i < kDpl; ++i) x[i] = v_head[lane * kDpl + i];
                    quantize_row_q8_warp<kDpl>(x, Vq.row_values(kv_head, row, p.max_seq, HD),
                                               Vq.row_scales(kv_head, row, p.max_seq, HD));
                }
            } else if (warp == 0) {
                rotate_head<Pairs, kDpl>(x, k_head, ri.k_norm, ri, cs, HD, 1.f, pro.stash[0]);
                const float *v_src = v_head + lane * kDpl;
                const size_t dst = (size_t)row * HD + lane * kDpl;
#pragma unroll
                for (int i = 0; i < kDpl; i += 2) {
                    *reinterpret_cast<__half2 *>(K + dst + i) = __floats2half2_rn(x[i], x[i + 1]);
                    *reinterpret_cast<__half2 *>(V + dst + i) = __floats2half2_rn(v_src[i], v_src[i + 1]);
                }
            }
        }
    }
    __syncthreads();  // q rows written, the own row in the cache

    uint32_t qa[HD / 16][4], qa_lo[HD / 16][4];
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
        ldmatrix_x4(qa[kk], &pro.q_hi[lane & 15][16 * kk + 8 * (lane >> 4)]);
        ldmatrix_x4(qa_lo[kk], &pro.q_lo[lane & 15][16 * kk + 8 * (lane >> 4)]);
    }

    float o[HD / 8][4];
#pragma unroll
    for (int j = 0; j < HD / 8; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[j][c] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    if (!early)
        for (int c = 0; c < kStages - 1; ++c) stage(c);
    if constexpr (kQ8) __syncthreads();  // every warp holds its q fragments: the V tile takes values
    for (uint32_t c = 0; c < n_chunks; ++c) {
        cp_async_wait_group<kStages - 2>();  // chunk c has landed; the next ones may fly
        // ... for every thread (Q8_0: of the warp, which stages, dequantizes and reads only its own
        // 16 keys: no block barrier in the loop); chunk c - 1's buffer is free
        if constexpr (kQ8) __syncwarp(); else __syncthreads();
        stage(c + kStages - 1);  // into chunk c - 1's buffer
        if constexpr (kQ8) {
            sm.ring[c % kStages].dequantize(static_cast<__half(*)[S::LD]>(nullptr), sm.vs, 16 * warp, 16,
                                            lane, 32);  // V only
            __syncwarp();
        }
        const uint32_t buf = c % kStages, c0 = k_begin + c * kChunkKeys;
        const uint32_t w0 = c0 + 16 * warp;  // the warp's first key
        if (w0 < k_end) {                    // warp-uniform
            float s[2][4] = {};
            if constexpr (kQ8) {
                // Per 32-dim block: the integer keys' scores, then times each key's block scale.
                const Q8Chunk<HD, kChunkKeys> &chunk = sm.ring[buf];
#pragma unroll
                for (int b = 0; b < HD / 32; ++b) {
                    float sb[2][4] = {};
#pragma unroll
                    for (int j = 0; j < 2; ++j) {  // n-tile j: keys 16 warp + 8 j + 0..7, this lane's row g
                        uint32_t frag[2][2];
                        chunk.read_key_fragments(16 * warp + 8 * j + g, b, t, frag);
                        mma_16816(sb[j], qa[2 * b], frag[0]);
                        mma_16816(sb[j], qa_lo[2 * b], frag[0]);
                        mma_16816(sb[j], qa[2 * b + 1], frag[1]);
                        mma_16816(sb[j], qa_lo[2 * b + 1], frag[1]);
                    }
#pragma unroll
                    for (int j = 0; j < 2; ++j)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {  // this lane's columns: keys 8 j + 2 t + e
                            const float scale = __half2float(chunk.kd[16 * warp + 8 * j + 2 * t + e][b]);
                            s[j][e] = fmaf(sb[j][e], scale, s[j][e]);
                            s[j][2 + e] = fmaf(sb[j][2 + e], scale, s[j][2 + e]);
                        }
                }
            } else {
#pragma unroll
                for (int kk = 0; kk < HD / 16; ++kk) {
                    uint32_t b[4];
                    ldmatrix_x4(b, &sm.ks[buf][16 * warp + (lane & 7) + 8 * (lane >> 4)][16 * kk + 8 * ((lane >> 3) & 1)]);
                    mma_16816(s[0], qa[kk], b);
                    mma_16816(s[1], qa[kk], b + 2);
                    mma_16816(s[0], qa_lo[kk], b);
                    mma_16816(s[1], qa_lo[kk], b + 2);
                }
            }
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    float v = s[j][c];
                    if (p.softcap > 0.f) v = p.softcap * tanhf(v / p.softcap);  // Gemma 2
                    s[j][c] = w0 + 8 * j + 2 * t + (c & 1) < k_end ? v : -INFINITY;
                }
            online_softmax_step(s, m, l, o);
            const uint32_t pa[4] = {pack_half2(s[0][0], s[0][1]), pack_half2(s[0][2], s[0][3]),
                                    pack_half2(s[1][0], s[1][1]), pack_half2(s[1][2], s[1][3])};
#pragma unroll
            for (int dj = 0; dj < HD / 16; ++dj) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, &sm.v_tile(buf)[16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1)][16 * dj + 8 * (lane >> 4)]);
                mma_16816(o[2 * dj], pa, b);
                mma_16816(o[2 * dj + 1], pa, b + 2);
            }
        }
    }
    cp_async_wait_all();  // only empty groups are left; then the buffers take the warps' states
    __syncthreads();

    // The warps' states: (m, l, acc) per row into shared memory (the chunk buffers are free).
    constexpr int kState = HD + 2;
    float *states = sm.states();
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        float *st = states + (warp * kRows + g + 8 * i) * kState;
        if (t == 0) {
            st[0] = m[i];
            st[1] = l[i];
        }
#pragma unroll
        for (int j = 0; j < HD / 8; ++j) {
            st[2 + 8 * j + 2 * t] = o[j][2 * i];
            st[2 + 8 * j + 2 * t + 1] = o[j][2 * i + 1];
        }
    }
    __syncthreads();
    // The split's state per head: warps merged. Threads take (row, dim) pairs; a warp's 32 lanes
    // share one row and a 32-dim block (HD % 32 == 0), as the quantized hand-off needs.
    const auto split_state = [&](uint32_t r, uint32_t d, float *M_out, float *L_out) {
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) M = fmaxf(M, states[(w * kRows + r) * kState]);
        float L = 0.f, acc = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            const float *st = states + (w * kRows + r) * kState;
            const float wt = st[1] > 0.f ? exp2f((st[0] - M) * kLog2e) : 0.f;
            L = fmaf(st[1], wt, L);
            acc = fmaf(st[2 + d], wt, acc);
        }
        *M_out = M;
        *L_out = L;
        return acc;
    };
    if (active == 1) {
        for (uint32_t i = tid; i < group * HD; i += kWarps * 32) {
            const uint32_t r = i / HD, d = i % HD, h = head0 + r;
            float M, L;
            const float o_rd = split_state(r, d, &M, &L) / L;
            out[(size_t)h * HD + d] = o_rd;
            if (xq_out) store_q16_block(xq_out, h * HD + d - lane, o_rd, out_norm_w);
        }
        return;
    }
    // The split's results in the workspace: the accumulators [n_heads][n_splits][HD] (rows 16-byte
    // aligned for the merge's vector loads), then each (head, split)'s (m, l).
    float *part_acc = partial, *part_ml = partial + (size_t)p.n_heads * n_splits * HD;
    for (uint32_t i = tid; i < group * HD; i += kWarps * 32) {
        const uint32_t r = i / HD, d = i % HD, hs = (head0 + r) * n_splits + split;
        float M, L;
        part_acc[(size_t)hs * HD + d] = split_state(r, d, &M, &L);
        if (d == 0) {
            part_ml[2 * hs] = M;
            part_ml[2 * hs + 1] = L;
        }
    }
    // The last split of this KV head to finish merges all of them (see cuda/attention_decode.cu).
    __syncthreads();
    __shared__ bool is_last;
    if (tid == 0) {
        __threadfence();
        is_last = atomicAdd(&done_splits[kv_head], 1u) == active - 1;
        if (is_last) {
            __threadfence();
            done_splits[kv_head] = 0;  // ready for the next layer / replay
        }
    }
    __syncthreads();
    if (!is_last) return;
    // Each head's split weights w_s = e^(m_s - M) / sum_s l_s e^(m_s - M): a warp per head, splits
    // lane, lane + 32 (active <= 64); then out = sum_s w_s acc_s, four dims per thread and load,
    // every split's load in flight at once. The states area is free: it takes the weights, then
    // the outputs for the quantized hand-off.
    float *w = states;                            // [kRows][kMaxSplits]
    float *merged = states + kRows * kMaxSplits;  // [group * HD]
    for (uint32_t r = warp; r < group; r += kWarps) {
        float m_s[kSplitsPerLane], l_s[kSplitsPerLane], M = -INFINITY;
#pragma unroll
        for (uint32_t j = 0; j < kSplitsPerLane; ++j) {
            const uint32_t s = lane + 32 * j, hs = (head0 + r) * n_splits + s;
            m_s[j] = s < active ? __ldcg(part_ml + 2 * hs) : -INFINITY;
            l_s[j] = s < active ? __ldcg(part_ml + 2 * hs + 1) : 0.f;
            M = fmaxf(M, l_s[j] > 0.f ? m_s[j] : -INFINITY);  // empty splits weigh nothing
        }
        M = warp_max(M);
        float e[kSplitsPerLane], le = 0.f;
#pragma unroll
        for (uint32_t j = 0; j < kSplitsPerLane; ++j) {
            e[j] = l_s[j] > 0.f ? exp2f((m_s[j] - M) * kLog2e) : 0.f;
            le = fmaf(l_s[j], e[j], le);
        }
        const float L = warp_sum(le);
#pragma unroll
        for (uint32_t j = 0; j < kSplitsPerLane; ++j) w[r * kMaxSplits + lane + 32 * j] = e[j] / L;
    }
    __syncthreads();
    for (uint32_t i = tid; i < group * HD / 4; i += kWarps * 32) {
        const uint32_t r = 4 * i / HD, d = 4 * i % HD, h = head0 + r;
        const float4 *acc = reinterpret_cast<const float4 *>(part_acc + (size_t)h * n_splits * HD + d);
        float4 o4 = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 16
        for (uint32_t s = 0; s < active; ++s) {
            const float4 a = __ldcg(acc + (size_t)s * (HD / 4));
            const float ws = w[r * kMaxSplits + s];
            o4.x = fmaf(ws, a.x, o4.x);
            o4.y = fmaf(ws, a.y, o4.y);
            o4.z = fmaf(ws, a.z, o4.z);
            o4.w = fmaf(ws, a.w, o4.w);
        }
        *reinterpret_cast<float4 *>(out + (size_t)h * HD + d) = o4;
        if (xq_out) *reinterpret_cast<float4 *>(merged + r * HD + d) = o4;
    }
    if (!xq_out) return;
    __syncthreads();
    for (uint32_t i = tid; i < group * HD; i += kWarps * 32)  // a warp: one row's 32-dim block
        store_q16_block(xq_out, head0 * HD + i - lane, merged[i], out_norm_w);
}

template <class Pairs, int HD, bool kQ8, int kWarps>
void launch_blocks_of(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri) {
    const auto kernel = attention_decode_gqa_kernel<Pairs, HD, kQ8, kWarps>;
    const size_t smem = sizeof(Smem<HD, kQ8, kWarps>);
    static const bool smem_ok = allow_dynamic_smem(kernel, smem);
    if (!smem_ok) throw AkunuError("internal: the GQA decode attention's shared memory does not fit this device");
    // Enough (KV head, split) blocks for every SM to hold as many as it can at once (asked once:
    // it depends on the kernel and the device only).
    static const int per_sm = [&] {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kWarps * 32, smem) != cudaSuccess) {
            cudaGetLastError();
            n = 1;
        }
        return n;
    }();
    uint32_t n_splits = std::min<uint32_t>(kMaxSplits, ceil_div_u((uint64_t)a.workspace->sm_count * std::max(per_sm, 1),
                                                                  p.n_kv_heads));
    if (a.workspace->attention_gqa_splits) n_splits = std::min(n_splits, a.workspace->attention_gqa_splits);
    // The workspace's last 128 floats and last counter belong to argmax_f32.
    while (n_splits > 1 && (size_t)p.n_heads * n_splits * (HD + 2) > a.workspace->floats - 128) --n_splits;
    if (p.n_kv_heads >= a.workspace->n_counters) n_splits = 1;
    const Q16Handoff &ho = a.q16_out;
    const bool hand_off = p.rows == 1 && ho.offered_for(reinterpret_cast<float *>(a.buffers[3]), p.n_heads * HD);
    launch_pdl(kernel, dim3(p.n_kv_heads, 1, n_splits), kWarps * 32, smem, a,
               reinterpret_cast<const float *>(a.buffers[0]), static_cast<void *>(a.buffers[1]),
               static_cast<void *>(a.buffers[2]), reinterpret_cast<float *>(a.buffers[3]), a.workspace->data, p,
               ri, a.patch, n_splits, a.workspace->counters, hand_off ? static_cast<XQ16Chunk *>(ho.chunks) : nullptr,
               hand_off ? ho.norm_w : nullptr);
    if (hand_off) *ho.written = true;
}

template <class Pairs, int HD, bool kQ8>
void launch(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri) {
    if constexpr (!kQ8) {  // the Q8_0 cache measured 0.6 % slower in 8 warps at 16384 keys
        if (a.context == ContextLength::VeryLong) return launch_blocks_of<Pairs, HD, false, 8>(a, p, ri);
    }
    launch_blocks_of<Pairs, HD, kQ8, 4>(a, p, ri);
}

template <class Pairs, bool kQ8>
bool launch_for_head_dim(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri) {
    switch (p.head_dim) {
        case 64: launch<Pairs, 64, kQ8>(a, p, ri); return true;
        case 128: launch<Pairs, 128, kQ8>(a, p, ri); return true;
        default: return false;
    }
}

template <bool kQ8>
bool launch_for_rope(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri, DecodeRope rope) {
    switch (rope) {
        case DecodeRope::None: return launch_for_head_dim<NoRope, kQ8>(a, p, ri);
        case DecodeRope::Interleaved: return launch_for_head_dim<Interleaved, kQ8>(a, p, ri);
        case DecodeRope::NeoX: return launch_for_head_dim<NeoX, kQ8>(a, p, ri);
    }
    return false;
}

}  // namespace

bool gqa_decode_covers(uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim) {
    return n_kv_heads != 0 && n_heads % n_kv_heads == 0 && n_heads / n_kv_heads <= (uint32_t)kRows &&
           (head_dim == 64 || head_dim == 128);
}

bool launch_attention_decode_gqa(const LaunchArgs &a, const AttentionParams &p, const RopeInputs &ri, DecodeRope rope,
                                 KVCacheDType cache) {
    if (p.rows != 1 || !gqa_decode_covers(p.n_heads, p.n_kv_heads, p.head_dim)) return false;
    return cache == KVCacheDType::Q8_0 ? launch_for_rope<true>(a, p, ri, rope) : launch_for_rope<false>(a, p, ri, rope);
}

}  // namespace akunu::cuda
