#include "core/scratch.h"

#include "core/sampling_rule.h"

namespace akunu {

ScratchBuffers ScratchBuffers::create(Device &device, const ModelConfig &cfg, int max_rows, int max_logits_rows,
                                      int token_slots, size_t act_q_row_bytes, int recent_tokens) {
    ScratchBuffers s;
    s.max_rows = max_rows;
    s.max_logits_rows = max_logits_rows;
    s.act_q_row_bytes = act_q_row_bytes;
    const size_t rows = (size_t)max_rows, f = sizeof(float);
    s.token_ids = device.allocate((size_t)(token_slots + 1) * 4);
    s.residual = device.allocate(rows * cfg.dim * f);
    s.normed = device.allocate(rows * cfg.dim * f);
    s.act_q = device.allocate(rows * (act_q_row_bytes ? act_q_row_bytes : 4));
    s.qkv = device.allocate(rows * (cfg.q_dim() + 2 * cfg.kv_dim()) * f);
    s.attn_out = device.allocate(rows * cfg.q_dim() * f);
    s.gate_up = device.allocate(rows * 2 * cfg.ffn_dim * f);
    s.ffn_act = device.allocate(rows * cfg.ffn_dim * f);
    s.logits = device.allocate((size_t)max_logits_rows * cfg.vocab_size * f);
    s.sampling = device.allocate(sampling_buffer_bytes((size_t)recent_tokens));
    s.token_mask = device.allocate(token_mask_words(cfg) * 4);
    return s;
}

void ScratchBuffers::release(Device &device) {
    for (Buffer *b : {&token_ids, &residual, &normed, &act_q, &qkv, &attn_out, &gate_up, &ffn_act, &logits, &sampling, &token_mask})
        device.free_buffer(*b);
}

}  // namespace akunu
