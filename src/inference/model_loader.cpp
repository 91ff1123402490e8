// Load order (the book's, minus what the CPU does not need): device, weights and config,
// architecture, chip config, tokenizer, weights onto the device, KV cache, scratch, decode table.
#include <algorithm>
#include <set>

#include "core/errors.h"
#include "core/quoted_text.h"
#include "core/table_builder.h"
#include "inference/model.h"
#include "weights/gguf_file.h"

namespace akunu {

namespace {
void check_options(const LoadOptions &options) {
    if (options.context_length < 0)
        throw std::invalid_argument("context_length must be positive, got " + std::to_string(options.context_length));
}

// Refuses a KV cache dtype this model or backend cannot run before any weight is uploaded: Q8_0
// needs whole 32-element blocks per head and the backend's kernels for it.
void check_kv_cache_dtype(Device &device, const ArchDescriptor &arch, const ChipConfig &chip, const ModelConfig &config,
                          KVCacheDType dtype, const std::string &path) {
    if (dtype == KVCacheDType::F16) return;
    const std::string what = std::string("kv_cache_dtype '") + kv_cache_dtype_name(dtype) + "'";
    if (!kv_cache_supports_head_dim(dtype, (int)config.head_dim))
        throw UnsupportedError(path + ": " + what + " needs head_dim a multiple of 32, but this model's head_dim is " +
                               std::to_string(config.head_dim) + " (use kv_cache_dtype 'f16')");
    const auto &dims = chip.q8_kv_head_dims;
    const int group = config.n_kv_heads > 0 ? (int)(config.n_heads / config.n_kv_heads) : 0;
    if ((!dims.empty() && std::find(dims.begin(), dims.end(), (int)config.head_dim) == dims.end()) ||
        (chip.q8_kv_max_group > 0 && group > chip.q8_kv_max_group)) {
        std::string shapes;
        for (int d : dims) shapes += (shapes.empty() ? "" : " or ") + std::to_string(d);
        throw UnsupportedError(path + ": " + what + " on the " + device.backend_name() + " backend needs head_dim " +
                               (shapes.empty() ? std::string("a multiple of 32") : shapes) + " and at most " +
                               std::to_string(chip.q8_kv_max_group) + " query heads per KV head; this model has head_dim " +
                               std::to_string(config.head_dim) + " and " + std::to_string(group) +
                               " (use kv_cache_dtype 'f16')");
    }
    for (const std::string &kernel : kv_cache_kernels(arch, chip, dtype)) {
        try {
            device.get_pipeline(kernel);
        } catch (const UnsupportedError &e) {
            throw UnsupportedError(path + ": " + what + " is not supported by the " + device.backend_name() +
                                   " backend yet (" + e.what() + "); use kv_cache_dtype 'f16'");
        }
    }
}

// Rows per head of each layer's KV cache: the context, or on a backend that keeps windows
// (ChipConfig::windowed_kv_cache) for a sliding-window layer a ring of window + max_rows rows.
// A pass of up to max_rows rows writes its rows before it reads: the ring must still hold the
// window of its first row then.
std::vector<int> kv_layer_lengths(const ModelConfig &config, const ChipConfig &chip, int context, int max_rows) {
    std::vector<int> lengths((size_t)config.n_layers, context);
    if (!chip.windowed_kv_cache || config.sliding_window == 0) return lengths;
    const int ring = (int)std::min<int64_t>((int64_t)config.sliding_window + max_rows, context);
    for (size_t l = 0; l < lengths.size(); ++l)
        if (l < config.layer_sliding.size() && config.layer_sliding[l]) lengths[l] = ring;
    return lengths;
}
}  // namespace

std::unique_ptr<Model> Model::load(const std::string &path, const LoadOptions &options) {
    check_options(options);
    std::unique_ptr<Model> m(new Model());
    m->device_ = options.make_device ? options.make_device() : create_device(options.backend, options.threads);
    m->provider_ = WeightProvider::open(path);
    m->finish_load(options);
    return m;
}

// A Hugging Face checkpoint: no tokenizer in the engine (Python runs tokenizer.json), only the
// end-of-generation ids that stop a generation.
std::unique_ptr<Model> Model::load(const HFCheckpoint &checkpoint, const LoadOptions &options) {
    check_options(options);
    std::unique_ptr<Model> m(new Model());
    m->device_ = options.make_device ? options.make_device() : create_device(options.backend, options.threads);
    m->provider_ = WeightProvider::open_checkpoint(checkpoint);
    m->eog_.assign(checkpoint.config.vocab_size, false);
    for (int32_t id : checkpoint.eog_ids) m->eog_[(size_t)id] = true;  // ids validated by open_checkpoint
    m->finish_load(options);
    return m;
}

void Model::finish_load(const LoadOptions &options) {
    Model *m = this;  // the steps read as they did when they lived in load()
    const std::string &path = provider_->path();
    m->config_ = m->provider_->config();
    m->arch_ = arch_from_name(m->config_.architecture);
    m->arch_.tie_embeddings = !m->provider_->has(tensor_names::kOutput);
    m->chip_ = m->device_->chip_config();
    if (m->config_.head_dim > 1024) throw UnsupportedError(path + ": head_dim above 1024 is not supported");
    check_kv_cache_dtype(*m->device_, m->arch_, m->chip_, m->config_, options.kv_cache_dtype, path);
    if (m->provider_->has_gguf()) {
        m->tokenizer_ = Tokenizer::from_gguf(m->provider_->gguf());
        if (m->tokenizer_->vocab_size() > m->config_.vocab_size)
            throw ModelFormatError(path + ": tokenizer has " + std::to_string(m->tokenizer_->vocab_size()) +
                                   " tokens but the embedding only " + std::to_string(m->config_.vocab_size) + " rows");
    }
    m->upload_weights();

    int context = options.context_length > 0 ? options.context_length
                                             : std::min<int>((int)m->config_.max_seq_len, LoadOptions::kDefaultContextCap);
    // The most rows one forward pass writes to the cache (a prefill chunk, or a slice of logits).
    const int max_rows = std::max(m->chip_.max_prefill_chunk, m->chip_.max_logits_rows);
    m->kv_ = KVCache::create(*m->device_, (int)m->config_.n_layers, (int)m->config_.n_kv_heads,
                             (int)m->config_.head_dim, context, options.kv_cache_dtype,
                             kv_layer_lengths(m->config_, m->chip_, context, max_rows));
    // By default the prompt cache holds a full context's worth: the whole KV cache and its tokens.
    m->prompt_cache_ = PromptCache(options.prompt_cache_bytes < 0 ? kv_snapshot_bytes(m->kv_, context)
                                                                  : (size_t)options.prompt_cache_bytes);

    // Widest activation row any GEMM converts: its K is dim, q_dim or ffn_dim.
    const uint32_t widest_k = std::max({m->config_.dim, m->config_.q_dim(), m->config_.ffn_dim});
    size_t act_q_row_bytes = 0;
    auto widen = [&](const WeightMatrix &w) {
        if (w.desc->act_row_bytes) act_q_row_bytes = std::max(act_q_row_bytes, w.desc->act_row_bytes(widest_k));
    };
    widen(m->weights_.output);
    for (const LayerWeights &L : m->weights_.layers)
        for (const WeightMatrix *w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) widen(*w);
    const int token_slots = std::max(max_rows, m->chip_.chain_decode_chunk);
    m->scratch_ = ScratchBuffers::create(*m->device_, m->config_, max_rows, m->chip_.max_logits_rows, token_slots,
                                         act_q_row_bytes, context);

    m->decode_table_ = build_dispatch_table(m->context());
    m->sampled_decode_table_ = with_sampler(m->decode_table_, m->context());
    m->masked_argmax_table_ = masked_choice_table(m->decode_table_, m->context());
    m->masked_sample_table_ = masked_choice_table(m->sampled_decode_table_, m->context());
    m->table_builds_ = 1;
}

bool Model::is_eog(int32_t id) const {
    if (tokenizer_) return tokenizer_->is_eog(id);
    return id >= 0 && (size_t)id < eog_.size() && eog_[(size_t)id];
}

namespace {

// A weight matrix as the device will run it, or a clear refusal naming tensor, dtype and backend.
WeightMatrix upload_matrix(Device &device, const TensorView &t, const std::string &path) {
    WeightMatrix w;
    w.desc = device.dtype_lookup(t.dtype);
    if (!w.desc)
        throw UnsupportedError(path + ": tensor " + quoted(t.file_name) + " has dtype " + dtype_name(t.dtype) +
                               ", which the " + device.backend_name() + " backend does not support yet");
    w.cols = (uint32_t)t.dims[0];
    w.rows = (uint32_t)t.dims[1];
    w.row_bytes = t.n_bytes / w.rows;
    w.buffer = device.upload_matrix(t.data, t.n_bytes, *w.desc, w.rows, w.cols);
    return w;
}

}  // namespace

void Model::upload_weights() {
    Device &dev = *device_;
    const WeightProvider &wp = *provider_;
    const std::string &path = wp.path();
    auto vector_buffer = [&](const std::vector<float> &v) {
        Buffer b = dev.allocate(v.size() * sizeof(float));
        dev.write_buffer(b, v.data(), v.size() * sizeof(float));
        weights_.owned.push_back(b);
        return b;
    };
    weights_.token_embedding = upload_matrix(dev, wp.get(tensor_names::kTokenEmbedding), path);
    weights_.output = arch_.tie_embeddings ? weights_.token_embedding : upload_matrix(dev, wp.get(tensor_names::kOutput), path);
    weights_.output_norm = vector_buffer(wp.get_f32(tensor_names::kOutputNorm));
    weights_.rope_inv_freq = vector_buffer(config_.rope_inv_freq);
    if (!config_.rope_inv_freq_local.empty()) weights_.rope_inv_freq_local = vector_buffer(config_.rope_inv_freq_local);
    for (uint32_t l = 0; l < config_.n_layers; ++l) {
        auto name = [&](const char *suffix) { return tensor_names::layer((int)l, suffix); };
        LayerWeights L;
        L.attention_norm = vector_buffer(wp.get_f32(name(tensor_names::kAttentionNorm)));
        L.ffn_norm = vector_buffer(wp.get_f32(name(tensor_names::kFFNNorm)));
        L.q = upload_matrix(dev, wp.get(name(tensor_names::kQ)), path);
        L.k = upload_matrix(dev, wp.get(name(tensor_names::kK)), path);
        L.v = upload_matrix(dev, wp.get(name(tensor_names::kV)), path);
        L.o = upload_matrix(dev, wp.get(name(tensor_names::kO)), path);
        L.gate = upload_matrix(dev, wp.get(name(tensor_names::kGate)), path);
        L.up = upload_matrix(dev, wp.get(name(tensor_names::kUp)), path);
        L.down = upload_matrix(dev, wp.get(name(tensor_names::kDown)), path);
        if (arch_.has_qkv_bias) {
            std::vector<float> bias = wp.get_f32(name(tensor_names::kQBias));
            for (const char *part : {tensor_names::kKBias, tensor_names::kVBias}) {
                std::vector<float> b = wp.get_f32(name(part));
                bias.insert(bias.end(), b.begin(), b.end());
            }
            L.qkv_bias = vector_buffer(bias);
        }
        if (arch_.qk_norm) {
            L.q_norm = vector_buffer(wp.get_f32(name(tensor_names::kQNorm)));
            L.k_norm = vector_buffer(wp.get_f32(name(tensor_names::kKNorm)));
        }
        if (arch_.post_attention_norm)
            L.post_attention_norm = vector_buffer(wp.get_f32(name(tensor_names::kPostAttentionNorm)));
        if (arch_.post_ffn_norm) L.post_ffn_norm = vector_buffer(wp.get_f32(name(tensor_names::kPostFFNNorm)));
        weights_.layers.push_back(L);
    }
    // Tensors the loader converted in memory (MLX, reordered Q/K) are dead weight once a device
    // has copied or repacked them; keep only those it reads in place.
    std::set<const void *> aliased;
    auto keep_if_aliased = [&](const WeightMatrix &w) { if (w.buffer.contents) aliased.insert(w.buffer.contents); };
    keep_if_aliased(weights_.token_embedding);
    keep_if_aliased(weights_.output);
    for (const LayerWeights &L : weights_.layers)
        for (const WeightMatrix *w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) keep_if_aliased(*w);
    provider_->release_host_copies(aliased);
}

Model::~Model() {
    if (!device_) return;
    kv_.release(*device_);
    scratch_.release(*device_);
    for (Buffer &b : weights_.owned) device_->free_buffer(b);
    // Aliased/uploaded weight matrices belong to the device upload; free them through it.
    auto free_matrix = [&](WeightMatrix &w) { device_->free_buffer(w.buffer); };
    if (!arch_.tie_embeddings) free_matrix(weights_.output);
    free_matrix(weights_.token_embedding);
    for (LayerWeights &L : weights_.layers)
        for (WeightMatrix *w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) free_matrix(*w);
}

}  // namespace akunu
