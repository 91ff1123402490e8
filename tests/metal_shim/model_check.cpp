// metal_kernel_check --model FILE [--kv f16|q8_0]: one model on the CPU backend and on the Metal
// kernels (ShimMetalDevice), the checks tests/test_cuda.py makes of CUDA: teacher-forced logits,
// greedy tokens, chain decode == single steps, seeded sampling, a grammar mask. Prints one
// `key value` line per measurement and the kernels the Metal tables used; tests/test_metal_shim.py
// asserts on them.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "inference/model.h"
#include "inference/sampler.h"
#include "shim_device.h"

namespace metal_check {

namespace {

std::vector<int32_t> test_prompt(int vocab, int n) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back((int32_t)((i * 7919L + 13) % vocab));
    return ids;
}

std::vector<int32_t> generate(akunu::Model &m, const std::vector<int32_t> &prompt, const akunu::SamplingConfig &s) {
    m.reset();
    m.begin_generation(prompt, s);
    std::vector<int32_t> out;
    while (!m.generation_finished()) {
        const std::vector<int32_t> chunk = m.next_tokens();
        out.insert(out.end(), chunk.begin(), chunk.end());
    }
    return out;
}

std::string join(const std::vector<int32_t> &v) {
    std::string s;
    for (int32_t t : v) s += (s.empty() ? "" : ",") + std::to_string(t);
    return s;
}

// Teacher-forced logits of both backends: argmax agreement, mean KL(cpu || metal), worst
// difference relative to the largest |logit|.
void compare_logits(const std::vector<float> &cpu, const std::vector<float> &metal, int vocab) {
    const size_t rows = cpu.size() / (size_t)vocab;
    int agree = 0;
    double kl_sum = 0, worst = 0, scale = 1e-30;
    for (float x : cpu) scale = std::max(scale, (double)std::fabs(x));
    for (size_t r = 0; r < rows; ++r) {
        const float *a = &cpu[r * vocab], *b = &metal[r * vocab];
        int arg_a = 0, arg_b = 0;
        double max_a = a[0], max_b = b[0];
        for (int i = 0; i < vocab; ++i) {
            if (a[i] > a[arg_a]) arg_a = i;
            if (b[i] > b[arg_b]) arg_b = i;
            max_a = std::max(max_a, (double)a[i]);
            max_b = std::max(max_b, (double)b[i]);
            worst = std::max(worst, std::fabs((double)a[i] - b[i]) / scale);
        }
        agree += arg_a == arg_b;
        double za = 0, zb = 0;
        for (int i = 0; i < vocab; ++i) {
            za += std::exp(a[i] - max_a);
            zb += std::exp(b[i] - max_b);
        }
        double kl = 0;
        for (int i = 0; i < vocab; ++i) {
            const double pa = std::exp(a[i] - max_a) / za;
            const double la = a[i] - max_a - std::log(za), lb = b[i] - max_b - std::log(zb);
            kl += pa * (la - lb);
        }
        kl_sum += kl;
    }
    std::printf("logits_rows %zu\nargmax_agreement %.6f\nmean_kl %.3e\nmax_logit_error %.3e\n", rows,
                (double)agree / rows, kl_sum / rows, worst);
}

}  // namespace

int run_model_check(const std::string &path, const std::string &kv) {
    akunu::LoadOptions cpu_options;
    cpu_options.backend = "cpu";
    cpu_options.context_length = 256;
    cpu_options.threads = 1;
    if (kv == "q8_0") cpu_options.kv_cache_dtype = akunu::KVCacheDType::Q8_0;
    akunu::LoadOptions metal_options = cpu_options;
    auto *shim_device = new ShimMetalDevice();
    bool handed_over = false;
    metal_options.make_device = [&]() {
        handed_over = true;
        return std::unique_ptr<akunu::Device>(shim_device);
    };
    std::unique_ptr<akunu::Model> cpu = akunu::Model::load(path, cpu_options);
    std::unique_ptr<akunu::Model> metal;
    try {
        metal = akunu::Model::load(path, metal_options);
    } catch (...) {
        if (!handed_over) delete shim_device;
        throw;
    }
    const int vocab = (int)cpu->config().vocab_size;
    std::printf("device %s\n", metal->device().name().c_str());

    // Teacher-forced logits over a prompt longer than one decode chunk.
    const std::vector<int32_t> prompt = test_prompt(vocab, 40);
    cpu->reset();
    metal->reset();
    compare_logits(cpu->evaluate_logits(prompt), metal->evaluate_logits(prompt), vocab);

    // Greedy generation: prefill, then the chained decode table.
    akunu::SamplingConfig greedy;
    greedy.max_tokens = 24;
    const std::vector<int32_t> short_prompt(prompt.begin(), prompt.begin() + 9);
    std::printf("greedy_cpu %s\n", join(generate(*cpu, short_prompt, greedy)).c_str());
    std::printf("greedy_metal %s\n", join(generate(*metal, short_prompt, greedy)).c_str());

    // chain_decode == decode_step one at a time, on the Metal kernels.
    metal->reset();
    const int32_t first = metal->prefill(short_prompt);
    const std::vector<int32_t> chained = metal->chain_decode(first, 12);
    metal->reset();
    std::vector<int32_t> stepped;
    int32_t t = metal->prefill(short_prompt);
    for (int i = 0; i < 12; ++i) stepped.push_back(t = metal->decode_step(t));
    std::printf("chain_metal %s\nsteps_metal %s\n", join(chained).c_str(), join(stepped).c_str());

    // Seeded sampling with every part of the rule at work.
    akunu::SamplingConfig sampled;
    sampled.temperature = 0.8f;
    sampled.top_k = 40;
    sampled.top_p = 0.95f;
    sampled.min_p = 0.02f;
    sampled.repeat_penalty = 1.1f;
    sampled.frequency_penalty = 0.2f;
    sampled.presence_penalty = 0.1f;
    sampled.seed = 1234;
    sampled.max_tokens = 20;
    const std::vector<int32_t> sampled_cpu = generate(*cpu, short_prompt, sampled);
    std::printf("sampled_cpu %s\n", join(sampled_cpu).c_str());
    std::printf("sampled_metal %s\n", join(generate(*metal, short_prompt, sampled)).c_str());
    // The same draws with each backend fed the CPU's sampled tokens (teacher-forced): every step's
    // choice from the same context and the same point of the seeded stream.
    for (akunu::Model *m : {cpu.get(), metal.get()}) {
        m->reset();
        m->begin_constrained(short_prompt, sampled);
        const std::vector<uint32_t> all(m->token_mask_words(), ~0u);
        std::vector<int32_t> chosen;
        for (int32_t token : sampled_cpu) {
            chosen.push_back(m->choose_token(all.data(), all.size()));
            m->feed({token});
        }
        m->end_constrained((int)chosen.size(), "length");
        std::printf("sampled_forced_%s %s\n", m == cpu.get() ? "cpu" : "metal", join(chosen).c_str());
    }

    // A grammar's mask: only every third token allowed, for a few steps.
    for (akunu::Model *m : {cpu.get(), metal.get()}) {
        m->reset();
        m->begin_constrained(short_prompt, greedy);
        std::vector<uint32_t> mask(m->token_mask_words(), 0);
        for (int i = 0; i < vocab; i += 3) mask[(size_t)i / 32] |= 1u << (i % 32);
        std::vector<int32_t> chosen;
        for (int step = 0; step < 6; ++step) {
            chosen.push_back(m->choose_token(mask.data(), mask.size()));
            m->feed({chosen.back()});
        }
        m->end_constrained((int)chosen.size(), "length");
        std::printf("masked_%s %s\n", m == cpu.get() ? "cpu" : "metal", join(chosen).c_str());
    }

    std::string used;
    for (const std::string &k : shim_device->kernels_used()) used += (used.empty() ? "" : ",") + k;
    std::printf("kernels_used %s\n", used.c_str());
    for (const auto &[kernel, ms] : shim_device->kernel_ms()) std::printf("ms_%s %.0f\n", kernel.c_str(), ms);
    return 0;
}

}  // namespace metal_check
