// WeightProvider: the one place that knows how a file names its tensors and hyper-parameters.
// Everything above it asks for canonical names ("layers.3.attention.q") and a ModelConfig.
// Formats: GGUF (mmap, zero copy) and Hugging Face SafeTensors / MLX checkpoints (HFCheckpoint,
// read by the Python layer; see safetensors_source.h).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/model_config.h"

namespace akunu {

class GGUFFile;
class SafeTensorsSource;
struct HFCheckpoint;

struct TensorView {
    std::string file_name;          // the name inside the file, for error messages
    DType dtype;
    std::vector<uint64_t> dims;     // innermost first: a [N, K] matrix has dims {K, N}
    const uint8_t *data = nullptr;  // mapped, read-only
    size_t n_bytes = 0;
};

class WeightProvider {
public:
    // Opens the model file; throws ModelFormatError / UnsupportedError naming the problem.
    static std::unique_ptr<WeightProvider> open(const std::string &path);
    // A Hugging Face checkpoint directory described by `checkpoint` (config already read).
    static std::unique_ptr<WeightProvider> open_checkpoint(const HFCheckpoint &checkpoint);
    ~WeightProvider();

    const std::string &format() const { return format_; }  // "gguf", "safetensors" or "mlx"
    const std::string &path() const { return path_; }      // the file or checkpoint directory
    const ModelConfig &config() const { return config_; }
    bool has_gguf() const { return gguf_ != nullptr; }
    const GGUFFile &gguf() const { return *gguf_; }  // only when has_gguf()

    bool has(const std::string &canonical) const;
    // Throws ModelFormatError if the tensor is missing.
    const TensorView &get(const std::string &canonical) const;
    // A small tensor (norm weights, rope factors) converted to F32.
    std::vector<float> get_f32(const std::string &canonical) const;

    // Every tensor of the file, for `akunu inspect`.
    std::vector<TensorView> all_tensors() const;
    // After upload: frees tensors the loader built in memory (converted / reordered checkpoint
    // tensors) unless their host pointer is in `in_use` (aliased by the device). GGUF: nothing.
    void release_host_copies(const std::set<const void *> &in_use);
    // Bytes of weights held in the loader's own memory rather than mapped from the files.
    size_t owned_bytes() const;

private:
    WeightProvider() = default;
    void read_config();
    void read_rope_frequencies();
    void split_fused_tensors();
    void check_shapes() const;
    std::string format_;
    std::string path_;
    std::unique_ptr<GGUFFile> gguf_;
    std::unique_ptr<SafeTensorsSource> safetensors_;
    ModelConfig config_;
    std::map<std::string, TensorView> tensors_;  // canonical name -> view
};

// Canonical tensor names, in one place.
namespace tensor_names {
std::string layer(int l, const char *suffix);  // "layers.3." + suffix
constexpr const char *kTokenEmbedding = "token_embedding";
constexpr const char *kOutputNorm = "output_norm";
constexpr const char *kOutput = "output";
constexpr const char *kRopeFreqs = "rope_freqs";
constexpr const char *kAttentionNorm = "attention_norm";
constexpr const char *kQ = "attention.q";
constexpr const char *kK = "attention.k";
constexpr const char *kV = "attention.v";
constexpr const char *kO = "attention.o";
constexpr const char *kFFNNorm = "ffn_norm";
constexpr const char *kGate = "ffn.gate";
constexpr const char *kUp = "ffn.up";
constexpr const char *kDown = "ffn.down";
// Present only in the architectures whose ArchDescriptor asks for them.
constexpr const char *kQBias = "attention.q_bias";
constexpr const char *kKBias = "attention.k_bias";
constexpr const char *kVBias = "attention.v_bias";
constexpr const char *kQNorm = "attention.q_norm";  // [head_dim], shared by every head
constexpr const char *kKNorm = "attention.k_norm";
constexpr const char *kPostAttentionNorm = "post_attention_norm";
constexpr const char *kPostFFNNorm = "post_ffn_norm";
// Fused tensors (Phi-3), split at open into kQ/kK/kV and kGate/kUp row ranges.
constexpr const char *kQKV = "attention.qkv";
constexpr const char *kGateUp = "ffn.gate_up";
}  // namespace tensor_names

}  // namespace akunu
