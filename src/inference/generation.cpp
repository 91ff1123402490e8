// A generation session: prefill, then chain decode, N tokens per replay with token i's
// choice feeding token i + 1 on the device: argmax for plain greedy decoding, the sampler
// (core/sampling_rule.h) otherwise. Timing for GenerationStats.
#include <algorithm>
#include <chrono>

#include "core/errors.h"
#include "inference/model.h"

namespace akunu {

double ms_since(SessionClock::time_point t0) {
    return std::chrono::duration<double, std::milli>(SessionClock::now() - t0).count();
}

std::vector<int32_t> Model::start_session(const std::vector<int32_t> &prompt, const SamplingConfig &sampling) {
    if (prompt.empty()) throw std::invalid_argument("the prompt is empty");
    sampling.validate();
    check_tokens(prompt);
    check_prompt_fits(prompt.size());

    gen_ = Session{};
    stats_ = GenerationStats{};
    stats_.prompt_tokens = (int)prompt.size();
    stats_.cached_tokens = reuse_cached_prefix(prompt);
    prompt_end_ = (int)prompt.size();
    gen_.sampling = sampling;
    gen_.history = prompt;
    gen_.prompt_length = prompt.size();
    return std::vector<int32_t>(prompt.begin() + stats_.cached_tokens, prompt.end());
}

void Model::begin_generation(const std::vector<int32_t> &prompt, const SamplingConfig &sampling) {
    const SessionClock::time_point t0 = SessionClock::now();
    const std::vector<int32_t> rest = start_session(prompt, sampling);
    gen_.finished = sampling.max_tokens == 0;
    gen_.finish_reason = gen_.finished ? "length" : "";
    if (gen_.finished) return;

    gen_.next_input = prefill_for_session(rest);
    stats_.prefill_ms = ms_since(t0);
    gen_.first_pending = true;
}

int32_t Model::prefill_for_session(const std::vector<int32_t> &rest) {
    if (gen_.sampling.plain_greedy()) return prefill(rest);
    write_sampling_state();
    int32_t next = 0;
    forward_in_chunks(rest, chip_.max_prefill_chunk, false, true,
                      [&](size_t, int rows) { next = read_token_slot(rows); });
    return next;
}

void Model::write_sampling_state() {
    SamplingRule rule = gen_.sampling.rule();
    // The buffer holds a context's worth of tokens, and the history never outgrows the context.
    rule.repeat_window = std::min<uint32_t>(rule.repeat_window, (uint32_t)kv_.max_length);
    const size_t recent = std::min<size_t>(rule.repeat_window, gen_.history.size());
    rule.recent_count = (uint32_t)recent;
    // The history's tokens past the prompt are the generated ones (chosen or fed in a constrained
    // session): the frequency and presence penalties count only those.
    rule.recent_generated = (uint32_t)std::min(recent, gen_.history.size() - gen_.prompt_length);
    device_->write_buffer(scratch_.sampling, &rule, sizeof rule);
    if (recent > 0)
        device_->write_buffer(scratch_.sampling, gen_.history.data() + (gen_.history.size() - recent), recent * 4,
                              kSamplingRecentOffset);
}

std::vector<int32_t> Model::decode_greedy_chunk(int n) { return chain_decode(gen_.next_input, n); }

// Sampled decode: one replay of the sampled table draws n tokens, each draw feeding the next.
std::vector<int32_t> Model::decode_sampled_chunk(int n) {
    if (n > std::max(scratch_.max_rows, chip_.chain_decode_chunk))
        throw AkunuError("internal: a sampled chunk of " + std::to_string(n) + " tokens exceeds the token slots");
    write_sampling_state();
    std::vector<int32_t> out = replay_chain(sampled_decode_table_, gen_.next_input, n);
    gen_.history.insert(gen_.history.end(), out.begin(), out.end());
    return out;
}

std::vector<int32_t> Model::next_tokens() {
    std::vector<int32_t> out;
    if (gen_.finished) return out;
    if (gen_.constrained) throw std::logic_error("next_tokens: this session is grammar-constrained (choose_token / feed)");
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
        if (gen_.generated >= gen_.sampling.max_tokens) finish("length");
        return out;
    }
    const int room = kv_.max_length - kv_.length();
    const int n = std::min({chip_.chain_decode_chunk, gen_.sampling.max_tokens - gen_.generated, room});
    if (n <= 0) {
        finish("length");
        return out;
    }
    SessionClock::time_point t0 = SessionClock::now();
    std::vector<int32_t> produced = gen_.sampling.plain_greedy() ? decode_greedy_chunk(n) : decode_sampled_chunk(n);
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
        if (gen_.generated >= gen_.sampling.max_tokens || kv_.length() >= kv_.max_length) finish("length");
    }
    return out;
}

}  // namespace akunu
