// Prefill attention on the tensor cores, flash-attention-2 style: for several query rows at once
// (prefill, evaluation), over the head-major F16 KV cache, causal, with the sliding window and
// score soft-capping of AttentionParams.
//
// Block = 4 or 8 warps = 64 or 128 query rows of one head; warp w owns rows 16w..16w+15. The
// block walks the rows' keys in chunks of 64: K and V rows land in shared memory (cp.async, two
// buffers: the next chunk loads while this one is used), each warp computes its 16 x 64 scores
// with mma.sync (Q fragments, in two f16 parts, held in registers), applies the mask and an online
// softmax on the accumulator fragments, and multiplies the probabilities (re-packed as f16 A
// fragments, no trip through shared memory) by V into f32 accumulators.
// Each K/V row is read once per 64 (128) query rows, where the one-row kernel read it once per row;
// 8 warps halve that traffic and the block's barriers per row, for long prompts whose grid still
// fills the GPU (launch's rule). Chunks wholly inside a warp's visible keys skip the mask.
//
// Over the Q8_0 cache (attention_q8kv) the two buffers hold staged Q8_0 chunks, and each chunk is
// dequantized into one f16 tile that the same mma loops read (cuda/kv_cache_q8.cuh).
#include "cuda/attention_prefill.h"

#include "cuda/common.cuh"
#include "cuda/kv_cache_q8.cuh"
#include "cuda/mma.cuh"

namespace akunu::cuda {

namespace {

constexpr int kChunkKeys = 64;

// Halves per shared row: the 8 rows of an ldmatrix hit distinct banks.
template <int HD>
constexpr int row_halves() {
    return HD + 8;
}
// F16 tiles: two (the next chunk loads while one is used); over the Q8_0 cache one, fed from two
// staged Q8_0 chunks.
template <bool kQ8>
constexpr int tiles() {
    return kQ8 ? 1 : 2;
}
template <int HD, bool kQ8>
constexpr size_t smem_bytes() {
    return 2 * tiles<kQ8>() * kChunkKeys * row_halves<HD>() * sizeof(__half) +
           (kQ8 ? 2 * sizeof(Q8Chunk<HD, kChunkKeys>) : 0);
}

// 8-warp blocks of head_dim <= 64 are held to two per SM's registers (the 4-warp ones fit three).
template <int HD, int kWarps>
constexpr int min_blocks_per_sm() {
    return kWarps == 8 && HD <= 64 ? 2 : 1;
}

template <int HD, bool kQ8, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, min_blocks_per_sm<HD, kWarps>())
    attention_prefill_kernel(const float *__restrict__ q_all, const void *__restrict__ k_cache,
                             const void *__restrict__ v_cache, float *__restrict__ out,
                             const __grid_constant__ AttentionParams p, const __grid_constant__ PatchContext pc) {
    pdl_enter();
    constexpr int LD = row_halves<HD>(), kTiles = tiles<kQ8>(), kTileRows = 16 * kWarps;
    static_assert(HD % 16 == 0 && kTileRows <= kTiles * kChunkKeys, "the Q tile is staged in the key buffers");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    auto ks = reinterpret_cast<__half(*)[kChunkKeys][LD]>(smem_raw);  // [kTiles][kChunkKeys][LD]
    auto vs = ks + kTiles;
    auto ring = reinterpret_cast<Q8Chunk<HD, kChunkKeys> *>(vs + kTiles);  // Q8_0: [2]
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t g = lane >> 2, t = lane & 3;
    const uint32_t h = blockIdx.y, r0 = blockIdx.x * kTileRows;
    const uint32_t position = resolve_position(p.position, pc);
    const uint32_t kv_head = h / (p.n_heads / p.n_kv_heads);
    const size_t head_base = (size_t)kv_head * p.max_seq * HD;
    // F16 cache: this head's rows; Q8_0: the layer's planes.
    const __half *K = static_cast<const __half *>(k_cache) + head_base, *V = static_cast<const __half *>(v_cache) + head_base;
    const Q8Planes Kq(const_cast<void *>(k_cache), p.n_kv_heads, p.max_seq, HD),
        Vq(const_cast<void *>(v_cache), p.n_kv_heads, p.max_seq, HD);
    const auto row_of = [&](uint32_t pos) { return kv_cache_row(pos, p.max_seq); };

    // The tile's q rows, scaled, as two f16 A fragments: q = hi + lo (hi staged through the K tiles,
    // lo through the V tiles, each read as [kTiles * kChunkKeys][LD]). One f16 alone would put its
    // rounding (2^-11 relative) into every score before the softmax amplifies it; hi + lo carries q
    // to ~2^-22 for a second mma per step.
    __half(*q_hi)[LD] = ks[0], (*q_lo)[LD] = vs[0];
    for (uint32_t i = tid; i < kTileRows * HD / 2; i += kWarps * 32) {
        const uint32_t row = i / (HD / 2), c = 2 * (i % (HD / 2));
        float2 v = make_float2(0.f, 0.f);
        if (r0 + row < p.rows)
            v = *reinterpret_cast<const float2 *>(q_all + (size_t)(r0 + row) * p.q_stride + (size_t)h * HD + c);
        const float x = v.x * p.scale, y = v.y * p.scale;
        const __half2 hi = __floats2half2_rn(x, y);
        const float2 back = __half22float2(hi);
        *reinterpret_cast<__half2 *>(&q_hi[row][c]) = hi;
        *reinterpret_cast<uint32_t *>(&q_lo[row][c]) = pack_half2(x - back.x, y - back.y);
    }
    __syncthreads();
    uint32_t qa[HD / 16][4], qa_lo[HD / 16][4];
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
        ldmatrix_x4(qa[kk], &q_hi[16 * warp + (lane & 15)][16 * kk + 8 * (lane >> 4)]);
        ldmatrix_x4(qa_lo[kk], &q_lo[16 * warp + (lane & 15)][16 * kk + 8 * (lane >> 4)]);
    }
    __syncthreads();  // the tile now takes keys

    // Keys the tile needs: causal up to its last row, from the first row's window start.
    const uint32_t last_row = min(r0 + kTileRows, p.rows) - 1;
    const uint32_t k_end = position + last_row + 1;
    const uint32_t first_pos = position + r0;
    const uint32_t k_begin = (p.window != 0 && first_pos + 1 > p.window) ? first_pos + 1 - p.window : 0;
    // This thread's two query rows (fragment rows g and g + 8) as positions.
    const uint32_t qpos[2] = {position + r0 + 16 * warp + g, position + r0 + 16 * warp + g + 8};
    const uint32_t warp_first = position + r0 + 16 * warp, warp_last = warp_first + 15;

    float o[HD / 8][4];
#pragma unroll
    for (int j = 0; j < HD / 8; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[j][c] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    const auto stage = [&](int b, uint32_t c0) {  // chunk c0's rows into buffer b (past k_end: zeros)
        if constexpr (kQ8) {
            ring[b].stage(Kq, Vq, kv_head, p.max_seq, c0, k_end - c0, row_of, 0, kChunkKeys, tid, kWarps * 32);
        } else {
            for (uint32_t i = tid; i < kChunkKeys * HD / 8; i += kWarps * 32) {
                const uint32_t j = i / (HD / 8), d = 8 * (i % (HD / 8));
                const bool ok = c0 + j < k_end;
                const size_t src = (size_t)row_of(ok ? c0 + j : c0) * HD + d;
                cp_async16(&ks[b][j][d], K + src, ok ? 16 : 0);
                cp_async16(&vs[b][j][d], V + src, ok ? 16 : 0);
            }
        }
        cp_async_commit();
    };
    if (k_begin < k_end) stage(0, k_begin);
    int buf = 0;
    for (uint32_t c0 = k_begin; c0 < k_end; c0 += kChunkKeys, buf ^= 1) {
        if (c0 + kChunkKeys < k_end) {  // the next chunk into the other buffer, freed by the last barrier
            stage(buf ^ 1, c0 + kChunkKeys);
            cp_async_wait_group<1>();
        } else {
            cp_async_wait_all();
        }
        __syncthreads();
        if constexpr (kQ8) {
            ring[buf].dequantize(ks[0], vs[0], 0, kChunkKeys, tid, kWarps * 32);
            __syncthreads();  // the f16 tile is whole (the barrier closing the last chunk: none still reads it)
        }
        const int tile = kQ8 ? 0 : buf;

        if (c0 <= warp_last) {  // (a chunk wholly after the warp's rows is all masked)
            // Scores S = Q K^T: 8 n-tiles of 8 keys.
            float s[kChunkKeys / 8][4];
#pragma unroll
            for (int j = 0; j < kChunkKeys / 8; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) s[j][c] = 0.f;
#pragma unroll
            for (int kk = 0; kk < HD / 16; ++kk)
#pragma unroll
                for (int j = 0; j < kChunkKeys / 16; ++j) {
                    uint32_t b[4];
                    ldmatrix_x4(b, &ks[tile][16 * j + (lane & 7) + 8 * (lane >> 4)][16 * kk + 8 * ((lane >> 3) & 1)]);
                    mma_16816(s[2 * j], qa[kk], b);
                    mma_16816(s[2 * j + 1], qa[kk], b + 2);
                    mma_16816(s[2 * j], qa_lo[kk], b);
                    mma_16816(s[2 * j + 1], qa_lo[kk], b + 2);
                }
            // Soft-cap, mask, and the online softmax of each of the thread's two rows. A chunk all of
            // whose keys every row of the warp sees (behind the diagonal, inside the window) needs
            // no mask.
            if (p.softcap > 0.f) {  // Gemma 2
#pragma unroll
                for (int j = 0; j < kChunkKeys / 8; ++j)
#pragma unroll
                    for (int c = 0; c < 4; ++c) s[j][c] = p.softcap * tanhf(s[j][c] / p.softcap);
            }
            const bool all_visible = c0 + kChunkKeys <= warp_first + 1 && c0 + kChunkKeys <= k_end &&
                                     (p.window == 0 || c0 + p.window > warp_last);
            if (!all_visible) {
#pragma unroll
                for (int j = 0; j < kChunkKeys / 8; ++j)
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        const uint32_t key = c0 + 8 * j + 2 * t + (c & 1), qp = qpos[c >> 1];
                        const bool visible = key <= qp && key < k_end && (p.window == 0 || key + p.window > qp);
                        if (!visible) s[j][c] = -INFINITY;
                    }
            }
            online_softmax_step(s, m, l, o);
            // O += P V: P's accumulator fragments are the A fragments of the next mma.
#pragma unroll
            for (int kk = 0; kk < kChunkKeys / 16; ++kk) {
                const uint32_t pa[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                                        pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                        pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
                for (int dj = 0; dj < HD / 16; ++dj) {
                    uint32_t b[4];
                    ldmatrix_x4_trans(b, &vs[tile][16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1)][16 * dj + 8 * (lane >> 4)]);
                    mma_16816(o[2 * dj], pa, b);
                    mma_16816(o[2 * dj + 1], pa, b + 2);
                }
            }
        }
        __syncthreads();  // this buffer takes the chunk after next
    }

#pragma unroll
    for (int i = 0; i < 2; ++i) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint32_t row = r0 + 16 * warp + g + 8 * i;
        if (row >= p.rows) continue;
        const float inv = 1.0f / l[i];
        float *dst = out + (size_t)row * p.out_stride + (size_t)h * HD + 2 * t;
#pragma unroll
        for (int j = 0; j < HD / 8; ++j)
            *reinterpret_cast<float2 *>(dst + 8 * j) = make_float2(o[j][2 * i] * inv, o[j][2 * i + 1] * inv);
    }
}

template <int HD, bool kQ8, int kWarps>
void launch(const LaunchArgs &a, const AttentionParams &p) {
    constexpr uint32_t kTileRows = 16 * kWarps;
    const dim3 grid((p.rows + kTileRows - 1) / kTileRows, p.n_heads);
    const auto kernel = attention_prefill_kernel<HD, kQ8, kWarps>;
    const size_t smem = smem_bytes<HD, kQ8>();
    static const bool smem_ok = allow_dynamic_smem(kernel, smem);
    if (!smem_ok) throw AkunuError("internal: the prefill attention's shared memory does not fit this device");
    launch_pdl(kernel, grid, kWarps * 32, smem, a, reinterpret_cast<const float *>(a.buffers[0]),
               static_cast<const void *>(a.buffers[1]), static_cast<const void *>(a.buffers[2]),
               reinterpret_cast<float *>(a.buffers[3]), p, a.patch);
}

// Over the F16 cache, 8-warp blocks (128 rows) where their grid still gives every SM a block;
// AKUNU_CUDA_PREFILL_ATTN_WARPS=4/8 chooses (Workspace::prefill_attention_warps).
template <int HD>
void launch_f16(const LaunchArgs &a, const AttentionParams &p) {
    const uint32_t wanted = a.workspace->prefill_attention_warps;
    const bool eight = wanted ? wanted == 8 : (p.rows + 127) / 128 * p.n_heads >= (uint32_t)a.workspace->sm_count;
    if (eight)
        launch<HD, false, 8>(a, p);
    else
        launch<HD, false, 4>(a, p);
}

}  // namespace

bool launch_attention_prefill(const LaunchArgs &a, KVCacheDType cache) {
    const AttentionParams &p = params_of<AttentionParams>(a);
    // float2 q loads and stores need 8-byte aligned rows.
    const bool aligned = p.q_stride % 2 == 0 && p.out_stride % 2 == 0 &&
                         (reinterpret_cast<uintptr_t>(a.buffers[0]) & 7) == 0 &&
                         (reinterpret_cast<uintptr_t>(a.buffers[3]) & 7) == 0;
    if (p.rows < 2 || !aligned) return false;
    if (cache == KVCacheDType::Q8_0) {
        switch (p.head_dim) {
            case 64: launch<64, true, 4>(a, p); return true;
            case 128: launch<128, true, 4>(a, p); return true;
            default: return false;
        }
    }
    switch (p.head_dim) {
        case 16: launch_f16<16>(a, p); return true;
        case 32: launch_f16<32>(a, p); return true;
        case 64: launch_f16<64>(a, p); return true;
        case 128: launch_f16<128>(a, p); return true;
        default: return false;
    }
}

}  // namespace akunu::cuda
