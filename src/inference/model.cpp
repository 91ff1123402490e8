// Running the model: prefill, decode (single step and chained), evaluation logits.
#include <algorithm>
#include <cstring>
#include <functional>

#include "core/errors.h"
#include "core/table_builder.h"
#include "inference/model.h"
#include "weights/gguf_file.h"

namespace akunu {

ModelContext Model::context() const { return ModelContext{*device_, config_, arch_, chip_, weights_, kv_, scratch_}; }

// Hugging Face checkpoints keep theirs in tokenizer_config.json, which the Python layer reads.
std::string Model::chat_template() const {
    return provider_->has_gguf() ? provider_->gguf().get_string("tokenizer.chat_template", "") : "";
}

void Model::reset() {
    kv_.reset();
    prompt_end_ = 0;
    prompt_cache_.clear();
    gen_ = Session{};
}

void Model::check_tokens(const std::vector<int32_t> &tokens) const {
    for (int32_t t : tokens)
        if (t < 0 || (uint32_t)t >= config_.vocab_size)
            throw std::invalid_argument("token id " + std::to_string(t) + " is out of range [0, " +
                                        std::to_string(config_.vocab_size) + ")");
}

void Model::check_room(int n_new) const {
    if (kv_.length() + n_new > kv_.max_length)
        throw ContextOverflowError(std::to_string(kv_.length()) + " cached + " + std::to_string(n_new) +
                                   " new tokens exceed the context length of " + std::to_string(kv_.max_length) +
                                   " (load the model with a larger context_length)");
}

void Model::check_prompt_fits(size_t prompt_tokens) const {
    if (prompt_tokens > (size_t)kv_.max_length)
        throw ContextOverflowError(std::to_string(prompt_tokens) + " prompt tokens exceed the context length of " +
                                   std::to_string(kv_.max_length) + " (load the model with a larger context_length)");
}

int32_t Model::read_token_slot(int slot) const {
    uint32_t t = 0;
    device_->read_buffer(&t, scratch_.token_ids, 4, (size_t)slot * 4);
    return (int32_t)t;
}

void Model::forward_in_chunks(const std::vector<int32_t> &tokens, int max_rows, bool all_logits, bool sample,
                              const std::function<void(size_t first, int rows)> &after_chunk) {
    for (size_t done = 0; done < tokens.size();) {
        const int rows = (int)std::min<size_t>((size_t)max_rows, tokens.size() - done);
        std::vector<uint32_t> ids(tokens.begin() + (long)done, tokens.begin() + (long)done + rows);
        device_->write_buffer(scratch_.token_ids, ids.data(), ids.size() * 4);
        ForwardSpec spec;
        spec.rows = rows;
        spec.start_position = kv_.length();
        spec.all_logits = all_logits;
        spec.sample = sample;
        DispatchTable table = build_forward_table(context(), spec);
        device_->encode_dispatch_table(table, kv_.length(), 1);
        device_->synchronize();
        kv_.append(tokens.data() + done, (size_t)rows);
        after_chunk(done, rows);
        done += (size_t)rows;
    }
}

int32_t Model::prefill(const std::vector<int32_t> &tokens) {
    if (tokens.empty()) throw std::invalid_argument("prefill needs at least one token");
    check_tokens(tokens);
    check_room((int)tokens.size());
    int32_t next = 0;
    // Each chunk's argmax lands in the token slot after its rows; the last chunk's is the answer.
    forward_in_chunks(tokens, chip_.max_prefill_chunk, false, false,
                      [&](size_t, int rows) { next = read_token_slot(rows); });
    prompt_end_ = kv_.length();
    return next;
}

int32_t Model::decode_step(int32_t token) { return chain_decode(token, 1).at(0); }

std::vector<int32_t> Model::chain_decode(int32_t token, int count) {
    if (count < 0) throw std::invalid_argument("count must be >= 0");
    check_tokens({token});
    check_room(count);
    std::vector<int32_t> out;
    out.reserve((size_t)count);
    // The token buffer holds one replay's worth of slots; longer chains run in several replays.
    const int slots = std::max(scratch_.max_rows, chip_.chain_decode_chunk);
    int32_t next = token;
    while ((int)out.size() < count) {
        std::vector<int32_t> produced = replay_chain(decode_table_, next, std::min(slots, count - (int)out.size()));
        out.insert(out.end(), produced.begin(), produced.end());
        next = produced.back();
    }
    return out;
}

std::vector<int32_t> Model::replay_chain(const DispatchTable &table, int32_t token, int n) {
    const uint32_t first = (uint32_t)token;
    device_->write_buffer(scratch_.token_ids, &first, 4);
    device_->encode_dispatch_table(table, kv_.length(), n);
    device_->synchronize();
    // Token slots hold vocabulary ids (< 2^31): read as int32 directly.
    std::vector<int32_t> out((size_t)n);
    device_->read_buffer(out.data(), scratch_.token_ids, (size_t)n * 4, 4);
    // The chain fed `token`, then each produced token but the last (that one feeds the next chain).
    kv_.append(&token, 1);
    kv_.append(out.data(), (size_t)n - 1);
    return out;
}

std::vector<double> Model::profile_decode_step(int32_t token) {
    check_tokens({token});
    check_room(1);
    uint32_t slot = (uint32_t)token;
    device_->write_buffer(scratch_.token_ids, &slot, 4);
    std::vector<double> ms = device_->profile_dispatch_table(decode_table_, kv_.length());
    kv_.append(&token, 1);
    return ms;
}

std::vector<float> Model::evaluate_logits(const std::vector<int32_t> &tokens, size_t first_row) {
    if (tokens.empty()) throw std::invalid_argument("logits needs at least one token");
    if (first_row >= tokens.size())
        throw std::invalid_argument("logits: first row " + std::to_string(first_row) + " is past the last of " +
                                    std::to_string(tokens.size()) + " tokens");
    check_tokens(tokens);
    check_prompt_fits(tokens.size());
    gen_ = Session{};
    // The rows before first_row only fill the cache: what the live cache already holds of them is
    // kept (a logprobs pass over a reply just generated runs only the reply's rows), the rest is a
    // plain prefill with no logits computed.
    const int keep = std::min(reusable_prefix(kv_.tokens(), prompt_end_, tokens), (int)first_row);
    kv_.truncate(keep);
    const size_t vocab = config_.vocab_size;
    const std::vector<int32_t> head(tokens.begin() + keep, tokens.begin() + first_row);
    const std::vector<int32_t> tail(tokens.begin() + first_row, tokens.end());
    if (!head.empty()) forward_in_chunks(head, chip_.max_prefill_chunk, false, false, [](size_t, int) {});
    std::vector<float> logits(tail.size() * vocab);
    forward_in_chunks(tail, chip_.max_logits_rows, true, false, [&](size_t first, int rows) {
        device_->read_buffer(logits.data() + first * vocab, scratch_.logits, (size_t)rows * vocab * sizeof(float));
    });
    prompt_end_ = kv_.length();
    return logits;
}

std::vector<float> Model::last_logits() const {
    std::vector<float> logits(config_.vocab_size);
    device_->read_buffer(logits.data(), scratch_.logits, logits.size() * sizeof(float));
    return logits;
}

}  // namespace akunu
