// akunu._core.Model, SamplingConfig, GenerationStats and built_backends(). akunu.Model
// (python/akunu/model.py) holds a _core.Model and adds the text-level API (generate, stream,
// chat); everything here works in token ids.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <mutex>

#include "core/device.h"
#include "core/dispatch_table.h"
#include "inference/model.h"
#include "python/bind_tokenizer.h"
#include "weights/hf_checkpoint.h"

namespace nb = nanobind;
using akunu::Model;

namespace {


// The Python object owns the C++ model through this holder so that close() can free it early.
// Calls run with the GIL released, so two Python threads could reach one Model at once: every
// access goes through a lock (a Model is not thread-safe; this makes sharing one merely serial).
struct PyModel {
    std::unique_ptr<Model> model;
    std::recursive_mutex mutex;

    struct Access {
        std::unique_lock<std::recursive_mutex> lock;
        Model *model;
        Model *operator->() const { return model; }
        Model &operator*() const { return *model; }
    };
    Access get() {
        std::unique_lock<std::recursive_mutex> lock(mutex);
        if (!model) throw std::invalid_argument("this model has been closed");
        return Access{std::move(lock), model.get()};
    }
};

nb::dict config_dict(const Model &m) {
    const akunu::ModelConfig &c = m.config();
    nb::dict d;
    d["architecture"] = c.architecture;
    d["name"] = c.name;
    d["dim"] = c.dim;
    d["n_layers"] = c.n_layers;
    d["n_heads"] = c.n_heads;
    d["n_kv_heads"] = c.n_kv_heads;
    d["head_dim"] = c.head_dim;
    d["ffn_dim"] = c.ffn_dim;
    d["vocab_size"] = c.vocab_size;
    d["context_length"] = m.context_length();
    d["trained_context_length"] = c.max_seq_len;
    d["rope_theta"] = c.rope_theta;
    d["norm_eps"] = c.norm_eps;
    d["tie_embeddings"] = m.arch().tie_embeddings;
    d["rope_dim"] = c.rope_dim;
    d["sliding_window"] = c.sliding_window;
    nb::list sliding;
    for (uint8_t s : c.layer_sliding) sliding.append(s != 0);
    d["sliding_layers"] = sliding;
    d["attn_logit_softcap"] = c.attn_logit_softcap;
    d["final_logit_softcap"] = c.final_logit_softcap;
    d["embedding_scale"] = c.embedding_scale;
    return d;
}

nb::list table_list(const akunu::DispatchTable &t) {
    nb::list out;
    for (size_t i = 0; i < t.commands.size(); ++i) {
        nb::dict d;
        d["label"] = std::string(t.labels[i].text);
        d["kernel"] = t.kernel_names[i];
        d["patch"] = std::string(akunu::patch_type_name(t.commands[i].patch));
        d["units"] = (uint64_t)t.commands[i].grid.x * t.commands[i].grid.y * t.commands[i].grid.z;
        out.append(d);
    }
    return out;
}

// A memory plan (inference/memory_plan.h) as akunu.Model.memory_plan shows it.
nb::dict plan_dict(const akunu::MemoryPlan &plan, const char *backend) {
    nb::dict d;
    d["backend"] = std::string(backend);
    d["context_length"] = plan.context_length;
    d["weights_bytes"] = plan.weights;
    d["kv_cache_bytes"] = plan.kv_cache;
    d["scratch_bytes"] = plan.scratch;
    d["total_bytes"] = plan.total();
    d["available_bytes"] = plan.available.known() ? nb::object(nb::int_(plan.available.bytes)) : nb::none();
    d["available_source"] = plan.available.known() ? plan.available.source : std::string("unknown: no limit");
    d["fits"] = plan.fits();
    d["largest_context"] = plan.largest_context < 0 ? nb::none() : nb::object(nb::int_(plan.largest_context));
    d["prompt_cache_bytes"] = plan.prompt_cache_budget;
    return d;
}

akunu::LoadOptions load_options(const std::string &backend, int context_length, int threads,
                                const std::string &kv_cache_dtype, int64_t prompt_cache_bytes) {
    akunu::LoadOptions opt;
    opt.backend = backend;
    opt.context_length = context_length;
    opt.threads = threads;
    opt.prompt_cache_bytes = prompt_cache_bytes;
    if (!akunu::kv_cache_dtype_from_name(kv_cache_dtype, &opt.kv_cache_dtype))
        throw std::invalid_argument("kv_cache_dtype must be 'f16' or 'q8_0', got '" + kv_cache_dtype + "'");
    return opt;
}

// Model::plan for a GGUF path or an HFCheckpoint, with the GIL released, as a dict.
template <class Source> nb::dict plan_without_loading(const Source &source, akunu::LoadOptions options) {
    std::string backend;
    akunu::MemoryPlan plan;
    {
        nb::gil_scoped_release release;
        options.make_device = [&] {  // create_device's, remembering which backend "auto" chose
            auto device = akunu::create_device(options.backend, options.threads);
            backend = device->backend_name();
            return device;
        };
        plan = Model::plan(source, options);
    }
    return plan_dict(plan, backend.c_str());
}

// akunu.plan_memory(source, backend=, context_length=, ...) for one kind of source (overloads).
template <class Source> void def_plan_memory(nb::module_ &m, const char *source_name, const char *doc) {
    m.def(
        "plan_memory",
        [](const Source &source, const std::string &backend, int context_length, int threads,
           const std::string &kv_cache_dtype, int64_t prompt_cache_bytes) {
            return plan_without_loading(source, load_options(backend, context_length, threads, kv_cache_dtype,
                                                             prompt_cache_bytes));
        },
        nb::arg(source_name), nb::arg("backend") = "auto", nb::arg("context_length") = 0, nb::arg("threads") = 0,
        nb::arg("kv_cache_dtype") = "f16", nb::arg("prompt_cache_bytes") = -1, doc);
}

std::vector<int32_t> to_ids(const std::vector<int64_t> &ids) {
    std::vector<int32_t> out;
    out.reserve(ids.size());
    for (int64_t t : ids) {
        if (t < INT32_MIN || t > INT32_MAX) throw std::invalid_argument("token id " + std::to_string(t) + " is out of range");
        out.push_back((int32_t)t);
    }
    return out;
}

}  // namespace

void bind_model(nb::module_ &m) {
    m.def("built_backends", [] { return akunu::built_backends(); },
          "The backends compiled into this build of akunu: 'cpu', and 'cuda' when built with nvcc, 'metal' when "
          "built on macOS. "
          "Model(backend=...) takes one of them or \"auto\".");

    def_plan_memory<std::string>(m, "path",
                                 "The memory plan Model(path, ...) would make (a dict, as Model.memory_plan), allocating nothing.");
    def_plan_memory<akunu::HFCheckpoint>(m, "checkpoint",
                                         "The memory plan of a Hugging Face checkpoint (an HFCheckpoint), allocating nothing.");

    using akunu::SamplingConfig;
    nb::class_<SamplingConfig>(m, "SamplingConfig",
                               "The engine's side of akunu.SamplingParams (whose to_core() makes one): checked when "
                               "made, ValueError naming a setting out of its range.")
        .def(
            "__init__",
            [](SamplingConfig *self, float temperature, int top_k, float top_p, float min_p, float repeat_penalty,
               int repeat_last_n, float frequency_penalty, float presence_penalty, uint64_t seed, int max_tokens) {
                SamplingConfig c;
                c.temperature = temperature;
                c.top_k = top_k;
                c.top_p = top_p;
                c.min_p = min_p;
                c.repeat_penalty = repeat_penalty;
                c.repeat_last_n = repeat_last_n;
                c.frequency_penalty = frequency_penalty;
                c.presence_penalty = presence_penalty;
                c.seed = seed;
                c.max_tokens = max_tokens;
                c.validate();
                new (self) SamplingConfig(c);
            },
            nb::kw_only(), nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("min_p"),
            nb::arg("repeat_penalty"), nb::arg("repeat_last_n"), nb::arg("frequency_penalty"),
            nb::arg("presence_penalty"), nb::arg("seed"), nb::arg("max_tokens"))
        .def_ro("temperature", &SamplingConfig::temperature)
        .def_ro("top_k", &SamplingConfig::top_k)
        .def_ro("top_p", &SamplingConfig::top_p)
        .def_ro("min_p", &SamplingConfig::min_p)
        .def_ro("repeat_penalty", &SamplingConfig::repeat_penalty)
        .def_ro("repeat_last_n", &SamplingConfig::repeat_last_n)
        .def_ro("frequency_penalty", &SamplingConfig::frequency_penalty)
        .def_ro("presence_penalty", &SamplingConfig::presence_penalty)
        .def_ro("seed", &SamplingConfig::seed)
        .def_ro("max_tokens", &SamplingConfig::max_tokens);

    nb::class_<akunu::GenerationStats>(m, "GenerationStats", "Timing and token counts of the last generation.")
        .def_ro("prompt_tokens", &akunu::GenerationStats::prompt_tokens, "Tokens of the whole prompt.")
        .def_ro("cached_tokens", &akunu::GenerationStats::cached_tokens,
                "Prompt tokens reused from the KV cache or the prompt cache, not prefilled.")
        .def_ro("generated_tokens", &akunu::GenerationStats::generated_tokens)
        .def_ro("decode_steps", &akunu::GenerationStats::decode_steps)
        .def_ro("prefill_ms", &akunu::GenerationStats::prefill_ms,
                "Time to the first token: reusing the cached prefix, then prefilling the rest.")
        .def_ro("decode_ms", &akunu::GenerationStats::decode_ms)
        .def_prop_ro("prefill_tokens_per_sec", &akunu::GenerationStats::prefill_tokens_per_sec,
                     "Prefilled (not reused) prompt tokens per second of prefill_ms.")
        .def_prop_ro("decode_tokens_per_sec", &akunu::GenerationStats::decode_tokens_per_sec)
        .def("__repr__", [](const akunu::GenerationStats &s) {
            char buf[256];
            std::snprintf(buf, sizeof(buf),
                          "GenerationStats(prompt_tokens=%d, cached_tokens=%d, generated_tokens=%d, prefill_ms=%.1f, "
                          "decode_ms=%.1f, prefill_tokens_per_sec=%.1f, decode_tokens_per_sec=%.1f)",
                          s.prompt_tokens, s.cached_tokens, s.generated_tokens, s.prefill_ms, s.decode_ms,
                          s.prefill_tokens_per_sec(),
                          s.decode_tokens_per_sec());
            return std::string(buf);
        });

    nb::class_<PyModel>(m, "Model", "A loaded model (token-level core; see akunu.Model for the text API).")
        .def(
            "__init__",
            [](PyModel *self, const std::string &path, const std::string &backend, int context_length, int threads,
               const std::string &kv_cache_dtype, int64_t prompt_cache_bytes) {
                new (self) PyModel{Model::load(
                    path, load_options(backend, context_length, threads, kv_cache_dtype, prompt_cache_bytes))};
            },
            nb::arg("path"), nb::arg("backend") = "auto", nb::arg("context_length") = 0, nb::arg("threads") = 0,
            nb::arg("kv_cache_dtype") = "f16", nb::arg("prompt_cache_bytes") = -1,
            nb::call_guard<nb::gil_scoped_release>(),
            "Load a GGUF file. prompt_cache_bytes: host memory for recent conversations' KV caches (0: none, "
            "-1: the KV cache's size).")
        .def(
            "__init__",
            [](PyModel *self, const akunu::HFCheckpoint &checkpoint, const std::string &backend, int context_length,
               int threads, const std::string &kv_cache_dtype, int64_t prompt_cache_bytes) {
                new (self) PyModel{Model::load(
                    checkpoint, load_options(backend, context_length, threads, kv_cache_dtype, prompt_cache_bytes))};
            },
            nb::arg("checkpoint"), nb::arg("backend") = "auto", nb::arg("context_length") = 0, nb::arg("threads") = 0,
            nb::arg("kv_cache_dtype") = "f16", nb::arg("prompt_cache_bytes") = -1,
            nb::call_guard<nb::gil_scoped_release>(),
            "Load a Hugging Face checkpoint described by an HFCheckpoint (see akunu.hf_checkpoint).")
        .def(
            "close",
            [](PyModel &s) {
                std::lock_guard<std::recursive_mutex> lock(s.mutex);
                s.model.reset();
            },
            nb::call_guard<nb::gil_scoped_release>(), "Free the model's memory now.")
        .def_prop_ro("config", [](PyModel &s) { return config_dict(*s.get()); })
        .def_prop_ro("backend", [](PyModel &s) { return std::string(s.get()->device().backend_name()); })
        .def_prop_ro("device_name", [](PyModel &s) { return s.get()->device().name(); })
        .def_prop_ro("context_length", [](PyModel &s) { return s.get()->context_length(); })
        .def_prop_ro("position", [](PyModel &s) { return s.get()->position(); }, "Tokens in the KV cache.")
        .def_prop_ro("cached_tokens", [](PyModel &s) { return s.get()->cached_tokens(); },
                     "The token at each position of the KV cache (what the next session may reuse).")
        .def_prop_ro("reusable_length", [](PyModel &s) { return s.get()->reusable_length(); },
                     "How many of cached_tokens a next prompt could keep (on CUDA only the last prompt's: "
                     "decode steps round otherwise than a prefill).")
        .def_prop_ro("prompt_cache_bytes", [](PyModel &s) { return s.get()->prompt_cache().budget_bytes(); },
                     "Host memory the prompt cache may use for saved conversations (0: off).")
        .def_prop_ro("prompt_cache_used_bytes", [](PyModel &s) { return s.get()->prompt_cache().used_bytes(); },
                     "Host memory the saved conversations use now.")
        .def_prop_ro("prompt_cache_entries", [](PyModel &s) { return s.get()->prompt_cache().entries(); },
                     "Conversations saved in the prompt cache.")
        .def_prop_ro("tokenizer", [](PyModel &s) -> nb::object {
            auto tok = s.get()->tokenizer();  // null for Hugging Face checkpoints: Python supplies one
            if (!tok) return nb::none();
            return make_py_tokenizer(std::const_pointer_cast<akunu::Tokenizer>(tok));
        })
        .def_prop_ro("loader_owned_bytes", [](PyModel &s) { return s.get()->weights().owned_bytes(); },
                     "Weight bytes the loader keeps in its own memory (converted or reordered checkpoint "
                     "tensors the device reads in place); the rest is mapped from the files or on the device.")
        .def_prop_ro("format", [](PyModel &s) { return s.get()->weights().format(); },
                     "Where the weights came from: \"gguf\", \"safetensors\" or \"mlx\".")
        .def_prop_ro("chat_template", [](PyModel &s) { return s.get()->chat_template(); })
        .def_prop_ro("dispatch_table", [](PyModel &s) { return table_list(s.get()->decode_table()); },
                     "The decode dispatch table: one dict (label, kernel, patch, units) per command.")
        .def_prop_ro("table_builds", [](PyModel &s) { return s.get()->table_builds(); })
        .def_prop_ro("forced_run_tables", [](PyModel &s) { return s.get()->forced_run_tables(); },
                     "Row counts of the forced-run prefill tables kept so far (grammar-constrained decoding)")
        .def_prop_ro("kv_cache_bytes", [](PyModel &s) { return s.get()->kv_cache_bytes(); })
        .def_prop_ro("weight_bytes", [](PyModel &s) { return s.get()->weight_bytes(); },
                     "Bytes of the weights as the device holds them (owned buffers and the file's bytes it reads in "
                     "place).")
        .def_prop_ro("scratch_bytes", [](PyModel &s) { return s.get()->scratch_bytes(); },
                     "Bytes of the scratch buffers (activations, logits, the sampling state).")
        .def_prop_ro(
            "memory_plan",
            [](PyModel &s) {
                auto m = s.get();
                nb::dict d = plan_dict(m->memory_plan(), m->device().backend_name());
                d["prompt_cache_bytes"] = m->prompt_cache().budget_bytes();
                return d;
            },
            "The memory plan checked before anything was allocated (docs/adr/0021-memory-plan.md): context_length, "
            "weights_bytes, kv_cache_bytes, scratch_bytes, total_bytes, available_bytes (None: not known), "
            "available_source, fits, largest_context (None: not known), prompt_cache_bytes (host memory, not in "
            "the total) and backend.")
        .def_prop_ro("kv_cache_dtype",
                     [](PyModel &s) { return std::string(akunu::kv_cache_dtype_name(s.get()->kv_cache_dtype())); },
                     "Element type of the KV cache: \"f16\" or \"q8_0\" (8-bit blocks of 32, half the memory).")
        .def_prop_ro("stats", [](PyModel &s) { return s.get()->stats(); })
        .def("reset", [](PyModel &s) { s.get()->reset(); }, "Empty the KV cache and the prompt cache.")
        .def(
            "prefill", [](PyModel &s, const std::vector<int64_t> &tokens) { return s.get()->prefill(to_ids(tokens)); },
            nb::arg("tokens"), nb::call_guard<nb::gil_scoped_release>(),
            "Run tokens at the current position; returns the argmax next token.")
        .def(
            "decode_step", [](PyModel &s, int64_t token) { return s.get()->decode_step(to_ids({token})[0]); },
            nb::arg("token"), nb::call_guard<nb::gil_scoped_release>(),
            "Feed one token through the dispatch table; returns the argmax next token.")
        .def(
            "chain_decode",
            [](PyModel &s, int64_t token, int count) { return s.get()->chain_decode(to_ids({token})[0], count); },
            nb::arg("token"), nb::arg("count"), nb::call_guard<nb::gil_scoped_release>(),
            "Greedy-decode `count` tokens in chained replays, starting by feeding `token`.")
        .def(
            "profile_decode_step",
            [](PyModel &s, int64_t token) {
                std::vector<double> ms;
                {
                    nb::gil_scoped_release release;
                    ms = s.get()->profile_decode_step(to_ids({token})[0]);
                }
                const akunu::DispatchTable &t = s.get()->decode_table();
                nb::list out;
                for (size_t i = 0; i < ms.size(); ++i)
                    out.append(nb::make_tuple(std::string(t.labels[i].text), t.kernel_names[i], ms[i]));
                return out;
            },
            nb::arg("token"),
            "Feed one token through the decode table, timing each command: [(label, kernel, ms), ...].")
        .def(
            "logits",
            [](PyModel &s, const std::vector<int64_t> &tokens, size_t first) {
                std::vector<float> *data;
                size_t vocab;
                {
                    nb::gil_scoped_release release;
                    data = new std::vector<float>(s.get()->evaluate_logits(to_ids(tokens), first));
                    vocab = s.get()->config().vocab_size;
                }
                nb::capsule owner(data, [](void *p) noexcept { delete static_cast<std::vector<float> *>(p); });
                return nb::ndarray<nb::numpy, float, nb::ndim<2>>(data->data(), {tokens.size() - first, vocab}, owner);
            },
            nb::arg("tokens"), nb::arg("first") = 0,
            "Teacher-forced logits of positions first.. of tokens, from a fresh cache: float32 array\n"
            "[len(tokens) - first, vocab].")
        .def(
            "_last_logits",
            [](PyModel &s) {
                std::vector<float> *data;
                {
                    nb::gil_scoped_release release;
                    data = new std::vector<float>(s.get()->last_logits());
                }
                nb::capsule owner(data, [](void *p) noexcept { delete static_cast<std::vector<float> *>(p); });
                return nb::ndarray<nb::numpy, float, nb::ndim<1>>(data->data(), {data->size()}, owner);
            },
            "The logits the last forward pass left for its last position: float32 [vocab] (the model's after a "
            "greedy prefill or decode; a grammar's mask or the repetition penalty change them in place).")
        .def(
            "_begin",
            [](PyModel &s, const std::vector<int64_t> &prompt, const akunu::SamplingConfig &sampling) {
                std::vector<int32_t> ids = to_ids(prompt);
                nb::gil_scoped_release release;
                s.get()->begin_generation(ids, sampling);
            },
            nb::arg("prompt"), nb::arg("sampling"),
            "Start a generation session (akunu.Model.stream and the like call this), reusing the cached prefix it "
            "shares with the prompt; _next_tokens() continues it.")
        .def("_next_tokens", [](PyModel &s) { return s.get()->next_tokens(); }, nb::call_guard<nb::gil_scoped_release>())
        // A grammar-constrained session (akunu.Model with grammar=, python/akunu/constrained.py).
        .def(
            "_begin_constrained",
            [](PyModel &s, const std::vector<int64_t> &prompt, const akunu::SamplingConfig &sampling) {
                std::vector<int32_t> ids = to_ids(prompt);
                nb::gil_scoped_release release;
                s.get()->begin_constrained(ids, sampling);
            },
            nb::arg("prompt"), nb::arg("sampling"),
            "Prefill `prompt` (past the cached prefix it shares) for a grammar-constrained session.")
        .def(
            "_choose_token",
            [](PyModel &s, nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> mask) {
                const uint32_t *words = reinterpret_cast<const uint32_t *>(mask.data());
                const size_t n = mask.shape(0);
                nb::gil_scoped_release release;
                return s.get()->choose_token(words, n);
            },
            nb::arg("mask"),
            "The next token among those whose bit is set in `mask` (int32 [token_mask_words], llguidance's layout).")
        .def(
            "_feed",
            [](PyModel &s, const std::vector<int64_t> &tokens) {
                std::vector<int32_t> ids = to_ids(tokens);
                nb::gil_scoped_release release;
                s.get()->feed(ids);
            },
            nb::arg("tokens"), "Append the chosen (and forced) tokens and start their forward pass.")
        .def(
            "_end_constrained",
            [](PyModel &s, int generated, const std::string &reason) { s.get()->end_constrained(generated, reason); },
            nb::arg("generated"), nb::arg("reason"), nb::call_guard<nb::gil_scoped_release>())
        .def_prop_ro("token_mask_words", [](PyModel &s) { return s.get()->token_mask_words(); },
                     "Words of a grammar's token mask: (vocab_size + 31) // 32.")
        .def_prop_ro("finish_reason", [](PyModel &s) { return s.get()->finish_reason(); })
        .def_prop_ro("tensors", [](PyModel &s) {
            nb::list out;
            for (const akunu::TensorView &t : s.get()->weights().all_tensors()) {
                nb::list dims;
                for (uint64_t d : t.dims) dims.append(d);
                out.append(nb::make_tuple(t.file_name, std::string(akunu::dtype_name(t.dtype)), dims, t.n_bytes));
            }
            return out;
        });
}
