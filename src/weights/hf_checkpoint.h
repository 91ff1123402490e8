// A Hugging Face checkpoint directory (SafeTensors, optionally MLX-quantized) as a plain table.
// The Python layer reads the JSON (config.json, each shard's SafeTensors header, the shard
// index) and fills this in (docs/adr/0004); the engine maps the files, checks every offset
// against the real file sizes and builds the canonical tensors from it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model_config.h"

namespace akunu {

// One tensor's bytes inside a .safetensors file.
struct CheckpointSlice {
    std::string file;             // path of the .safetensors file
    std::string name;             // the tensor's name in that file (for messages)
    std::string dtype;            // SafeTensors dtype: "F32", "F16", "BF16", "U32"
    std::vector<uint64_t> shape;  // as stored: outermost first ([out, in] for a Linear weight)
    uint64_t offset = 0;          // absolute byte offset of the data in the file
    uint64_t n_bytes = 0;
};

// One canonical tensor ("layers.3.attention.q") and how to turn the stored bytes into it.
struct CheckpointTensor {
    std::string canonical;
    CheckpointSlice data;
    // MLX affine quantization when bits > 0: `data` is U32 [rows, cols * bits / 32] holding a
    // little-endian bit stream per row (element 0 in the lowest bits), `scales` and `biases` are
    // [rows, cols / group_size]; value = scale * q + bias.
    uint32_t bits = 0;
    uint32_t group_size = 0;
    CheckpointSlice scales;
    CheckpointSlice biases;
    // > 0: the rows (for a vector, its elements) are in HF's rotate-half order; reorder each of
    // this many heads into the interleaved (adjacent pairs) order the RoPE kernel expects.
    // 0: keep the order.
    uint32_t permute_heads = 0;
    // A norm weight the model multiplies by (1 + w) (Gemma): stored as w, loaded as F32 w + 1 so
    // the common RMSNorm kernels (which multiply by the weight) compute the same thing.
    bool add_one = false;
};

struct HFCheckpoint {
    std::string path;    // the checkpoint directory (for messages)
    std::string format;  // "safetensors" or "mlx"
    ModelConfig config;  // rope_inv_freq already computed, scaling included
    std::vector<CheckpointTensor> tensors;
    // The tokenizer lives in Python (tokenizers library); the engine only needs to know which
    // ids end a generation.
    std::vector<int32_t> eog_ids;
};

// The config as the engine needs it (the Python reader checks the same things with friendlier
// messages; this guards the kernels against any caller): positive sizes, heads that divide,
// even head/rope dims, rope_dim / 2 finite positive frequencies (and as many local ones, if
// any), one sliding flag per layer (or none), finite non-negative scales and softcaps, a known
// architecture.
// Throws ModelFormatError / UnsupportedError naming the checkpoint and the field.
void validate_checkpoint_config(const HFCheckpoint &checkpoint);

}  // namespace akunu
