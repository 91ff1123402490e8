// The memory plan: every byte a model will hold on its device — the weights as the backend lays
// them out, the KV cache for the context, the scratch buffers — worked out before anything is
// allocated, and checked against what the device can still give (Device::available_memory). A
// model that does not fit is refused with OutOfMemoryError naming the numbers and the largest
// context that would fit, instead of being killed by the OOM killer halfway through zero-filling
// its KV cache (docs/adr/0021-memory-plan.md).
//
// The sizes come from the functions the allocations use (kv_cache_bytes for KVCache::create,
// ScratchBuffers::bytes for ScratchBuffers::create, visit_weights for Model::upload_weights), so
// the plan is what the loader then allocates, byte for byte.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/arch_descriptor.h"
#include "core/chip_config.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/kv_cache.h"
#include "core/model_config.h"
#include "core/scratch.h"
#include "weights/weight_provider.h"

namespace akunu {

// The context a load gets when none is asked for: the model's trained context, capped here.
constexpr int kDefaultContextCap = 4096;
// The longest context a load may ask for (positions are 32-bit signed integers).
constexpr int kMaxContextLength = INT32_MAX;

// What a load asks for that decides its memory (LoadOptions' part).
struct MemoryRequest {
    int context_length = 0;  // 0: default_context_length(config)
    KVCacheDType kv_cache_dtype = KVCacheDType::F16;
    int64_t prompt_cache_bytes = -1;  // < 0: the default budget (MemoryPlan::prompt_cache_budget)
};

struct MemoryPlan {
    int context_length = 0;
    // Device memory, in bytes. Weights the device reads in place from the mapped file (the CPU's
    // file-layout matrices, Metal's page-aligned ones) count too: they are resident while the
    // model runs, and the page cache they live in is part of what the host reports available.
    uint64_t weights = 0;
    uint64_t kv_cache = 0;
    uint64_t scratch = 0;
    MemoryAvailable available;     // the device's (or the test override's)
    int64_t largest_context = -1;  // the longest context whose plan fits; 0: none; -1: no limit known
    // Host memory for saved conversations (the prompt cache): the budget asked for, or by default a
    // full context's worth (the KV cache and a token id per position) capped at the host memory
    // the plan leaves free. Not part of total(): it holds nothing at load and fills lazily.
    uint64_t prompt_cache_budget = 0;
    // What the loader allocates, as planned.
    std::vector<int> kv_layer_length;
    ScratchShape scratch_shape;

    uint64_t total() const;  // weights + KV cache + scratch (saturating)
    bool fits() const { return !available.known() || total() <= available.bytes; }
};

// The context a load gets when none is asked for: the trained context, at most kDefaultContextCap
// (and at least 1, whatever the file says).
int default_context_length(const ModelConfig &config);

// Rows per head of each layer's KV cache for `context` positions: the context, or on a backend that
// keeps windows (ChipConfig::windowed_kv_cache) for a sliding-window layer a ring of window + the
// most rows one pass writes (a pass writes its rows before it reads: the ring must still hold the
// window of its first row then).
std::vector<int> kv_layer_lengths(const ModelConfig &config, const ChipConfig &chip, int context);

// The plan for a model (its weights, config, architecture and the device's chip config) on `device`,
// allocating nothing. Throws UnsupportedError for a weight dtype the device cannot run (as the
// upload would) and std::invalid_argument for a negative context_length.
MemoryPlan plan_memory(Device &device, const WeightProvider &weights, const ArchDescriptor &arch,
                       const ModelConfig &config, const ChipConfig &chip, const MemoryRequest &request);

// The refusal of a plan that does not fit: what is needed (weights, KV cache, scratch), what is
// available and where that number came from, and the largest context_length that fits.
OutOfMemoryError plan_refusal(const MemoryPlan &plan, const std::string &path, const std::string &backend);

// Whether loads refuse a plan that does not fit: yes, unless AKUNU_MEMORY_CHECK=0 (docs/switches.md).
bool memory_check_enabled();

// Test seam (akunu._testing.set_available_memory_override): plans use `bytes` as the memory
// available instead of asking the device; nullopt goes back to the device's.
void set_available_memory_override(std::optional<uint64_t> bytes);

}  // namespace akunu
