// sample_f32 against the CPU's sampling kernel (src/backend/cpu/sample.cpp -> sample_token): the
// token drawn must be the same exactly, and so must the penalized logits, for greedy and tiny
// temperatures, temperatures 0.7 / 1 / 1.5 with top-k, top-p and min-p, the penalties over a
// history (repetition; frequency and presence over the generated tokens), several seeds and
// positions, and draws chained after earlier ones of the same replay.
#include <algorithm>
#include <cmath>
#include <functional>

#include "backend/cpu/cpu_kernel.h"
#include "core/kernel_params.h"
#include "core/sampling_rule.h"
#include "kernel_case.h"

using namespace metal_check;

namespace {

// Logits shaped like a language model's: a noisy floor and a few favoured tokens.
std::vector<float> peaked_logits(uint32_t n, uint32_t seed) {
    std::vector<float> x = random_floats(n, seed, 3.0f);
    std::mt19937 rng(seed + 1);
    for (int i = 0; i < 12; ++i) x[rng() % n] += 4.0f + (float)(rng() % 8);
    return x;
}

// Values on a grid of 1/4: many exact ties, at the top-k and top-p cuts too.
std::vector<float> tied_logits(uint32_t n, uint32_t seed) {
    std::vector<float> x = random_floats(n, seed, 4.0f);
    for (float &v : x) v = std::round(v * 4.0f) / 4.0f;
    return x;
}

// Nearly flat: every token weighs about the same, so top-p's total (~n * 2^40) is past a double's
// 53 bits, and the cuts fall among thousands of near-equals.
std::vector<float> flat_logits(uint32_t n, uint32_t seed) {
    std::vector<float> x = random_floats(n, seed, 1e-3f);
    for (float &v : x) v += 2.0f;
    return x;
}

struct Draw {
    std::string what;
    uint32_t n = 1000;
    std::vector<float> logits;
    float temperature = 1.0f;  // 0: greedy
    uint32_t top_k = 0;
    float top_p = 1.0f;
    float min_p = 0.0f;
    float repeat_penalty = 1.0f;
    uint32_t repeat_window = 0;
    float frequency_penalty = 0.0f, presence_penalty = 0.0f;
    std::vector<uint32_t> recent;  // the sampling buffer's latest tokens, oldest first
    uint32_t recent_generated = 0;
    std::vector<uint32_t> earlier_draws;  // this replay's draws before this one (chain_index of them)
    uint64_t seed = 1234;
    uint32_t position = 57;
};

// The cut by its definition (sampling_rule.h), sorting where the CPU's kernel selects: top-k's
// k-th largest order key, then top-p's, the key at which the softmax weights of the top-k set,
// walked best first, reach top_p_target of their total.
akunu::SamplingCut defined_cut(const float *x, uint32_t n, const akunu::SamplingRule &rule) {
    akunu::SamplingCut cut{};
    cut.max_logit = *std::max_element(x, x + n);
    std::vector<uint32_t> keys(n);
    for (uint32_t i = 0; i < n; ++i) keys[i] = akunu::order_key(x[i]);
    std::sort(keys.begin(), keys.end(), std::greater<uint32_t>());
    if (rule.top_k > 0 && rule.top_k < n) cut.min_key = keys[rule.top_k - 1];
    if (rule.top_p < 1.f) {
        auto weight = [&](uint32_t key) {
            return akunu::softmax_weight(akunu::order_key_value(key), cut.max_logit, rule.inv_temperature);
        };
        uint64_t total = 0, mass = 0;
        for (uint32_t key : keys)
            if (key >= cut.min_key) total += weight(key);
        const uint64_t target = akunu::top_p_target(total, rule.top_p);
        for (uint32_t key : keys) {
            mass += weight(key);
            if (mass >= target) {
                cut.min_key = std::max(cut.min_key, key);
                break;
            }
        }
    }
    return cut;
}

KernelCase sample_case(const Draw &d) {
    akunu::SamplingRule rule{};
    rule.inv_temperature = d.temperature > 0.f ? 1.0f / d.temperature : 0.f;
    rule.top_k = d.top_k;
    rule.top_p = d.top_p;
    rule.log_min_p = d.min_p > 0.f ? std::log(d.min_p) : -INFINITY;
    rule.repeat_penalty = d.repeat_penalty;
    rule.repeat_window = d.repeat_window;
    rule.recent_count = (uint32_t)d.recent.size();
    rule.seed_lo = (uint32_t)d.seed;
    rule.seed_hi = (uint32_t)(d.seed >> 32);
    rule.frequency_penalty = d.frequency_penalty;
    rule.presence_penalty = d.presence_penalty;
    rule.recent_generated = d.recent_generated;
    Bytes state(akunu::sampling_buffer_bytes(d.recent.size()), 0);
    std::memcpy(state.data(), &rule, sizeof rule);
    if (!d.recent.empty())
        std::memcpy(state.data() + akunu::kSamplingRecentOffset, d.recent.data(), 4 * d.recent.size());

    // The replay's token slots: its earlier draws, the slot this draw fills, one more after it.
    std::vector<uint32_t> tokens = d.earlier_draws;
    tokens.push_back(0xDEADBEEFu);
    tokens.push_back(0xCAFEF00Du);

    akunu::SampleParams p{};
    p.n = d.n;
    p.position = d.position;
    p.chain_index = (uint32_t)d.earlier_draws.size();

    KernelCase c;
    char label[200];
    std::snprintf(label, sizeof label, "sample_f32 n=%u %s: T=%g top_k=%u top_p=%g min_p=%g seed=%llu pos=%u chain=%u",
                  d.n, d.what.c_str(), d.temperature, d.top_k, d.top_p, d.min_p, (unsigned long long)d.seed,
                  d.position, p.chain_index);
    c.label = label;
    c.kernel = "sample_f32";
    c.buffers = {to_bytes(d.logits), to_bytes(tokens), state};
    c.offsets = {0, 4 * (size_t)p.chain_index, 0};
    c.params = params_bytes(p);
    c.grid = {1, 1, 1};
    // The CPU's sampling kernel draws the token and penalizes the logits; the cut it finds on the
    // way, which the Metal kernel leaves in the sampling buffer, comes from its definition.
    c.reference = [rule, p](std::vector<Bytes> &b) {
        akunu::cpu::KernelArgs a{};
        a.buffers[0] = b[0].data();
        a.buffers[1] = b[1].data() + 4 * (size_t)p.chain_index;
        a.buffers[2] = b[2].data();
        a.params = &p;
        a.grid = {1, 1, 1};
        akunu::cpu::find_kernel("sample_f32")(a, 0, 1);
        if (rule.inv_temperature == 0.f) return;  // greedy: no cut
        const akunu::SamplingCut cut = defined_cut(reinterpret_cast<const float *>(b[0].data()), p.n, rule);
        std::memcpy(b[2].data() + akunu::kSamplingCutOffset, &cut, 8);  // max_logit, min_key
    };
    // The penalized logits bit for bit, the token slots exactly, the sampling buffer with its cut.
    c.outputs = {{0, Element::F32, 0.0}, {1, Element::U32}, {2, Element::Raw}};
    return c;
}

// A history of n-vocabulary tokens with repeats (and a few ids past the vocabulary, which the
// penalties skip).
std::vector<uint32_t> history(uint32_t n, size_t len, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint32_t> h(len);
    for (uint32_t &t : h) {
        const uint32_t kind = rng() % 16;
        t = kind < 6 ? rng() % 24 : kind == 15 ? n + rng() % 5 : rng() % n;  // repeats among the first 24
    }
    return h;
}

}  // namespace

AKUNU_KERNEL_CASES(sample) {
    // Each case draws once in one 1024-thread group (slow in the shim): each covers several things.
    std::vector<KernelCase> cases;
    for (uint32_t n : {1000u, 32000u}) {
        const std::vector<float> peaked = peaked_logits(n, n);
        auto draw = [&](const std::string &what) {
            Draw d;
            d.what = what;
            d.n = n;
            d.logits = peaked;
            return d;
        };
        {  // greedy after a repetition penalty, the first index on ties, two earlier draws in the window
            Draw d = draw("greedy, repeat penalty, ties, chained");
            d.logits = tied_logits(n, n + 1);
            d.temperature = 0.f;
            d.repeat_penalty = 1.3f;
            d.repeat_window = 64;
            d.recent = history(n, 80, n);
            d.earlier_draws = {d.recent[79], 2};
            cases.push_back(sample_case(d));
        }
        {  // a temperature so small the draw is the argmax in all but name; no filters
            Draw d = draw("tiny T, frequency and presence penalties");
            d.temperature = 1e-3f;
            d.repeat_window = 64;
            d.frequency_penalty = 0.5f;
            d.presence_penalty = 0.3f;
            d.recent = history(n, 50, n + 5);
            d.recent_generated = 40;
            d.seed = 11;
            d.position = 0;
            cases.push_back(sample_case(d));
        }
        {  // the usual chain, a repetition penalty over a window shorter than the history
            Draw d = draw("all filters, repeat penalty");
            d.temperature = 0.7f;
            d.top_k = 40;
            d.top_p = 0.9f;
            d.min_p = 0.05f;
            d.repeat_penalty = 1.1f;
            d.repeat_window = 64;
            d.recent = history(n, 100, n + 4);
            d.recent_generated = 30;
            cases.push_back(sample_case(d));
        }
        {  // this replay's earlier draws join the window and count as generated
            Draw d = draw("top-p, all penalties, chained");
            d.temperature = 1.0f;
            d.top_p = 0.9f;
            d.repeat_penalty = 1.25f;
            d.repeat_window = 32;
            d.frequency_penalty = -0.5f;
            d.presence_penalty = 1.5f;
            d.recent = history(n, 40, n + 7);
            d.recent_generated = 10;
            d.earlier_draws = {d.recent[35], 5, 5, n - 1, d.recent[3]};
            d.seed = 0xFFFFFFFF12345678ull;
            d.position = 3;
            cases.push_back(sample_case(d));
        }
        {
            Draw d = draw("top-k 1");
            d.temperature = 1.5f;
            d.top_k = 1;
            d.seed = 42;
            d.position = 100000;
            cases.push_back(sample_case(d));
        }
        {  // exact ties at the top-k and top-p cuts: all tokens at a cut's key are kept
            Draw d = draw("ties at the cuts");
            d.logits = tied_logits(n, n + 2);
            d.temperature = 1.5f;
            d.top_k = 40;
            d.top_p = 0.9f;
            d.min_p = 0.05f;
            d.seed = 5;
            cases.push_back(sample_case(d));
        }
        {  // near-equal weights: top-p's total past 2^53, its cut among thousands
            Draw d = draw("flat, top-p");
            d.logits = flat_logits(n, n + 3);
            d.temperature = 1.0f;
            d.top_p = 0.9f;
            d.seed = 6;
            cases.push_back(sample_case(d));
        }
        {  // a grammar's mask before the sampler: most logits -inf
            Draw d = draw("masked");
            for (uint32_t i = 0; i < n; ++i)
                if (i % 7 != 3) d.logits[i] = -INFINITY;
            d.temperature = 0.8f;
            d.top_p = 0.95f;
            d.min_p = 0.02f;
            d.seed = 7;
            d.position = 4096;
            cases.push_back(sample_case(d));
        }
    }
    {
        Draw d;
        d.what = "flat, top-k 2";
        d.n = 1000;
        d.logits = flat_logits(d.n, 9);
        d.temperature = 1.0f;
        d.top_k = 2;
        cases.push_back(sample_case(d));
    }
    {  // a window longer than the threadgroup: its tiles take turns
        Draw d;
        d.what = "long window";
        d.n = 1000;
        d.logits = peaked_logits(d.n, 10);
        d.temperature = 1.0f;
        d.top_k = 40;
        d.repeat_penalty = 1.15f;
        d.repeat_window = 1500;
        d.frequency_penalty = 0.1f;
        d.recent = history(d.n, 1600, 10);
        d.recent_generated = 700;
        d.earlier_draws = {3, 1, 4, 1, 5};
        cases.push_back(sample_case(d));
    }
    {
        Draw d;
        d.what = "large vocabulary";
        d.n = 151936;
        d.logits = peaked_logits(d.n, 3);
        d.temperature = 0.7f;
        d.top_k = 40;
        d.top_p = 0.9f;
        d.min_p = 0.05f;
        d.repeat_penalty = 1.1f;
        d.repeat_window = 64;
        d.recent = history(d.n, 64, 3);
        cases.push_back(sample_case(d));
    }
    return cases;
}
