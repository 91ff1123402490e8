// y[M, N] (+)= x[M, K] . W[N, K]^T for every weight format, with the CPU's multi-part semantic:
// up to three weight matrices (fused Q/K/V or gate/up) sharing one input, part i writing output
// columns y_col[i] .. y_col[i] + N[i], and `accumulate` adding into y (the fused residual add).
//   M == 1 (decode): a GEMV, memory bound: a block owns 4 weight rows, its warps split K, lanes
//     read consecutive quant blocks (coalesced), each x chunk reused by the block's rows.
//   M > 1 (prefill/evaluation): a tensor-core tile GEMM: weight tiles dequantized to f16 in shared
//     memory, activations converted to f16, WMMA 16x16x16 with fp32 accumulators.
#include <mma.h>

#include "cuda/common.cuh"
#include "cuda/formats_kquant.cuh"

namespace akunu::cuda {

namespace {

struct WeightPtrs {
    const uint8_t *part[GemmParams::kMaxParts];
};

// Which part a global weight row (counted across parts) falls in, and its row inside that part.
__device__ __forceinline__ void locate_row(const GemmParams &p, uint32_t row, uint32_t &part, uint32_t &local) {
    part = 0;
    local = row;
    while (part + 1 < p.n_parts && local >= p.N[part]) {
        local -= p.N[part];
        ++part;
    }
}

// ------------------------------------------------------------------------------------------
// GEMV (M = 1). Block = 4 warps on the same kGemvRows (4 or 16) weight rows, K split between the warps (a
// warp-step is 8 blocks = 256 elements; warp w takes steps w, w + 4, ...), partial sums merged in
// shared memory. Inside a step, lane = (block lane / 4, slice lane % 4): a warp's weight loads are
// one contiguous run of 8 blocks and its x loads 1 KB of x, both coalesced; each x chunk is
// reused for all the block's rows. Splitting K keeps enough warps in flight for short matrices.
constexpr int kGemvWarps = 4;

template <class Fmt, int kGemvRows>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_kernel(const float *__restrict__ x, float *__restrict__ y, WeightPtrs w, GemmParams p, uint32_t total_rows) {
    pdl_enter();
    __shared__ float partial[kGemvWarps][kGemvRows];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t row0 = blockIdx.x * kGemvRows;

    const uint8_t *wrow[kGemvRows];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
        // Rows past the end recompute row0 (no divergence in the loop) and are not stored.
        const uint32_t row = row0 + r < total_rows ? row0 + r : row0;
        uint32_t part, local;
        locate_row(p, row, part, local);
        wrow[r] = w.part[part] + (size_t)local * p.w_row_bytes[part];
    }

    const int sub = lane & 3;               // slice of the block
    const uint32_t blk_in_step = lane >> 2;  // 0..7
    const uint32_t n_blocks = p.K / 32;
    float acc[kGemvRows] = {};
#pragma unroll 2
    for (uint32_t kb = (uint32_t)warp * 8 + blk_in_step; kb < n_blocks; kb += kGemvWarps * 8) {
        const float4 xa = *reinterpret_cast<const float4 *>(x + (size_t)kb * 32 + 4 * sub);
        const float4 xb = *reinterpret_cast<const float4 *>(x + (size_t)kb * 32 + 16 + 4 * sub);
#pragma unroll
        for (int r = 0; r < kGemvRows; ++r) acc[r] += fmt_dot8<Fmt>(wrow[r], kb, sub, xa, xb);
    }
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
        const float s = warp_sum(acc[r]);
        if (lane == 0) partial[warp][r] = s;
    }
    __syncthreads();
    if (threadIdx.x < kGemvRows && row0 + threadIdx.x < total_rows) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < kGemvWarps; ++i) s += partial[i][threadIdx.x];
        uint32_t part, local;
        locate_row(p, row0 + threadIdx.x, part, local);
        float *dst = y + p.y_col[part] + local;
        *dst = p.accumulate ? *dst + s : s;
    }
}

// ------------------------------------------------------------------------------------------
// Tensor-core GEMM (M > 1). Block = 4 warps computing a 64 (x rows) x 64 (weight rows) tile of y;
// each warp owns 32 x 32 (2 x 2 WMMA fragments). K advances one 32-element block at a time: one
// quant block per weight row, so two threads per row each dequantize one half.
constexpr int kTileM = 64, kTileN = 64, kTileK = 32;
constexpr int kPad = 8;  // halves of padding per shared row: breaks bank conflicts, keeps 16-byte rows

template <class Fmt>
__global__ void __launch_bounds__(128)
    gemm_tc_kernel(const float *__restrict__ x, float *__restrict__ y, WeightPtrs w, GemmParams p) {
    pdl_enter();
    using namespace nvcuda;
    __shared__ __align__(32) __half xs[kTileM][kTileK + kPad];
    __shared__ __align__(32) __half ws[kTileN][kTileK + kPad];
    __shared__ __align__(32) float out_s[kTileM][kTileN + 4];

    // blockIdx.x enumerates 64-row tiles part by part, so a tile never straddles two parts.
    uint32_t part = 0, tile = blockIdx.x;
    while (part + 1 < p.n_parts && tile >= (p.N[part] + kTileN - 1) / kTileN) {
        tile -= (p.N[part] + kTileN - 1) / kTileN;
        ++part;
    }
    const uint32_t n0 = tile * kTileN, m0 = blockIdx.y * kTileM;
    const uint32_t N = p.N[part];
    const uint8_t *W = w.part[part];
    const uint32_t x_stride = p.x_row_bytes / 4;  // floats
    const int tid = threadIdx.x, warp = tid >> 5;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

    for (uint32_t k0 = 0; k0 < p.K; k0 += kTileK) {
        // Activations: 64 rows x 32 floats -> f16; thread t handles row t/2, half t%2.
        {
            const int r = tid >> 1, h = tid & 1;
            __half2 *dst = reinterpret_cast<__half2 *>(&xs[r][16 * h]);
            if (m0 + r < p.M) {
                const float4 *src = reinterpret_cast<const float4 *>(x + (size_t)(m0 + r) * x_stride + k0 + 16 * h);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float4 v = src[i];
                    dst[2 * i] = __floats2half2_rn(v.x, v.y);
                    dst[2 * i + 1] = __floats2half2_rn(v.z, v.w);
                }
            } else {
#pragma unroll
                for (int i = 0; i < 8; ++i) dst[i] = __floats2half2_rn(0.f, 0.f);
            }
        }
        // Weights: 64 rows x one block; thread t dequantizes row t/2, half t%2.
        {
            const int r = tid >> 1, h = tid & 1;
            __half2 *dst = reinterpret_cast<__half2 *>(&ws[r][16 * h]);
            if (n0 + r < N) {
                float v[16];
                fmt_dequant_half<Fmt>(W + (size_t)(n0 + r) * p.w_row_bytes[part], k0 / 32, h, v);
#pragma unroll
                for (int i = 0; i < 8; ++i) dst[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
            } else {
#pragma unroll
                for (int i = 0; i < 8; ++i) dst[i] = __floats2half2_rn(0.f, 0.f);
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTileK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &xs[(warp >> 1) * 32 + 16 * i][kk], kTileK + kPad);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &ws[(warp & 1) * 32 + 16 * j][kk], kTileK + kPad);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(&out_s[(warp >> 1) * 32 + 16 * i][(warp & 1) * 32 + 16 * j], acc[i][j], kTileN + 4,
                                    wmma::mem_row_major);
    __syncthreads();
    for (int idx = tid; idx < kTileM * kTileN; idx += 128) {
        const uint32_t r = idx / kTileN, c = idx % kTileN;
        if (m0 + r < p.M && n0 + c < N) {
            float *dst = y + (size_t)(m0 + r) * p.y_stride + p.y_col[part] + n0 + c;
            *dst = p.accumulate ? *dst + out_s[r][c] : out_s[r][c];
        }
    }
}

template <class Fmt>
void launch_gemm(const LaunchArgs &a, const char *name) {
    const GemmParams &p = params_of<GemmParams>(a);
    if (p.K % 32 != 0 || p.x_row_bytes % 16 != 0 || (reinterpret_cast<uintptr_t>(a.buffers[0]) & 15) != 0)
        throw UnsupportedError(std::string(name) + " on CUDA needs K % 32 == 0 and 16-byte aligned activation rows");
    if (p.n_parts < 1 || p.n_parts > (uint32_t)GemmParams::kMaxParts) throw AkunuError("internal: bad GEMM part count");
    const float *x = reinterpret_cast<const float *>(a.buffers[0]);
    float *y = reinterpret_cast<float *>(a.buffers[1]);
    WeightPtrs w{};
    uint32_t total_rows = 0, n_tiles = 0;
    for (uint32_t i = 0; i < p.n_parts; ++i) {
        w.part[i] = a.buffers[2 + i];
        total_rows += p.N[i];
        n_tiles += ceil_div_u(p.N[i], kTileN);
    }
    if (p.M == 1) {
        // Rows per block, measured on an H100 (tg128, Q4_0): long rows gain from more rows per
        // block (more independent loads per thread: 1B shape 860 -> 927 t/s), short rows (K < 2048,
        // a warp-step covers the whole row) lose parallelism (SmolLM2 shape 884 -> 852 t/s).
        if (p.K >= 2048)
            launch_pdl(gemv_kernel<Fmt, 16>, ceil_div_u(total_rows, 16), kGemvWarps * 32, 0, a, x, y, w, p, total_rows);
        else
            launch_pdl(gemv_kernel<Fmt, 4>, ceil_div_u(total_rows, 4), kGemvWarps * 32, 0, a, x, y, w, p, total_rows);
    } else {
        dim3 grid(n_tiles, ceil_div_u(p.M, kTileM));
        launch_pdl(gemm_tc_kernel<Fmt>, grid, 128, 0, a, x, y, w, p);
    }
    check_launch(name);
}

}  // namespace

void launch_gemm_f32(const LaunchArgs &a) { launch_gemm<FmtF32>(a, "gemm_f32"); }
void launch_gemm_f16(const LaunchArgs &a) { launch_gemm<FmtF16>(a, "gemm_f16"); }
void launch_gemm_bf16(const LaunchArgs &a) { launch_gemm<FmtBF16>(a, "gemm_bf16"); }
void launch_gemm_q8_0(const LaunchArgs &a) { launch_gemm<FmtQ8_0>(a, "gemm_q8_0"); }
void launch_gemm_q4_0(const LaunchArgs &a) { launch_gemm<FmtQ4_0>(a, "gemm_q4_0"); }
void launch_gemm_q4_1(const LaunchArgs &a) { launch_gemm<FmtQ4_1>(a, "gemm_q4_1"); }
#define AKUNU_DEFINE(lower, upper) \
    void launch_gemm_##lower(const LaunchArgs &a) { launch_gemm<Fmt##upper>(a, "gemm_" #lower); }
AKUNU_CUDA_KQUANT_FORMATS(AKUNU_DEFINE)
#undef AKUNU_DEFINE

}  // namespace akunu::cuda
