// akunu._testing.mlx_convert: the loader's conversion of one MLX-quantized matrix
// (weights/mlx_quant.h), read back through the CPU kernels' dequantization. For
// tests/test_mlx_checkpoints.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/dequantize.h"
#include "core/dtype.h"
#include "python/bind_testing.h"
#include "weights/mlx_quant.h"

namespace nb = nanobind;
using namespace nb::literals;
using akunu::testing::owner_of;

namespace {

akunu::DType scale_dtype_from(const std::string &name) {
    if (name == "F16") return akunu::DType::F16;
    if (name == "BF16") return akunu::DType::BF16;
    if (name == "F32") return akunu::DType::F32;
    throw std::invalid_argument("scale dtype must be F16, BF16 or F32, got '" + name + "'");
}

}  // namespace

void bind_testing_checkpoint(nb::module_ &m) {
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
            auto *values = new std::vector<float>((size_t)rows * cols);
            akunu::cpu::dequantize_row(c.dtype, c.bytes.data(), values->data(), (int64_t)values->size());
            nb::ndarray<nb::numpy, float, nb::ndim<2>> array(values->data(), {rows, cols}, owner_of(values));
            return nb::make_tuple(std::string(akunu::dtype_name(c.dtype)), array);
        },
        "packed"_a, "scales"_a, "biases"_a, "scale_dtype"_a, "rows"_a, "cols"_a, "bits"_a, "group_size"_a,
        "Convert one MLX-quantized matrix as the loader does; returns (dtype the engine runs it as, the "
        "converted values as float32 [rows, cols]).");
}
