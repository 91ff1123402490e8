// Load order (the book's, minus what the CPU does not need): device, weights and config,
// architecture, chip config, the memory plan (nothing is allocated unless it fits), tokenizer,
// weights onto the device, KV cache, scratch, decode table.
#include <algorithm>
#include <set>

#include "core/errors.h"
#include "core/table_builder.h"
#include "inference/model.h"
#include "inference/weight_list.h"
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

}  // namespace

std::unique_ptr<Model> Model::open(const std::string &path, const LoadOptions &options) {
    check_options(options);
    std::unique_ptr<Model> m(new Model());
    m->device_ = options.make_device ? options.make_device() : create_device(options.backend, options.threads);
    m->provider_ = WeightProvider::open(path);
    m->read_model(options);
    return m;
}

// A Hugging Face checkpoint: no tokenizer in the engine (Python runs tokenizer.json), only the
// end-of-generation ids that stop a generation.
std::unique_ptr<Model> Model::open(const HFCheckpoint &checkpoint, const LoadOptions &options) {
    check_options(options);
    std::unique_ptr<Model> m(new Model());
    m->device_ = options.make_device ? options.make_device() : create_device(options.backend, options.threads);
    m->provider_ = WeightProvider::open_checkpoint(checkpoint);
    m->eog_.assign(checkpoint.config.vocab_size, false);
    for (int32_t id : checkpoint.eog_ids) m->eog_[(size_t)id] = true;  // ids validated by open_checkpoint
    m->read_model(options);
    return m;
}

std::unique_ptr<Model> Model::load(const std::string &path, const LoadOptions &options) {
    std::unique_ptr<Model> m = open(path, options);
    m->finish_load(options);
    return m;
}

std::unique_ptr<Model> Model::load(const HFCheckpoint &checkpoint, const LoadOptions &options) {
    std::unique_ptr<Model> m = open(checkpoint, options);
    m->finish_load(options);
    return m;
}

// Planning opens the device and the weights (a mapping) as a load does, and stops there.
MemoryPlan Model::plan(const std::string &path, const LoadOptions &options) {
    std::unique_ptr<Model> m = open(path, options);
    return plan_memory(*m->device_, *m->provider_, m->arch_, m->config_, m->chip_, options.memory_request());
}

MemoryPlan Model::plan(const HFCheckpoint &checkpoint, const LoadOptions &options) {
    std::unique_ptr<Model> m = open(checkpoint, options);
    return plan_memory(*m->device_, *m->provider_, m->arch_, m->config_, m->chip_, options.memory_request());
}

void Model::read_model(const LoadOptions &options) {
    const std::string &path = provider_->path();
    config_ = provider_->config();
    arch_ = arch_from_name(config_.architecture);
    arch_.tie_embeddings = !provider_->has(tensor_names::kOutput);
    chip_ = device_->chip_config();
    if (config_.head_dim > 1024) throw UnsupportedError(path + ": head_dim above 1024 is not supported");
    check_kv_cache_dtype(*device_, arch_, chip_, config_, options.kv_cache_dtype, path);
}

void Model::finish_load(const LoadOptions &options) {
    Model *m = this;  // the steps read as they did when they lived in load()
    const std::string &path = provider_->path();
    // Nothing is allocated before the plan says it fits (docs/adr/0021-memory-plan.md).
    m->plan_ = plan_memory(*m->device_, *m->provider_, m->arch_, m->config_, m->chip_, options.memory_request());
    if (!m->plan_.fits() && memory_check_enabled()) throw plan_refusal(m->plan_, path, m->device_->backend_name());
    if (m->provider_->has_gguf()) {
        m->tokenizer_ = Tokenizer::from_gguf(m->provider_->gguf());
        if (m->tokenizer_->vocab_size() > m->config_.vocab_size)
            throw ModelFormatError(path + ": tokenizer has " + std::to_string(m->tokenizer_->vocab_size()) +
                                   " tokens but the embedding only " + std::to_string(m->config_.vocab_size) + " rows");
    }
    m->upload_weights();

    const int context = m->plan_.context_length;
    m->kv_ = KVCache::create(*m->device_, (int)m->config_.n_layers, (int)m->config_.n_kv_heads,
                             (int)m->config_.head_dim, context, options.kv_cache_dtype, m->plan_.kv_layer_length);
    m->prompt_cache_ = PromptCache(m->plan_.prompt_cache_budget);
    m->scratch_ = ScratchBuffers::create(*m->device_, m->config_, m->plan_.scratch_shape);

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

// Puts each weight on the device (weight_list.h): matrices through Device::upload_matrix (aliased,
// copied or repacked, as the backend does), vectors as owned F32 buffers.
class Uploader final : public WeightVisitor {
public:
    Uploader(Device &device, ModelWeights &weights, const std::string &path)
        : device_(device), weights_(weights), path_(path) {}
    void matrix(WeightMatrix &slot, const TensorView &t) override {
        describe_matrix(device_, t, path_, slot);
        slot.buffer = device_.upload_matrix(t.data, t.n_bytes, *slot.desc, slot.rows, slot.cols);
    }
    void vector(Buffer &slot, size_t n, const std::function<std::vector<float>()> &values) override {
        const std::vector<float> v = values();
        if (v.size() != n) throw AkunuError("internal: a weight vector of " + std::to_string(v.size()) + " floats, not " + std::to_string(n));
        slot = device_.allocate(n * sizeof(float));
        weights_.owned.push_back(slot);
        device_.write_buffer(slot, v.data(), n * sizeof(float));
    }

private:
    Device &device_;
    ModelWeights &weights_;
    const std::string &path_;
};

// Each matrix buffer once (a tied output is the token embedding's buffer).
template <class F> void for_each_matrix(const ModelWeights &w, bool tied, F &&f) {
    f(w.token_embedding);
    if (!tied) f(w.output);
    for (const LayerWeights &L : w.layers)
        for (const WeightMatrix *m : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) f(*m);
}

}  // namespace

void Model::upload_weights() {
    Uploader uploader(*device_, weights_, provider_->path());
    visit_weights(*provider_, arch_, config_, weights_, uploader);
    // Tensors the loader converted in memory (MLX, reordered Q/K) are dead weight once a device
    // has copied or repacked them; keep only those it reads in place.
    std::set<const void *> aliased;
    for_each_matrix(weights_, arch_.tie_embeddings, [&](const WeightMatrix &w) {
        if (w.buffer.contents) aliased.insert(w.buffer.contents);
    });
    provider_->release_host_copies(aliased);
}

size_t Model::weight_bytes() const {
    size_t total = 0;
    for (const Buffer &b : weights_.owned) total += b.size;
    for_each_matrix(weights_, arch_.tie_embeddings, [&](const WeightMatrix &w) { total += w.buffer.size; });
    return total;
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
