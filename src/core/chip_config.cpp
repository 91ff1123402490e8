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
    // H100, tg128 with norm and activation fused / separate, staging GEMVs: SmolLM2 (dim 576)
    // 1512 / 1313 t/s, Qwen3-0.6B (1024) 1156 / 1121, Llama-3.2-1B (2048) 1190 / 1286, 8B (4096)
    // 311 / 317. Streaming (integer g8) GEMVs, one call: 1B Q4_0 1403 / 1347, 8B 374 / 385; since
    // their first weight loads really run before the PDL wait (session 10), 8B 486 / 475.
    c.fuse_gemv_norm_max_dim = 1024;
    c.fuse_streamed_norm_max_dim = ~0u;
    c.fuse_gemv_activation = true;
    c.fuse_rope_into_attention = true;
    c.q8_kv_head_dims = {64, 128};
    c.q8_kv_max_group = 16;
    // Launches are expensive relative to small-model kernels: chain many tokens per submission.
    c.chain_decode_chunk = 64;
    c.max_prefill_chunk = 2048;
    c.max_logits_rows = 256;
    c.gemv_rows_per_unit = 4;
    c.gemm_rows_per_unit = 64;
    return c;
}

}  // namespace akunu
