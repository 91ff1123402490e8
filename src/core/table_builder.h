// The forward pass, in one place. build_forward_table emits every command of one transformer
// forward over `rows` tokens; the decode dispatch table is the rows = 1 case with per-token
// patches, built once at load and replayed for every token.
#pragma once
#include <string>
#include <vector>

#include "core/arch_descriptor.h"
#include "core/chip_config.h"
#include "core/dispatch_table.h"
#include "core/kv_cache.h"
#include "core/model_config.h"
#include "core/model_weights.h"
#include "core/scratch.h"

namespace akunu {

struct ForwardSpec {
    int rows = 1;             // tokens in this pass
    int start_position = 0;   // position of the first token (ignored when patched)
    bool patched = false;     // decode table: position, token slot and KV length patched per token
    bool all_logits = false;  // logits for every row into scratch.logits (evaluation); else last row + argmax
    bool sample = false;      // the last row's token is drawn by the sampling rule (scratch.sampling), not argmax
};

struct ModelContext {
    Device &device;
    const ModelConfig &config;
    const ArchDescriptor &arch;
    const ChipConfig &chip;
    const ModelWeights &weights;
    const KVCache &kv;
    const ScratchBuffers &scratch;
};

DispatchTable build_forward_table(const ModelContext &ctx, const ForwardSpec &spec);

// Whether a pass of `rows` rows runs RoPE, the KV append and attention as one command.
bool fuses_rope_into_attention(const ChipConfig &chip, int rows);
// Every kernel that reads or writes a KV cache of `dtype` in this model's forward passes (decode
// and prefill), so that a loader can refuse a dtype the backend lacks kernels for up front.
std::vector<std::string> kv_cache_kernels(const ArchDescriptor &arch, const ChipConfig &chip, KVCacheDType dtype);

// The decode table: one token, patched per token, argmax feeding the next token's slot.
inline DispatchTable build_dispatch_table(const ModelContext &ctx) {
    ForwardSpec spec;
    spec.patched = true;
    DispatchTable table = build_forward_table(ctx, spec);
    table.persistent = true;  // built once at load, replayed for every token
    return table;
}

// A grammar's forced run of `rows` tokens: a prefill pass patched like the decode table (its
// position and KV length from the replay's start, its tokens from slots 0..rows - 1), so one table
// serves every position; it ends with the last row's logits (and an argmax nobody needs: replay
// it without its last command).
inline DispatchTable build_forced_run_table(const ModelContext &ctx, int rows) {
    ForwardSpec spec;
    spec.rows = rows;
    spec.patched = true;
    DispatchTable table = build_forward_table(ctx, spec);
    table.persistent = true;
    return table;
}

// The sampled decode table: `decode_table` with its argmax replaced by the sampler, so sampled
// decode chains like greedy decode (token i's draw feeding token i + 1 on the device).
DispatchTable with_sampler(const DispatchTable &decode_table, const ModelContext &ctx);

// Grammar-constrained decoding's token choice: the grammar's mask (scratch.token_mask) applied to
// the logits, then `decode_table`'s last command (its argmax or sampler, patched the same way).
// Replayed after the forward pass, decode_table's commands but the last, once the host has written
// the mask, so the mask is computed while the forward pass runs.
DispatchTable masked_choice_table(const DispatchTable &decode_table, const ModelContext &ctx);

}  // namespace akunu
