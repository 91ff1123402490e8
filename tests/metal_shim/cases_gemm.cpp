// GEMM / GEMV (metal/gemm.metal) against y = x . W^T computed in double from the weight rows as the
// CPU backend dequantizes them (akunu::cpu::dequantize_row), with the input RMSNorm and the gated
// activations as the CPU's rmsnorm_f32 / silu_mul_f32 / gelu_tanh_mul_f32 define them. The shapes
// are the table builder's (emit_matmul): one to three parts, the grid ceil(total rows /
// rows_per_unit), decode (M = 1) with its fusions and prefill tiles with tails.
#include <cctype>
#include <cmath>
#include <stdexcept>

#include "backend/cpu/dequantize.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "kernel_case.h"
#include "random_weights.h"

using namespace metal_check;

namespace {

// The float dtypes run every shape; the block formats (random valid blocks: random_weights.h)
// the shapes of kBlockShapes with K a multiple of 256 (the K-quants' superblock): the decoders are
// checked element by element by the embedding cases, what is left is their place in the GEMM.
const char *const kFloatDTypes[] = {"F32", "F16", "BF16"};
const char *const kBlockDTypes[] = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL",
                                    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"};

akunu::DType dtype_by_name(const std::string &name) {
    for (uint32_t code = 0; code < 64; ++code) {
        const akunu::DTypeInfo *info = akunu::dtype_info(code);
        if (info && name == info->name) return (akunu::DType)code;
    }
    throw std::invalid_argument("unknown dtype " + name);
}

size_t dtype_row_bytes(const std::string &dtype, size_t cols) {
    return akunu::row_bytes(*akunu::dtype_info((uint32_t)dtype_by_name(dtype)), cols);
}

std::string lowercase(std::string s) {
    for (char &c : s) c = (char)std::tolower((unsigned char)c);
    return s;
}

uint16_t f32_to_bf16(float f) {  // round to nearest even (finite inputs)
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// `rows` GGUF weight rows of `cols` elements of the dtype, reproducible per seed.
Bytes weight_rows(const std::string &dtype, size_t rows, size_t cols, uint32_t seed) {
    const std::vector<float> v = random_floats(rows * cols, seed, 0.5f);
    if (dtype == "F32") return to_bytes(v);
    std::vector<uint16_t> h(v.size());
    if (dtype == "F16") {
        for (size_t i = 0; i < v.size(); ++i) h[i] = akunu::float_to_half_bits(v[i]);
        return to_bytes(h);
    }
    if (dtype == "BF16") {
        for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
        return to_bytes(h);
    }
    return random_weight_rows(lowercase(dtype), rows, cols, seed);
}


struct GemmShape {
    std::string what;  // the label's tail
    uint32_t M, K;
    std::vector<uint32_t> N;  // rows of each part
    uint32_t rows_per_unit;
    bool accumulate = false;
    uint32_t input_op = akunu::kGemmInputAsIs;
    uint32_t output_op = akunu::kGemmOutputPlain;
    uint32_t x_pad = 0, y_pad = 0;  // floats past each x / y row (strided rows)
    float x_scale = 1.0f;
};

double gated(uint32_t op, double gate, double up) {
    if (op == akunu::kGemmOutputGeluTanhMul) {
        const double k = 0.7978845608028654;  // sqrt(2 / pi)
        return 0.5 * gate * (1.0 + std::tanh(k * (gate + 0.044715 * gate * gate * gate))) * up;
    }
    return gate / (1.0 + std::exp(-gate)) * up;
}

// y as the command defines it, from the case's buffers: 0 x, 1 y, 2.. weights, then the norm weight.
void reference_gemm(const std::string &dtype, const akunu::GemmParams &p, std::vector<Bytes> &b) {
    const akunu::DType t = dtype_by_name(dtype);
    const std::vector<float> x_all = from_bytes<float>(b[0]);
    std::vector<float> y = from_bytes<float>(b[1]);
    const size_t x_row_floats = p.x_row_bytes / 4;
    // The input the weights see, row by row (RMS-normalized when the command says so).
    std::vector<std::vector<double>> x(p.M, std::vector<double>(p.K));
    for (uint32_t m = 0; m < p.M; ++m) {
        const float *row = x_all.data() + m * x_row_floats;
        double scale = 1.0;
        if (p.input_op == akunu::kGemmInputRMSNorm) {
            double sum_sq = 0;
            for (uint32_t k = 0; k < p.K; ++k) sum_sq += (double)row[k] * row[k];
            scale = 1.0 / std::sqrt(sum_sq / p.K + p.eps);
        }
        const std::vector<float> norm_w = p.input_op == akunu::kGemmInputRMSNorm ? from_bytes<float>(b[2 + p.n_parts])
                                                                                 : std::vector<float>(p.K, 1.0f);
        for (uint32_t k = 0; k < p.K; ++k) x[m][k] = row[k] * scale * norm_w[k];
    }
    // dot(x row m, weight row n of part i), from the CPU's dequantized row.
    std::vector<float> w_row(p.K);
    auto dot = [&](uint32_t part, uint32_t n, uint32_t m) {
        akunu::cpu::dequantize_row(t, b[2 + part].data() + (size_t)n * p.w_row_bytes[part], w_row.data(), p.K);
        double s = 0;
        for (uint32_t k = 0; k < p.K; ++k) s += (double)w_row[k] * x[m][k];
        return s;
    };
    if (p.output_op != akunu::kGemmOutputPlain) {
        for (uint32_t i = 0; i < p.N[0]; ++i) y[p.y_col[0] + i] = (float)gated(p.output_op, dot(0, i, 0), dot(1, i, 0));
    } else {
        for (uint32_t part = 0; part < p.n_parts; ++part)
            for (uint32_t n = 0; n < p.N[part]; ++n)
                for (uint32_t m = 0; m < p.M; ++m) {
                    float &out = y[(size_t)m * p.y_stride + p.y_col[part] + n];
                    const double s = dot(part, n, m);
                    out = (float)(p.accumulate ? out + s : s);
                }
    }
    b[1] = to_bytes(y);
}

KernelCase gemm_case(const std::string &dtype, const GemmShape &s, uint32_t seed) {
    akunu::GemmParams p{};
    p.M = s.M;
    p.K = s.K;
    p.n_parts = (uint32_t)s.N.size();
    uint32_t total_rows = 0, y_col = 0;
    for (uint32_t i = 0; i < p.n_parts; ++i) {
        p.N[i] = s.N[i];
        p.y_col[i] = y_col;
        p.w_row_bytes[i] = (uint32_t)dtype_row_bytes(dtype, s.K);
        total_rows += s.N[i];
        // A gated command writes act(gate) * up over the gate's columns only.
        if (s.output_op == akunu::kGemmOutputPlain) y_col += s.N[i];
    }
    if (s.output_op != akunu::kGemmOutputPlain) y_col = s.N[0];
    p.x_row_bytes = (s.K + s.x_pad) * 4;
    p.y_stride = y_col + s.y_pad;
    p.accumulate = s.accumulate ? 1 : 0;
    p.rows_per_unit = s.rows_per_unit;
    p.input_op = s.input_op;
    p.output_op = s.output_op;
    p.eps = 1e-5f;

    KernelCase c;
    c.kernel = "gemm_" + lowercase(dtype);
    c.label = c.kernel + " M=" + std::to_string(s.M) + " K=" + std::to_string(s.K) + " N=";
    for (uint32_t i = 0; i < p.n_parts; ++i) c.label += (i ? "+" : "") + std::to_string(s.N[i]);
    c.label += " rpu=" + std::to_string(s.rows_per_unit) + " " + s.what;
    c.buffers.push_back(to_bytes(random_floats((size_t)s.M * (s.K + s.x_pad), seed, s.x_scale)));
    c.buffers.push_back(to_bytes(random_floats((size_t)s.M * p.y_stride, seed + 1, 3.0f)));
    for (uint32_t i = 0; i < p.n_parts; ++i) c.buffers.push_back(weight_rows(dtype, s.N[i], s.K, seed + 2 + i));
    if (s.input_op == akunu::kGemmInputRMSNorm) c.buffers.push_back(to_bytes(random_floats(s.K, seed + 7, 1.5f)));
    c.params = params_bytes(p);
    c.grid = {(total_rows + s.rows_per_unit - 1) / s.rows_per_unit, 1, 1};  // as emit_matmul
    // F32 math throughout (the weights decode exactly): float rounding over K terms only.
    c.outputs = {{1, Element::F32, 2e-6}};
    c.reference = [dtype, p](std::vector<Bytes> &b) { reference_gemm(dtype, p, b); };
    return c;
}

std::vector<GemmShape> gemm_shapes() {
    using namespace akunu;
    const uint32_t norm = kGemmInputRMSNorm, silu = kGemmOutputSiluMul, gelu = kGemmOutputGeluTanhMul;
    std::vector<GemmShape> s;
    // Decode GEMV (M = 1). rows_per_unit 8 is the Metal ChipConfig's; others must work too.
    s.push_back({"plain", 1, 256, {96}, 8});
    s.push_back({"plain N-tail", 1, 128, {100}, 32});
    s.push_back({"plain odd-unit", 1, 64, {37}, 5});
    s.push_back({"accumulate", 1, 192, {64}, 8, true});
    s.push_back({"strided", 1, 512, {64}, 8, false, 0, 0, 8, 5});
    s.push_back({"qkv", 1, 128, {128, 64, 64}, 8});                     // GQA 2, head_dim 64
    s.push_back({"qkv rmsnorm", 1, 128, {64, 32, 32}, 8, false, norm});    // GQA 2, head_dim 32
    s.push_back({"qkv rmsnorm straddle", 1, 64, {40, 24, 24}, 16, false, norm, 0, 0, 0, 3.0f});
    s.push_back({"rmsnorm accumulate", 1, 128, {48}, 8, true, norm, 0, 4, 2});
    s.push_back({"silu", 1, 128, {72, 72}, 8, false, 0, silu});
    s.push_back({"silu rmsnorm odd-unit", 1, 256, {50, 50}, 7, false, norm, silu});
    s.push_back({"gelu rmsnorm", 1, 64, {40, 40}, 8, false, norm, gelu});
    s.push_back({"gelu rmsnorm unit=32", 1, 128, {40, 40}, 32, false, norm, gelu, 0, 3});
    s.push_back({"silu large", 1, 64, {24, 24}, 8, false, 0, silu, 0, 0, 40.0f});  // saturated activations
    s.push_back({"gelu large", 1, 64, {24, 24}, 8, false, 0, gelu, 0, 0, 40.0f});
    // Prefill tiles (M > 1): rows_per_unit 32 is the Metal ChipConfig's.
    s.push_back({"plain", 2, 64, {40}, 32});
    s.push_back({"qkv", 7, 64, {64, 32, 32}, 32});
    s.push_back({"plain M-tail", 33, 96, {72}, 32});
    s.push_back({"accumulate", 7, 128, {64}, 32, true});
    s.push_back({"strided accumulate", 7, 64, {48}, 32, true, 0, 0, 4, 3});
    s.push_back({"qkv straddle", 9, 64, {40, 16, 16}, 24});
    s.push_back({"two tiles a unit", 5, 64, {100}, 64});
    s.push_back({"small unit", 3, 32, {20}, 8});
    return s;
}

}  // namespace

// Block formats: decode (plain, fused Q/K/V with the norm, gated with the norm, a residual
// add) and prefill (a ragged M tile, fused Q/K/V) at K = 256 and 512.
std::vector<GemmShape> block_shapes() {
    using namespace akunu;
    const uint32_t norm = kGemmInputRMSNorm, silu = kGemmOutputSiluMul;
    return {
        {"plain", 1, 512, {40}, 8},
        {"qkv rmsnorm", 1, 256, {64, 32, 32}, 8, false, norm},
        {"silu rmsnorm odd-unit", 1, 256, {24, 24}, 7, false, norm, silu},
        {"accumulate", 1, 256, {20}, 8, true},
        {"plain M-tail", 11, 256, {40}, 32},
        {"qkv", 5, 512, {32, 16, 16}, 32},
    };
}

AKUNU_KERNEL_CASES(gemm) {
    std::vector<KernelCase> cases;
    uint32_t seed = 100;
    for (const char *dtype : kFloatDTypes)
        for (const GemmShape &s : gemm_shapes()) cases.push_back(gemm_case(dtype, s, seed += 10));
    for (const char *dtype : kBlockDTypes)
        for (const GemmShape &s : block_shapes()) cases.push_back(gemm_case(dtype, s, seed += 10));
    return cases;
}
