// Host-side token sampling from one row of logits: repetition penalty, temperature, top-k,
// top-p, min-p, then a seeded draw. Same seed, same logits, same token.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace akunu {

struct SamplingConfig {
    float temperature = 0.f;     // 0: greedy (argmax)
    int top_k = 0;               // 0: off
    float top_p = 1.f;           // 1: off
    float min_p = 0.f;           // 0: off
    float repeat_penalty = 1.f;  // 1: off (llama.cpp rule: divide positive logits, multiply negative)
    int repeat_last_n = 64;      // how many recent tokens the penalty looks at
    uint64_t seed = 0;

    bool greedy() const { return temperature <= 0.f; }
    // Throws std::invalid_argument naming the bad field.
    void validate() const;
};

class Sampler {
public:
    explicit Sampler(const SamplingConfig &cfg) : cfg_(cfg), rng_(cfg.seed) {}
    // `logits` is modified in place. `recent` holds the tokens seen so far (prompt + output).
    int32_t sample(float *logits, int n_vocab, const std::vector<int32_t> &recent);

private:
    SamplingConfig cfg_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, int32_t>> candidates_;
};

int32_t argmax(const float *logits, int n);

}  // namespace akunu
