#include "inference/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "core/host_memory.h"
#include "inference/weight_list.h"

namespace akunu {

namespace {

std::mutex g_override_mutex;
std::optional<uint64_t> g_available_override;

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// Counts what the loader's upload of each weight will hold on the device (weight_list.h).
class WeightBytes final : public WeightVisitor {
public:
    WeightBytes(const Device &device, const std::string &path) : device_(device), path_(path) {}
    void matrix(WeightMatrix &slot, const TensorView &tensor) override {
        describe_matrix(device_, tensor, path_, slot);
        bytes = saturating_add(bytes, device_matrix_bytes(slot, tensor));
    }
    void vector(Buffer &, size_t n, const std::function<std::vector<float>()> &) override {
        bytes = saturating_add(bytes, (uint64_t)n * sizeof(float));
    }
    uint64_t bytes = 0;

private:
    const Device &device_;
    const std::string &path_;
};

// The widest activation row any GEMM converts into its weights' input format (its K is dim, q_dim
// or ffn_dim), over the output matrix and every layer's: the scratch's act_q row.
size_t widest_act_q_row(const ModelWeights &w, const ModelConfig &config) {
    const uint32_t widest_k = std::max({config.dim, config.q_dim(), config.ffn_dim});
    size_t row = 0;
    auto widen = [&](const WeightMatrix &m) {
        if (m.desc && m.desc->act_row_bytes) row = std::max(row, m.desc->act_row_bytes(widest_k));
    };
    widen(w.output);
    for (const LayerWeights &L : w.layers)
        for (const WeightMatrix *m : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) widen(*m);
    return row;
}

// "1.50 GiB": sizes in messages, in the units people compare with their machine's.
std::string human_bytes(uint64_t bytes) {
    const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        ++u;
    }
    char buf[64];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%llu bytes", (unsigned long long)bytes);
    else
        std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    return buf;
}

// The context-dependent part of a plan: KV cache and scratch for `context` positions.
struct ContextBytes {
    uint64_t kv_cache, scratch;
};
ContextBytes context_bytes(const ModelConfig &config, const ChipConfig &chip, KVCacheDType dtype, ScratchShape shape,
                           int context) {
    shape.recent_tokens = context;
    return {kv_cache_bytes(dtype, (int)config.n_kv_heads, (int)config.head_dim, kv_layer_lengths(config, chip, context)),
            ScratchBuffers::bytes(config, shape)};
}

}  // namespace

uint64_t MemoryPlan::total() const { return saturating_add(saturating_add(weights, kv_cache), scratch); }

int default_context_length(const ModelConfig &config) {
    return (int)std::clamp<uint64_t>(config.max_seq_len, 1, (uint64_t)kDefaultContextCap);
}

std::vector<int> kv_layer_lengths(const ModelConfig &config, const ChipConfig &chip, int context) {
    std::vector<int> lengths((size_t)config.n_layers, context);
    if (!chip.windowed_kv_cache || config.sliding_window == 0) return lengths;
    // The most rows one forward pass writes to the cache (a prefill chunk, or a slice of logits).
    const int max_rows = std::max(chip.max_prefill_chunk, chip.max_logits_rows);
    const int ring = (int)std::min<int64_t>((int64_t)config.sliding_window + max_rows, context);
    for (size_t l = 0; l < lengths.size(); ++l)
        if (l < config.layer_sliding.size() && config.layer_sliding[l]) lengths[l] = ring;
    return lengths;
}

MemoryPlan plan_memory(Device &device, const WeightProvider &weights, const ArchDescriptor &arch,
                       const ModelConfig &config, const ChipConfig &chip, const MemoryRequest &request) {
    if (request.context_length < 0)
        throw std::invalid_argument("context_length must be positive, got " + std::to_string(request.context_length));
    MemoryPlan plan;
    plan.context_length = request.context_length > 0 ? request.context_length : default_context_length(config);

    // Weights: walked as the upload walks them, each matrix described as the device will run it.
    ModelWeights described;
    WeightBytes counter(device, weights.path());
    visit_weights(weights, arch, config, described, counter);
    plan.weights = counter.bytes;

    const int max_rows = std::max(chip.max_prefill_chunk, chip.max_logits_rows);
    plan.scratch_shape = ScratchShape{max_rows, chip.max_logits_rows, std::max(max_rows, chip.chain_decode_chunk),
                                      widest_act_q_row(described, config), plan.context_length};
    plan.kv_layer_length = kv_layer_lengths(config, chip, plan.context_length);
    const ContextBytes at = context_bytes(config, chip, request.kv_cache_dtype, plan.scratch_shape, plan.context_length);
    plan.kv_cache = at.kv_cache;
    plan.scratch = at.scratch;

    {
        std::lock_guard<std::mutex> lock(g_override_mutex);
        if (g_available_override) {
            plan.available.bytes = *g_available_override;
            plan.available.source = "akunu._testing.set_available_memory_override";
        }
    }
    if (!plan.available.known()) plan.available = device.available_memory();

    // The largest context that fits: the plan grows with the context (KV rows, the sampling
    // buffer's recent tokens), so a binary search over [1, kMaxContextLength] finds it.
    if (plan.available.known()) {
        auto fits = [&](int context) {
            const ContextBytes b = context_bytes(config, chip, request.kv_cache_dtype, plan.scratch_shape, context);
            return saturating_add(saturating_add(plan.weights, b.kv_cache), b.scratch) <= plan.available.bytes;
        };
        if (!fits(1)) {
            plan.largest_context = 0;
        } else {
            int lo = 1, hi = kMaxContextLength;  // fits(lo); the answer is in [lo, hi]
            while (lo < hi) {
                const int mid = lo + (hi - lo + 1) / 2;
                if (fits(mid))
                    lo = mid;
                else
                    hi = mid - 1;
            }
            plan.largest_context = lo;
        }
    }

    // The prompt cache: the budget asked for, or a full context's worth — every row of the KV cache
    // (kv_snapshot_bytes of a full cache) and a token id per position — capped at the host memory
    // left once the plan is allocated, so that filling it later cannot exhaust the host.
    if (request.prompt_cache_bytes >= 0) {
        plan.prompt_cache_budget = (uint64_t)request.prompt_cache_bytes;
    } else {
        plan.prompt_cache_budget = saturating_add(plan.kv_cache, 4 * (uint64_t)plan.context_length);
        const MemoryAvailable host = device.buffers_in_host_memory() ? plan.available : host_available_memory();
        if (host.known()) {
            const uint64_t left = device.buffers_in_host_memory() ? (plan.fits() ? host.bytes - plan.total() : 0) : host.bytes;
            plan.prompt_cache_budget = std::min(plan.prompt_cache_budget, left);
        }
    }
    return plan;
}

OutOfMemoryError plan_refusal(const MemoryPlan &plan, const std::string &path, const std::string &backend) {
    std::string msg = path + ": the model does not fit in memory on the " + backend + " backend: it needs " +
                      human_bytes(plan.total()) + " (" + std::to_string(plan.total()) + " bytes: weights " +
                      human_bytes(plan.weights) + ", KV cache " + human_bytes(plan.kv_cache) + " for context_length " +
                      std::to_string(plan.context_length) + ", scratch " + human_bytes(plan.scratch) + "), but " +
                      human_bytes(plan.available.bytes) + " (" + std::to_string(plan.available.bytes) +
                      " bytes) are available (" + plan.available.source + "). ";
    if (plan.largest_context > 0)
        msg += "The largest context_length that fits is " + std::to_string(plan.largest_context) + ".";
    else
        msg += "Not even a context_length of 1 fits (the weights alone are " + human_bytes(plan.weights) + ").";
    return OutOfMemoryError(msg, plan.total(), plan.available.bytes, plan.largest_context);
}

bool memory_check_enabled() {
    const char *v = std::getenv("AKUNU_MEMORY_CHECK");
    return !(v && std::strcmp(v, "0") == 0);
}

void set_available_memory_override(std::optional<uint64_t> bytes) {
    std::lock_guard<std::mutex> lock(g_override_mutex);
    g_available_override = bytes;
}

}  // namespace akunu
