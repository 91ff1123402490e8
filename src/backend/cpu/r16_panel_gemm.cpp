// The r16 prefill GEMM over int16 weight panels (AVX-512 VNNI builds): Q6_K weights against
// kPanelMinRows (32) or more activation rows.
//
// Why: the vpdpbusd tiles (r16_kquant_layout.cpp) unpack every weight and apply its per-16 scale
// once per tile of 4 activation rows, and multiply each weight by both activation digits. For Q6_K
// that overhead, not the dot products, took most of the time (docs/experiments.md, "CPU: where the
// Q6_K prefill GEMM's time goes"). Here a thread turns a few 16-row groups at a time into int16
// panels, sc (u - 32) per weight (r16k::group_panel), and every activation row then passes them with
// one vpdpwssd per pair of elements against its int16 values
// (quantize_row_act_q8x2_superblocks): 32 products an instruction, as two digits' vpdpbusd give,
// with no unpacking, no scales and no digits to recombine. A panel is made once per group and used
// by all M rows.
//
// Q6_K's activations have one scale per superblock (ADR 0027), so a superblock's 256 products sum in
// int32 and turn into floats once, (sum x a.d) x d. Exact: |sc (u - 32)| <= 128 x 32 = 4096 and
// |q| <= 2047, so the sum is at most 256 x 4096 x 2047 = 2,146,435,072 in magnitude, below 2^31. It
// is the same integer the vpdpbusd tiles form and the float steps after it are the same too, so both
// kernels give the same bits.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics start from an undefined vector and warn wherever they are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/r16_panel_gemm.h"

#include "backend/cpu/simd_config.h"

#if defined(AKUNU_CPU_VNNI512)

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/act_quant.h"
#include "backend/cpu/r16_kquant_layout.h"
#include "backend/cpu/repacked_gemm_loop.h"
#include "core/kquant_blocks.h"
#include "core/quant_blocks.h"

namespace akunu::cpu::r16k {

namespace {

constexpr int kRows = 16;
// Activation rows per tile (3 accumulators each; 6 measured best against 4 and 8 on Zen 4), and the
// panels made at a time: 512 KiB stay in a Zen 4 core's 1 MiB L2 beside the rows passing them (256
// and 1024 KiB measured slower).
constexpr int kPanelTileM = 6;
constexpr size_t kPanelChunkBytes = 512 * 1024;

// One 64-byte panel vector, as the allocator aligns it.
struct alignas(64) PanelVector {
    int16_t pair[32];
};
static_assert(sizeof(PanelVector) == sizeof(__m512i), "a panel vector is one zmm");

// Elements e, e + 1 of an int16 row in every 32-bit lane.
inline __m512i broadcast_pair(const int16_t *e) {
    int32_t pair;
    std::memcpy(&pair, e, sizeof pair);
    return _mm512_set1_epi32(pair);
}

// One panel (16 rows x K) against RM activation rows: out[m] lane l = dot(row l, activation row m).
template <int RM>
void panel_tile(const PanelVector *panel, const float *row_d, const uint8_t *x, size_t x_row_bytes, int64_t K, __m512 *out) {
    const BlockQ8x2Act *xb[RM];  // the rows' blocks, for their d (one per superblock)
    const int16_t *q16[RM];      // the rows' int16 values, read a pair (32 bits) at a time
    __m512 acc[RM];
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) {
        xb[m] = reinterpret_cast<const BlockQ8x2Act *>(x + (size_t)m * x_row_bytes);
        q16[m] = q8x2_row_int16(xb[m], K);
        acc[m] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < K / QK_K; ++b) {
        const PanelVector *w = panel + (QK_K / 2) * b;  // 2 elements a vector
        __m512i dot[RM];
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m) dot[m] = _mm512_setzero_si512();
        for (int p = 0; p < QK_K / 2; p += 16) {
            AKUNU_UNROLL
            for (int i = 0; i < 16; ++i) {
                const __m512i wp = _mm512_load_si512(w[p + i].pair);
                AKUNU_UNROLL
                for (int m = 0; m < RM; ++m)
                    dot[m] = _mm512_dpwssd_epi32(dot[m], wp, broadcast_pair(q16[m] + QK_K * b + 2 * (p + i)));
            }
        }
        const __m512 d = _mm512_loadu_ps(row_d + kRows * b);
        AKUNU_UNROLL
        for (int m = 0; m < RM; ++m)
            acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot[m]), _mm512_set1_ps(xb[m][b * (QK_K / QK_ACT)].d)), d, acc[m]);
    }
    AKUNU_UNROLL
    for (int m = 0; m < RM; ++m) out[m] = acc[m];
}

using PanelTileFn = void (*)(const PanelVector *, const float *, const uint8_t *, size_t, int64_t, __m512 *);
struct PanelTileTable {
    PanelTileFn fn[kPanelTileM];
    template <int RM> constexpr void fill() {
        fn[RM - 1] = &panel_tile<RM>;
        if constexpr (RM > 1) fill<RM - 1>();
    }
    constexpr PanelTileTable() : fn{} { fill<kPanelTileM>(); }
};

// A thread's panels, reused from call to call (at most kPanelChunkBytes, or one group's panel when
// that is larger: 16 x K x 2 bytes).
struct PanelScratch {
    std::vector<PanelVector> panels;
    std::vector<float> row_d;
};

}  // namespace

void panel_gemm_rows(const GemmArgs &a, int64_t n_begin, int64_t n_end) {
    static constexpr PanelTileTable table{};
    thread_local PanelScratch scratch;
    const int64_t K = a.K;
    const size_t group_bytes = (size_t)kRows * a.w_row_bytes;
    const size_t panel_vectors = (size_t)K / 2;  // 16 rows x K int16 = K / 2 vectors of 64 bytes
    const size_t d_per_group = (size_t)(K / QK_K) * kRows;
    const int64_t per_chunk = std::max<int64_t>(1, (int64_t)(kPanelChunkBytes / (panel_vectors * sizeof(PanelVector))));
    const int64_t g_begin = n_begin / kRows, g_end = (n_end + kRows - 1) / kRows;
    const int64_t chunk = std::min(per_chunk, g_end - g_begin);
    scratch.panels.resize((size_t)chunk * panel_vectors);
    scratch.row_d.resize((size_t)chunk * d_per_group);
    for (int64_t gc = g_begin; gc < g_end; gc += chunk) {
        const int64_t n_groups = std::min(chunk, g_end - gc);
        for (int64_t i = 0; i < n_groups; ++i)
            group_panel(a.type, a.w + (size_t)(gc + i) * group_bytes, K, scratch.panels[(size_t)i * panel_vectors].pair,
                        scratch.row_d.data() + (size_t)i * d_per_group);
        for (int64_t m = 0; m < a.M; m += kPanelTileM) {
            const int rm = (int)std::min<int64_t>(kPanelTileM, a.M - m);
            for (int64_t i = 0; i < n_groups; ++i) {
                const int64_t row0 = (gc + i) * kRows;
                const int lo = (int)(std::max(n_begin, row0) - row0);
                const int hi = (int)(std::min(n_end, row0 + kRows) - row0);
                __m512 out[kPanelTileM];
                table.fn[rm - 1](scratch.panels.data() + (size_t)i * panel_vectors,
                                 scratch.row_d.data() + (size_t)i * d_per_group,
                                 a.x + (size_t)m * a.x_row_bytes, a.x_row_bytes, K, out);
                store_r16_tile(a, out, m, rm, row0, lo, hi);
            }
        }
    }
}

}  // namespace akunu::cpu::r16k

#endif  // AKUNU_CPU_VNNI512
