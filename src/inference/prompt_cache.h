// The prompt cache: host copies of the KV caches of the most recent conversations a Model set aside,
// least recently saved evicted first, bounded by bytes (docs/adr/0018-prompt-reuse.md). The Model
// saves its live cache here when a new session would discard most of it, and takes an entry back
// when it shares a longer prefix with a new prompt than the live cache does.
#pragma once
#include <cstddef>
#include <functional>
#include <list>
#include <optional>

#include "core/kv_snapshot.h"

namespace akunu {

class PromptCache {
public:
    explicit PromptCache(size_t budget_bytes = 0) : budget_(budget_bytes) {}

    size_t budget_bytes() const { return budget_; }
    size_t used_bytes() const { return used_; }
    size_t entries() const { return entries_.size(); }
    // Whether an entry of `bytes` would be kept (0 budget: nothing is).
    bool fits(size_t bytes) const { return bytes > 0 && bytes <= budget_; }

    // Keeps `snapshot` as the most recent entry, evicting the oldest past the budget.
    void insert(KVSnapshot snapshot);
    // Removes and returns the entry with the highest score above `must_beat` (ties: the most
    // recent); score(entry) says how many of its positions a prompt could reuse.
    std::optional<KVSnapshot> take_best(const std::function<int(const KVSnapshot &)> &score, int must_beat);
    void clear();

private:
    size_t budget_;
    size_t used_ = 0;
    std::list<KVSnapshot> entries_;  // most recent first
};

}  // namespace akunu
