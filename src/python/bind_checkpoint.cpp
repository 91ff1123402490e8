// akunu._core.HFCheckpoint (+ ModelConfig, CheckpointTensor, CheckpointSlice): the plain table
// python/akunu/hf_checkpoint.py fills from a Hugging Face checkpoint directory.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "weights/hf_checkpoint.h"

namespace nb = nanobind;

void bind_checkpoint(nb::module_ &m) {
    using akunu::CheckpointSlice;
    using akunu::CheckpointTensor;
    using akunu::HFCheckpoint;
    using akunu::ModelConfig;

    nb::class_<ModelConfig>(m, "ModelConfig", "Model hyper-parameters (filled from config.json for checkpoints).")
        .def(nb::init<>())
        .def_rw("architecture", &ModelConfig::architecture)
        .def_rw("name", &ModelConfig::name)
        .def_rw("dim", &ModelConfig::dim)
        .def_rw("n_layers", &ModelConfig::n_layers)
        .def_rw("n_heads", &ModelConfig::n_heads)
        .def_rw("n_kv_heads", &ModelConfig::n_kv_heads)
        .def_rw("head_dim", &ModelConfig::head_dim)
        .def_rw("rope_dim", &ModelConfig::rope_dim)
        .def_rw("ffn_dim", &ModelConfig::ffn_dim)
        .def_rw("vocab_size", &ModelConfig::vocab_size)
        .def_rw("max_seq_len", &ModelConfig::max_seq_len)
        .def_rw("norm_eps", &ModelConfig::norm_eps)
        .def_rw("rope_theta", &ModelConfig::rope_theta)
        .def_rw("rope_inv_freq", &ModelConfig::rope_inv_freq)
        .def_rw("rope_inv_freq_local", &ModelConfig::rope_inv_freq_local)
        .def_rw("attention_scale", &ModelConfig::attention_scale)
        .def_rw("embedding_scale", &ModelConfig::embedding_scale)
        .def_rw("attn_logit_softcap", &ModelConfig::attn_logit_softcap)
        .def_rw("final_logit_softcap", &ModelConfig::final_logit_softcap)
        .def_rw("sliding_window", &ModelConfig::sliding_window)
        .def_rw("layer_sliding", &ModelConfig::layer_sliding);

    nb::class_<CheckpointSlice>(m, "CheckpointSlice", "One tensor's bytes inside a .safetensors file.")
        .def(nb::init<>())
        .def_rw("file", &CheckpointSlice::file)
        .def_rw("name", &CheckpointSlice::name)
        .def_rw("dtype", &CheckpointSlice::dtype)
        .def_rw("shape", &CheckpointSlice::shape)
        .def_rw("offset", &CheckpointSlice::offset)
        .def_rw("n_bytes", &CheckpointSlice::n_bytes);

    nb::class_<CheckpointTensor>(m, "CheckpointTensor", "A canonical tensor and how to build it from the files.")
        .def(nb::init<>())
        .def_rw("canonical", &CheckpointTensor::canonical)
        .def_rw("data", &CheckpointTensor::data)
        .def_rw("bits", &CheckpointTensor::bits)
        .def_rw("group_size", &CheckpointTensor::group_size)
        .def_rw("scales", &CheckpointTensor::scales)
        .def_rw("biases", &CheckpointTensor::biases)
        .def_rw("permute_heads", &CheckpointTensor::permute_heads)
        .def_rw("add_one", &CheckpointTensor::add_one);

    nb::class_<HFCheckpoint>(m, "HFCheckpoint", "A Hugging Face checkpoint directory as a plain table.")
        .def(nb::init<>())
        .def_rw("path", &HFCheckpoint::path)
        .def_rw("format", &HFCheckpoint::format)
        .def_rw("config", &HFCheckpoint::config)
        // A copy, not views into the vector: assigning the list back reallocates it, which would
        // leave element views dangling. Edit the copy and assign it back.
        .def_prop_rw(
            "tensors", [](const HFCheckpoint &c) { return c.tensors; },
            [](HFCheckpoint &c, std::vector<CheckpointTensor> v) { c.tensors = std::move(v); })
        .def_rw("eog_ids", &HFCheckpoint::eog_ids);
}
