// GEMM / GEMV kernels (the CPU's src/backend/cpu/gemm.cpp, the CUDA cuda/gemm.cu):
// y[M, N] (+)= x[M, K] . W[N, K]^T with the multi-part semantic of GemmParams: up to three weight
// matrices (fused Q/K/V or gate/up) share one input, part i writing output columns y_col[i] ..
// y_col[i] + N[i]. x is F32 rows `x_row_bytes` apart; W is GGUF rows read through a weight format
// of metal/formats.h, so every dtype is one gemm_impl<Format> instantiation (AKUNU_GEMM_KERNEL).
//
// Threadgroup g covers the weight rows [g * rows_per_unit, (g + 1) * rows_per_unit) of the parts
// laid end to end, as the CPU's gemm_units does; a group may straddle two parts. Two paths:
//  - M == 1 (decode GEMV, memory bound): one SIMD group per weight row, its lanes over 16-element
//    chunks of K, simd_sum. The decode fusions live here only (kernel_params.h): the input
//    RMSNorm, streamed by linearity, W . (x * inv_rms * w_norm) = inv_rms * (W . (x * w_norm)),
//    each group computing inv_rms itself; and the gated output act(gate_i . x) * (up_i . x).
//  - M > 1 (prefill): 32 x 32 output tiles of simdgroup_float8x8 products over threadgroup tiles
//    of x and of dequantized weights, 32 elements of K per step (K is a multiple of 32).
#include "common.h"
#include "formats.h"
#include "formats_kquant.h"
#include "reduce.h"

// Named, not anonymous: every .metal file shares one translation unit in the shim (and may in a
// Metal library), so helpers keep to their file's namespace.
namespace gemm {

// --- where a weight row lives ------------------------------------------------------------------

// The weight matrices of one command (buffer slots 2 .. 1 + n_parts).
struct GemmWeights {
    device const uchar *part[GemmParams::kMaxParts];
};

// Row `row` of the parts laid end to end: its bytes, and the output column it writes.
inline device const uchar *locate_weight_row(constant GemmParams &p, thread const GemmWeights &w, uint row,
                                             thread uint &out_col) {
    uint part = 0;
    while (part + 1 < p.n_parts && row >= p.N[part]) {
        row -= p.N[part];
        ++part;
    }
    out_col = p.y_col[part] + row;
    return w.part[part] + ulong(row) * p.w_row_bytes[part];
}

// Elements [16 * chunk, 16 * chunk + 16) of a weight row, as floats.
template <typename Format>
inline void load_weight_chunk(device const uchar *row, uint chunk, thread float *out) {
    const uint chunks_per_block = Format::kBlockElements / 16;
    Format::dequantize_chunk(row + (chunk / chunks_per_block) * Format::kBlockBytes, chunk % chunks_per_block, out);
}

// --- M == 1: the decode GEMV -----------------------------------------------------------------------

// This lane's share of dot(W row, x) (times norm_w elementwise when kNorm): chunks lane,
// lane + lanes, ... where `lanes` are the SIMD group's threads (fewer in a partial last group).
template <typename Format, bool kNorm>
inline float gemv_lane_dot(device const uchar *w_row, device const float *x, device const float *norm_w, uint K,
                           uint simd_lane, uint lanes) {
    float sum = 0.0f;
    for (uint c = simd_lane; c < K / 16; c += lanes) {
        float w[16];
        load_weight_chunk<Format>(w_row, c, w);
        device const float *xc = x + c * 16;
        for (uint i = 0; i < 16; ++i) sum += w[i] * (kNorm ? xc[i] * norm_w[c * 16 + i] : xc[i]);
    }
    return sum;
}

// act(gate) * up as the CPU's silu_mul / gelu_tanh_mul compute it (src/backend/cpu/activation.cpp).
inline float gated_output(uint output_op, float gate, float up) {
    if (output_op == kGemmOutputGeluTanhMul) {
        const float k = 0.7978845608028654f;  // sqrt(2 / pi)
        // precise: a fast tanh may not saturate cleanly for large arguments.
        return 0.5f * gate * (1.0f + precise::tanh(k * (gate + 0.044715f * gate * gate * gate))) * up;
    }
    return gate / (1.0f + exp(-gate)) * up;
}

template <typename Format, bool kNorm, typename Scratch>
inline void gemv(device const float *x, device float *y, thread const GemmWeights &w, device const float *norm_w,
                 constant GemmParams &p, Scratch scratch, uint unit, uint tid, uint n_threads, uint simd_lane,
                 uint simd_index) {
    float scale = 1.0f;
    if (kNorm) {  // 1 / rms(x), as rmsnorm_f32 computes it; every thread of the group takes part
        float sum_sq = 0.0f;
        for (uint i = tid; i < p.K; i += n_threads) sum_sq += x[i] * x[i];
        sum_sq = threadgroup_sum(sum_sq, scratch, simd_lane, simd_index, n_threads);
        scale = 1.0f / sqrt(sum_sq / float(p.K) + p.eps);
    }
    const uint n_simd = (n_threads + AKUNU_SIMD_WIDTH - 1) / AKUNU_SIMD_WIDTH;
    const uint lanes = min(uint(AKUNU_SIMD_WIDTH), n_threads - simd_index * AKUNU_SIMD_WIDTH);

    if (p.output_op != kGemmOutputPlain) {
        // Gated (two parts of equal N: gate, up). The grid counts the rows of both parts, so a
        // group of rows_per_unit rows takes ceil(rows_per_unit / 2) outputs, i.e. that many gate
        // rows and the up rows of the same outputs; the groups cover all N[0] outputs (the grid
        // has ceil(2 N / rows_per_unit) of them), the last ones possibly none.
        const uint per_group = (p.rows_per_unit + 1) / 2;
        const uint first = unit * per_group, last = min(first + per_group, p.N[0]);
        for (uint i = first + simd_index; i < last; i += n_simd) {
            device const uchar *gate_row = w.part[0] + ulong(i) * p.w_row_bytes[0];
            device const uchar *up_row = w.part[1] + ulong(i) * p.w_row_bytes[1];
            const float gate = simd_sum(gemv_lane_dot<Format, kNorm>(gate_row, x, norm_w, p.K, simd_lane, lanes));
            const float up = simd_sum(gemv_lane_dot<Format, kNorm>(up_row, x, norm_w, p.K, simd_lane, lanes));
            if (simd_lane == 0) y[p.y_col[0] + i] = gated_output(p.output_op, gate * scale, up * scale);
        }
        return;
    }

    uint total_rows = 0;
    for (uint i = 0; i < p.n_parts; ++i) total_rows += p.N[i];
    const uint first = unit * p.rows_per_unit, last = min(first + p.rows_per_unit, total_rows);
    for (uint row = first + simd_index; row < last; row += n_simd) {
        uint col;
        device const uchar *w_row = locate_weight_row(p, w, row, col);
        const float s = simd_sum(gemv_lane_dot<Format, kNorm>(w_row, x, norm_w, p.K, simd_lane, lanes)) * scale;
        if (simd_lane == 0) y[col] = p.accumulate ? y[col] + s : s;
    }
}

// --- M > 1: the tiled GEMM -------------------------------------------------------------------------

// Output tile: kTileM x rows of x by kTileN weight rows; kTileK elements of K per step. Each SIMD
// group (up to kTileM / 8 of them) owns an 8-row strip of the tile: kTileN / 8 accumulators.
enum : uint { kTileM = 32, kTileN = 32, kTileK = 32 };
// Threadgroup floats the kernels declare: x tile [kTileM][kTileK], weight tile [kTileN][kTileK]
// and the output tile [kTileM][kTileN] the accumulators land in before going to y.
enum : uint { kScratchFloats = kTileM * kTileK + kTileN * kTileK + kTileM * kTileN };

template <typename Format, typename Scratch>
inline void gemm_tiles(device const float *x, device float *y, thread const GemmWeights &w, constant GemmParams &p,
                       Scratch scratch, uint unit, uint tid, uint n_threads, uint simd_index) {
    Scratch x_tile = scratch;                         // [kTileM][kTileK]
    Scratch w_tile = scratch + kTileM * kTileK;       // [kTileN][kTileK]: row n holds weight row n's slice
    Scratch out_tile = w_tile + kTileN * kTileK;      // [kTileM][kTileN]
    // SIMD groups with a strip; the x tile is as tall as they cover (extra groups only load).
    // Written for whole SIMD groups (the kernel table's 128 threads).
    const uint strips = clamp(n_threads / AKUNU_SIMD_WIDTH, 1u, uint(kTileM / 8));
    const uint tile_m = strips * 8;
    const uint x_row_floats = p.x_row_bytes / 4;

    uint total_rows = 0;
    for (uint i = 0; i < p.n_parts; ++i) total_rows += p.N[i];
    const uint unit_first = unit * p.rows_per_unit, unit_last = min(unit_first + p.rows_per_unit, total_rows);

    for (uint n0 = unit_first; n0 < unit_last; n0 += kTileN) {
        const uint n_count = min(uint(kTileN), unit_last - n0);
        for (uint m0 = 0; m0 < p.M; m0 += tile_m) {
            const uint m_count = min(tile_m, p.M - m0);
            simdgroup_float8x8 acc[kTileN / 8];
            for (uint j = 0; j < kTileN / 8; ++j) acc[j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);

            for (uint k0 = 0; k0 < p.K; k0 += kTileK) {
                // Weight tile: one 16-element chunk per thread and pass; rows past the unit are zero.
                for (uint i = tid; i < kTileN * (kTileK / 16); i += n_threads) {
                    const uint r = i / (kTileK / 16), c = i % (kTileK / 16);
                    float v[16];
                    if (r < n_count) {
                        uint col;
                        load_weight_chunk<Format>(locate_weight_row(p, w, n0 + r, col), k0 / 16 + c, v);
                    } else {
                        for (uint e = 0; e < 16; ++e) v[e] = 0.0f;
                    }
                    for (uint e = 0; e < 16; ++e) w_tile[r * kTileK + c * 16 + e] = v[e];
                }
                // x tile; rows past M are zero.
                for (uint i = tid; i < tile_m * kTileK; i += n_threads) {
                    const uint m = i / kTileK, k = i % kTileK;
                    x_tile[i] = m < m_count ? x[(m0 + m) * x_row_floats + k0 + k] : 0.0f;
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                if (simd_index < strips) {
                    for (uint k8 = 0; k8 < kTileK; k8 += 8) {
                        simdgroup_float8x8 a, b;
                        simdgroup_load(a, x_tile + simd_index * 8 * kTileK + k8, kTileK);
                        for (uint j = 0; j < kTileN / 8; ++j) {
                            // b[k][n] = weight row n, element k: the weight tile read transposed.
                            simdgroup_load(b, w_tile + j * 8 * kTileK + k8, kTileK, ulong2(0), true);
                            simdgroup_multiply_accumulate(acc[j], a, b, acc[j]);
                        }
                    }
                }
                // The tiles are read by all before the next step overwrites them.
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }

            // Through threadgroup memory to y: the tile's columns may span two parts, and its
            // rows and columns may run past M and the unit. (The next writer of out_tile is past
            // the next K step's barriers, so no barrier is needed after the copy.)
            if (simd_index < strips)
                for (uint j = 0; j < kTileN / 8; ++j)
                    simdgroup_store(acc[j], out_tile + simd_index * 8 * kTileN + j * 8, kTileN);
            threadgroup_barrier(mem_flags::mem_threadgroup);
            for (uint i = tid; i < m_count * kTileN; i += n_threads) {
                const uint m = i / kTileN, n = i % kTileN;
                if (n >= n_count) continue;
                uint col;
                locate_weight_row(p, w, n0 + n, col);
                device float *dst = y + (m0 + m) * p.y_stride + col;
                *dst = p.accumulate ? *dst + out_tile[i] : out_tile[i];
            }
        }
    }
}

// The whole command. Buffers: 0 x, 1 y, 2 .. 5 the weights of the n_parts parts and, right after
// them, the input norm's weight (slot 2 + n_parts; only with kGemmInputRMSNorm). Slots the
// command leaves empty hold a placeholder and are never read.
template <typename Format, typename Scratch>
inline void gemm_impl(device const float *x, device float *y, device const uchar *slot2, device const uchar *slot3,
                      device const uchar *slot4, device const uchar *slot5, constant GemmParams &p, Scratch scratch,
                      uint unit, uint tid, uint n_threads, uint simd_lane, uint simd_index) {
    GemmWeights w;
    w.part[0] = slot2;
    w.part[1] = p.n_parts > 1 ? slot3 : slot2;
    w.part[2] = p.n_parts > 2 ? slot4 : slot2;
    if (p.M == 1) {
        if (p.input_op == kGemmInputRMSNorm) {
            const uint norm_slot = 2 + p.n_parts;
            device const uchar *norm = norm_slot == 3 ? slot3 : norm_slot == 4 ? slot4 : slot5;
            gemv<Format, true>(x, y, w, (device const float *)norm, p, scratch, unit, tid, n_threads, simd_lane,
                               simd_index);
        } else {
            gemv<Format, false>(x, y, w, nullptr, p, scratch, unit, tid, n_threads, simd_lane, simd_index);
        }
    } else {
        // The fusions are decode's (M = 1); the table builder asks for them nowhere else.
        gemm_tiles<Format>(x, y, w, p, scratch, unit, tid, n_threads, simd_index);
    }
}

}  // namespace gemm

// One kernel per weight dtype, all with the same buffers (gemm_impl) and 128 threads a group
// (four SIMD groups: metal_kernels.cpp).
#define AKUNU_GEMM_KERNEL(name, Format)                                                                            \
    kernel void name(device const float *x [[buffer(0)]], device float *y [[buffer(1)]],                           \
                     device const uchar *slot2 [[buffer(2)]], device const uchar *slot3 [[buffer(3)]],             \
                     device const uchar *slot4 [[buffer(4)]], device const uchar *slot5 [[buffer(5)]],             \
                     constant GemmParams &p [[buffer(6)]], AKUNU_THREAD_ARGS) {                                    \
        threadgroup float scratch[gemm::kScratchFloats];                                                           \
        gemm::gemm_impl<Format>(x, y, slot2, slot3, slot4, slot5, p, scratch, group.x, thread_position.x,          \
                                group_size.x, simd_lane, simd_index);                                              \
    }

AKUNU_GEMM_KERNEL(gemm_f32, FormatF32)
AKUNU_GEMM_KERNEL(gemm_f16, FormatF16)
AKUNU_GEMM_KERNEL(gemm_bf16, FormatBF16)
AKUNU_GEMM_KERNEL(gemm_q8_0, FormatQ8_0)
AKUNU_GEMM_KERNEL(gemm_q4_0, FormatQ4_0)
AKUNU_GEMM_KERNEL(gemm_q4_1, FormatQ4_1)
AKUNU_GEMM_KERNEL(gemm_q5_0, FormatQ5_0)
AKUNU_GEMM_KERNEL(gemm_q5_1, FormatQ5_1)
AKUNU_GEMM_KERNEL(gemm_iq4_nl, FormatIQ4_NL)
AKUNU_GEMM_KERNEL(gemm_q2_k, FormatQ2_K)
AKUNU_GEMM_KERNEL(gemm_q3_k, FormatQ3_K)
AKUNU_GEMM_KERNEL(gemm_q4_k, FormatQ4_K)
AKUNU_GEMM_KERNEL(gemm_q5_k, FormatQ5_K)
AKUNU_GEMM_KERNEL(gemm_q6_k, FormatQ6_K)
AKUNU_GEMM_KERNEL(gemm_iq4_xs, FormatIQ4_XS)
