// The prefill/evaluation GEMM (M > 1) of cuda/gemm.cu: y[M, N] (+)= x[M, K] . W[N, K]^T on the
// tensor cores (mma.sync m16n8k16, f16 inputs, f32 accumulators).
//
// Block = 8 warps computing a BM (x rows: 64 or 128) x 128 (weight rows) tile of y; warp (wm, wn)
// of a 2 x 4 grid owns BM/2 x 32. K advances one 32-element quant block per step through two
// shared-memory buffers: while the warps multiply out of one, each thread's global loads for the
// next step (its activation floats and one weight row's half-block) are in flight, and are
// converted to f16 into the other buffer afterwards; one barrier per step. Few x rows (a short
// prompt, a grammar's forced run) give too few tiles to fill the GPU: then the K steps are split
// among gridDim.z blocks per tile, each writing its partial tile to `partial` ([z][M][all parts'
// rows]), and gemm_split_k_sum_kernel adds them in order into y. Activations come either
// as f32 rows (converted per tile: every N-tile block converts the same rows again) or, when
// they fit the workspace, as f16 rows converted once by to_half_rows_kernel, which the tiles
// then copy with cp.async: half the bytes, no conversion and no staging registers.
#pragma once
#include "cuda/gemv.cuh"
#include "cuda/mma.cuh"

namespace akunu::cuda {

// --- weight tile loaders: thread -> (weight row, half h of the step's 32-element block) -------
// state(base, row_bytes, K, row, N) once; raw(state, kb, h) issues the step's global loads;
// to_half(state, raw, kb, h, out) writes 16 f16 weights as 8 half2 words (zeros past N).

// GGUF rows as stored, any format of common.cuh / formats_kquant.cuh (dequantized at convert).
template <class Fmt>
struct RowsTileLoader {
    struct State {
        const uint8_t *row;  // nullptr past N
    };
    struct Raw {};
    __device__ static State state(const uint8_t *base, uint32_t row_bytes, uint32_t, uint32_t row, uint32_t N) {
        return {row < N ? base + (size_t)row * row_bytes : nullptr};
    }
    __device__ static Raw raw(const State &, uint32_t, int) { return {}; }
    __device__ static void to_half(const State &s, const Raw &, uint32_t kb, int h, uint32_t *out) {
        float v[16];
        if (s.row)
            fmt_dequant_half<Fmt>(s.row, kb, h, v);
        else
#pragma unroll
            for (int i = 0; i < 16; ++i) v[i] = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) out[i] = pack_half2(v[2 * i], v[2 * i + 1]);
    }
};

// The g8 layout (cuda/layout_g8.h): the quant bytes and scales are loaded a step ahead.
template <class F>
struct G8TileLoader {
    struct State {
        const uint8_t *group;  // nullptr past N
        uint32_t r, K;
    };
    using Raw = typename F::Raw;
    __device__ static State state(const uint8_t *base, uint32_t, uint32_t K, uint32_t row, uint32_t N) {
        return {row < N ? base + (size_t)(row / kG8Rows) * F::Layout::group_bytes(K) : nullptr, row % kG8Rows, K};
    }
    __device__ static Raw raw(const State &s, uint32_t kb, int h) {
        return s.group ? F::raw(s.group, s.K, kb, s.r, h) : Raw{};
    }
    __device__ static void to_half(const State &, const Raw &v, uint32_t, int h, uint32_t *out) { F::to_half(v, h, out); }
};

// x [M, K] f32 (rows x_stride floats apart) -> out [M, K] f16, dense.
__global__ void to_half_rows_kernel(const float *__restrict__ x, uint32_t x_stride, __half *__restrict__ out,
                                    uint32_t M, uint32_t K) {
    pdl_enter();
    const uint32_t quads = K / 4;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)M * quads;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t m = i / quads, q = i % quads;
        const float4 v = __ldg(reinterpret_cast<const float4 *>(x + m * x_stride) + q);
        __half2 *dst = reinterpret_cast<__half2 *>(out + m * K) + 2 * q;
        dst[0] = __floats2half2_rn(v.x, v.y);
        dst[1] = __floats2half2_rn(v.z, v.w);
    }
}

constexpr int kTileN = 128, kTileK = 32, kTileThreads = 256;
constexpr int kTileLd = kTileK + 8;  // halves per shared row: 80 bytes, so ldmatrix rows hit distinct banks

// kXHalf: x is [M, K] f16 (to_half_rows_kernel), else f32 rows of p.x_row_bytes.
// Rows of all parts before `part`: where its columns start in a split-K partial row.
__device__ __forceinline__ uint32_t rows_before_part(const GemmParams &p, uint32_t part) {
    uint32_t rows = 0;
    for (uint32_t i = 0; i < part; ++i) rows += p.N[i];
    return rows;
}

template <class Loader, int BM, bool kXHalf>
__global__ void __launch_bounds__(kTileThreads, 2)
    gemm_mma_kernel(const void *__restrict__ x_in, float *__restrict__ y, const __grid_constant__ WeightPtrs w,
                    const __grid_constant__ GemmParams p, float *__restrict__ partial) {
    pdl_enter();
    constexpr int WM = BM / 2, MF = WM / 16;          // warp tile rows, m16 fragments per warp
    constexpr int XF4 = kXHalf ? 1 : BM * kTileK / 4 / kTileThreads;  // f32: float4 per thread per step
    constexpr int XT = kTileK / 4 / XF4;                               // f32: threads per activation row
    constexpr int XC = BM * kTileK / 8 / kTileThreads;                 // f16: 16-byte copies per thread per step
    __shared__ __align__(16) __half xs[2][BM][kTileLd];
    __shared__ __align__(16) __half ws[2][kTileN][kTileLd];

    // blockIdx.x enumerates 128-row tiles part by part, so a tile never straddles two parts.
    uint32_t part = 0, tile = blockIdx.x;
    while (part + 1 < p.n_parts && tile >= (p.N[part] + kTileN - 1) / kTileN) {
        tile -= (p.N[part] + kTileN - 1) / kTileN;
        ++part;
    }
    const uint32_t n0 = tile * kTileN, m0 = blockIdx.y * BM, N = p.N[part];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3;

    // This thread's share of each step's loads.
    const uint32_t w_row = tid >> 1;
    const int w_h = tid & 1;
    const typename Loader::State ls = Loader::state(w.at(part), p.w_row_bytes[part], p.K, n0 + w_row, N);
    const uint32_t x_row = tid / XT, x_col = (tid % XT) * XF4 * 4;
    const bool x_valid = m0 + x_row < p.M;
    const float *xp = static_cast<const float *>(x_in) + (size_t)(m0 + (x_valid ? x_row : 0)) * (p.x_row_bytes / 4) + x_col;
    const __half *x16 = static_cast<const __half *>(x_in);

    // A step's loads: load() issues this thread's global loads (f32 activations, the weight raw)
    // into registers, store() converts them into shared buffer `buf`; f16 activations instead go
    // straight to shared memory with copy_x() (chunk c = tid + 256 i: row c / 4, 8 halves at
    // 8 (c % 4)), waited for in store().
    float4 xr[XF4];
    typename Loader::Raw wr;
    auto copy_x = [&](int buf, uint32_t kb) {
#pragma unroll
        for (int i = 0; i < XC; ++i) {
            const uint32_t c = tid + kTileThreads * i, row = c / 4, col = 8 * (c % 4);
            const bool ok = m0 + row < p.M;
            cp_async16(&xs[buf][row][col], x16 + (size_t)(ok ? m0 + row : 0) * p.K + (size_t)kb * kTileK + col, ok ? 16 : 0);
        }
        cp_async_commit();
    };
    auto load = [&](uint32_t kb) {
        if constexpr (!kXHalf) {
#pragma unroll
            for (int i = 0; i < XF4; ++i)
                xr[i] = x_valid ? __ldg(reinterpret_cast<const float4 *>(xp + (size_t)kb * kTileK) + i) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        wr = Loader::raw(ls, kb, w_h);
    };
    auto store = [&](int buf, uint32_t kb) {
        if constexpr (kXHalf) {
            cp_async_wait_all();  // this thread's copies; the barrier after store publishes all
        } else {
            uint32_t hx[2 * XF4];
#pragma unroll
            for (int i = 0; i < XF4; ++i) {
                hx[2 * i] = pack_half2(xr[i].x, xr[i].y);
                hx[2 * i + 1] = pack_half2(xr[i].z, xr[i].w);
            }
#pragma unroll
            for (int i = 0; i < XF4 / 2; ++i)
                reinterpret_cast<uint4 *>(&xs[buf][x_row][x_col])[i] =
                    make_uint4(hx[4 * i], hx[4 * i + 1], hx[4 * i + 2], hx[4 * i + 3]);
        }
        uint32_t hw[8];
        Loader::to_half(ls, wr, kb, w_h, hw);
        uint4 *dst = reinterpret_cast<uint4 *>(&ws[buf][w_row][16 * w_h]);
        dst[0] = make_uint4(hw[0], hw[1], hw[2], hw[3]);
        dst[1] = make_uint4(hw[4], hw[5], hw[6], hw[7]);
    };

    float acc[MF][4][4];
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;

    // This block's K steps: all of them, or its split's share.
    const uint32_t all_steps = p.K / kTileK, per_split = (all_steps + gridDim.z - 1) / gridDim.z;
    const uint32_t kb0 = blockIdx.z * per_split;
    const uint32_t steps = kb0 < all_steps ? min(per_split, all_steps - kb0) : 0;
    if (steps > 0) {
        if constexpr (kXHalf) copy_x(0, kb0);
        load(kb0);
        store(0, kb0);
    }
    __syncthreads();
    for (uint32_t s = 0; s < steps; ++s) {
        const int buf = s & 1;
        if (s + 1 < steps) {
            if constexpr (kXHalf) copy_x(buf ^ 1, kb0 + s + 1);
            load(kb0 + s + 1);
        }
#pragma unroll
        for (int kk = 0; kk < kTileK; kk += 16) {
            uint32_t a[MF][4], b[4][2];
#pragma unroll
            for (int i = 0; i < MF; ++i) ldmatrix_x4(a[i], &xs[buf][wm * WM + 16 * i + (lane & 15)][kk + 8 * (lane >> 4)]);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                uint32_t t[4];
                ldmatrix_x4(t, &ws[buf][wn * 32 + 16 * j + (lane & 7) + 8 * (lane >> 4)][kk + 8 * ((lane >> 3) & 1)]);
                b[2 * j][0] = t[0];
                b[2 * j][1] = t[1];
                b[2 * j + 1][0] = t[2];
                b[2 * j + 1][1] = t[3];
            }
#pragma unroll
            for (int i = 0; i < MF; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma_16816(acc[i][j], a[i], b[j]);
        }
        if (s + 1 < steps) store(buf ^ 1, kb0 + s + 1);
        __syncthreads();
    }

    // Fragment element c of (i, j): row g (+8 for c >= 2), column 2t (+1 for odd c), g = lane / 4.
    const uint32_t g = lane >> 2, t = lane & 3;
    // Split K: this split's partial tile ([z][M][all parts' rows]); else y itself.
    const bool split = gridDim.z > 1;
    const uint32_t all_rows = split ? rows_before_part(p, p.n_parts) : 0, col0 = split ? rows_before_part(p, part) : 0;
    float *out = split ? partial + (size_t)blockIdx.z * p.M * all_rows : nullptr;
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const uint32_t m = m0 + wm * WM + 16 * i + g + 8 * (c >> 1);
                const uint32_t n = n0 + wn * 32 + 8 * j + 2 * t + (c & 1);
                if (m >= p.M || n >= N) continue;
                if (split) {
                    out[(size_t)m * all_rows + col0 + n] = acc[i][j][c];
                } else {
                    float *dst = y + (size_t)m * p.y_stride + p.y_col[part] + n;
                    *dst = p.accumulate ? *dst + acc[i][j][c] : acc[i][j][c];
                }
            }
}

// Split K's second pass: y[m, part's y_col + n] (+)= the sum over the splits of partial[z][m][col], in
// split order (the same sum every run). One thread per output element.
__global__ void gemm_split_k_sum_kernel(const float *__restrict__ partial, float *__restrict__ y,
                                        const __grid_constant__ GemmParams p, uint32_t splits) {
    pdl_enter();
    const uint32_t all_rows = rows_before_part(p, p.n_parts);
    const size_t total = (size_t)p.M * all_rows;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t m = (uint32_t)(i / all_rows);
        uint32_t col = (uint32_t)(i % all_rows), part = 0;
        while (col >= p.N[part]) col -= p.N[part++];
        float sum = 0.f;
        for (uint32_t z = 0; z < splits; ++z) sum += partial[(size_t)z * total + i];
        float *dst = y + (size_t)m * p.y_stride + p.y_col[part] + col;
        *dst = p.accumulate ? *dst + sum : sum;
    }
}

}  // namespace akunu::cuda
