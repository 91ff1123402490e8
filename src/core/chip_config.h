// ChipConfig: every tuning number the table builder uses, derived from what the device is
// (never configured by hand). Consumed only at table-build time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace akunu {

struct ChipConfig {
    int compute_units = 1;          // CPU worker threads, GPU SMs or GPU cores
    size_t last_level_cache = 0;    // bytes: CPU L3, GPU L2, Apple SLC
    // Run Q/K/V (and gate/up) as one multi-matrix GEMM command instead of separate ones.
    bool should_fuse_weights = true;
    // Decode GEMVs normalize their input (the RMSNorm before Q/K/V, gate/up and the logits) for
    // models up to these widths (0: never), and the gate/up GEMV applies the gated activation in
    // its epilogue: fewer launches per layer, which is what a GPU's per-kernel latency costs in
    // decode. A GEMV that stages its whole normalized input first loses to the saved launch
    // sooner than one that streams the norm (DTypeDescriptor::gemv_streams_norm); the epilogue
    // costs nothing. (The CPU keeps separate passes: its GEMVs take activations quantized once
    // for every consumer.)
    unsigned fuse_gemv_norm_max_dim = 0;
    unsigned fuse_streamed_norm_max_dim = 0;
    bool fuse_gemv_activation = false;
    // Decode attention applies RoPE (and QK-norm) to its own query and key and appends K/V to
    // the cache, instead of a RoPE + KV-write command before it: one launch fewer per layer.
    bool fuse_rope_into_attention = false;
    // Greedy tokens per replay of the table (chain decode). Larger amortizes submission cost;
    // smaller gives a streaming user text sooner.
    int chain_decode_chunk = 16;
    // Grammar-constrained decoding feeds the tokens a grammar forces in one submission: up to this
    // many as chained replays of the decode table (a captured graph on GPUs, asynchronous), more as
    // a prefill pass (one pass over all rows, but a table built and launched per call).
    int max_forced_decode_steps = 1;
    // Longer forced runs, up to this many tokens, replay a prefill table of exactly their row
    // count, built on first use and kept (position-independent: patched like the decode table, so
    // a captured graph on GPUs); longer still, a prefill pass built per call. 0: never kept.
    int max_forced_table_rows = 0;
    // Sliding-window layers keep a ring of (window + the most rows a pass writes) rows in the KV
    // cache, not the whole context (KVCache::layer_length). For backends whose KV kernels address
    // rows as position % max_seq (the CPU's and CUDA's).
    bool windowed_kv_cache = false;
    // Whether a decode step writes a position's K/V rows bit for bit as a prefill pass does. Then
    // prompt reuse keeps generated positions too; otherwise only positions a prefill wrote, so a
    // reply after reuse equals a fresh model's (docs/adr/0018-prompt-reuse.md). True on the CPU
    // (decode's GEMV and prefill's GEMM share their dot products); false on CUDA (GEMV and split-K
    // attention vs tiled GEMM and tensor-core attention round differently).
    bool decode_rows_match_prefill = true;
    // Shapes the backend's kernels read a Q8_0 KV cache in: these head sizes (empty: every multiple
    // of 32) and at most this many query heads per KV head (0: any). A GPU reads it only in its
    // tensor-core attention kernels, which cover head_dim 64 and 128 and GQA groups up to 16.
    std::vector<int> q8_kv_head_dims;
    int q8_kv_max_group = 0;
    // Longest prompt slice run through the forward pass at once (bounds prefill scratch).
    int max_prefill_chunk = 512;
    // Logits for every position (evaluation) are produced this many rows at a time.
    int max_logits_rows = 64;
    // GEMM work unit: weight rows per unit for decode (M = 1) and for prefill.
    int gemv_rows_per_unit = 16;
    int gemm_rows_per_unit = 32;
    // The unit for a GEMM of m_rows activation rows over a weight layout whose kernels compute
    // whole groups of row_group rows (0: none): the above, rounded up to whole groups.
    uint32_t gemm_unit_rows(uint32_t m_rows, uint32_t row_group) const;

    // A CPU with `threads` workers and a last-level cache of `llc_bytes`.
    static ChipConfig for_cpu(int threads, size_t llc_bytes);
    // A discrete GPU with `sm_count` multiprocessors and an L2 of `l2_bytes`.
    static ChipConfig for_gpu(int sm_count, size_t l2_bytes);
    // An Apple GPU with `gpu_cores` cores and a system-level cache of `slc_bytes` (unified memory).
    static ChipConfig for_apple_gpu(int gpu_cores, size_t slc_bytes);
};

}  // namespace akunu
