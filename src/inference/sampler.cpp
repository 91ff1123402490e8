#include "inference/sampler.h"

#include <cmath>
#include <stdexcept>
#include <string>

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

SamplingRule SamplingConfig::rule() const {
    SamplingRule r{};
    // 1 / T rounds to infinity for T below ~3e-39: such a T is greedy in all but name.
    r.inv_temperature = greedy() ? 0.f : 1.f / temperature;
    if (!std::isfinite(r.inv_temperature)) r.inv_temperature = 0.f;
    r.top_k = (uint32_t)top_k;
    r.top_p = top_p;
    r.log_min_p = min_p > 0.f ? std::log(min_p) : -INFINITY;
    r.repeat_penalty = repeat_penalty;
    r.repeat_window = repeat_penalty == 1.f ? 0u : (uint32_t)repeat_last_n;
    r.seed_lo = (uint32_t)seed;
    r.seed_hi = (uint32_t)(seed >> 32);
    return r;
}

}  // namespace akunu
