#include "core/kv_cache.h"

#include <algorithm>
#include <cstdint>

#include "core/errors.h"
#include "core/kv_cache_q8.h"

namespace akunu {

const char *kv_cache_dtype_name(KVCacheDType dtype) { return dtype == KVCacheDType::Q8_0 ? "q8_0" : "f16"; }

bool kv_cache_dtype_from_name(const std::string &name, KVCacheDType *dtype) {
    for (KVCacheDType d : {KVCacheDType::F16, KVCacheDType::Q8_0})
        if (name == kv_cache_dtype_name(d)) {
            *dtype = d;
            return true;
        }
    return false;
}

bool kv_cache_supports_head_dim(KVCacheDType dtype, int head_dim) {
    return head_dim > 0 && (dtype != KVCacheDType::Q8_0 || head_dim % (int)kKVQ8Block == 0);
}

std::string kv_kernel_name(const std::string &f16_kernel, KVCacheDType dtype) {
    if (dtype == KVCacheDType::F16) return f16_kernel;
    const std::string f16_suffix = "_f16kv";
    const size_t n = f16_kernel.size();
    if (n > f16_suffix.size() && f16_kernel.compare(n - f16_suffix.size(), f16_suffix.size(), f16_suffix) == 0)
        return f16_kernel.substr(0, n - f16_suffix.size()) + "_q8kv";
    return f16_kernel + "_q8";
}

size_t kv_buffer_bytes(KVCacheDType dtype, int n_kv_heads, int rows, int head_dim) {
    if (n_kv_heads < 0 || rows < 0 || head_dim < 0) return SIZE_MAX;
    // One row of one head: F16 elements, or Q8_0's int8 values and fp16 scales (kv_cache_q8.h).
    const size_t row_bytes = dtype == KVCacheDType::Q8_0 ? kv_q8_buffer_bytes(1, 1, (uint32_t)head_dim)
                                                         : (size_t)head_dim * 2;
    size_t bytes;
    if (__builtin_mul_overflow((size_t)n_kv_heads, (size_t)rows, &bytes) ||
        __builtin_mul_overflow(bytes, row_bytes, &bytes))
        return SIZE_MAX;
    return bytes;
}

size_t kv_cache_bytes(KVCacheDType dtype, int n_kv_heads, int head_dim, const std::vector<int> &layer_length) {
    size_t total = 0;
    for (int rows : layer_length) {
        const size_t one = kv_buffer_bytes(dtype, n_kv_heads, rows, head_dim);
        if (one > SIZE_MAX / 2 || __builtin_add_overflow(total, 2 * one, &total)) return SIZE_MAX;  // K and V
    }
    return total;
}

KVCache KVCache::create(Device &device, int n_layers, int n_kv_heads, int head_dim, int max_length,
                        KVCacheDType dtype, const std::vector<int> &layer_length) {
    if (!kv_cache_supports_head_dim(dtype, head_dim))
        throw UnsupportedError(std::string("kv_cache_dtype '") + kv_cache_dtype_name(dtype) +
                               "' needs head_dim a multiple of " + std::to_string(kKVQ8Block) + ", got head_dim " +
                               std::to_string(head_dim));
    if (!layer_length.empty() && layer_length.size() != (size_t)n_layers)
        throw AkunuError("internal: KV cache lengths for " + std::to_string(layer_length.size()) + " layers, not " +
                         std::to_string(n_layers));
    KVCache kv;
    kv.dtype = dtype;
    kv.n_layers = n_layers;
    kv.n_kv_heads = n_kv_heads;
    kv.head_dim = head_dim;
    kv.max_length = max_length;
    kv.layer_length = layer_length.empty() ? std::vector<int>((size_t)n_layers, max_length) : layer_length;
    try {
        for (int l = 0; l < n_layers; ++l) {
            const size_t bytes = kv_buffer_bytes(dtype, n_kv_heads, kv.layer_length[(size_t)l], head_dim);
            kv.k_buffers.push_back(device.allocate(bytes));
            kv.v_buffers.push_back(device.allocate(bytes));
        }
    } catch (...) {
        kv.release(device);  // the buffers made before the one that failed
        throw;
    }
    return kv;
}

void KVCache::release(Device &device) {
    for (Buffer &b : k_buffers) device.free_buffer(b);
    for (Buffer &b : v_buffers) device.free_buffer(b);
    k_buffers.clear();
    v_buffers.clear();
}

void KVCache::truncate(int length) {
    if (length < 0 || length > this->length())
        throw AkunuError("internal: KV cache rollback to " + std::to_string(length) + " of " +
                         std::to_string(this->length()) + " positions");
    tokens_.resize((size_t)length);
}

bool KVCache::can_roll_back(int filled, int length, int window) const {
    const int oldest_needed = window > 0 ? std::max(0, length - window + 1) : 0;
    for (int rows : layer_length)
        if (filled - rows > oldest_needed) return false;  // its row holds a later position now
    return true;
}

size_t KVCache::bytes() const {
    size_t total = 0;
    for (const Buffer &b : k_buffers) total += b.size;
    for (const Buffer &b : v_buffers) total += b.size;
    return total;
}

}  // namespace akunu
