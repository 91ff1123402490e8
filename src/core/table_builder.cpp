#include "core/table_builder.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include "core/errors.h"
#include "core/kernel_params.h"

namespace akunu {

namespace {

uint32_t ceil_div(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

// What a GEMV command does besides the product (GemmInputOp / GemmOutputOp).
struct GemvFusion {
    const Buffer *input_norm = nullptr;  // RMSNorm the input with this weight first
    uint32_t output_op = kGemmOutputPlain;
};

// Emits the commands of one forward pass. Each emit_* method is one stage of the book's
// per-layer recipe; the pass itself reads top to bottom in build().
class ForwardBuilder {
public:
    ForwardBuilder(const ModelContext &ctx, const ForwardSpec &spec) : c_(ctx), s_(spec) {}

    DispatchTable build() {
        const ModelConfig &cfg = c_.config;
        const ScratchBuffers &sc = c_.scratch;
        emit_embedding();
        for (uint32_t l = 0; l < cfg.n_layers; ++l) {
            const LayerWeights &L = c_.weights.layers[l];
            const std::string p = "layer." + std::to_string(l) + ".";
            // Attention block: x += O . attention(rope(QKV . norm(x)))
            emit_normed_matmul({&L.q, &L.k, &L.v}, L.attention_norm, 0, rows(), sc.qkv, qkv_stride(),
                               p + "attention_norm", p + "qkv");
            if (c_.arch.has_qkv_bias) emit_bias(L.qkv_bias, p + "qkv_bias");
            if (fuses_rope_into_attention(c_.chip, rows())) {
                emit_rope_attention(L, l, p + "attention");
            } else {
                if (c_.arch.qk_norm) emit_qk_norm(L, p + "qk_norm");
                emit_rope_kv_write(l, p + "rope_kv_write");
                emit_attention(l, p + "attention");
            }
            // With a post-norm the projection lands in `normed` and is normalized into the residual.
            if (c_.arch.post_attention_norm) {
                emit_matmul({&L.o}, sc.attn_out, cfg.q_dim(), sc.normed, cfg.dim, false, rows(), p + "o_proj");
                emit_post_norm(L.post_attention_norm, p + "post_attention_norm");
            } else {
                emit_matmul({&L.o}, sc.attn_out, cfg.q_dim(), sc.residual, cfg.dim, true, rows(), p + "o_proj");
            }
            // FFN block: x += down . act(gate . norm(x)) * (up . norm(x))
            emit_ffn_gate_up(L, p);
            if (c_.arch.post_ffn_norm) {
                emit_matmul({&L.down}, sc.ffn_act, cfg.ffn_dim, sc.normed, cfg.dim, false, rows(), p + "down");
                emit_post_norm(L.post_ffn_norm, p + "post_ffn_norm");
            } else {
                emit_matmul({&L.down}, sc.ffn_act, cfg.ffn_dim, sc.residual, cfg.dim, true, rows(), p + "down");
            }
        }
        emit_output();
        return std::move(table_);
    }

private:
    const ModelContext &c_;
    const ForwardSpec &s_;
    DispatchTable table_;

    uint32_t rows() const { return (uint32_t)s_.rows; }
    // An ArchDescriptor kernel that touches the KV cache, in its variant for the cache's dtype.
    std::string kv_kernel(const char *f16_kernel) const { return kv_kernel_name(f16_kernel, c_.kv.dtype); }
    uint32_t qkv_stride() const { return c_.config.q_dim() + 2 * c_.config.kv_dim(); }

    // Can a GEMV of `m_rows` rows over these matrices take a fusion at all? GPU decode only, and
    // only where no activation conversion comes before it.
    bool gemv_can_fuse(const std::vector<const WeightMatrix *> &mats, uint32_t m_rows) const {
        if (m_rows != 1) return false;
        for (const WeightMatrix *w : mats)
            if (w->desc->act_quant_kernel) return false;
        return true;
    }
    // Does it take its input norm itself? Up to the chip's width limit for its kind of GEMV.
    bool fuses_norm(const std::vector<const WeightMatrix *> &mats, uint32_t m_rows) const {
        if (!gemv_can_fuse(mats, m_rows)) return false;
        bool streamed = true;
        for (const WeightMatrix *w : mats) streamed = streamed && w->desc->gemv_streams_norm;
        return c_.config.dim <= (streamed ? c_.chip.fuse_streamed_norm_max_dim : c_.chip.fuse_gemv_norm_max_dim);
    }

    void emit_embedding() {
        const WeightMatrix &emb = c_.weights.token_embedding;
        EmbeddingParams p{};
        p.dim = c_.config.dim;
        p.rows = rows();
        p.vocab_size = c_.config.vocab_size;
        p.row_bytes = (uint32_t)emb.row_bytes;
        p.scale = c_.config.embedding_scale;
        CmdBuilder b(table_, c_.device, emb.desc->embedding_kernel, {rows(), 1, 1});
        b.buf(c_.scratch.token_ids).buf(emb.buffer).buf(c_.scratch.residual).params(p).label("embedding");
        if (s_.patched) b.patch(PatchType::TokenOffset);
        b.emit();
    }

    void emit_norm(const Buffer &x, size_t x_row, const Buffer &weight, uint32_t n_rows, const std::string &label) {
        RMSNormParams p{};
        p.dim = c_.config.dim;
        p.rows = n_rows;
        p.x_stride = c_.config.dim;
        p.out_stride = c_.config.dim;
        p.eps = c_.config.norm_eps;
        CmdBuilder(table_, c_.device, c_.arch.norm_kernel, {n_rows, 1, 1})
            .buf(x, x_row * c_.config.dim * sizeof(float))
            .buf(weight)
            .buf(c_.scratch.normed)
            .params(p)
            .label(label)
            .emit();
    }

    // residual += norm(normed) * w: the post-norm of a block's output.
    void emit_post_norm(const Buffer &weight, const std::string &label) {
        RMSNormParams p{};
        p.dim = c_.config.dim;
        p.rows = rows();
        p.x_stride = c_.config.dim;
        p.out_stride = c_.config.dim;
        p.eps = c_.config.norm_eps;
        CmdBuilder(table_, c_.device, c_.arch.post_norm_kernel, {rows(), 1, 1})
            .buf(c_.scratch.normed)
            .buf(weight)
            .buf(c_.scratch.residual)
            .params(p)
            .label(label)
            .emit();
    }

    void emit_bias(const Buffer &bias, const std::string &label) {
        BiasAddParams p{};
        p.n = qkv_stride();
        p.rows = rows();
        p.stride = qkv_stride();
        CmdBuilder(table_, c_.device, c_.arch.bias_kernel, {rows(), 1, 1})
            .buf(c_.scratch.qkv)
            .buf(bias)
            .params(p)
            .label(label)
            .emit();
    }

    void emit_qk_norm(const LayerWeights &L, const std::string &label) {
        const ModelConfig &cfg = c_.config;
        HeadNormParams p{};
        p.rows = rows();
        p.n_heads = cfg.n_heads;
        p.n_kv_heads = cfg.n_kv_heads;
        p.head_dim = cfg.head_dim;
        p.stride = qkv_stride();
        p.eps = cfg.norm_eps;
        CmdBuilder(table_, c_.device, c_.arch.qk_norm_kernel, {rows(), 1, 1})
            .buf(c_.scratch.qkv)
            .buf(L.q_norm)
            .buf(L.k_norm)
            .params(p)
            .label(label)
            .emit();
    }

    bool sliding(uint32_t layer) const {
        return layer < c_.config.layer_sliding.size() && c_.config.layer_sliding[layer] != 0;
    }

    // y = norm(x) . W_i^T over `n_rows` residual rows from `x_row`: a norm command then the matmul,
    // or one GEMV that normalizes its input (fuses_norm). output_op: the GEMV's gated epilogue.
    void emit_normed_matmul(const std::vector<const WeightMatrix *> &mats, const Buffer &norm_weight, uint32_t x_row,
                            uint32_t n_rows, const Buffer &y, uint32_t y_stride, const std::string &norm_label,
                            const std::string &label, uint32_t output_op = kGemmOutputPlain) {
        const uint32_t dim = c_.config.dim;
        GemvFusion f;
        f.output_op = output_op;
        if (fuses_norm(mats, n_rows)) {
            f.input_norm = &norm_weight;
            emit_matmul(mats, c_.scratch.residual, dim, y, y_stride, false, n_rows, label, f, x_row);
            return;
        }
        emit_norm(c_.scratch.residual, x_row, norm_weight, n_rows, norm_label);
        emit_matmul(mats, c_.scratch.normed, dim, y, y_stride, false, n_rows, label, f);
    }

    // ffn_act = act(gate . norm(x)) * (up . norm(x)): norm, gate/up and activation commands; where
    // gate and up form a single GEMV command, it applies the activation in its epilogue (and, for
    // narrow models, the norm too).
    void emit_ffn_gate_up(const LayerWeights &L, const std::string &p) {
        const ModelConfig &cfg = c_.config;
        const ScratchBuffers &sc = c_.scratch;
        const std::vector<const WeightMatrix *> mats = {&L.gate, &L.up};
        const bool one_command = c_.chip.should_fuse_weights && L.gate.desc == L.up.desc && L.gate.rows == L.up.rows;
        if (one_command && c_.chip.fuse_gemv_activation && gemv_can_fuse(mats, rows())) {
            emit_normed_matmul(mats, L.ffn_norm, 0, rows(), sc.ffn_act, cfg.ffn_dim, p + "ffn_norm", p + "gate_up",
                               c_.arch.fused_activation);
            return;
        }
        emit_normed_matmul(mats, L.ffn_norm, 0, rows(), sc.gate_up, 2 * cfg.ffn_dim, p + "ffn_norm",
                           p + "gate_up");
        emit_gated_activation(p + "activation");
    }

    // y (+)= x . W_i^T for each matrix, fused into multi-part commands where the chip says so.
    // Activations are converted (e.g. to Q8 blocks) once for all consumers that want it.
    void emit_matmul(std::vector<const WeightMatrix *> mats, const Buffer &x, uint32_t x_stride, const Buffer &y,
                     uint32_t y_stride, bool accumulate, uint32_t m_rows, const std::string &label,
                     const GemvFusion &fusion = {}, uint32_t x_row = 0) {
        const uint32_t K = mats[0]->cols;
        // The act_quant kernel whose output scratch.act_q holds (dtypes may want different formats).
        const char *quantized_by = nullptr;
        uint32_t y_col = 0;
        size_t i = 0;
        while (i < mats.size()) {
            // Group consecutive matrices of the same dtype (one kernel) when fusion is on.
            const auto room = [&](size_t j) { return j < mats.size() && j - i < (size_t)GemmParams::kMaxParts; };
            size_t j = i + 1;
            while (c_.chip.should_fuse_weights && room(j) && mats[j]->desc == mats[i]->desc) ++j;
            const DTypeDescriptor *desc = mats[i]->desc;
            // Then the matrices of a second dtype after them, where the device has a kernel for the
            // pair: llama.cpp's mixes give attn_v another dtype than Q and K (Q6_K in Q4_K_M files,
            // Q5_K in IQ4_XS ones), and one command costs less than two.
            std::string kernel = desc->gemm_kernel;
            uint32_t second_part = 0;
            if (c_.chip.should_fuse_weights && room(j) && !desc->act_quant_kernel && !mats[j]->desc->act_quant_kernel) {
                const DTypeDescriptor *second = mats[j]->desc;
                const std::string pair = kernel + "+" + second->gemm_kernel;
                if (c_.device.has_kernel(pair)) {
                    kernel = pair;
                    second_part = (uint32_t)(j - i);
                    while (room(j) && mats[j]->desc == second) ++j;
                }
            }

            Buffer input = x;
            size_t input_offset = (size_t)x_row * x_stride * sizeof(float);
            uint32_t x_row_bytes = x_stride * (uint32_t)sizeof(float);
            if (desc->act_quant_kernel) {
                x_row_bytes = (uint32_t)desc->act_row_bytes(K);
                if (!quantized_by || std::strcmp(quantized_by, desc->act_quant_kernel) != 0)
                    emit_act_quant(desc, x, input_offset, x_stride, K, m_rows, label);
                quantized_by = desc->act_quant_kernel;
                input = c_.scratch.act_q;
                input_offset = 0;
            }

            GemmParams p{};
            p.M = m_rows;
            p.K = K;
            p.n_parts = (uint32_t)(j - i);
            uint32_t total_rows = 0;
            for (size_t k = i; k < j; ++k) {
                p.N[k - i] = mats[k]->rows;
                p.y_col[k - i] = y_col;
                p.w_row_bytes[k - i] = (uint32_t)mats[k]->row_bytes;
                y_col += mats[k]->rows;
                total_rows += mats[k]->rows;
            }
            p.x_row_bytes = x_row_bytes;
            p.y_stride = y_stride;
            p.accumulate = accumulate ? 1 : 0;
            p.rows_per_unit = c_.chip.gemm_unit_rows(m_rows, desc->repack_row_group);
            p.input_op = fusion.input_norm ? kGemmInputRMSNorm : kGemmInputAsIs;
            p.eps = c_.config.norm_eps;
            p.output_op = fusion.output_op;
            p.second_part = second_part;
            if (p.output_op != kGemmOutputPlain && (i != 0 || j != mats.size() || accumulate || second_part))
                throw AkunuError("internal: a gated GEMV output needs gate and up in one command of one dtype");

            CmdBuilder b(table_, c_.device, kernel, {ceil_div(total_rows, p.rows_per_unit), 1, 1});
            b.buf(input, input_offset).buf(y);
            for (size_t k = i; k < j; ++k) b.buf(mats[k]->buffer);
            if (fusion.input_norm) b.buf(*fusion.input_norm);
            b.params(p).label(label).emit();
            i = j;
        }
    }

    void emit_act_quant(const DTypeDescriptor *desc, const Buffer &x, size_t x_offset, uint32_t x_stride, uint32_t K,
                        uint32_t m_rows, const std::string &label) {
        ActQuantParams p{};
        p.K = K;
        p.rows = m_rows;
        p.x_stride = x_stride;
        p.out_row_bytes = (uint32_t)desc->act_row_bytes(K);
        if ((size_t)p.out_row_bytes > c_.scratch.act_q_row_bytes)
            throw AkunuError("internal: activation row of " + std::to_string(K) + " does not fit scratch.act_q");
        CmdBuilder(table_, c_.device, desc->act_quant_kernel, {m_rows, 1, 1})
            .buf(x, x_offset)
            .buf(c_.scratch.act_q)
            .params(p)
            .label(label + ".quantize")
            .emit();
    }

    void emit_rope_kv_write(uint32_t layer, const std::string &label) {
        const ModelConfig &cfg = c_.config;
        RopeKVParams p{};
        p.position = (uint32_t)s_.start_position;
        p.rows = rows();
        p.n_heads = cfg.n_heads;
        p.n_kv_heads = cfg.n_kv_heads;
        p.head_dim = cfg.head_dim;
        p.rope_dim = cfg.rope_dim;
        p.max_seq = (uint32_t)c_.kv.layer_length[layer];
        p.qkv_stride = qkv_stride();
        CmdBuilder b(table_, c_.device, kv_kernel(c_.arch.rope_kernel), {rows(), 1, 1});
        b.buf(c_.scratch.qkv).buf(c_.kv.k_buffers[layer]).buf(c_.kv.v_buffers[layer]).buf(rope_inv_freq(layer));
        b.params(p).label(label);
        if (s_.patched) b.patch(PatchType::Position, offsetof(RopeKVParams, position));
        b.emit();
    }

    AttentionParams attention_params(uint32_t layer) const {
        const ModelConfig &cfg = c_.config;
        AttentionParams p{};
        p.position = (uint32_t)s_.start_position;
        p.kv_len = (uint32_t)(s_.start_position + s_.rows);
        p.rows = rows();
        p.n_heads = cfg.n_heads;
        p.n_kv_heads = cfg.n_kv_heads;
        p.head_dim = cfg.head_dim;
        p.max_seq = (uint32_t)c_.kv.layer_length[layer];
        p.q_stride = qkv_stride();
        p.out_stride = cfg.q_dim();
        p.scale = cfg.attention_scale > 0.f ? cfg.attention_scale : 1.0f / std::sqrt((float)cfg.head_dim);
        p.window = sliding(layer) ? cfg.sliding_window : 0;
        p.softcap = cfg.attn_logit_softcap;
        return p;
    }

    const Buffer &rope_inv_freq(uint32_t layer) const {
        const bool local = sliding(layer) && c_.weights.rope_inv_freq_local.handle != nullptr;
        return local ? c_.weights.rope_inv_freq_local : c_.weights.rope_inv_freq;
    }

    void emit_attention(uint32_t layer, const std::string &label) {
        const AttentionParams p = attention_params(layer);
        // One unit per (head, query row).
        CmdBuilder b(table_, c_.device, kv_kernel(c_.arch.attention_kernel), {p.n_heads, rows(), 1});
        b.buf(c_.scratch.qkv).buf(c_.kv.k_buffers[layer]).buf(c_.kv.v_buffers[layer]).buf(c_.scratch.attn_out);
        b.params(p).label(label);
        if (s_.patched)
            b.patch(PatchType::PosAndKV, offsetof(AttentionParams, position), offsetof(AttentionParams, kv_len));
        b.emit();
    }

    // Decode: QK-norm, RoPE, the KV-cache append and attention as one command.
    void emit_rope_attention(const LayerWeights &L, uint32_t layer, const std::string &label) {
        RopeAttentionParams p{};
        p.attention = attention_params(layer);
        p.rope_dim = c_.config.rope_dim;
        p.qk_norm = c_.arch.qk_norm ? 1 : 0;
        p.norm_eps = c_.config.norm_eps;
        CmdBuilder b(table_, c_.device, kv_kernel(c_.arch.rope_attention_kernel), {p.attention.n_heads, 1, 1});
        b.buf(c_.scratch.qkv).buf(c_.kv.k_buffers[layer]).buf(c_.kv.v_buffers[layer]).buf(c_.scratch.attn_out);
        b.buf(rope_inv_freq(layer));
        if (c_.arch.qk_norm) b.buf(L.q_norm).buf(L.k_norm);
        b.params(p).label(label);
        if (s_.patched) {
            const size_t base = offsetof(RopeAttentionParams, attention);
            b.patch(PatchType::PosAndKV, base + offsetof(AttentionParams, position),
                    base + offsetof(AttentionParams, kv_len));
        }
        b.emit();
    }

    void emit_gated_activation(const std::string &label) {
        GatedActParams p{};
        p.ffn_dim = c_.config.ffn_dim;
        p.rows = rows();
        CmdBuilder(table_, c_.device, c_.arch.activation_kernel, {rows(), 1, 1})
            .buf(c_.scratch.gate_up)
            .buf(c_.scratch.ffn_act)
            .params(p)
            .label(label)
            .emit();
    }

    // Final norm and logits. Generation needs only the last row's logits and its argmax;
    // evaluation asks for every row.
    void emit_output() {
        const ModelConfig &cfg = c_.config;
        const uint32_t first_row = s_.all_logits ? 0 : rows() - 1;
        const uint32_t n_rows = s_.all_logits ? rows() : 1;
        emit_normed_matmul({&c_.weights.output}, c_.weights.output_norm, first_row, n_rows, c_.scratch.logits,
                           cfg.vocab_size, "output_norm", "logits");
        if (cfg.final_logit_softcap > 0.f) {
            SoftcapParams p{};
            p.n = cfg.vocab_size;
            p.rows = n_rows;
            p.cap = cfg.final_logit_softcap;
            CmdBuilder(table_, c_.device, c_.arch.softcap_kernel, {n_rows, 1, 1})
                .buf(c_.scratch.logits)
                .params(p)
                .label("logit_softcap")
                .emit();
        }
        if (s_.all_logits) return;
        if (s_.sample)
            emit_sample(table_, c_, s_);
        else
            emit_argmax();
    }

    void emit_argmax() {
        ArgmaxParams p{};
        p.n = c_.config.vocab_size;
        CmdBuilder b(table_, c_.device, "argmax_f32", {1, 1, 1});
        // The slot after the pass's rows: built at rows - 1 and patched one on when patched (decode:
        // token i's argmax fills slot i + 1).
        b.buf(c_.scratch.logits).buf(c_.scratch.token_ids, 4u * (s_.patched ? rows() - 1 : rows())).params(p).label("argmax");
        if (s_.patched) b.patch(PatchType::ArgmaxOutput);
        b.emit();
    }

public:
    // The sampler in the argmax's place: the same token slot, drawn from the same logits.
    static void emit_sample(DispatchTable &table, const ModelContext &c, const ForwardSpec &s) {
        SampleParams p{};
        p.n = c.config.vocab_size;
        p.position = (uint32_t)(s.start_position + s.rows);
        p.chain_index = 0;
        CmdBuilder b(table, c.device, "sample_f32", {1, 1, 1});
        b.buf(c.scratch.logits).buf(c.scratch.token_ids, s.patched ? 0 : 4u * (uint32_t)s.rows).buf(c.scratch.sampling);
        b.params(p).label("sample");
        if (s.patched)
            b.patch(PatchType::SampleOutput, offsetof(SampleParams, position), offsetof(SampleParams, chain_index));
        b.emit();
    }
};

}  // namespace

bool fuses_rope_into_attention(const ChipConfig &chip, int rows) { return rows == 1 && chip.fuse_rope_into_attention; }

std::vector<std::string> kv_cache_kernels(const ArchDescriptor &arch, const ChipConfig &chip, KVCacheDType dtype) {
    std::vector<std::string> names = {kv_kernel_name(arch.rope_kernel, dtype),
                                      kv_kernel_name(arch.attention_kernel, dtype)};
    if (fuses_rope_into_attention(chip, 1)) names.push_back(kv_kernel_name(arch.rope_attention_kernel, dtype));
    return names;
}

DispatchTable with_sampler(const DispatchTable &decode_table, const ModelContext &ctx) {
    if (decode_table.commands.empty() || decode_table.commands.back().patch != PatchType::ArgmaxOutput)
        throw AkunuError("internal: with_sampler needs a decode table that ends in its argmax");
    DispatchTable table = decode_table;
    table.commands.pop_back();
    table.labels.pop_back();
    table.kernel_names.pop_back();
    ForwardSpec spec;
    spec.patched = true;
    ForwardBuilder::emit_sample(table, ctx, spec);
    return table;
}

DispatchTable masked_choice_table(const DispatchTable &decode_table, const ModelContext &ctx) {
    const PatchType last = decode_table.commands.empty() ? PatchType::None : decode_table.commands.back().patch;
    if (last != PatchType::ArgmaxOutput && last != PatchType::SampleOutput)
        throw AkunuError("internal: masked_choice_table needs a decode table that ends in its argmax or sampler");
    DispatchTable table;
    GrammarBitmaskParams p{};
    p.n = ctx.config.vocab_size;
    const uint32_t words = (uint32_t)token_mask_words(ctx.config);
    // CPU: one work unit per 64 mask words (2048 tokens); GPUs size their own launch.
    CmdBuilder(table, ctx.device, "grammar_bitmask_f32", {(words + 63) / 64, 1, 1})
        .buf(ctx.scratch.logits)
        .buf(ctx.scratch.token_mask)
        .params(p)
        .label("grammar_bitmask")
        .emit();
    table.commands.push_back(decode_table.commands.back());
    table.labels.push_back(decode_table.labels.back());
    table.kernel_names.push_back(decode_table.kernel_names.back());
    table.persistent = true;
    return table;
}

DispatchTable build_forward_table(const ModelContext &ctx, const ForwardSpec &spec) {
    if (spec.rows < 1 || spec.rows > ctx.scratch.max_rows)
        throw AkunuError("internal: forward pass of " + std::to_string(spec.rows) + " rows exceeds scratch");
    if (spec.all_logits && spec.rows > ctx.scratch.max_logits_rows)
        throw AkunuError("internal: all-logits pass of " + std::to_string(spec.rows) + " rows exceeds scratch");
    if (spec.patched && spec.sample && spec.rows > 1)
        throw AkunuError("internal: a patched sampler draws after one row (decode), not " + std::to_string(spec.rows));
    return ForwardBuilder(ctx, spec).build();
}

}  // namespace akunu
