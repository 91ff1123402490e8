// akunu._testing's CPU row kernels (src/backend/cpu/: dequantize.h, gemm_tiles.h, repacked_layout.h,
// act_quant.h, vec_math.h) on raw bytes: dequantize a GGUF row, run gemm_rows on raw weight rows
// (file layout or the load-time repacked one), and the vector exp / SiLU. For
// tests/test_quant_kernels.py and test_vec_math.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/act_quant.h"
#include "backend/cpu/dequantize.h"
#include "backend/cpu/dtypes.h"
#include "backend/cpu/gemm_tiles.h"
#include "backend/cpu/repacked_layout.h"
#include "backend/cpu/simd_config.h"
#include "backend/cpu/vec_math.h"
#include "core/dtype.h"
#include "python/bind_testing.h"

namespace nb = nanobind;
using akunu::DType;
using akunu::testing::FloatMatrix;
using akunu::testing::FloatVector;
using akunu::testing::owner_of;

namespace {

// A dtype the CPU kernels run, looked up by GGML name, with its layout facts.
struct KernelDType {
    DType type;
    const akunu::DTypeInfo *info;
};

KernelDType kernel_dtype(const std::string &name) {
    DType t;
    if (!akunu::cpu::dtype_from_name(name, &t) || !akunu::cpu::cpu_supports_dtype(t))
        throw nb::value_error(("unknown or unsupported weight dtype '" + name + "'").c_str());
    const akunu::DTypeInfo *info = akunu::dtype_info(static_cast<uint32_t>(t));
    if (!info) throw nb::value_error(("no layout for dtype '" + name + "'").c_str());
    return {t, info};
}

void check_row_length(const KernelDType &d, int64_t n, const char *what) {
    if (n <= 0 || n % d.info->block_size != 0)
        throw nb::value_error((std::string(what) + " must be a positive multiple of " + std::to_string(d.info->block_size) +
                               " for " + d.info->name + ", got " + std::to_string(n))
                                  .c_str());
}

}  // namespace

void bind_testing_kernels(nb::module_ &m) {
    m.def(
        "dequantize",
        [](const std::string &dtype_name, nb::bytes raw, int64_t n) {
            const KernelDType d = kernel_dtype(dtype_name);
            check_row_length(d, n, "n");
            const size_t expected = akunu::row_bytes(*d.info, (uint64_t)n);
            if (raw.size() != expected)
                throw nb::value_error(("raw holds " + std::to_string(raw.size()) + " bytes; " + std::to_string(n) +
                                       " elements of " + d.info->name + " need " + std::to_string(expected))
                                          .c_str());
            auto *out = new std::vector<float>((size_t)n);
            {
                nb::gil_scoped_release release;
                akunu::cpu::dequantize_row(d.type, raw.c_str(), out->data(), n);
            }
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(out->data(), {(size_t)n}, owner_of(out));
        },
        nb::arg("dtype_name"), nb::arg("raw"), nb::arg("n"),
        "Dequantize n elements of raw GGUF data of the named dtype into a float32 array.");

    m.def(
        "gemm",
        [](const std::string &dtype_name, nb::bytes w_raw, int64_t n_rows, int64_t k, FloatMatrix x, bool repacked,
           int64_t row_chunk) {
            const KernelDType d = kernel_dtype(dtype_name);
            check_row_length(d, k, "k");
            if (n_rows <= 0) throw nb::value_error("n_rows must be positive");
            if (repacked && !akunu::cpu::has_repacked_layout(d.type)) throw nb::value_error("dtype has no repacked layout");
            if ((int64_t)x.shape(1) != k)
                throw nb::value_error(("x has " + std::to_string(x.shape(1)) + " columns, expected k = " + std::to_string(k)).c_str());
            const size_t w_row_bytes = akunu::row_bytes(*d.info, (uint64_t)k);
            if (w_raw.size() != w_row_bytes * (size_t)n_rows)
                throw nb::value_error(("w_raw holds " + std::to_string(w_raw.size()) + " bytes; " + std::to_string(n_rows) +
                                       " rows of " + std::to_string(k) + " " + d.info->name + " need " +
                                       std::to_string(w_row_bytes * (size_t)n_rows))
                                          .c_str());
            const int64_t M = (int64_t)x.shape(0);
            auto *y = new std::vector<float>((size_t)(M * n_rows));
            {
                nb::gil_scoped_release release;
                // Activations in the format the dot product wants (integer blocks for quantized weights).
                std::vector<uint8_t> x_quantized;
                const uint8_t *x_rows = reinterpret_cast<const uint8_t *>(x.data());
                size_t x_row_bytes = (size_t)k * sizeof(float);
                if (repacked) {
                    x_row_bytes = akunu::cpu::repacked_act_row_bytes(d.type, k);
                    x_quantized.resize((size_t)M * x_row_bytes);
                    for (int64_t r = 0; r < M; ++r)
                        akunu::cpu::quantize_row_act_repacked(d.type, x.data() + r * k, x_quantized.data() + r * x_row_bytes, k);
                    x_rows = x_quantized.data();
                } else if (akunu::cpu::act_format_for(d.type) == akunu::cpu::ActFormat::Q16Act) {
                    x_row_bytes = (size_t)(k / akunu::QK_ACT) * sizeof(akunu::BlockQ16Act);
                    x_quantized.resize((size_t)M * x_row_bytes);
                    for (int64_t r = 0; r < M; ++r)
                        akunu::cpu::quantize_row_act(x.data() + r * k,
                                                     reinterpret_cast<akunu::BlockQ16Act *>(x_quantized.data() + r * x_row_bytes), k);
                    x_rows = x_quantized.data();
                }
                akunu::cpu::GemmArgs args{d.type,      reinterpret_cast<const uint8_t *>(w_raw.c_str()),
                                          w_row_bytes, x_rows,
                                          x_row_bytes, y->data(),
                                          (size_t)n_rows, k,
                                          M,           false};
                std::vector<uint8_t> packed;
                if (repacked) {
                    packed.resize(akunu::cpu::repacked_bytes(d.type, n_rows, k));
                    akunu::cpu::repack_weights(d.type, w_raw.c_str(), packed.data(), n_rows, k);
                    args.w = packed.data();
                    args.repacked = true;
                }
                const int64_t step = row_chunk > 0 ? row_chunk : n_rows;
                if (M > 0)
                    for (int64_t n = 0; n < n_rows; n += step) akunu::cpu::gemm_rows(args, n, std::min(n_rows, n + step));
            }
            return nb::ndarray<nb::numpy, float, nb::ndim<2>>(y->data(), {(size_t)M, (size_t)n_rows}, owner_of(y));
        },
        nb::arg("dtype_name"), nb::arg("w_raw"), nb::arg("n_rows"), nb::arg("k"), nb::arg("x"),
        nb::arg("repacked") = false, nb::arg("row_chunk") = 0,
        "y[M, N] = x[M, K] @ W[N, K]^T with W given as raw GGUF rows of the named dtype. x is float32; for "
        "quantized weights it is quantized per row first (quantize_row_act, or quantize_row_act_q8x2 for the r16 "
        "layout), as the engine does. repacked: run the build's load-time repacked layout (repack_weights; "
        "repacked_dtypes()) instead. row_chunk > 0: "
        "compute the rows in consecutive ranges of that many rows (as threads split them).");

    m.def(
        "repacked_layout",
        [] { return akunu::cpu::repack_row_group(akunu::DType::Q4_0) == 16 ? "r16" : "r8"; },
        "The load-time layout this build repacks Q4_0 / Q4_1 / Q8_0 into: 'r16' (AVX-512 VNNI, two-digit int8 "
        "activations) or 'r8' (int16 activations).");
    m.def(
        "repacked_dtypes",
        [] {
            std::vector<std::string> names;
            for (uint32_t code = 0; code < 64; ++code) {
                const akunu::DTypeInfo *info = akunu::dtype_info(code);
                if (info && akunu::cpu::has_repacked_layout(static_cast<DType>(code))) names.push_back(info->name);
            }
            return names;
        },
        "Names of the weight dtypes this build repacks at load (r8: Q4_0 / Q4_1 / Q8_0; r16, and r8 with AVX2, also "
        "Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS).");
    m.def("cpu_simd", [] { return std::string(akunu::cpu::compiled_simd_level()); },
          "The SIMD level the engine's CPU kernels were compiled for: 'avx512vnni', 'avx2' or 'scalar' "
          "(src/backend/cpu/simd_config.h).");
    m.def(
        "dequantize_repacked",
        [](const std::string &dtype_name, nb::bytes raw, int64_t n_rows, int64_t k) {
            const KernelDType d = kernel_dtype(dtype_name);
            check_row_length(d, k, "k");
            if (!akunu::cpu::has_repacked_layout(d.type)) throw nb::value_error("dtype has no repacked layout");
            const size_t w_row_bytes = akunu::row_bytes(*d.info, (uint64_t)k);
            if (n_rows <= 0 || raw.size() != w_row_bytes * (size_t)n_rows) throw nb::value_error("raw size != n_rows rows");
            auto *out = new std::vector<float>((size_t)(n_rows * k));
            {
                nb::gil_scoped_release release;
                std::vector<uint8_t> packed(akunu::cpu::repacked_bytes(d.type, n_rows, k));
                akunu::cpu::repack_weights(d.type, raw.c_str(), packed.data(), n_rows, k);
                for (int64_t r = 0; r < n_rows; ++r)
                    akunu::cpu::dequantize_row_repacked(d.type, packed.data(), r, out->data() + r * k, k);
            }
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(out->data(), {(size_t)(n_rows * k)}, owner_of(out));
        },
        nb::arg("dtype_name"), nb::arg("raw"), nb::arg("n_rows"), nb::arg("k"),
        "Repack n_rows GGUF rows (repack_weights) and dequantize every row back out of the repacked layout.");
    m.def(
        "exp_shifted",
        [](FloatVector x, float shift) {
            const uint32_t n = (uint32_t)x.shape(0);
            auto *out = new std::vector<float>(n);
            const float sum = akunu::cpu::exp_shifted_sum(x.data(), shift, out->data(), n);
            return nb::make_tuple(nb::ndarray<nb::numpy, float, nb::ndim<1>>(out->data(), {(size_t)n}, owner_of(out)), sum);
        },
        nb::arg("x"), nb::arg("shift"), "(exp(x - shift), its sum) through the CPU kernels' vector exp.");
    m.def(
        "silu_mul",
        [](FloatVector gate, FloatVector up) {
            if (gate.shape(0) != up.shape(0)) throw nb::value_error("gate and up differ in length");
            const uint32_t n = (uint32_t)gate.shape(0);
            auto *out = new std::vector<float>(n);
            akunu::cpu::silu_mul(gate.data(), up.data(), out->data(), n);
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(out->data(), {(size_t)n}, owner_of(out));
        },
        nb::arg("gate"), nb::arg("up"), "silu(gate) * up through the CPU kernels' vector math.");

}
