#include "inference/prompt_cache.h"

namespace akunu {

void PromptCache::insert(KVSnapshot snapshot) {
    if (!fits(snapshot.bytes())) return;
    used_ += snapshot.bytes();
    entries_.push_front(std::move(snapshot));
    while (used_ > budget_) {
        used_ -= entries_.back().bytes();
        entries_.pop_back();
    }
}

std::optional<KVSnapshot> PromptCache::take_best(const std::function<int(const KVSnapshot &)> &score, int must_beat) {
    auto best = entries_.end();
    int best_score = must_beat;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const int s = score(*it);
        if (s > best_score) {
            best = it;
            best_score = s;
        }
    }
    if (best == entries_.end()) return std::nullopt;
    KVSnapshot taken = std::move(*best);
    used_ -= taken.bytes();
    entries_.erase(best);
    return taken;
}

void PromptCache::clear() {
    entries_.clear();
    used_ = 0;
}

}  // namespace akunu
