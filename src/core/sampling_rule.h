// The sampling rule every backend follows, so that one seed draws the same token from the same
// logits on the CPU, on CUDA and in the host reference:
//
//   penalties (repetition, then frequency and presence) -> top-k -> softmax at temperature over
//   the top-k set -> min-p -> top-p -> Gumbel-max over the kept tokens
//
// The penalties look at a window of the latest tokens (prompt and generated): the repetition
// penalty (llama.cpp's) at each distinct token of the window, the frequency and presence penalties
// (OpenAI's: logit -= frequency * count + presence) at each distinct token among the window's
// generated tokens, its count being how often it occurs among them. Counts are integers, the same
// in any order of counting, and each penalized logit is computed by one function with explicit
// fused operations (penalized_logit), so every backend writes the same penalized logits.
//
// Gumbel-max (argmax of logit / T + Gumbel noise) draws exactly from the softmax of the kept
// tokens with no sort and no running sum, so a GPU draws in one pass. The noise is a stateless
// hash of (seed, position, token): no RNG state to carry between tokens, and the token drawn at
// a position does not depend on how the tokens were chunked into replays. Every filter keeps the
// tokens at or above a threshold (ties at the threshold are all kept); top-p sums softmax weights
// in fixed point, whose integer sums are exact in any order, so each backend finds the same cut.
//
// Plain C++, also compiled by nvcc for the CUDA kernel (AKUNU_HD: host and device).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define AKUNU_HD __host__ __device__ __forceinline__
#else
#define AKUNU_HD inline
#endif

namespace akunu {

// The head of the sampling buffer (ScratchBuffers::sampling), written by the host before each
// replay that samples. Layout of the buffer: this rule, the cut the device computes for the
// current draw (SamplingCut), then the latest tokens (u32, oldest first).
struct SamplingRule {
    float inv_temperature;      // 1 / T; 0: greedy (argmax after the penalties)
    uint32_t top_k;             // 0 or >= vocabulary: off
    float top_p;                // 1: off
    float log_min_p;            // log(min_p); -inf: off
    float repeat_penalty;       // 1: off (llama.cpp's rule: divide positive logits, multiply negative)
    uint32_t repeat_window;     // how many of the latest tokens the penalties look at (0: none)
    uint32_t recent_count;      // tokens stored in the buffer: the latest ones before this replay
    uint32_t seed_lo, seed_hi;
    float frequency_penalty;    // 0: off (subtracted once per occurrence among the generated tokens)
    float presence_penalty;     // 0: off (subtracted once from each generated token)
    uint32_t recent_generated;  // how many of the recent_count tokens (the latest of them) were
                                // generated; this replay's earlier draws are generated too
    uint32_t reserved[4];
};
static_assert(sizeof(SamplingRule) == 64, "SamplingRule is the 64-byte head of the sampling buffer");

// Where the filters put the draw's threshold (device scratch between a GPU's two sampling kernels).
struct SamplingCut {
    float max_logit;
    uint32_t min_key;  // tokens with order_key(logit) below it are cut (top-k, top-p)
    uint32_t reserved[14];
};
static_assert(sizeof(SamplingCut) == 64, "SamplingCut is 64 bytes");

constexpr size_t kSamplingCutOffset = sizeof(SamplingRule);
constexpr size_t kSamplingRecentOffset = sizeof(SamplingRule) + sizeof(SamplingCut);
inline size_t sampling_buffer_bytes(size_t recent_capacity) { return kSamplingRecentOffset + 4 * recent_capacity; }

// The book's stateless PCG hash (one round of PCG-RXS-M-XS).
AKUNU_HD uint32_t pcg_hash(uint32_t v) {
    const uint32_t state = v * 747796405u + 2891336453u;
    const uint32_t word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

// The noise stream of one draw. `position` is the absolute index of the token being drawn
// (the prompt's tokens are 0 .. n-1, so the first generated token is drawn at n).
AKUNU_HD uint32_t noise_stream(uint32_t seed_lo, uint32_t seed_hi, uint32_t position) {
    return pcg_hash(pcg_hash(pcg_hash(seed_lo) ^ seed_hi) + position);
}

// Gumbel noise -log(-log(u)) for `token`, u uniform in (0, 1) on a 2^-23 grid: (h >> 9) + 0.5
// is exact in a float, so u is never 0 or 1. Tokens are hashed before the xor so that streams
// never overlap shifted copies of each other.
AKUNU_HD float gumbel_noise(uint32_t stream, uint32_t token) {
    const uint32_t h = pcg_hash(stream ^ pcg_hash(token));
    const float u = ((float)(h >> 9) + 0.5f) * (1.0f / 8388608.0f);
    return -logf(-logf(u));
}

// The Gumbel-max score of a kept token: (logit - max) / T + noise, one rounding (fused).
AKUNU_HD float gumbel_score(float logit, float max_logit, float inv_temperature, float noise) {
    return fmaf(logit - max_logit, inv_temperature, noise);
}

// Whether min-p keeps a token: p / p_max = exp((logit - max) / T) >= min_p.
AKUNU_HD bool min_p_keeps(float logit, float max_logit, float inv_temperature, float log_min_p) {
    return (logit - max_logit) * inv_temperature >= log_min_p;
}

// A token's softmax weight in fixed point, 2^40 for the most likely one (truncated, so exact in
// both backends' float -> integer conversion); sums of up to 2^23 tokens fit in 64 bits.
AKUNU_HD uint64_t softmax_weight(float logit, float max_logit, float inv_temperature) {
    return (uint64_t)(expf((logit - max_logit) * inv_temperature) * 1099511627776.0f);
}

// The weight top-p must reach: ceil(top_p * total), at most total.
AKUNU_HD uint64_t top_p_target(uint64_t total, float top_p) {
    const double t = ceil((double)top_p * (double)total);
    return t >= (double)total ? total : (uint64_t)t;
}

// Float -> u32 with the same order (negative floats reversed), for radix selection.
AKUNU_HD uint32_t order_key(float v) {
    uint32_t u;
#if defined(__CUDA_ARCH__)
    u = __float_as_uint(v);
#else
    std::memcpy(&u, &v, 4);
#endif
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The float whose order key is `key`.
AKUNU_HD float order_key_value(uint32_t key) {
    const uint32_t u = (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key;
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

// Whether the frequency or presence penalty is on.
AKUNU_HD bool additive_penalties_on(const SamplingRule &rule) {
    return rule.frequency_penalty != 0.f || rule.presence_penalty != 0.f;
}

// A window token's logit after the penalties: the repetition penalty divides a positive logit and
// multiplies a negative one; a token generated `generated_count` > 0 times then has
// frequency * count + presence (one rounding) subtracted, a negative logit's product and that
// subtraction rounded once. Written with explicit fused operations: left to the compilers, nvcc
// and GCC (-march with FMA) may each contract `logit * penalty - p` into one rounding or not, and
// the backends' logits would differ in the last bit.
AKUNU_HD float penalized_logit(const SamplingRule &rule, float logit, uint32_t generated_count) {
    const float rp = rule.repeat_penalty;
    if (generated_count == 0) return rp == 1.f ? logit : logit > 0.f ? logit / rp : logit * rp;
    const float p = fmaf(rule.frequency_penalty, (float)generated_count, rule.presence_penalty);
    if (logit > 0.f) return (rp == 1.f ? logit : logit / rp) - p;
    return fmaf(logit, rp, -p);
}

// Applies the penalties to `logits` in place: each distinct valid token of `window` once, the last
// `generated_len` of its tokens being the generated ones (the frequency and presence penalties
// count only those). Then draws the token of `position` by the rule above. The host reference of
// the device kernels (the CPU backend's sampling command runs exactly this).
uint32_t sample_token(const SamplingRule &rule, float *logits, uint32_t n, const uint32_t *window,
                      uint32_t window_len, uint32_t generated_len, uint32_t position);

}  // namespace akunu
