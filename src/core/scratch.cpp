#include "core/scratch.h"

#include "core/sampling_rule.h"

namespace akunu {

namespace {

// Every buffer and its size, listed once: create() allocates them, bytes() adds them up.
template <class Visit> void for_each_buffer(const ModelConfig &cfg, const ScratchShape &shape, Visit &&visit) {
    const size_t rows = (size_t)shape.max_rows, f = sizeof(float);
    visit(&ScratchBuffers::token_ids, (size_t)(shape.token_slots + 1) * 4);
    visit(&ScratchBuffers::residual, rows * cfg.dim * f);
    visit(&ScratchBuffers::normed, rows * cfg.dim * f);
    visit(&ScratchBuffers::act_q, rows * (shape.act_q_row_bytes ? shape.act_q_row_bytes : 4));
    visit(&ScratchBuffers::qkv, rows * (cfg.q_dim() + 2 * cfg.kv_dim()) * f);
    visit(&ScratchBuffers::attn_out, rows * cfg.q_dim() * f);
    visit(&ScratchBuffers::gate_up, rows * 2 * cfg.ffn_dim * f);
    visit(&ScratchBuffers::ffn_act, rows * cfg.ffn_dim * f);
    visit(&ScratchBuffers::logits, (size_t)shape.max_logits_rows * cfg.vocab_size * f);
    visit(&ScratchBuffers::sampling, sampling_buffer_bytes((size_t)shape.recent_tokens));
    visit(&ScratchBuffers::token_mask, token_mask_words(cfg) * 4);
}

}  // namespace

ScratchBuffers ScratchBuffers::create(Device &device, const ModelConfig &cfg, const ScratchShape &shape) {
    ScratchBuffers s;
    s.max_rows = shape.max_rows;
    s.max_logits_rows = shape.max_logits_rows;
    s.act_q_row_bytes = shape.act_q_row_bytes;
    try {
        for_each_buffer(cfg, shape, [&](Buffer ScratchBuffers::*buffer, size_t bytes) { s.*buffer = device.allocate(bytes); });
    } catch (...) {
        s.release(device);  // the buffers made before the one that failed
        throw;
    }
    return s;
}

size_t ScratchBuffers::bytes(const ModelConfig &cfg, const ScratchShape &shape) {
    size_t total = 0;
    for_each_buffer(cfg, shape, [&](Buffer ScratchBuffers::*, size_t bytes) { total += bytes; });
    return total;
}

// Every buffer, for release() and allocated_bytes().
constexpr Buffer ScratchBuffers::*kEveryBuffer[] = {
    &ScratchBuffers::token_ids, &ScratchBuffers::residual, &ScratchBuffers::normed,  &ScratchBuffers::act_q,
    &ScratchBuffers::qkv,       &ScratchBuffers::attn_out, &ScratchBuffers::gate_up, &ScratchBuffers::ffn_act,
    &ScratchBuffers::logits,    &ScratchBuffers::sampling, &ScratchBuffers::token_mask};

void ScratchBuffers::release(Device &device) {
    for (Buffer ScratchBuffers::*b : kEveryBuffer) device.free_buffer(this->*b);
}

size_t ScratchBuffers::allocated_bytes() const {
    size_t total = 0;
    for (Buffer ScratchBuffers::*b : kEveryBuffer) total += (this->*b).size;
    return total;
}

}  // namespace akunu
