// What a caller asks of a generation's tokens (how each is drawn, how many), and its translation
// into the rule the devices run (core/sampling_rule.h): penalties (repetition, frequency,
// presence), top-k, temperature, min-p, top-p, then a seeded Gumbel-max draw. Same seed, same
// logits, same token, on every backend.
// Python builds one from akunu.SamplingParams (python/akunu/sampling.py); validate() is the one
// range check of these settings for both.
#pragma once
#include <cstdint>

#include "core/sampling_rule.h"

namespace akunu {

struct SamplingConfig {
    float temperature = 0.f;     // 0: greedy (argmax)
    int top_k = 0;               // 0: off
    float top_p = 1.f;           // 1: off
    float min_p = 0.f;           // 0: off
    float repeat_penalty = 1.f;  // 1: off (llama.cpp rule: divide positive logits, multiply negative)
    int repeat_last_n = 64;      // how many recent tokens the penalties look at
    // OpenAI's, in [-2, 2] (0: off): logit -= frequency_penalty * count + presence_penalty for each
    // token generated count > 0 times among the latest repeat_last_n tokens (the prompt's not counted).
    float frequency_penalty = 0.f;
    float presence_penalty = 0.f;
    uint64_t seed = 0;
    int max_tokens = 128;        // the most tokens a generation produces

    bool greedy() const { return temperature <= 0.f; }
    bool penalized() const { return repeat_penalty != 1.f || frequency_penalty != 0.f || presence_penalty != 0.f; }
    // Greedy with nothing changing the logits: decoded by the argmax table.
    bool plain_greedy() const { return greedy() && !penalized(); }
    // Throws std::invalid_argument naming the bad field and its allowed range.
    void validate() const;
    // The rule's head; recent_count and recent_generated are left 0 for the caller to fill in.
    SamplingRule rule() const;
};

}  // namespace akunu
