// A grammar-constrained generation session (see model.h): the prompt's prefill, then per token a
// forward pass (feed), the caller's mask, and the masked choice (choose_token). Tokens the grammar
// forces need no choice: a few run as chained decode steps in one submission, more as one prefill
// pass (ChipConfig::max_forced_decode_steps), replayed from a kept table where the backend keeps
// them (max_forced_table_rows), so a grammar that fixes long stretches of text (keys, punctuation)
// costs fewer forward passes than free text.
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "core/errors.h"
#include "inference/model.h"

namespace akunu {

size_t Model::token_mask_words() const { return akunu::token_mask_words(config_); }

void Model::begin_constrained(const std::vector<int32_t> &prompt, const SamplingConfig &sampling) {
    const SessionClock::time_point t0 = SessionClock::now();
    const std::vector<int32_t> rest = start_session(prompt, sampling);
    gen_.constrained = true;
    gen_.finished = false;

    // The last chunk's logits (row 0 of scratch.logits) wait for the mask; its argmax is unused.
    forward_in_chunks(rest, chip_.max_prefill_chunk, false, false, [](size_t, int) {});
    stats_.prefill_ms = ms_since(t0);
    gen_.logits_pending = true;
    gen_.decode_start = SessionClock::now();
}

int32_t Model::choose_token(const uint32_t *mask, size_t words) {
    if (!gen_.constrained || gen_.finished) throw std::logic_error("choose_token needs a running constrained session");
    if (!gen_.logits_pending)
        throw std::logic_error("choose_token: the last chosen token has not been fed yet (feed() it first)");
    if (words != token_mask_words())
        throw std::invalid_argument("the token mask has " + std::to_string(words) + " words; this model's vocabulary of " +
                                    std::to_string(config_.vocab_size) + " tokens needs " +
                                    std::to_string(token_mask_words()));
    device_->write_buffer(scratch_.token_mask, mask, words * 4);
    const bool greedy = gen_.sampling.plain_greedy();
    if (!greedy) write_sampling_state();
    // Patched at the last cached position: the choice writes token slot 1 and draws the token of
    // position length(), as the decode table's last command would after that position.
    device_->encode_dispatch_table(greedy ? masked_argmax_table_ : masked_sample_table_, kv_.length() - 1, 1);
    const int32_t token = read_token_slot(1);
    gen_.logits_pending = false;
    stats_.decode_ms = ms_since(gen_.decode_start);
    return token;
}

void Model::feed(const std::vector<int32_t> &tokens) {
    if (!gen_.constrained || gen_.finished) throw std::logic_error("feed needs a running constrained session");
    if (tokens.empty()) throw std::invalid_argument("feed needs at least one token");
    check_tokens(tokens);
    check_room((int)tokens.size());
    gen_.history.insert(gen_.history.end(), tokens.begin(), tokens.end());
    const int n = (int)tokens.size();
    // A few tokens: chained replays of the decode table; more, up to max_forced_table_rows: one
    // replay of the kept table of n rows; both without their argmax, asynchronous where the device
    // is. Longer runs: prefill passes built per call.
    const DispatchTable *table = nullptr;
    int replays = 1;
    if (n <= std::max(1, chip_.max_forced_decode_steps)) {
        table = &decode_table_;
        replays = n;
    } else if (n <= std::min(chip_.max_forced_table_rows, scratch_.max_rows)) {
        auto kept = forced_run_tables_.find(n);
        if (kept == forced_run_tables_.end())
            kept = forced_run_tables_.emplace(n, build_forced_run_table(context(), n)).first;
        table = &kept->second;
    }
    if (table) {
        // Token i reads slot i. (Checked ids are non-negative: their int32 bytes are the u32 slots.)
        device_->write_buffer(scratch_.token_ids, tokens.data(), tokens.size() * 4);
        device_->encode_dispatch_table(*table, kv_.length(), replays, 0, (int)table->commands.size() - 1);
        kv_.append(tokens);
    } else {
        forward_in_chunks(tokens, chip_.max_prefill_chunk, false, false, [](size_t, int) {});
    }
    stats_.decode_steps += (int)tokens.size();
    gen_.logits_pending = true;
}

std::vector<int> Model::forced_run_tables() const {
    std::vector<int> rows;
    for (const auto &kept : forced_run_tables_) rows.push_back(kept.first);
    return rows;
}

void Model::end_constrained(int generated, const std::string &reason) {
    if (!gen_.constrained) throw std::logic_error("end_constrained needs a constrained session");
    if (reason != "stop" && reason != "length") throw std::invalid_argument("finish reason must be 'stop' or 'length'");
    // A forward pass fed after the last choice may still run; nothing needs it, and every later
    // command on the device is ordered after it.
    gen_.finished = true;
    gen_.logits_pending = false;
    gen_.finish_reason = reason;
    stats_.generated_tokens = generated;
}

}  // namespace akunu
