// Prompt reuse: a session keeps the cached positions its prompt shares with what the cache holds
// (the live cache, or a conversation saved in the prompt cache) and prefills only the rest
// (docs/adr/0018-prompt-reuse.md). Rolling back is setting the length: a position's K/V rows depend
// only on the tokens up to it, and the rows past the new length are overwritten before any pass
// reads them.
#include <algorithm>
#include <utility>

#include "inference/model.h"

namespace akunu {

namespace {
// Fewer lost positions than this are cheap to prefill again: not worth a host copy.
constexpr int kMinLostPositions = 32;
}  // namespace

int Model::reusable_prefix(const std::vector<int32_t> &cached, int prefilled,
                           const std::vector<int32_t> &prompt) const {
    // The prompt's last token always runs: its pass gives the logits of the first new token.
    size_t limit = std::min(cached.size(), prompt.size() - 1);
    // Where decode steps round K/V otherwise than a prefill pass, generated positions are run again
    // by the next prompt's prefill, as a fresh model would run them.
    if (!chip_.decode_rows_match_prefill) limit = std::min(limit, (size_t)std::max(prefilled, 0));
    size_t common = 0;
    while (common < limit && cached[common] == prompt[common]) ++common;
    // A sliding-window ring may have overwritten what the first new position reads; then nothing
    // is reusable (a shorter prefix needs older keys still).
    if (common == 0 || !kv_.can_roll_back((int)cached.size(), (int)common, (int)config_.sliding_window)) return 0;
    return (int)common;
}

int Model::reuse_cached_prefix(const std::vector<int32_t> &prompt) {
    int keep = reusable_prefix(kv_.tokens(), prompt_end_, prompt);
    std::optional<KVSnapshot> saved = prompt_cache_.take_best(
        [&](const KVSnapshot &s) { return reusable_prefix(s.tokens, s.prefilled, prompt); }, keep);
    // Set the live conversation aside when this prompt departs from it before the end of its last
    // prompt (another conversation, or an edit of this one) and loses enough of it: a later prompt
    // may continue it. A new reply to the same prompt only replaces the old reply.
    const int live = kv_.length();
    const bool departs = keep < std::min(prompt_end_, live);
    if (departs && live - keep >= kMinLostPositions && prompt_cache_.fits(kv_snapshot_bytes(kv_, live))) {
        KVSnapshot snapshot = save_kv_rows(*device_, kv_);
        snapshot.prefilled = prompt_end_;
        prompt_cache_.insert(std::move(snapshot));
    }
    if (saved) {
        restore_kv_rows(*device_, kv_, *saved);
        prompt_end_ = saved->prefilled;
        keep = reusable_prefix(kv_.tokens(), prompt_end_, prompt);
    }
    kv_.truncate(keep);
    return keep;
}

}  // namespace akunu
