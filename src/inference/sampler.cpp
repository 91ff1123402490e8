#include "inference/sampler.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace akunu {

namespace {
std::string show(float x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", (double)x);
    return buf;
}
}  // namespace

void SamplingConfig::validate() const {
    auto bad = [](const char *rule, const std::string &got) { throw std::invalid_argument(rule + (", got " + got)); };
    if (!(temperature >= 0.f) || !std::isfinite(temperature))
        bad("temperature must be a finite number >= 0 (0: greedy)", show(temperature));
    if (top_k < 0) bad("top_k must be an integer >= 0 (0: off)", std::to_string(top_k));
    if (!(top_p > 0.f && top_p <= 1.f)) bad("top_p must be in (0, 1] (1: off)", show(top_p));
    if (!(min_p >= 0.f && min_p <= 1.f)) bad("min_p must be in [0, 1] (0: off)", show(min_p));
    if (!(repeat_penalty > 0.f) || !std::isfinite(repeat_penalty))
        bad("repeat_penalty must be a finite number > 0 (1: off)", show(repeat_penalty));
    if (repeat_last_n < 0) bad("repeat_last_n must be an integer >= 0", std::to_string(repeat_last_n));
    if (!(frequency_penalty >= -2.f && frequency_penalty <= 2.f))
        bad("frequency_penalty must be in [-2, 2] (0: off)", show(frequency_penalty));
    if (!(presence_penalty >= -2.f && presence_penalty <= 2.f))
        bad("presence_penalty must be in [-2, 2] (0: off)", show(presence_penalty));
    if (max_tokens < 0) bad("max_tokens must be an integer >= 0", std::to_string(max_tokens));
}

SamplingRule SamplingConfig::rule() const {
    SamplingRule r{};
    // 1 / T rounds to infinity for T below ~3e-39: such a T is greedy in all but name.
    r.inv_temperature = greedy() ? 0.f : 1.f / temperature;
    if (!std::isfinite(r.inv_temperature)) r.inv_temperature = 0.f;
    r.top_k = (uint32_t)top_k;
    r.top_p = top_p;
    r.log_min_p = min_p > 0.f ? std::log(min_p) : -INFINITY;
    r.repeat_penalty = repeat_penalty;
    r.repeat_window = penalized() ? (uint32_t)repeat_last_n : 0u;
    r.frequency_penalty = frequency_penalty;
    r.presence_penalty = presence_penalty;
    r.seed_lo = (uint32_t)seed;
    r.seed_hi = (uint32_t)(seed >> 32);
    return r;
}

}  // namespace akunu
