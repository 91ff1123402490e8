// KV cache, head-major: for each layer, K and V are [n_kv_heads][max_length][head_dim] F16, so one
// head's history is contiguous for attention. Allocated once at load.
#pragma once
#include <cstddef>
#include <vector>

#include "core/device.h"

namespace akunu {

struct KVCache {
    int n_layers = 0;
    int n_kv_heads = 0;
    int head_dim = 0;
    int max_length = 0;      // positions per head
    int current_length = 0;  // positions filled
    std::vector<Buffer> k_buffers;
    std::vector<Buffer> v_buffers;

    static KVCache create(Device &device, int n_layers, int n_kv_heads, int head_dim, int max_length);
    void release(Device &device);
    size_t bytes() const;
    void advance(int n) { current_length += n; }
    void reset() { current_length = 0; }
};

}  // namespace akunu
