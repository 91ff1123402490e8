// A generation session: prefill, then greedy chain decode (N tokens per replay, the argmax of
// token i feeding token i + 1 on the device) or sampled decode (one replay per token, sampling
// on the host), with timing for GenerationStats.
#include <algorithm>
#include <chrono>

#include "core/errors.h"
#include "inference/model.h"

namespace akunu {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
}  // namespace

void Model::begin_generation(const std::vector<int32_t> &prompt, int max_tokens, const SamplingConfig &sampling) {
    if (prompt.empty()) throw std::invalid_argument("the prompt is empty");
    if (max_tokens < 0) throw std::invalid_argument("max_tokens must be >= 0, got " + std::to_string(max_tokens));
    sampling.validate();
    check_tokens(prompt);
    reset();
    check_room((int)prompt.size());

    stats_ = GenerationStats{};
    stats_.prompt_tokens = (int)prompt.size();
    gen_.max_tokens = max_tokens;
    gen_.sampling = sampling;
    gen_.sampler = std::make_unique<Sampler>(sampling);
    gen_.history = prompt;
    gen_.finished = max_tokens == 0;
    gen_.finish_reason = gen_.finished ? "length" : "";
    if (gen_.finished) return;

    Clock::time_point t0 = Clock::now();
    int32_t greedy_next = prefill(prompt);
    gen_.next_input = sampling.greedy() && sampling.repeat_penalty == 1.f ? greedy_next : sample_next(gen_.history);
    stats_.prefill_ms = ms_since(t0);
    gen_.first_pending = true;
}

// Samples from the logits of the last row the device computed (scratch.logits row 0).
int32_t Model::sample_next(const std::vector<int32_t> &history) {
    device_->read_buffer(logits_row_.data(), scratch_.logits, logits_row_.size() * sizeof(float));
    return gen_.sampler->sample(logits_row_.data(), (int)logits_row_.size(), history);
}

std::vector<int32_t> Model::decode_greedy_chunk(int n) { return chain_decode(gen_.next_input, n); }

// Sampled decode: the table without its final argmax, one token per replay, sampled on the host.
std::vector<int32_t> Model::decode_sampled_chunk(int n) {
    std::vector<int32_t> out;
    const int without_argmax = (int)decode_table_.commands.size() - 1;
    int32_t input = gen_.next_input;
    for (int i = 0; i < n; ++i) {
        uint32_t slot = (uint32_t)input;
        device_->write_buffer(scratch_.token_ids, &slot, 4);
        device_->encode_dispatch_table(decode_table_, kv_.current_length, 1, 0, without_argmax);
        device_->synchronize();
        kv_.advance(1);
        input = sample_next(gen_.history);
        out.push_back(input);
        gen_.history.push_back(input);
        if (is_eog(input)) break;
    }
    return out;
}

std::vector<int32_t> Model::next_tokens() {
    std::vector<int32_t> out;
    if (gen_.finished) return out;
    auto finish = [&](const char *reason) {
        gen_.finished = true;
        gen_.finish_reason = reason;
    };
    // The prefill already produced the first token: hand it out on its own so a stream shows
    // text as soon as possible.
    if (gen_.first_pending) {
        gen_.first_pending = false;
        int32_t t = gen_.next_input;
        if (is_eog(t)) {
            finish("stop");
            return out;
        }
        out.push_back(t);
        gen_.history.push_back(t);
        gen_.generated = 1;
        stats_.generated_tokens = 1;
        if (gen_.generated >= gen_.max_tokens) finish("length");
        return out;
    }
    const int room = kv_.max_length - kv_.current_length;
    const int n = std::min({chip_.chain_decode_chunk, gen_.max_tokens - gen_.generated, room});
    if (n <= 0) {
        finish("length");
        return out;
    }
    Clock::time_point t0 = Clock::now();
    const bool plain_greedy = gen_.sampling.greedy() && gen_.sampling.repeat_penalty == 1.f;
    std::vector<int32_t> produced = plain_greedy ? decode_greedy_chunk(n) : decode_sampled_chunk(n);
    stats_.decode_ms += ms_since(t0);
    stats_.decode_steps += (int)produced.size();
    for (int32_t t : produced) {
        if (is_eog(t)) {
            finish("stop");
            break;
        }
        out.push_back(t);
        ++gen_.generated;
    }
    stats_.generated_tokens = gen_.generated;
    if (!gen_.finished) {
        gen_.next_input = produced.back();
        if (gen_.generated >= gen_.max_tokens || kv_.current_length >= kv_.max_length) finish("length");
    }
    return out;
}

}  // namespace akunu
