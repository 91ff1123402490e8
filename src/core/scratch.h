// Named scratch buffers for activations, allocated once at load for the largest row count any
// table uses (a prefill chunk). Decode tables use row 0 of the same buffers. All rows are F32
// except act_q (activations converted for quantized GEMMs) and token_ids (u32).
#pragma once
#include <cstddef>

#include "core/device.h"
#include "core/model_config.h"

namespace akunu {

// Words of a grammar's token mask: one bit per output row of the model.
inline size_t token_mask_words(const ModelConfig &cfg) { return ((size_t)cfg.vocab_size + 31) / 32; }

// What the scratch buffers are sized for (the loader's memory plan works it out, inference/memory_plan.h).
struct ScratchShape {
    int max_rows = 0;            // rows of the largest forward pass (a prefill chunk)
    int max_logits_rows = 0;     // rows of logits one pass produces
    int token_slots = 0;         // tokens one replay feeds (token_ids holds one more)
    size_t act_q_row_bytes = 0;  // the widest converted activation row (K = max(dim, q_dim, ffn_dim))
    int recent_tokens = 0;       // latest tokens the sampling buffer holds (the context length)
};

struct ScratchBuffers {
    int max_rows = 0;         // rows every buffer below can hold
    int max_logits_rows = 0;  // rows `logits` can hold
    size_t act_q_row_bytes = 0;

    Buffer token_ids;  // u32 [max(max_rows, chain chunk) + 1]: slot i feeds token i, argmax fills i + 1
    Buffer residual;   // [rows, dim]   the residual stream
    Buffer normed;     // [rows, dim]   norm output, the GEMM input
    Buffer act_q;      // [rows, act_q_row_bytes] activations in the GEMM's input format
    Buffer qkv;        // [rows, q_dim + 2 kv_dim]
    Buffer attn_out;   // [rows, q_dim]
    Buffer gate_up;    // [rows, 2 ffn_dim]
    Buffer ffn_act;    // [rows, ffn_dim]
    Buffer logits;     // [max_logits_rows, vocab]
    Buffer sampling;   // the sampling rule, its cut and the latest tokens (core/sampling_rule.h)
    Buffer token_mask; // u32 [(vocab + 31) / 32]: a grammar's allowed tokens, one bit each (constrained decoding)

    static ScratchBuffers create(Device &device, const ModelConfig &cfg, const ScratchShape &shape);
    // What create() allocates, in bytes (the memory plan counts it before anything is allocated).
    static size_t bytes(const ModelConfig &cfg, const ScratchShape &shape);
    void release(Device &device);
    size_t allocated_bytes() const;  // the buffers' sizes added up
};

}  // namespace akunu
