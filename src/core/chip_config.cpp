#include "core/chip_config.h"

#include <algorithm>

namespace akunu {

ChipConfig ChipConfig::for_cpu(int threads, size_t llc_bytes) {
    ChipConfig c;
    c.compute_units = std::max(1, threads);
    c.last_level_cache = llc_bytes;
    // On a CPU a multi-matrix GEMM saves a thread-pool barrier per fused matrix; no copy needed.
    c.should_fuse_weights = true;
    // A CPU replay has no submission cost to amortize, so the chunk only trades per-call
    // overhead against streaming latency and the work wasted after an end-of-generation token.
    c.chain_decode_chunk = 8;
    c.windowed_kv_cache = true;
    c.max_prefill_chunk = 512;
    c.max_logits_rows = 64;
    // Forced runs replay kept tables: no table built per run (a small saving on a CPU, and the path
    // the GPUs take, checked in CI).
    c.max_forced_table_rows = 64;
    // Enough units that the dynamic scheduler can balance threads, few enough that the per-unit
    // overhead stays invisible: ~8 units per thread on a 576-row matrix at 2 threads.
    c.gemv_rows_per_unit = c.compute_units >= 8 ? 8 : 16;
    // Prefill: a tile of weight rows is reused by every prompt row, so bigger tiles win until
    // the tile falls out of L2.
    c.gemm_rows_per_unit = 32;
    return c;
}

uint32_t ChipConfig::gemm_unit_rows(uint32_t m_rows, uint32_t row_group) const {
    const uint32_t rows = (uint32_t)std::max(1, m_rows == 1 ? gemv_rows_per_unit : gemm_rows_per_unit);
    return row_group ? (rows + row_group - 1) / row_group * row_group : rows;
}

ChipConfig ChipConfig::for_gpu(int sm_count, size_t l2_bytes) {
    ChipConfig c;
    c.compute_units = std::max(1, sm_count);
    c.last_level_cache = l2_bytes;
    c.should_fuse_weights = true;
    // Norm fusion: a staging GEMV (the float kernels: K floats staged per block) gains from it
    // up to dim 1024, beyond which the staging costs more than the launch it saves; the streaming
    // (integer g8) GEMVs gain at every width since their first weight loads run before the PDL
    // wait (H100 A/Bs: benchmarks/HISTORY.md, 2026-11-22, e99d575 and 7931fe2; 2026-11-23,
    // 590392c).
    c.fuse_gemv_norm_max_dim = 1024;
    c.fuse_streamed_norm_max_dim = ~0u;
    c.fuse_gemv_activation = true;
    c.fuse_rope_into_attention = true;
    c.windowed_kv_cache = true;
    c.decode_rows_match_prefill = false;
    c.q8_kv_head_dims = {64, 128};
    c.q8_kv_max_group = 16;
    // Launches are expensive relative to small-model kernels: chain many tokens per submission.
    c.chain_decode_chunk = 64;
    // A prefill pass built and launched command by command costs ~1.5 ms for a 1B model on an
    // H200 (benchmarks/grammar_decode.py), about three decode steps of the graph; replayed as a
    // kept table's graph, about one.
    c.max_forced_decode_steps = 3;
    c.max_forced_table_rows = 64;
    c.max_prefill_chunk = 2048;
    c.max_logits_rows = 256;
    c.gemv_rows_per_unit = 4;
    c.gemm_rows_per_unit = 64;
    return c;
}

ChipConfig ChipConfig::for_apple_gpu(int gpu_cores, size_t slc_bytes) {
    ChipConfig c;
    c.compute_units = std::max(1, gpu_cores);
    c.last_level_cache = slc_bytes;
    c.should_fuse_weights = true;
    // A Metal dispatch costs a few microseconds of encoding and GPU scheduling, as a CUDA launch
    // does: decode fuses the norms into the GEMVs, the gated activation into gate/up and RoPE +
    // the KV write into attention (the book's fused kernels). Every Metal GEMV streams its norm.
    c.fuse_gemv_norm_max_dim = ~0u;
    c.fuse_streamed_norm_max_dim = ~0u;
    c.fuse_gemv_activation = true;
    c.fuse_rope_into_attention = true;
    c.windowed_kv_cache = true;
    // GEMV and tiled GEMM round differently, as on CUDA (docs/adr/0018-prompt-reuse.md).
    c.decode_rows_match_prefill = false;
    // Q8_0 KV-cache kernels read any head size that is a multiple of 32.
    c.q8_kv_head_dims = {};
    c.q8_kv_max_group = 0;
    // The book's chain_decode_chunk: 128 on M4-class chips, 64 on the smallest.
    c.chain_decode_chunk = gpu_cores >= 10 ? 128 : 64;
    c.max_forced_decode_steps = 3;
    c.max_prefill_chunk = gpu_cores >= 16 ? 2048 : 512;
    c.max_logits_rows = 256;
    // GEMV: one SIMD group per weight row, four per threadgroup, two rounds (8 rows a group);
    // GEMM: 32 weight rows a group, the width of the simdgroup-matrix tile.
    c.gemv_rows_per_unit = 8;
    c.gemm_rows_per_unit = 32;
    return c;
}

}  // namespace akunu
