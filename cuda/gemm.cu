// y[M, N] (+)= x[M, K] . W[N, K]^T for every weight format, with the CPU's multi-part semantic:
// up to three weight matrices (fused Q/K/V or gate/up) sharing one input, part i writing output
// columns y_col[i] .. y_col[i] + N[i], and `accumulate` adding into y (the fused residual add).
//   M == 1 (decode): a GEMV, memory bound (cuda/gemv.cuh).
//   M > 1 (prefill/evaluation): a tensor-core tile GEMM (cuda/gemm_tiles.cuh).
//   M > 1 with F16 weights: cuBLAS when it loads (src/backend/cuda/cublas_runtime.h).
// Every quantized format but Q2_K / Q3_K arrives in the g8 layout (cuda/layout_g8.h, repacked at
// load); those two and the float formats as their GGUF rows (BF16 converted to F16). A pair command
// holds parts of two g8 formats (GemmParams::second_part; docs/adr/0030).
#include <algorithm>
#include <atomic>
#include <string>

#include "backend/cuda/cublas_runtime.h"
#include "cuda/gemm_tiles.cuh"
#include "cuda/gemv_q16.cuh"

namespace akunu::cuda {

namespace {

struct GemmLaunch {
    const float *x;
    float *y;
    WeightPtrs w;
    const float *norm_w = nullptr;  // the input RMSNorm's weight (kGemmInputRMSNorm)
    uint32_t total_rows = 0, total_groups = 0, n_tiles = 0;
};

GemmLaunch prepare(const LaunchArgs &a, const char *name) {
    const GemmParams &p = params_of<GemmParams>(a);
    if (p.K % 32 != 0 || p.x_row_bytes % 16 != 0 || (reinterpret_cast<uintptr_t>(a.buffers[0]) & 15) != 0)
        throw UnsupportedError(std::string(name) + " on CUDA needs K % 32 == 0 and 16-byte aligned activation rows");
    if (p.n_parts < 1 || p.n_parts > (uint32_t)GemmParams::kMaxParts) throw AkunuError("internal: bad GEMM part count");
    GemmLaunch l;
    l.x = reinterpret_cast<const float *>(a.buffers[0]);
    l.y = reinterpret_cast<float *>(a.buffers[1]);
    for (uint32_t i = 0; i < p.n_parts; ++i) {
        l.w.part[i] = a.buffers[2 + i];
        l.total_rows += p.N[i];
        l.total_groups += g8_groups(p.N[i]);
        l.n_tiles += ceil_div_u(p.N[i], kTileN);
    }
    // The fused input norm and gated output exist for decode (M = 1) only; the table builder asks
    // for them nowhere else.
    const bool gated = p.output_op != kGemmOutputPlain, norm = p.input_op == kGemmInputRMSNorm;
    if ((gated || norm) && p.M != 1) throw AkunuError(std::string("internal: ") + name + " fusions need M == 1");
    if (gated && (p.n_parts != 2 || p.N[0] != p.N[1] || p.accumulate))
        throw AkunuError(std::string("internal: ") + name + "'s gated output needs two parts of equal size");
    if (norm) {
        l.norm_w = reinterpret_cast<const float *>(a.buffers[2 + p.n_parts]);
        if (reinterpret_cast<uintptr_t>(l.norm_w) & 15) throw AkunuError("internal: unaligned norm weight");
    }
    return l;
}

// Blocks of 256 threads for a grid-stride kernel over `items` (one a thread): at most 8 an SM.
unsigned grid_stride_blocks(const LaunchArgs &a, size_t items) {
    return std::min<unsigned>(ceil_div_u(items, 256), 8u * (unsigned)a.workspace->sm_count);
}

// x rows m0 .. m0 + m - 1 as dense f16 rows of K at x16 (the tiles' and cuBLAS's activations).
void launch_x_to_half(const LaunchArgs &a, const GemmLaunch &l, uint32_t m0, uint32_t m, __half *x16) {
    const GemmParams &p = params_of<GemmParams>(a);
    launch_pdl(to_half_rows_kernel, grid_stride_blocks(a, (size_t)m * p.K / 4), 256, 0, a,
               l.x + (size_t)m0 * (p.x_row_bytes / 4), p.x_row_bytes / 4, x16, m, p.K);
}

// How many blocks share each tile's K steps: 1 when the tiles fill at least half the GPU's block
// slots (two per SM); else enough splits to fill them, each of at least 4 K steps, as long as the
// partial tiles ([splits][M][rows]) fit the workspace's `free_floats` (docs/adr/0024).
uint32_t split_k_count(const LaunchArgs &a, const GemmLaunch &l, uint32_t m_tiles, size_t free_floats) {
    const GemmParams &p = params_of<GemmParams>(a);
    const uint32_t blocks = l.n_tiles * m_tiles, slots = 2u * (uint32_t)a.workspace->sm_count;
    if (!a.workspace->split_k || blocks * 2 > slots) return 1;
    uint32_t splits = std::min(slots / blocks, (p.K / kTileK) / 4);
    while (splits > 1 && (size_t)splits * p.M * l.total_rows > free_floats) --splits;
    return std::max(splits, 1u);
}

template <class Loader, int BM>
void launch_tile_kernel(const LaunchArgs &a, const GemmLaunch &l) {
    const GemmParams &p = params_of<GemmParams>(a);
    // The workspace (its last 128 floats belong to argmax_f32): f16 activations when they fit,
    // then split K's partial tiles.
    const size_t halves = (size_t)p.M * p.K, capacity = (a.workspace->floats - 128) * 2;
    const bool x_half = halves <= capacity;
    const size_t x_floats = x_half ? (halves + 7) / 8 * 4 : 0;  // to a 16-byte boundary
    const uint32_t m_tiles = ceil_div_u(p.M, BM);
    const uint32_t splits = split_k_count(a, l, m_tiles, a.workspace->floats - 128 - x_floats);
    float *partial = splits > 1 ? a.workspace->data + x_floats : nullptr;
    const dim3 grid(l.n_tiles, m_tiles, splits);
    if (x_half) {
        __half *x16 = reinterpret_cast<__half *>(a.workspace->data);
        launch_x_to_half(a, l, 0, p.M, x16);
        launch_pdl(gemm_mma_kernel<Loader, BM, true>, grid, kTileThreads, 0, a, static_cast<const void *>(x16), l.y,
                   l.w, p, partial);
    } else {
        launch_pdl(gemm_mma_kernel<Loader, BM, false>, grid, kTileThreads, 0, a, static_cast<const void *>(l.x), l.y,
                   l.w, p, partial);
    }
    if (splits > 1) {
        launch_pdl(gemm_split_k_sum_kernel, grid_stride_blocks(a, (size_t)p.M * l.total_rows), 256, 0, a,
                   static_cast<const float *>(partial), l.y, p, splits);
    }
}

// M > 1: 128-row x tiles when they alone fill the GPU, else 64 (short prompts, narrow weights).
// (Two blocks of 64 K per step measured slower on an H100: benchmarks/HISTORY.md, 2026-11-22,
// 1b010e2.)
template <class Loader>
void launch_tiles(const LaunchArgs &a, const GemmLaunch &l) {
    const GemmParams &p = params_of<GemmParams>(a);
    if (l.n_tiles * ceil_div_u(p.M, 128) >= (unsigned)a.workspace->sm_count)
        launch_tile_kernel<Loader, 128>(a, l);
    else
        launch_tile_kernel<Loader, 64>(a, l);
}

// Dynamic shared memory of a GEMV block with the input norm: the staged row (stage_normed_x).
template <typename Kernel>
size_t staged_x_bytes(Kernel kernel, const GemmParams &p, bool norm) {
    if (!norm) return 0;
    const size_t bytes = (size_t)p.K * sizeof(float);
    if (!allow_dynamic_smem(kernel, bytes))
        throw UnsupportedError("a normed GEMV input of " + std::to_string(p.K) + " floats does not fit shared memory");
    return bytes;
}

// Decode over GGUF rows. Rows per block, measured on an H100 (tg128, Q4_0 before g8): long rows
// gain from more rows per block (more independent loads per thread), short rows (K < 2048, a
// warp-step covers the whole row) lose parallelism. A gated block holds half gate, half up rows.
template <class Fmt, int kRows, bool kNorm>
void launch_gemv_rows(const LaunchArgs &a, const GemmLaunch &l) {
    const GemmParams &p = params_of<GemmParams>(a);
    const unsigned blocks = p.output_op != kGemmOutputPlain ? ceil_div_u(p.N[0], kRows / 2) : ceil_div_u(l.total_rows, kRows);
    auto kernel = gemv_rows_kernel<Fmt, kRows, kNorm>;
    launch_pdl(kernel, blocks, kGemvWarps * 32, staged_x_bytes(kernel, p, kNorm), a, l.x, l.y, l.w, p, l.total_rows,
               l.norm_w);
}

// F16 prefill (BF16 arrives as F16: CudaDevice converts it at load) through cuBLAS
// (docs/adr/0010): x is converted to f16 in the workspace, as many rows at a time as fit, then one
// library GEMM per part: akunu's own tiles (mma.sync, one 32-wide K step per barrier) ran far
// below cuBLAS on float weights (docs/adr/0010 has the numbers). False when cuBLAS is missing or
// switched off: the caller runs the tiles.
bool launch_library_gemm(const LaunchArgs &a, const GemmLaunch &l) {
    const CublasGemm *lib = a.workspace->cublas;
    if (!lib || !lib->ready()) return false;
    const GemmParams &p = params_of<GemmParams>(a);
    const size_t capacity = (a.workspace->floats - 128) * 2;  // its last 128 floats belong to argmax_f32
    const uint32_t rows = (uint32_t)std::min<size_t>(p.M, capacity / p.K);
    if (rows == 0) return false;
    __half *x16 = reinterpret_cast<__half *>(a.workspace->data);
    for (uint32_t m0 = 0; m0 < p.M; m0 += rows) {
        const uint32_t m = std::min(rows, p.M - m0);
        launch_x_to_half(a, l, m0, m, x16);
        check_launch("to_half_rows");
        for (uint32_t i = 0; i < p.n_parts; ++i)
            lib->gemm(l.w.part[i], p.w_row_bytes[i] / 2, x16, p.K, l.y + (size_t)m0 * p.y_stride + p.y_col[i], p.y_stride,
                      m, p.N[i], p.K, p.accumulate);
    }
    return true;
}

// Rows of x from which a quantized prefill GEMM dequantizes its weights for cuBLAS: the f16 copy
// costs ~4.6 bytes a weight of traffic, paid back by cuBLAS's wgmma kernels (~3x akunu's mma.sync
// tiles on an H200) once each weight meets enough rows (docs/adr/0025 has the measurements).
constexpr uint32_t kDequantLibraryMinRows = 256;

// Rows row0 .. row0 + rows - 1 of a g8 matrix as dense f16 rows of K: one (row, 16-element half
// of a 32-block) per thread step, through the format's own to_half (the tiles' weights, bit for bit).
template <class F>
__global__ void g8_to_half_rows_kernel(const uint8_t *__restrict__ w, uint32_t K, uint32_t row0, uint32_t rows,
                                       __half *__restrict__ out) {
    pdl_enter();
    const uint32_t halves = K / 16;
    const size_t group_bytes = F::Layout::group_bytes(K);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)rows * halves;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t r = row0 + (uint32_t)(i / halves), j = (uint32_t)(i % halves), kb = j / 2;
        const int h = (int)(j & 1);
        const auto raw = F::raw(w + (size_t)(r / kG8Rows) * group_bytes, K, kb, r % kG8Rows, h);
        uint32_t o[8];
        F::to_half(raw, h, o);
        uint4 *dst = reinterpret_cast<uint4 *>(out + (size_t)(r - row0) * K + (size_t)kb * 32 + 16 * h);
        dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
        dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
    }
}

// Quantized prefill over many rows through cuBLAS: x to f16 in the first half of the library's
// scratch (as many rows as fit), each weight part dequantized to f16 in slices of rows into the
// second half, one library GEMM per slice. False (the caller runs the tiles) below
// kDequantLibraryMinRows, without cuBLAS or its scratch, or with AKUNU_CUDA_DEQUANT_CUBLAS=0.
template <class F>
bool launch_dequant_library_gemm(const LaunchArgs &a, const GemmLaunch &l) {
    const GemmParams &p = params_of<GemmParams>(a);
    const CublasGemm *lib = a.workspace->cublas;
    if (p.M < kDequantLibraryMinRows || !a.workspace->dequant_library_gemm || !lib) return false;
    auto *scratch = static_cast<__half *>(lib->scratch());
    if (!scratch) return false;
    const size_t half_room = CublasGemm::kScratchBytes / 2 / sizeof(__half);
    const uint32_t x_rows = (uint32_t)std::min<size_t>(p.M, half_room / p.K);
    const uint32_t slice_rows = (uint32_t)(half_room / p.K / 128 * 128);
    if (x_rows == 0 || slice_rows == 0) return false;
    __half *x16 = scratch, *w16 = scratch + half_room;
    for (uint32_t m0 = 0; m0 < p.M; m0 += x_rows) {
        const uint32_t m = std::min(x_rows, p.M - m0);
        launch_x_to_half(a, l, m0, m, x16);
        check_launch("to_half_rows");
        for (uint32_t i = 0; i < p.n_parts; ++i)
            for (uint32_t n0 = 0; n0 < p.N[i]; n0 += slice_rows) {
                const uint32_t n = std::min(slice_rows, p.N[i] - n0);
                launch_pdl(g8_to_half_rows_kernel<F>, grid_stride_blocks(a, (size_t)n * p.K / 16), 256, 0, a,
                           static_cast<const uint8_t *>(l.w.part[i]), p.K, n0, n, w16);
                check_launch("g8_to_half_rows");
                lib->gemm(w16, p.K, x16, p.K, l.y + (size_t)m0 * p.y_stride + p.y_col[i] + n0, p.y_stride, m, n, p.K,
                          p.accumulate);
            }
    }
    return true;
}

template <class Fmt>
void launch_gemm_rows(const LaunchArgs &a, const char *name) {
    const GemmLaunch l = prepare(a, name);
    const GemmParams &p = params_of<GemmParams>(a);
    if constexpr (std::is_same_v<Fmt, FmtF16>)
        if (p.M > 1 && launch_library_gemm(a, l)) return;
    if (p.M > 1)
        launch_tiles<RowsTileLoader<Fmt>>(a, l);
    else if (l.norm_w)
        p.K >= 2048 ? launch_gemv_rows<Fmt, 16, true>(a, l) : launch_gemv_rows<Fmt, 4, true>(a, l);
    else
        p.K >= 2048 ? launch_gemv_rows<Fmt, 16, false>(a, l) : launch_gemv_rows<Fmt, 4, false>(a, l);
    check_launch(name);
}

// The integer GEMV kernel of a block shape: groups per block 1, 2 or (a producer of a handed-off
// row, cuda/q16_activation.cuh) 4.
template <class F, bool kNorm, int kWarps>
auto q16_kernel(int groups) {
    if constexpr (!kNorm)  // producers have no input norm (can_hand_off)
        if (groups == 4) return gemv_g8_q16_kernel<F, 4, kWarps, kNorm, false>;
    return groups == 2 ? gemv_g8_q16_kernel<F, 2, kWarps, kNorm, false> : gemv_g8_q16_kernel<F, 1, kWarps, kNorm, false>;
}
template <class F, bool kNorm>
auto q16_kernel(int groups, int warps) {
    return warps == 16 ? q16_kernel<F, kNorm, 16>(groups) : warps == 8 ? q16_kernel<F, kNorm, 8>(groups)
                                                                      : q16_kernel<F, kNorm, 4>(groups);
}

// Dynamic shared memory of an integer-GEMV block of `warps` warps: their x slices (cuda/gemv_q16.cuh).
size_t q16_block_smem(uint32_t K, int warps) { return (size_t)warps * q16_warp_bytes(q16_steps(K, warps)); }

// A grid on more than half the GPU's warp slots lets the next kernel launch only after its main
// loop (the next kernel's early blocks would take room from its own); a smaller one right after the
// wait, so the next kernel's blocks issue their weight loads meanwhile (the threshold from H100
// A/Bs: benchmarks/HISTORY.md, 2026-11-23, 590392c).
bool releases_late(const LaunchArgs &a, unsigned blocks, int warps) {
    return a.workspace->q16_late_release && blocks * warps * 2 > a.workspace->warp_slots;
}

// The input row of a decode GEMV command, for a producer offering it quantized (Q16Handoff).
void describe_input_row(const LaunchArgs &a, const float **row, uint32_t *len, const float **norm_w) {
    const GemmParams &p = params_of<GemmParams>(a);
    *row = reinterpret_cast<const float *>(a.buffers[0]);
    *len = p.K;
    *norm_w = p.input_op == kGemmInputRMSNorm ? reinterpret_cast<const float *>(a.buffers[2 + p.n_parts]) : nullptr;
}

// How a decode GEMV over the g8 layout runs (launch_gemv_g8 explains the choices).
struct G8Plan {
    bool two = false, wide = false;
    int warps = 4;
    unsigned items = 0;
    bool integer = false;   // the integer kernel (cuda/gemv_q16.cuh)
    bool strided = false;   // its one-wave grid walking the items
    unsigned blocks = 0;
    unsigned per_block = 1;  // items per block of that grid
};

template <class F, bool kNorm>
G8Plan plan_gemv_g8(const LaunchArgs &a, const GemmParams &p, uint32_t total_groups) {
    G8Plan g;
    const bool gated = p.output_op != kGemmOutputPlain;
    const unsigned sm_count = (unsigned)a.workspace->sm_count;
    g.two = gated || total_groups >= 2u * sm_count;
    g.wide = p.K > 512;
    g.items = gated ? g8_groups(p.N[0]) : g.two ? ceil_div_u(total_groups, 2) : total_groups;
    g.warps = g.wide ? 8 : 4;
    g.blocks = g.items;
    const auto q16_smem = [&](int w) { return q16_block_smem(p.K, w); };
    if (!a.workspace->integer_gemv || p.K < 32u * 4 * g.warps || q16_smem(g.warps) > 48 * 1024) return g;
    g.integer = true;
    if (g.wide && a.workspace->sixteen_warp_gemv && g.items * 8u < 32u * sm_count && p.K >= 32u * 4 * 16 &&
        q16_smem(16) <= 48 * 1024) {
        int per_sm = 0;
        auto k16 = q16_kernel<F, kNorm, 16>(g.two ? 2 : 1);
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k16, 16 * 32, q16_smem(16)) == cudaSuccess &&
            g.items <= (unsigned)per_sm * sm_count)
            g.warps = 16;
        cudaGetLastError();
    }
    if (g.two && g.warps == 8 && a.workspace->q16_grid_stride) {
        auto strided = gemv_g8_q16_kernel<F, 2, 8, kNorm, true>;
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, strided, 8 * 32, q16_smem(8)) == cudaSuccess &&
            per_sm > 0 && g.items > (unsigned)per_sm * sm_count) {
            g.strided = true;
            g.per_block = ceil_div_u(g.items, (unsigned)per_sm * sm_count);
            g.blocks = ceil_div_u(g.items, g.per_block);  // per_block items each, the last block maybe fewer
        }
        cudaGetLastError();
    }
    return g;
}

// Whether this GEMV, planned as `g`, can leave its output row quantized for the next one
// (a.q16_out): its output must be exactly that row, in whole 32-element blocks per block. A gated
// output in the one-wave grid walks runs of 4 consecutive items (gated_hand_off); a plain one takes
// 32-row items (four groups, a one-part output; can_hand_off) in a grid that still fits on the
// GPU at once.
bool hands_off_row(const LaunchArgs &a, const GemmParams &p, const GemmLaunch &l) {
    return p.M == 1 && a.q16_out.offered_for(l.y + p.y_col[0], p.N[0]);
}
bool gated_hand_off(const LaunchArgs &a, const GemmParams &p, const GemmLaunch &l, const G8Plan &g) {
    return g.integer && g.strided && g.per_block % 4 == 0 && p.output_op != kGemmOutputPlain && hands_off_row(a, p, l);
}
template <class F>
bool can_hand_off(const LaunchArgs &a, const GemmParams &p, const GemmLaunch &l, const G8Plan &g) {
    if (!g.integer || !g.two || g.strided || p.output_op != kGemmOutputPlain || p.n_parts != 1 ||
        p.input_op == kGemmInputRMSNorm || !hands_off_row(a, p, l))
        return false;
    int per_sm = 0;
    auto k4 = q16_kernel<F, false>(4, g.warps);
    const bool fits = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k4, g.warps * 32,
                                                                    q16_block_smem(p.K, g.warps)) == cudaSuccess &&
                      ceil_div_u(l.total_groups, 4) <= (unsigned)per_sm * (unsigned)a.workspace->sm_count;
    cudaGetLastError();
    return fits;
}

// Decode over the g8 layout. Two groups (16 rows) per block share each x load when that still
// leaves a block per SM; small matrices keep one group per block for parallelism (on an H100 two
// groups per block streamed the 8B shape's large matrices faster: docs/adr/0006). Rows longer
// than 4 warp-steps (K > 512) get 8 warps, so a short row (SmolLM2's 576) is one step per warp. A
// gated output always pairs a gate group with its up group.
//
// The integer GEMV (cuda/gemv_q16.cuh) runs where its per-warp x slices fit the default shared
// memory, and where rows give each warp a step at least: below that, the float kernel's x, staged
// once per block, serves several items (faster at SmolLM2's K = 576: benchmarks/HISTORY.md,
// 2026-11-22, 7931fe2). A grid that would leave fewer than 32 warps per SM (the 8B shape's o_proj
// and down: 256 blocks) gets 16-warp blocks where rows give each warp a step and the blocks still
// fit on the GPU at once: twice the loads in flight per SM, with the same x traffic (2026-11-22,
// 3ab1d4a).
//
// More items than fit on the GPU at once (the logits: 8016 at the 1B shape, 9496 at the Qwen3
// shape's 1024-long rows; the 1B's gate_up: 1024) would run in waves, the last one partial, and
// spend much of a one-item block on quantizing x and storing: one wave of blocks walks the items,
// each block the same number, quantizing x once per block (both the walk and the equal split
// measured faster on an H100: benchmarks/HISTORY.md, 2026-11-23, 590392c). (Grids that large are
// two-group, 8-warp ones: 16 warps go to small grids only.)
template <class F, bool kNorm>
void launch_gemv_g8(const LaunchArgs &a, const GemmLaunch &l) {
    const GemmParams &p = params_of<GemmParams>(a);
    const G8Plan g = plan_gemv_g8<F, kNorm>(a, p, l.total_groups);
    const int warps = g.warps;
    const bool two = g.two, wide = g.wide;
    const unsigned items = g.items;
    if (a.q16_in && !g.integer) throw AkunuError("internal: a quantized input handed to a GEMV that cannot read it");
    if (g.integer) {
        const size_t smem = q16_block_smem(p.K, warps);
        const bool hand_off = !kNorm && can_hand_off<F>(a, p, l, g), gated_off = gated_hand_off(a, p, l, g);
        const bool produces = hand_off || gated_off;
        const int groups = hand_off ? 4 : two ? 2 : 1;
        auto q16 = g.strided ? gemv_g8_q16_kernel<F, 2, 8, kNorm, true> : q16_kernel<F, kNorm>(groups, warps);
        // A gated handoff walks runs of 4 consecutive items (32 outputs) per block.
        const unsigned per_block = gated_off ? g.per_block : 0;
        const unsigned blocks = hand_off ? ceil_div_u(l.total_groups, 4) : gated_off ? ceil_div_u(items, per_block) : g.blocks;
        launch_pdl(q16, blocks, warps * 32, smem, a, l.x, l.y, l.w, p, l.total_groups, hand_off ? blocks : items,
                   l.norm_w, releases_late(a, blocks, warps), static_cast<const XQ16Chunk *>(a.q16_in),
                   produces ? static_cast<XQ16Chunk *>(a.q16_out.chunks) : nullptr,
                   produces ? a.q16_out.norm_w : nullptr, per_block, a.output_settled && a.workspace->early_output);
        if (produces) *a.q16_out.written = true;
        return;
    }
    const int threads = warps * 32;
    auto kernel = two ? (wide ? gemv_g8_kernel<F, 2, 8, kNorm> : gemv_g8_kernel<F, 2, 4, kNorm>)
                      : (wide ? gemv_g8_kernel<F, 1, 8, kNorm> : gemv_g8_kernel<F, 1, 4, kNorm>);
    const size_t smem = staged_x_bytes(kernel, p, kNorm);
    // A normed GEMV runs one wave of blocks, each staging its input once and walking its items.
    unsigned blocks = items;
    if (kNorm) {
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) == cudaSuccess && per_sm > 0)
            blocks = std::min<unsigned>(items, (unsigned)(per_sm * a.workspace->sm_count));
        cudaGetLastError();
    }
    // The early L2 prefetch pays for matrices small next to L2 and costs on larger ones, whose
    // prefetched lines are evicted before use (benchmarks/HISTORY.md, 2026-11-22, e99d575).
    const size_t weight_bytes = (size_t)l.total_groups * F::Layout::group_bytes(p.K);
    const bool prefetch = a.workspace->prefetch_weights && 8 * weight_bytes <= a.workspace->l2_bytes;
    launch_pdl(kernel, blocks, threads, smem, a, l.x, l.y, l.w, p, l.total_groups, items, l.norm_w, prefetch);
}

template <class F>
void launch_gemm_g8(const LaunchArgs &a, const char *name) {
    const GemmLaunch l = prepare(a, name);
    const GemmParams &p = params_of<GemmParams>(a);
    if (p.M > 1 && launch_dequant_library_gemm<F>(a, l)) {
        check_launch(name);
        return;
    }
    if (p.M > 1)
        launch_tiles<G8TileLoader<F>>(a, l);
    else if (l.norm_w)
        launch_gemv_g8<F, true>(a, l);
    else
        launch_gemv_g8<F, false>(a, l);
    check_launch(name);
}

// ---- pair commands: the parts of two dtypes in one command (GemmParams::second_part) ----

// A pair command's halves as commands of their own: parts 0 .. second_part - 1 (the first
// dtype's) and the rest, each with its weights, the shared x, y and norm weight, and no output
// handed to the next GEMV (a multi-part output never is). The second half reads y's allocation
// after the first writes it, so its output is not settled.
struct PairHalves {
    GemmParams p[2];
    LaunchArgs a[2];
    WeightPtrs w[2];
    uint32_t groups[2] = {0, 0};

    explicit PairHalves(const LaunchArgs &whole) {
        const GemmParams &pw = params_of<GemmParams>(whole);
        const uint32_t s = pw.second_part;
        if (s < 1 || s >= pw.n_parts) throw AkunuError("internal: a pair GEMM's second_part is out of range");
        for (int k = 0; k < 2; ++k) {
            const uint32_t first = k == 0 ? 0 : s, n = k == 0 ? s : pw.n_parts - s;
            p[k] = pw;
            p[k].n_parts = n;
            p[k].second_part = 0;
            a[k] = whole;
            a[k].params = &p[k];
            a[k].q16_out = Q16Handoff{};
            for (uint32_t i = 0; i < n; ++i) {
                p[k].N[i] = pw.N[first + i];
                p[k].y_col[i] = pw.y_col[first + i];
                p[k].w_row_bytes[i] = pw.w_row_bytes[first + i];
                a[k].buffers[2 + i] = whole.buffers[2 + first + i];
                w[k].part[i] = whole.buffers[2 + first + i];
                groups[k] += g8_groups(p[k].N[i]);
            }
            if (pw.input_op == kGemmInputRMSNorm) a[k].buffers[2 + n] = whole.buffers[2 + pw.n_parts];
        }
        a[1].output_settled = false;
    }
    PairHalves(const PairHalves &) = delete;
    PairHalves &operator=(const PairHalves &) = delete;
};

// Whether a pair's decode GEMV runs as one launch of gemv_g8_q16_pair_kernel: planned as one
// GEMV over both halves' rows (integer, 8 or 16 warps, one item a block), each half's items of
// its own dtype. Otherwise (prefill, rows too short or too many items for one wave) the halves
// run one after the other, as two commands would.
template <class F1, bool kNorm>
bool pair_in_one_launch(const LaunchArgs &a, const PairHalves &h, G8Plan *plan) {
    const GemmParams &p = params_of<GemmParams>(a);
    if (p.M != 1 || p.output_op != kGemmOutputPlain) return false;
    *plan = plan_gemv_g8<F1, kNorm>(a, p, h.groups[0] + h.groups[1]);
    return plan->integer && !plan->strided && plan->warps >= 8;
}

std::atomic<uint64_t> g_pair_gemvs{0};

template <class F1, class F2, bool kNorm>
void launch_pair_gemv(const LaunchArgs &a, const GemmLaunch &l, const PairHalves &h, const G8Plan &g) {
    const GemmParams &p = params_of<GemmParams>(a);
    const uint32_t items1 = g.two ? ceil_div_u(h.groups[0], 2) : h.groups[0];
    const uint32_t items2 = g.two ? ceil_div_u(h.groups[1], 2) : h.groups[1];
    const unsigned blocks = items1 + items2;
    const size_t smem = q16_block_smem(p.K, g.warps);
    const auto kernel = g.two ? (g.warps == 16 ? gemv_g8_q16_pair_kernel<F1, F2, 2, 16, kNorm>
                                               : gemv_g8_q16_pair_kernel<F1, F2, 2, 8, kNorm>)
                              : (g.warps == 16 ? gemv_g8_q16_pair_kernel<F1, F2, 1, 16, kNorm>
                                               : gemv_g8_q16_pair_kernel<F1, F2, 1, 8, kNorm>);
    launch_pdl(kernel, blocks, g.warps * 32, smem, a, l.x, l.y, h.w[0], h.p[0], h.w[1], h.p[1], h.groups[0],
               h.groups[1], items1, l.norm_w, releases_late(a, blocks, g.warps), static_cast<const XQ16Chunk *>(a.q16_in));
    ++g_pair_gemvs;
}

template <class F1, class F2>
void launch_gemm_g8_pair(const LaunchArgs &a, const char *name) {
    const GemmLaunch l = prepare(a, name);
    const PairHalves h(a);
    G8Plan g;
    if (l.norm_w ? pair_in_one_launch<F1, true>(a, h, &g) : pair_in_one_launch<F1, false>(a, h, &g)) {
        if (l.norm_w)
            launch_pair_gemv<F1, F2, true>(a, l, h, g);
        else
            launch_pair_gemv<F1, F2, false>(a, l, h, g);
        check_launch(name);
        return;
    }
    launch_gemm_g8<F1>(h.a[0], name);
    launch_gemm_g8<F2>(h.a[1], name);
}

}  // namespace

void launch_gemm_f32(const LaunchArgs &a) { launch_gemm_rows<FmtF32>(a, "gemm_f32"); }
void launch_gemm_f16(const LaunchArgs &a) { launch_gemm_rows<FmtF16>(a, "gemm_f16"); }
#define AKUNU_DEFINE_G8(lower, upper, fmt) \
    void launch_gemm_##lower##_g8(const LaunchArgs &a) { launch_gemm_g8<fmt>(a, "gemm_" #lower "_g8"); }
AKUNU_CUDA_G8_FORMATS(AKUNU_DEFINE_G8)
#undef AKUNU_DEFINE_G8
#define AKUNU_DEFINE_G8_PAIR(a, fa, b, fb)                                   \
    void launch_gemm_##a##_g8_pair_##b##_g8(const LaunchArgs &args) {        \
        launch_gemm_g8_pair<fa, fb>(args, "gemm_" #a "_g8+gemm_" #b "_g8"); \
    }
AKUNU_CUDA_G8_PAIRS(AKUNU_DEFINE_G8_PAIR)
#undef AKUNU_DEFINE_G8_PAIR
#define AKUNU_DEFINE(lower, upper) \
    void launch_gemm_##lower(const LaunchArgs &a) { launch_gemm_rows<Fmt##upper>(a, "gemm_" #lower); }
AKUNU_CUDA_KQUANT_FORMATS(AKUNU_DEFINE)
#undef AKUNU_DEFINE

namespace {

template <class F>
bool takes_q16_input(const LaunchArgs &a, const float **row, uint32_t *len, const float **norm_w) {
    const GemmParams &p = params_of<GemmParams>(a);
    if (p.M != 1 || p.K % 32 != 0 || p.n_parts < 1 || p.n_parts > (uint32_t)GemmParams::kMaxParts) return false;
    uint32_t total_groups = 0;
    for (uint32_t i = 0; i < p.n_parts; ++i) total_groups += g8_groups(p.N[i]);
    const bool norm = p.input_op == kGemmInputRMSNorm;
    const G8Plan g = norm ? plan_gemv_g8<F, true>(a, p, total_groups) : plan_gemv_g8<F, false>(a, p, total_groups);
    if (!g.integer) return false;
    describe_input_row(a, row, len, norm_w);
    return true;
}

// A pair takes the row quantized where its one launch or both its halves would.
template <class F1, class F2>
bool pair_takes_q16_input(const LaunchArgs &a, const float **row, uint32_t *len, const float **norm_w) {
    const GemmParams &p = params_of<GemmParams>(a);
    if (p.M != 1 || p.K % 32 != 0 || p.n_parts < 2 || p.n_parts > (uint32_t)GemmParams::kMaxParts ||
        p.second_part < 1 || p.second_part >= p.n_parts)
        return false;
    const PairHalves h(a);
    G8Plan g;
    const bool one_launch = p.input_op == kGemmInputRMSNorm ? pair_in_one_launch<F1, true>(a, h, &g)
                                                            : pair_in_one_launch<F1, false>(a, h, &g);
    if (one_launch) {
        describe_input_row(a, row, len, norm_w);
        return true;
    }
    return takes_q16_input<F1>(h.a[0], row, len, norm_w) && takes_q16_input<F2>(h.a[1], row, len, norm_w);
}

}  // namespace

bool gemv_takes_q16_input(LaunchFn fn, const LaunchArgs &a, const float **row, uint32_t *len, const float **norm_w) {
#define AKUNU_TAKES_Q16(lower, upper, fmt) \
    if (fn == launch_gemm_##lower##_g8) return takes_q16_input<fmt>(a, row, len, norm_w);
    AKUNU_CUDA_G8_FORMATS(AKUNU_TAKES_Q16)
#undef AKUNU_TAKES_Q16
#define AKUNU_PAIR_TAKES_Q16(a_, fa, b, fb) \
    if (fn == launch_gemm_##a_##_g8_pair_##b##_g8) return pair_takes_q16_input<fa, fb>(a, row, len, norm_w);
    AKUNU_CUDA_G8_PAIRS(AKUNU_PAIR_TAKES_Q16)
#undef AKUNU_PAIR_TAKES_Q16
    return false;
}

uint64_t pair_gemvs_launched() { return g_pair_gemvs.load(); }

size_t q16_handoff_bytes(uint32_t len) { return (size_t)xq16_chunks(len) * sizeof(XQ16Chunk); }

bool is_gemm_launcher(LaunchFn fn) {
    if (fn == launch_gemm_f32 || fn == launch_gemm_f16) return true;
#define AKUNU_IS_G8(lower, upper, fmt) \
    if (fn == launch_gemm_##lower##_g8) return true;
    AKUNU_CUDA_G8_FORMATS(AKUNU_IS_G8)
#undef AKUNU_IS_G8
#define AKUNU_IS_G8_PAIR(a, fa, b, fb) \
    if (fn == launch_gemm_##a##_g8_pair_##b##_g8) return true;
    AKUNU_CUDA_G8_PAIRS(AKUNU_IS_G8_PAIR)
#undef AKUNU_IS_G8_PAIR
#define AKUNU_IS_ROWS(lower, upper) \
    if (fn == launch_gemm_##lower) return true;
    AKUNU_CUDA_KQUANT_FORMATS(AKUNU_IS_ROWS)
#undef AKUNU_IS_ROWS
    return false;
}

}  // namespace akunu::cuda
