#include "inference/sampler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace akunu {

void SamplingConfig::validate() const {
    if (!(temperature >= 0.f) || !std::isfinite(temperature))
        throw std::invalid_argument("temperature must be a finite number >= 0, got " + std::to_string(temperature));
    if (top_k < 0) throw std::invalid_argument("top_k must be >= 0, got " + std::to_string(top_k));
    if (!(top_p > 0.f && top_p <= 1.f)) throw std::invalid_argument("top_p must be in (0, 1], got " + std::to_string(top_p));
    if (!(min_p >= 0.f && min_p <= 1.f)) throw std::invalid_argument("min_p must be in [0, 1], got " + std::to_string(min_p));
    if (!(repeat_penalty > 0.f) || !std::isfinite(repeat_penalty))
        throw std::invalid_argument("repeat_penalty must be a finite number > 0, got " + std::to_string(repeat_penalty));
    if (repeat_last_n < 0) throw std::invalid_argument("repeat_last_n must be >= 0");
}

int32_t argmax(const float *logits, int n) {
    return (int32_t)(std::max_element(logits, logits + n) - logits);
}

int32_t Sampler::sample(float *logits, int n_vocab, const std::vector<int32_t> &recent) {
    if (cfg_.repeat_penalty != 1.f && cfg_.repeat_last_n > 0) {
        std::unordered_set<int32_t> seen;
        size_t from = recent.size() > (size_t)cfg_.repeat_last_n ? recent.size() - (size_t)cfg_.repeat_last_n : 0;
        for (size_t i = from; i < recent.size(); ++i) {
            int32_t t = recent[i];
            if (t < 0 || t >= n_vocab || !seen.insert(t).second) continue;
            logits[t] = logits[t] > 0 ? logits[t] / cfg_.repeat_penalty : logits[t] * cfg_.repeat_penalty;
        }
    }
    if (cfg_.greedy()) return argmax(logits, n_vocab);

    // Candidates sorted by logit, cut by top-k first (cheap partial sort).
    candidates_.resize((size_t)n_vocab);
    for (int i = 0; i < n_vocab; ++i) candidates_[(size_t)i] = {logits[i], i};
    size_t k = (cfg_.top_k > 0 && cfg_.top_k < n_vocab) ? (size_t)cfg_.top_k : (size_t)n_vocab;
    auto by_logit = [](const std::pair<float, int32_t> &a, const std::pair<float, int32_t> &b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    std::partial_sort(candidates_.begin(), candidates_.begin() + (long)k, candidates_.end(), by_logit);
    candidates_.resize(k);

    // Softmax with temperature.
    const float max_logit = candidates_[0].first;
    double total = 0;
    std::vector<double> probs(k);
    for (size_t i = 0; i < k; ++i) {
        probs[i] = std::exp((double)(candidates_[i].first - max_logit) / cfg_.temperature);
        total += probs[i];
    }
    for (double &p : probs) p /= total;

    // min-p: drop tokens less likely than min_p times the best one.
    size_t keep = k;
    if (cfg_.min_p > 0.f)
        for (size_t i = 1; i < keep; ++i)
            if (probs[i] < cfg_.min_p * probs[0]) {
                keep = i;
                break;
            }
    // top-p: the smallest prefix whose mass reaches top_p.
    if (cfg_.top_p < 1.f) {
        double mass = 0;
        for (size_t i = 0; i < keep; ++i) {
            mass += probs[i];
            if (mass >= cfg_.top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double kept_mass = 0;
    for (size_t i = 0; i < keep; ++i) kept_mass += probs[i];
    double u = std::uniform_real_distribution<double>(0.0, kept_mass)(rng_);
    for (size_t i = 0; i < keep; ++i) {
        u -= probs[i];
        if (u <= 0) return candidates_[i].second;
    }
    return candidates_[keep - 1].second;
}

}  // namespace akunu
