// libFuzzer target: the input is a GGUF model file. WeightProvider::open reads the ModelConfig
// from its metadata (architecture descriptor, dimensions, RoPE frequencies, sliding layers), maps
// the tensors to canonical names, splits fused ones and checks every shape against the config;
// then the small F32 vectors the loader converts (norms, biases) are read, and the tokenizer is
// built when the file has one. That is Model::load up to the first device allocation. A file that
// declares absurd sizes must be refused with ModelFormatError / UnsupportedError / TokenizerError,
// never allocate in proportion to them (-rss_limit_mb / -malloc_limit_mb report that).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/arch_descriptor.h"
#include "error_checks.h"
#include "input_file.h"
#include "tokenizer/tokenizer.h"
#include "weights/gguf_file.h"
#include "weights/weight_provider.h"

namespace {

void require(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "broken invariant: %s\n", what);
        std::abort();
    }
}

// The per-layer vectors Model::upload_weights converts to F32 (when the architecture has them).
void read_vectors(const akunu::WeightProvider &wp) {
    namespace names = akunu::tensor_names;
    const akunu::ModelConfig &c = wp.config();
    const akunu::ArchDescriptor arch = akunu::arch_from_name(c.architecture);
    require(wp.get_f32(names::kOutputNorm).size() == c.dim, "output_norm has dim values");
    for (uint32_t l = 0; l < c.n_layers; ++l) {
        auto name = [&](const char *suffix) { return names::layer((int)l, suffix); };
        require(wp.get_f32(name(names::kAttentionNorm)).size() == c.dim, "attention_norm has dim values");
        require(wp.get_f32(name(names::kFFNNorm)).size() == c.dim, "ffn_norm has dim values");
        if (arch.has_qkv_bias) require(wp.get_f32(name(names::kQBias)).size() == c.q_dim(), "q bias has q_dim values");
        if (arch.qk_norm) require(wp.get_f32(name(names::kQNorm)).size() == c.head_dim, "q_norm has head_dim values");
    }
}

void check_config(const akunu::ModelConfig &c) {
    require(c.rope_inv_freq.size() == c.rope_dim / 2, "rope_dim / 2 frequencies");
    require(c.layer_sliding.size() == c.n_layers, "one sliding flag per layer");
    require((uint64_t)c.n_heads * c.head_dim == c.q_dim(), "q_dim does not wrap around");
    require(c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0, "whole query groups");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    akunu_fuzz::InputFile input(data, size);
    try {
        std::unique_ptr<akunu::WeightProvider> wp = akunu::WeightProvider::open(input.path());
        check_config(wp->config());
        for (const akunu::TensorView &t : wp->all_tensors()) require(t.data != nullptr, "mapped tensors");
        read_vectors(*wp);
        if (wp->gguf().has("tokenizer.ggml.model")) {
            std::unique_ptr<akunu::Tokenizer> tokenizer = akunu::Tokenizer::from_gguf(wp->gguf());
            require(tokenizer->vocab_size() > 0, "a tokenizer has tokens");
        }
    } catch (const akunu::AkunuError &e) {  // ModelFormatError, UnsupportedError, TokenizerError
        akunu_fuzz::check_error_message(e);
    }
    return 0;
}
