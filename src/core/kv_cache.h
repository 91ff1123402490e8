// KV cache, head-major: for each layer, K and V are [n_kv_heads][layer_length][head_dim], so one
// head's history is contiguous for attention (a sliding-window layer's may be a ring: row =
// position % layer_length). Allocated once at load. Elements are F16, or 8-bit
// Q8_0 blocks in two planes (values, then scales; kv_cache_q8.h) for half the memory.
// The cache also records which token fills each position, so that a prompt sharing a prefix with
// its contents can reuse them (docs/adr/0018-prompt-reuse.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace akunu {

enum class KVCacheDType { F16, Q8_0 };

// "f16", "q8_0": the names the Python API and the CLI take.
const char *kv_cache_dtype_name(KVCacheDType dtype);
// False for a name that is none of them.
bool kv_cache_dtype_from_name(const std::string &name, KVCacheDType *dtype);
// Whether a cache of this dtype can hold heads of head_dim (Q8_0: whole 32-element blocks).
bool kv_cache_supports_head_dim(KVCacheDType dtype, int head_dim);

// The kernel that does the work of an F16-cache kernel (an ArchDescriptor name) on a cache of
// `dtype`: "rope_neox_kv_write" -> "rope_neox_kv_write_q8", "attention_f16kv" -> "attention_q8kv",
// "attention_rope_neox_f16kv" -> "attention_rope_neox_q8kv". F16 keeps the name.
std::string kv_kernel_name(const std::string &f16_kernel, KVCacheDType dtype);

// Bytes of one layer's K (or V) buffer holding `rows` rows per head: what KVCache::create
// allocates and what the memory plan counts (inference/memory_plan.h). SIZE_MAX when the product
// does not fit in size_t (a plan that size never fits).
size_t kv_buffer_bytes(KVCacheDType dtype, int n_kv_heads, int rows, int head_dim);
// A whole cache: a K and a V buffer per layer, layer_length[l] rows per head (SIZE_MAX on overflow).
size_t kv_cache_bytes(KVCacheDType dtype, int n_kv_heads, int head_dim, const std::vector<int> &layer_length);

struct KVCache {
    KVCacheDType dtype = KVCacheDType::F16;
    int n_layers = 0;
    int n_kv_heads = 0;
    int head_dim = 0;
    int max_length = 0;  // positions the cache serves (the context length)
    // Rows per head of each layer: max_length, or for a sliding-window layer a ring that position
    // p occupies at row p % layer_length (window + the most rows a forward pass writes).
    std::vector<int> layer_length;
    std::vector<Buffer> k_buffers;
    std::vector<Buffer> v_buffers;

    // Throws UnsupportedError when `dtype` cannot hold heads of head_dim (the loader checks first).
    // layer_length: rows per head of each layer (empty: max_length for all).
    static KVCache create(Device &device, int n_layers, int n_kv_heads, int head_dim, int max_length,
                          KVCacheDType dtype = KVCacheDType::F16, const std::vector<int> &layer_length = {});
    void release(Device &device);
    size_t bytes() const;

    // Positions filled, and the token at each. append() is the only way positions fill: every pass
    // that writes rows appends the tokens it ran, so the two cannot drift apart.
    int length() const { return (int)tokens_.size(); }
    const std::vector<int32_t> &tokens() const { return tokens_; }
    void append(const int32_t *ids, size_t n) { tokens_.insert(tokens_.end(), ids, ids + n); }
    void append(const std::vector<int32_t> &ids) { append(ids.data(), ids.size()); }
    void reset() { tokens_.clear(); }
    // Rolls back to the first `length` positions (<= length()): the rows past them are stale and
    // the next pass overwrites them. Valid only where can_roll_back(length(), length, window).
    void truncate(int length);
    // Whether a cache of this layout filled to `filled` positions can roll back to `length`: every
    // layer must still hold the keys position `length` attends to. A full-length layer always does;
    // a sliding-window ring of R rows holds positions [filled - R, filled), and position `length`
    // reads keys from length - window + 1 on (window: the model's sliding window).
    bool can_roll_back(int filled, int length, int window) const;

private:
    std::vector<int32_t> tokens_;  // the token at each filled position
};

}  // namespace akunu
