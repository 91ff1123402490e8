// The small kernels against the CPU kernels of the same names: bias add, logit soft-capping, the
// gated activations, argmax (ties and NaNs as the CPU resolves them) and the grammar's mask.
#include <cmath>
#include <limits>

#include "core/kernel_params.h"
#include "kernel_case.h"

using namespace metal_check;

namespace {

KernelCase make_case(const std::string &label, const std::string &kernel, std::vector<Bytes> buffers, Bytes params,
                     uint32_t groups, std::vector<Output> outputs) {
    KernelCase c;
    c.label = label;
    c.kernel = c.cpu_kernel = kernel;
    c.buffers = std::move(buffers);
    c.params = std::move(params);
    c.grid = {groups, 1, 1};
    c.outputs = std::move(outputs);
    return c;
}

std::string dims(const char *name, uint32_t value) { return std::string(" ") + name + "=" + std::to_string(value); }

void add_elementwise_cases(std::vector<KernelCase> &cases) {
    for (uint32_t n : {64u, 200u})
        for (uint32_t rows : {1u, 3u}) {
            akunu::BiasAddParams p{};
            p.n = n;
            p.rows = rows;
            p.stride = n + 8;  // only the first n of each row change
            cases.push_back(make_case("bias_add_f32" + dims("n", n) + dims("rows", rows), "bias_add_f32",
                                      {to_bytes(random_floats((size_t)rows * p.stride, n + rows, 4.0f)),
                                       to_bytes(random_floats(n, 5 * n))},
                                      params_bytes(p), rows, {{0, Element::F32, 1e-6}}));
        }
    for (float cap : {30.0f, 50.0f})
        for (auto [n, rows] : {std::pair<uint32_t, uint32_t>{64, 3}, {1000, 1}}) {
            akunu::SoftcapParams p{};
            p.n = n;
            p.rows = rows;
            p.cap = cap;
            // Logits up to 3 caps: tanh's linear part and its saturation.
            cases.push_back(make_case("softcap_f32 cap=" + std::to_string((int)cap) + dims("n", n) +
                                          dims("rows", rows),
                                      "softcap_f32",
                                      {to_bytes(random_floats((size_t)rows * n, n + rows + (uint32_t)cap, 3 * cap))},
                                      params_bytes(p), rows, {{0, Element::F32, 1e-6}}));
        }
    for (const char *kernel : {"silu_mul_f32", "gelu_tanh_mul_f32"})
        for (uint32_t ffn : {64u, 256u})
            for (uint32_t rows : {1u, 3u}) {
                akunu::GatedActParams p{};
                p.ffn_dim = ffn;
                p.rows = rows;
                // Gates up to +-12: both tails of the activations.
                cases.push_back(make_case(std::string(kernel) + dims("ffn", ffn) + dims("rows", rows), kernel,
                                          {to_bytes(random_floats((size_t)rows * 2 * ffn, ffn + rows, 12.0f)),
                                           to_bytes(random_floats((size_t)rows * ffn, 3 * ffn))},
                                          params_bytes(p), rows, {{1, Element::F32, 1e-5}}));
            }
}

KernelCase argmax_case(const std::string &what, std::vector<float> logits) {
    akunu::ArgmaxParams p{};
    p.n = (uint32_t)logits.size();
    // The token slot sits among others (bound at an offset), which must stay as they are.
    std::vector<uint32_t> tokens = {7, 7, 7, 0xDEADBEEFu, 7};
    KernelCase c = make_case("argmax_f32" + dims("n", p.n) + " " + what, "argmax_f32",
                             {to_bytes(logits), to_bytes(tokens)}, params_bytes(p), 1, {{1, Element::U32}});
    c.offsets = {0, 12};
    return c;
}

void add_argmax_cases(std::vector<KernelCase> &cases) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
    // One 1024-thread group per case (slow in the shim): a few vocabularies, then the edge values.
    for (uint32_t n : {1u, 32000u, 262144u})
        cases.push_back(argmax_case("random", random_floats(n, n, 20.0f)));
    // Ties: the first index wins, wherever the copies fall (one thread, one SIMD group, across them).
    for (uint32_t n : {1000u}) {
        std::vector<float> x = random_floats(n, 3 * n, 10.0f);
        for (uint32_t i : {n - 1, 5 * n / 7, n / 3, n / 3 + 1, n / 3 + 32, n / 3 + 600}) x[i] = 25.0f;
        cases.push_back(argmax_case("ties", x));
    }
    {
        std::vector<float> x(4096, -1.0f);  // the whole vocabulary tied
        cases.push_back(argmax_case("all tied", x));
        x.assign(777, -inf);
        cases.push_back(argmax_case("all -inf", x));
        x = random_floats(999, 9, 1.0f);
        x[998] = 3.0f;
        cases.push_back(argmax_case("max last", x));
        x = random_floats(2000, 10, 1.0f);
        for (float &v : x) v = -std::fabs(v) - 0.5f;
        x[700] = -0.0f;  // -0 and +0 are one value to the comparison: the first wins
        x[1500] = 0.0f;
        cases.push_back(argmax_case("signed zeros", x));
    }
    // NaNs: never the winner, except one at index 0, which nothing beats on the CPU.
    {
        std::vector<float> x = random_floats(5000, 11, 5.0f);
        x[17] = x[4000] = nan;
        x[2500] = 6.0f;
        cases.push_back(argmax_case("nan inside", x));
        x[0] = nan;
        x[1] = inf;
        cases.push_back(argmax_case("nan at 0 then inf", x));
    }
}

void add_grammar_cases(std::vector<KernelCase> &cases) {
    for (uint32_t n : {100u, 2049u, 32000u, 151936u}) {
        const uint32_t words = (n + 31) / 32;
        std::vector<uint32_t> mask(words);
        std::mt19937 rng(n);
        for (uint32_t w = 0; w < words; ++w) {
            const uint32_t kind = rng() % 4;  // allowed words, forbidden words, and mixed ones
            mask[w] = kind == 0 ? 0xFFFFFFFFu : kind == 1 ? 0u : (uint32_t)rng();
        }
        // The last word's bits past n are set or clear: neither may touch a logit.
        mask[words - 1] |= n % 32 ? ~0u << (n % 32) : 0u;
        akunu::GrammarBitmaskParams p{};
        p.n = n;
        cases.push_back(make_case("grammar_bitmask_f32" + dims("n", n), "grammar_bitmask_f32",
                                  {to_bytes(random_floats(n, 2 * n, 10.0f)), to_bytes(mask)}, params_bytes(p),
                                  (words + 63) / 64, {{0, Element::F32, 0.0}}));
    }
}

}  // namespace

AKUNU_KERNEL_CASES(small) {
    std::vector<KernelCase> cases;
    add_elementwise_cases(cases);
    add_argmax_cases(cases);
    add_grammar_cases(cases);
    return cases;
}
