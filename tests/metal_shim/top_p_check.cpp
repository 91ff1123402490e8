// top_p_target_integer (the double-free form metal/sample.metal uses, src/core/sampling_rule.h)
// against the host's double arithmetic it reproduces: edge values, then random totals of every
// magnitude a sum of softmax weights reaches and random top_p. Prints the first mismatch.
#include <cstdio>
#include <random>

#include "core/sampling_rule.h"

namespace metal_check {

int check_top_p_target() {
    std::mt19937_64 rng(20261126);
    long checked = 0;
    auto check = [&](uint64_t total, float top_p) {
        ++checked;
        const uint64_t want = akunu::top_p_target(total, top_p), got = akunu::top_p_target_integer(total, top_p);
        if (want == got) return true;
        std::printf("top_p_target(%llu, %.9g) = %llu, top_p_target_integer = %llu\n", (unsigned long long)total,
                    top_p, (unsigned long long)want, (unsigned long long)got);
        return false;
    };
    const float edge_p[] = {0.f, 1e-30f, 1e-7f, 0.1f, 0.5f, 0.9f, 0.95f, 0.99999994f, 1.f, 1.5f};
    const uint64_t edge_total[] = {0, 1, 2, 3, (1ull << 53) - 1, 1ull << 53, (1ull << 53) + 1, (1ull << 58) - 1};
    for (uint64_t t : edge_total)
        for (float p : edge_p)
            if (!check(t, p)) return 1;
    std::uniform_real_distribution<float> p01(0.f, 1.f);
    for (int i = 0; i < 2000000; ++i) {
        const int bits = 1 + (int)(rng() % 58);  // totals below 2^58
        const uint64_t total = rng() >> (64 - bits);
        if (!check(total, p01(rng))) return 1;
    }
    std::printf("top_p_target_integer == top_p_target on %ld inputs\n", checked);
    return 0;
}

}  // namespace metal_check
