// The host reference of the sampling rule (sampling_rule.h), written for clarity: sorts where a
// GPU selects. The CUDA kernel (cuda/sample.cu) must draw the same tokens.
#include "core/sampling_rule.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace akunu {

namespace {

// Scratch reused from draw to draw (the CPU backend draws once per token on its thread).
thread_local std::unordered_set<uint32_t> t_seen;
thread_local std::unordered_map<uint32_t, uint32_t> t_generated_counts;
thread_local std::vector<uint32_t> t_keys;

// The penalties (sampling_rule.h): each distinct valid token of the window once, with its count
// among the window's last generated_len tokens.
void apply_penalties(const SamplingRule &rule, float *logits, uint32_t n, const uint32_t *window, uint32_t window_len,
                     uint32_t generated_len) {
    std::unordered_map<uint32_t, uint32_t> &counts = t_generated_counts;
    counts.clear();
    if (additive_penalties_on(rule))
        for (uint32_t i = window_len - std::min(generated_len, window_len); i < window_len; ++i) ++counts[window[i]];
    std::unordered_set<uint32_t> &seen = t_seen;
    seen.clear();
    for (uint32_t i = 0; i < window_len; ++i) {
        const uint32_t t = window[i];
        if (t >= n || !seen.insert(t).second) continue;
        const auto c = counts.find(t);
        logits[t] = penalized_logit(rule, logits[t], c == counts.end() ? 0u : c->second);
    }
}

uint32_t first_argmax(const float *x, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return best;
}

}  // namespace

uint32_t sample_token(const SamplingRule &rule, float *logits, uint32_t n, const uint32_t *window,
                      uint32_t window_len, uint32_t generated_len, uint32_t position) {
    if (rule.repeat_penalty != 1.f || additive_penalties_on(rule))
        apply_penalties(rule, logits, n, window, window_len, generated_len);
    if (rule.inv_temperature == 0.f) return first_argmax(logits, n);

    const float inv_t = rule.inv_temperature;
    const float max_logit = *std::max_element(logits, logits + n);

    // top-k: keep keys >= the k-th largest key.
    uint32_t min_key = 0;
    if (rule.top_k > 0 && rule.top_k < n) {
        std::vector<uint32_t> &keys = t_keys;
        keys.resize(n);
        for (uint32_t i = 0; i < n; ++i) keys[i] = order_key(logits[i]);
        std::nth_element(keys.begin(), keys.begin() + (rule.top_k - 1), keys.end(), std::greater<uint32_t>());
        min_key = keys[rule.top_k - 1];
    }

    // top-p over the top-k set: the largest key whose tokens at or above it carry top_p of its
    // weight. Walks the keys best first, sorting more of them only while the target is not reached
    // (most of the weight sits in a few tokens).
    if (rule.top_p < 1.f) {
        std::vector<uint32_t> &keys = t_keys;
        keys.clear();
        uint64_t total = 0;
        for (uint32_t i = 0; i < n; ++i) {
            const uint32_t key = order_key(logits[i]);
            if (key < min_key) continue;
            keys.push_back(key);
            total += softmax_weight(logits[i], max_logit, inv_t);
        }
        const uint64_t target = top_p_target(total, rule.top_p);
        uint64_t mass = 0;
        size_t walked = 0;
        for (size_t sorted = std::min<size_t>(64, keys.size());; sorted = std::min(keys.size(), sorted * 8)) {
            std::partial_sort(keys.begin() + (long)walked, keys.begin() + (long)sorted, keys.end(), std::greater<uint32_t>());
            for (; walked < sorted; ++walked) {
                mass += softmax_weight(order_key_value(keys[walked]), max_logit, inv_t);
                if (mass >= target) break;
            }
            if (walked < sorted) {
                min_key = std::max(min_key, keys[walked]);
                break;
            }
        }
    }

    // Gumbel-max over the kept tokens (the first index on ties). A token whose score could not
    // beat the best so far even with the largest noise is skipped without hashing (fmaf is
    // monotone in its addend, so the bound is exact).
    const uint32_t stream = noise_stream(rule.seed_lo, rule.seed_hi, position);
    const float max_noise = -logf(-logf((8388607.0f + 0.5f) / 8388608.0f));
    uint32_t best = 0;
    float best_score = -INFINITY;
    bool found = false;
    for (uint32_t i = 0; i < n; ++i) {
        const float l = logits[i];
        if (order_key(l) < min_key || !min_p_keeps(l, max_logit, inv_t, rule.log_min_p)) continue;
        if (found && gumbel_score(l, max_logit, inv_t, max_noise) <= best_score) continue;
        const float s = gumbel_score(l, max_logit, inv_t, gumbel_noise(stream, i));
        if (!found || s > best_score) {
            best = i;
            best_score = s;
            found = true;
        }
    }
    return best;
}

}  // namespace akunu
