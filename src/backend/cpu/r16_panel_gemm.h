// The r16 prefill GEMM over int16 weight panels (AVX-512 VNNI builds), for the dtypes
// r16k::has_panel names. Why and how: r16_panel_gemm.cpp.
#pragma once
#include <cstdint>

#include "backend/cpu/gemm_tiles.h"

namespace akunu::cpu::r16k {

// Activation rows from which the panel GEMM replaces the vpdpbusd tiles (r16_kquant_layout.cpp):
// below it a group's panel costs more to make than it saves (Zen 4, one thread, 2048 x 8192 Q6_K,
// tiles against panels: 4.0 against 4.3 ms at 16 rows, 5.7 against 5.5 at 24, 6.9 against 6.9 at 32).
constexpr int64_t kPanelMinRows = 32;

// Rows [n_begin, n_end) of a GEMM of r16 weights (a dtype with has_panel) against r16 activation rows
// (quantize_row_act_q8x2_superblocks: the blocks, then the row as int16).
void panel_gemm_rows(const GemmArgs &a, int64_t n_begin, int64_t n_end);

}  // namespace akunu::cpu::r16k
