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
// Plain C++, also compiled by nvcc for the CUDA kernel (AKUNU_HD: host and device) and as Metal
// Shading Language for metal/sample.metal, which includes it after metal/common.h (that defines
// AKUNU_METAL_SOURCE, for the Linux shim too): there the host-only parts drop out, the float math
// takes Metal's spelling and top_p_target its double-free form.
#pragma once
#if defined(__METAL_VERSION__) || defined(AKUNU_METAL_SOURCE)
#define AKUNU_SAMPLING_RULE_MSL 1
#else
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#endif

#if defined(__CUDACC__)
#define AKUNU_HD __host__ __device__ __forceinline__
#else
#define AKUNU_HD inline
#endif

namespace akunu {
#if defined(AKUNU_SAMPLING_RULE_MSL)
// The Metal build's functions get names of their own (the shim links them into one binary with
// the host's, whose bodies are spelled differently).
inline namespace msl {
// Metal's float math, spelled as the host's; the precise forms, the nearest to the host's libm.
inline float logf(float x) { return metal::precise::log(x); }
inline float expf(float x) { return metal::precise::exp(x); }
inline float fmaf(float a, float b, float c) { return metal::fma(a, b, c); }
#endif

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

#if !defined(AKUNU_SAMPLING_RULE_MSL)  // Metal has no program-scope data outside `constant`
constexpr size_t kSamplingCutOffset = sizeof(SamplingRule);
constexpr size_t kSamplingRecentOffset = sizeof(SamplingRule) + sizeof(SamplingCut);
inline size_t sampling_buffer_bytes(size_t recent_capacity) { return kSamplingRecentOffset + 4 * recent_capacity; }
#endif

// A float's bits and back.
AKUNU_HD uint32_t float_as_u32(float v) {
#if defined(AKUNU_SAMPLING_RULE_MSL)
    return as_type<uint32_t>(v);
#elif defined(__CUDA_ARCH__)
    return __float_as_uint(v);
#else
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
#endif
}
AKUNU_HD float u32_as_float(uint32_t u) {
#if defined(AKUNU_SAMPLING_RULE_MSL)
    return as_type<float>(u);
#elif defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

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

// v >> shift (1 <= shift < 64) rounded to nearest, ties to even.
AKUNU_HD uint64_t shift_right_nearest_even(uint64_t v, int shift) {
    const uint64_t q = v >> shift, rest = v & ((uint64_t(1) << shift) - 1), halfway = uint64_t(1) << (shift - 1);
    return q + ((rest > halfway || (rest == halfway && (q & 1))) ? 1 : 0);
}

// top_p_target's value from integers alone (Metal has no double): total rounded to a double's 53
// bits, times top_p exactly, rounded to 53 bits again, then the ceiling, as the double arithmetic
// does. For total < 2^63 (a sum of softmax weights stays below 2^58).
AKUNU_HD uint64_t top_p_target_integer(uint64_t total, float top_p) {
    if (!(top_p < 1.f)) return total;
    if (!(top_p > 0.f) || total == 0) return 0;
    // (double)total = d * 2^d_shift.
    int total_bits = 0;
    while (total_bits < 64 && (total >> total_bits) != 0) ++total_bits;
    const int d_shift = total_bits > 53 ? total_bits - 53 : 0;
    const uint64_t d = d_shift ? shift_right_nearest_even(total, d_shift) : total;
    // top_p = m * 2^p_exp exactly.
    const uint32_t bits = float_as_u32(top_p), biased = (bits >> 23) & 0xFFu;
    const uint64_t m = biased ? ((bits & 0x7FFFFFu) | 0x800000u) : (bits & 0x7FFFFFu);
    const int p_exp = (biased ? (int)biased : 1) - 150;
    // m * d (< 2^77) as hi:lo.
    const uint64_t low_part = m * (d & 0xFFFFFFFFu), high_part = m * (d >> 32);
    const uint64_t lo = low_part + (high_part << 32), hi = (high_part >> 32) + (lo < low_part ? 1 : 0);
    int product_bits = 0;
    if (hi) {
        while ((hi >> product_bits) != 0) ++product_bits;
        product_bits += 64;
    } else {
        while (product_bits < 64 && (lo >> product_bits) != 0) ++product_bits;
    }
    // The product rounded to 53 bits: q * 2^q_exp.
    uint64_t q = lo;
    int q_exp = p_exp + d_shift;
    if (product_bits > 53) {
        const int s = product_bits - 53;  // 1..24: the bits dropped all sit in lo
        const uint64_t shifted = (lo >> s) | (hi << (64 - s));
        const uint64_t rest = lo & ((uint64_t(1) << s) - 1), halfway = uint64_t(1) << (s - 1);
        q = shifted + ((rest > halfway || (rest == halfway && (shifted & 1))) ? 1 : 0);
        q_exp += s;
    }
    uint64_t target;
    if (q_exp >= 0) {
        target = q << q_exp;
    } else {
        const int s = -q_exp;
        target = s >= 64 ? (q ? 1 : 0) : (q >> s) + ((q & ((uint64_t(1) << s) - 1)) ? 1 : 0);
    }
    return target >= (d << d_shift) ? total : target;
}

// The weight top-p must reach: ceil(top_p * total), at most total.
#if !defined(AKUNU_SAMPLING_RULE_MSL)
AKUNU_HD uint64_t top_p_target(uint64_t total, float top_p) {
    const double t = ceil((double)top_p * (double)total);
    return t >= (double)total ? total : (uint64_t)t;
}
#else
AKUNU_HD uint64_t top_p_target(uint64_t total, float top_p) { return top_p_target_integer(total, top_p); }
#endif

// Float -> u32 with the same order (negative floats reversed), for radix selection.
AKUNU_HD uint32_t order_key(float v) {
    const uint32_t u = float_as_u32(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The float whose order key is `key`.
AKUNU_HD float order_key_value(uint32_t key) {
    return u32_as_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

// Whether the frequency or presence penalty is on. (The rule is taken by value here and below:
// Metal would need an address space on a reference.)
AKUNU_HD bool additive_penalties_on(SamplingRule rule) {
    return rule.frequency_penalty != 0.f || rule.presence_penalty != 0.f;
}

// A window token's logit after the penalties: the repetition penalty divides a positive logit and
// multiplies a negative one; a token generated `generated_count` > 0 times then has
// frequency * count + presence (one rounding) subtracted, a negative logit's product and that
// subtraction rounded once. Written with explicit fused operations: left to the compilers, nvcc
// and GCC (-march with FMA) may each contract `logit * penalty - p` into one rounding or not, and
// the backends' logits would differ in the last bit.
AKUNU_HD float penalized_logit(SamplingRule rule, float logit, uint32_t generated_count) {
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
#if !defined(AKUNU_SAMPLING_RULE_MSL)
uint32_t sample_token(const SamplingRule &rule, float *logits, uint32_t n, const uint32_t *window,
                      uint32_t window_len, uint32_t generated_len, uint32_t position);
#endif

#if defined(AKUNU_SAMPLING_RULE_MSL)
}  // inline namespace msl
#endif
}  // namespace akunu
