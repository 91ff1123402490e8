#include "core/kv_cache.h"

namespace akunu {

KVCache KVCache::create(Device &device, int n_layers, int n_kv_heads, int head_dim, int max_length) {
    KVCache kv;
    kv.n_layers = n_layers;
    kv.n_kv_heads = n_kv_heads;
    kv.head_dim = head_dim;
    kv.max_length = max_length;
    size_t per_layer = (size_t)n_kv_heads * (size_t)max_length * (size_t)head_dim * 2;  // F16
    for (int l = 0; l < n_layers; ++l) {
        kv.k_buffers.push_back(device.allocate(per_layer));
        kv.v_buffers.push_back(device.allocate(per_layer));
    }
    return kv;
}

void KVCache::release(Device &device) {
    for (Buffer &b : k_buffers) device.free_buffer(b);
    for (Buffer &b : v_buffers) device.free_buffer(b);
    k_buffers.clear();
    v_buffers.clear();
}

size_t KVCache::bytes() const {
    size_t total = 0;
    for (const Buffer &b : k_buffers) total += b.size;
    for (const Buffer &b : v_buffers) total += b.size;
    return total;
}

}  // namespace akunu
