// akunu._core.HFCheckpoint (+ ModelConfig, CheckpointTensor, CheckpointSlice): the plain table
// python/akunu/hf_checkpoint.py fills from a Hugging Face checkpoint directory, and
// mlx_convert(), the load-time MLX conversion exposed for tests.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "weights/hf_checkpoint.h"
#include "weights/mlx_quant.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

akunu::DType scale_dtype_from(const std::string &name) {
    if (name == "F16") return akunu::DType::F16;
    if (name == "BF16") return akunu::DType::BF16;
    if (name == "F32") return akunu::DType::F32;
    throw std::invalid_argument("scale dtype must be F16, BF16 or F32, got '" + name + "'");
}

// The converted matrix read back as float32 (Q4_1 blocks decoded as the kernels do).
std::vector<float> converted_to_f32(const akunu::ConvertedMatrix &c, size_t n) {
    std::vector<float> out(n);
    const uint8_t *p = c.bytes.data();
    if (c.dtype == akunu::DType::F32) {
        std::memcpy(out.data(), p, n * 4);
    } else if (c.dtype == akunu::DType::F16) {
        for (size_t i = 0; i < n; ++i) {
            uint16_t h;
            std::memcpy(&h, p + 2 * i, 2);
            out[i] = akunu::half_bits_to_float(h);
        }
    } else {  // Q4_1
        const auto *blocks = reinterpret_cast<const akunu::BlockQ4_1 *>(p);
        for (size_t b = 0; b < n / akunu::QK4_1; ++b) {
            const float d = akunu::half_bits_to_float(blocks[b].d), m = akunu::half_bits_to_float(blocks[b].m);
            for (int j = 0; j < akunu::QK4_1 / 2; ++j) {
                out[b * akunu::QK4_1 + j] = (float)(blocks[b].qs[j] & 0xf) * d + m;
                out[b * akunu::QK4_1 + j + 16] = (float)(blocks[b].qs[j] >> 4) * d + m;
            }
        }
    }
    return out;
}

}  // namespace

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

    m.def(
        "mlx_convert",
        [](nb::bytes packed, nb::bytes scales, nb::bytes biases, const std::string &scale_dtype, uint32_t rows,
           uint32_t cols, uint32_t bits, uint32_t group_size) {
            if (bits < 2 || bits > 8 || group_size == 0 || cols % group_size != 0 || (uint64_t)cols * bits % 32 != 0)
                throw std::invalid_argument("bad bits/group_size/cols combination");
            akunu::MLXQuantMatrix q;
            q.scale_dtype = scale_dtype_from(scale_dtype);
            q.rows = rows;
            q.cols = cols;
            q.bits = bits;
            q.group_size = group_size;
            const size_t groups = (size_t)rows * (cols / group_size);
            const size_t ssize = q.scale_dtype == akunu::DType::F32 ? 4 : 2;
            if (packed.size() != (size_t)rows * q.row_stride() || scales.size() != groups * ssize ||
                biases.size() != groups * ssize)
                throw std::invalid_argument("packed/scales/biases sizes do not match rows, cols, bits and group_size");
            q.packed = static_cast<const uint8_t *>(packed.data());
            q.scales = static_cast<const uint8_t *>(scales.data());
            q.biases = static_cast<const uint8_t *>(biases.data());
            akunu::ConvertedMatrix c = akunu::convert_mlx_matrix(q);
            auto *values = new std::vector<float>(converted_to_f32(c, (size_t)rows * cols));
            nb::capsule owner(values, [](void *p) noexcept { delete static_cast<std::vector<float> *>(p); });
            return nb::make_tuple(std::string(akunu::dtype_name(c.dtype)),
                                  nb::ndarray<nb::numpy, float, nb::ndim<2>>(values->data(), {rows, cols}, owner));
        },
        "packed"_a, "scales"_a, "biases"_a, "scale_dtype"_a, "rows"_a, "cols"_a, "bits"_a, "group_size"_a,
        "Convert one MLX-quantized matrix as the loader does; returns (dtype the engine runs it as, the "
        "converted values as float32 [rows, cols]).");
}
