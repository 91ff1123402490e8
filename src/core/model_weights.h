// The model's weights as device buffers, resolved once at load so the table builder never looks
// anything up by name twice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/dtype_descriptor.h"

namespace akunu {

struct WeightMatrix {
    Buffer buffer;
    const DTypeDescriptor *desc = nullptr;  // how this device runs this dtype
    uint32_t rows = 0;                      // N (output features)
    uint32_t cols = 0;                      // K (input features)
    size_t row_bytes = 0;
};

struct LayerWeights {
    Buffer attention_norm;  // F32 [dim]
    Buffer ffn_norm;        // F32 [dim]
    WeightMatrix q, k, v, o;
    WeightMatrix gate, up, down;
    // Only where the ArchDescriptor asks for them (otherwise empty buffers).
    Buffer qkv_bias;             // F32 [q_dim + 2 kv_dim]: Q, K and V biases side by side
    Buffer q_norm, k_norm;       // F32 [head_dim]
    Buffer post_attention_norm;  // F32 [dim]
    Buffer post_ffn_norm;        // F32 [dim]
};

struct ModelWeights {
    WeightMatrix token_embedding;  // [vocab, dim]
    WeightMatrix output;           // [vocab, dim]; the token embedding when tied
    Buffer output_norm;            // F32 [dim]
    Buffer rope_inv_freq;          // F32 [rope_dim / 2]
    Buffer rope_inv_freq_local;    // F32 [rope_dim / 2] for sliding layers; empty: rope_inv_freq
    std::vector<LayerWeights> layers;
    std::vector<Buffer> owned;     // buffers to free at unload (aliased weights are not owned)
};

}  // namespace akunu
