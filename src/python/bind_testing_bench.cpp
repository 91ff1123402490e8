// akunu._testing's microbenchmark seams: time one kernel through the real engine path (a CpuDevice,
// a DispatchTable built with CmdBuilder exactly as table_builder.cpp builds it, replayed by
// encode_dispatch_table). For benchmarks/test_microbench.py.
//
//   bench_gemm(dtype, n_rows, k, m, iters, threads) -> seconds per replay
//   bench_attention(n_heads, n_kv_heads, head_dim, kv_len, iters, threads) -> seconds per replay
//   bench_rmsnorm(dim, rows, iters, threads) -> seconds per replay
//
// and the same setups as objects (KernelBench, from bench_*_setup) that keep the table and
// buffers alive, so a harness can time run() alone and read the buffers back for correctness.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_device.h"
#include "backend/cpu/dtypes.h"
#include "backend/cpu/repacked_layout.h"
#include "core/arch_descriptor.h"
#include "core/dispatch_table.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "core/quant_blocks.h"
#include "core/sampling_rule.h"
#include "python/bind_testing.h"

namespace nb = nanobind;
using akunu::Buffer;
using akunu::DType;

namespace {

// Random bits for weights whose values do not matter for speed: the sampler's stateless hash
// (core/sampling_rule.h) of (seed, draw index), as its Gumbel noise hashes (seed, position, token).
struct Rng {
    uint32_t stream;
    uint32_t index = 0;
    explicit Rng(uint64_t seed) : stream(akunu::noise_stream((uint32_t)seed, (uint32_t)(seed >> 32), 0)) {}
    uint32_t next32() { return akunu::pcg_hash(stream ^ akunu::pcg_hash(index++)); }
    uint64_t next() {
        const uint64_t hi = next32();
        return hi << 32 | next32();
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((next32() >> 8) * (1.0 / 16777216.0)); }
};

// The group-scaled dtypes (kquant_kernels.h): random bytes, then sane fp16 factors. Offsets of a
// block's fp16 scale d (and its min: dmin for the K-quants, m for Q5_1) in bytes.
void fill_group_scaled(DType dtype, uint8_t *row, size_t row_bytes, Rng &rng) {
    int d_at = 0, min_at = -1;
    switch (dtype) {
        case DType::Q5_0: case DType::IQ4_NL: case DType::IQ4_XS: break;
        case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: min_at = 2; break;
        case DType::Q2_K: d_at = 80, min_at = 82; break;
        case DType::Q3_K: d_at = 108; break;
        case DType::Q6_K: d_at = 208; break;
        default: throw nb::value_error("no random generator for this dtype");
    }
    const akunu::DTypeInfo *info = akunu::dtype_info((uint32_t)dtype);
    const bool super = info->block_size > 32;  // K-quant factors are multiplied by sub-scales up to 63
    for (size_t i = 0; i < row_bytes; i += 8) {
        const uint64_t v = rng.next();
        std::memcpy(row + i, &v, std::min<size_t>(8, row_bytes - i));
    }
    for (size_t b = 0; b < row_bytes; b += info->type_size) {
        const float d = super ? rng.uniform(0.0001f, 0.0005f) : rng.uniform(0.002f, 0.02f);
        const uint16_t d_bits = akunu::float_to_half_bits(d);
        std::memcpy(row + b + d_at, &d_bits, 2);
        if (min_at >= 0) {
            const float m = dtype == DType::Q5_1 ? rng.uniform(-0.1f, -0.01f) : rng.uniform(0.0001f, 0.0005f);
            const uint16_t m_bits = akunu::float_to_half_bits(m);
            std::memcpy(row + b + min_at, &m_bits, 2);
        }
    }
}

// Random raw GGUF rows of `dtype`: sane fp16 scales (0.002..0.02) and random quants.
void fill_weights(DType dtype, uint8_t *dst, size_t n_rows, size_t k, size_t row_bytes, Rng &rng) {
    for (size_t r = 0; r < n_rows; ++r) {
        uint8_t *row = dst + r * row_bytes;
        switch (dtype) {
            case DType::F32: {
                float *w = reinterpret_cast<float *>(row);
                for (size_t i = 0; i < k; ++i) w[i] = rng.uniform(-0.05f, 0.05f);
                break;
            }
            case DType::F16: {
                uint16_t *w = reinterpret_cast<uint16_t *>(row);
                for (size_t i = 0; i < k; ++i) w[i] = akunu::float_to_half_bits(rng.uniform(-0.05f, 0.05f));
                break;
            }
            case DType::Q8_0: {
                auto *b = reinterpret_cast<akunu::BlockQ8_0 *>(row);
                for (size_t j = 0; j < k / akunu::QK8_0; ++j) {
                    b[j].d = akunu::float_to_half_bits(rng.uniform(0.002f, 0.02f));
                    for (int i = 0; i < akunu::QK8_0; i += 8) {
                        uint64_t v = rng.next();
                        std::memcpy(b[j].qs + i, &v, 8);
                    }
                }
                break;
            }
            case DType::Q4_0: {
                auto *b = reinterpret_cast<akunu::BlockQ4_0 *>(row);
                for (size_t j = 0; j < k / akunu::QK4_0; ++j) {
                    b[j].d = akunu::float_to_half_bits(rng.uniform(0.002f, 0.02f));
                    uint64_t v0 = rng.next(), v1 = rng.next();
                    std::memcpy(b[j].qs, &v0, 8);
                    std::memcpy(b[j].qs + 8, &v1, 8);
                }
                break;
            }
            case DType::Q4_1: {
                auto *b = reinterpret_cast<akunu::BlockQ4_1 *>(row);
                for (size_t j = 0; j < k / akunu::QK4_1; ++j) {
                    b[j].d = akunu::float_to_half_bits(rng.uniform(0.002f, 0.02f));
                    b[j].m = akunu::float_to_half_bits(rng.uniform(-0.1f, -0.01f));
                    uint64_t v0 = rng.next(), v1 = rng.next();
                    std::memcpy(b[j].qs, &v0, 8);
                    std::memcpy(b[j].qs + 8, &v1, 8);
                }
                break;
            }
            default: fill_group_scaled(dtype, row, row_bytes, rng); break;
        }
    }
}

uint32_t ceil_div(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

// One kernel (or a kernel plus the activation conversion it needs) as a dispatch table on its own
// CpuDevice, with the buffers it reads and writes.
class KernelBench {
public:
    explicit KernelBench(int threads) : dev_(std::make_unique<akunu::cpu::CpuDevice>(threads)) {}
    ~KernelBench() {
        for (auto &kv : buffers_) dev_->free_buffer(kv.second);
    }
    KernelBench(const KernelBench &) = delete;
    KernelBench &operator=(const KernelBench &) = delete;

    Buffer &alloc(const std::string &name, size_t bytes) { return adopt(name, dev_->allocate(bytes)); }
    // A buffer the device made (e.g. upload_matrix's repacked weights), freed with the others.
    Buffer &adopt(const std::string &name, Buffer b) {
        buffers_[name] = b;
        order_.push_back(name);
        return buffers_[name];
    }
    const Buffer &buffer(const std::string &name) const {
        auto it = buffers_.find(name);
        if (it == buffers_.end()) throw nb::key_error(("no buffer '" + name + "'").c_str());
        return it->second;
    }
    void fill_floats(const std::string &name, size_t n, float lo, float hi, Rng &rng) {
        float *p = static_cast<float *>(buffer(name).contents);
        for (size_t i = 0; i < n; ++i) p[i] = rng.uniform(lo, hi);
    }
    void fill_halves(const std::string &name, size_t n, float lo, float hi, Rng &rng) {
        uint16_t *p = static_cast<uint16_t *>(buffer(name).contents);
        for (size_t i = 0; i < n; ++i) p[i] = akunu::float_to_half_bits(rng.uniform(lo, hi));
    }

    // Seconds per replay of the whole table, averaged over `iters` replays (after one untimed
    // warm-up replay when `warmup`).
    double run(int iters, bool warmup = true) {
        if (iters < 1) throw nb::value_error("iters must be >= 1");
        akunu::Device &dev = *dev_;
        if (warmup) {
            dev.encode_dispatch_table(table, 0, 1);
            dev.synchronize();
        }
        auto t0 = std::chrono::steady_clock::now();
        dev.encode_dispatch_table(table, 0, iters);
        dev.synchronize();
        std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
        return dt.count() / iters;
    }

    akunu::Device &device() { return *dev_; }
    int threads() const { return dev_->threads(); }
    std::string device_name() const { return dev_->name(); }
    std::vector<std::string> buffer_names() const { return order_; }

    akunu::DispatchTable table;
    size_t bytes_read = 0;  // bytes one replay must read from memory (weights / KV cache / input)
    std::map<std::string, uint64_t> info;

private:
    std::unique_ptr<akunu::cpu::CpuDevice> dev_;
    std::map<std::string, Buffer> buffers_;
    std::vector<std::string> order_;
};

DType dtype_by_name(const std::string &name) {
    DType t;
    if (!akunu::cpu::dtype_from_name(name, &t)) throw nb::value_error(("unknown dtype '" + name + "'").c_str());
    return t;
}

void check_positive(int64_t v, const char *what) {
    if (v <= 0) throw nb::value_error((std::string(what) + " must be positive").c_str());
}

// Buffers: x [m, k] F32, act_q [m, act_row_bytes] (if wanted), w [n_rows, k] raw, y [m, n_rows] F32.
std::unique_ptr<KernelBench> setup_gemm(const std::string &dtype_name, int64_t n_rows, int64_t k, int64_t m,
                                        int threads, uint64_t seed) {
    check_positive(n_rows, "n_rows");
    check_positive(k, "k");
    check_positive(m, "m");
    const DType dtype = dtype_by_name(dtype_name);
    auto kb = std::make_unique<KernelBench>(threads);
    akunu::Device &dev = kb->device();
    const akunu::DTypeDescriptor *desc = dev.dtype_lookup(dtype);
    if (!desc) throw nb::value_error(("the cpu device does not run " + dtype_name + " weights").c_str());
    const akunu::DTypeInfo *info = akunu::dtype_info((uint32_t)dtype);
    if (k % info->block_size != 0)
        throw nb::value_error(("k must be a multiple of " + std::to_string(info->block_size)).c_str());
    const size_t w_row_bytes = akunu::row_bytes(*info, (uint64_t)k);
    const akunu::ChipConfig chip = dev.chip_config();
    Rng rng(seed);

    kb->alloc("x", (size_t)(m * k) * sizeof(float));
    kb->fill_floats("x", (size_t)(m * k), -1.f, 1.f, rng);
    Buffer &w = kb->alloc("w", w_row_bytes * (size_t)n_rows);
    fill_weights(dtype, static_cast<uint8_t *>(w.contents), (size_t)n_rows, (size_t)k, w_row_bytes, rng);
    kb->alloc("y", (size_t)(m * n_rows) * sizeof(float));

    Buffer input = kb->buffer("x");
    uint32_t x_row_bytes = (uint32_t)(k * sizeof(float));
    if (desc->act_quant_kernel) {  // as table_builder.cpp's emit_act_quant
        x_row_bytes = (uint32_t)desc->act_row_bytes((size_t)k);
        input = kb->alloc("act_q", (size_t)x_row_bytes * (size_t)m);
        akunu::ActQuantParams ap{};
        ap.K = (uint32_t)k;
        ap.rows = (uint32_t)m;
        ap.x_stride = (uint32_t)k;
        ap.out_row_bytes = x_row_bytes;
        akunu::CmdBuilder(kb->table, dev, desc->act_quant_kernel, {(uint32_t)m, 1, 1})
            .buf(kb->buffer("x"))
            .buf(input)
            .params(ap)
            .label("bench.quantize")
            .emit();
    }
    akunu::GemmParams p{};  // as table_builder.cpp's emit_matmul, one part
    p.M = (uint32_t)m;
    p.K = (uint32_t)k;
    p.n_parts = 1;
    p.N[0] = (uint32_t)n_rows;
    p.y_col[0] = 0;
    p.w_row_bytes[0] = (uint32_t)w_row_bytes;
    p.x_row_bytes = x_row_bytes;
    p.y_stride = (uint32_t)n_rows;
    p.accumulate = 0;
    p.rows_per_unit = chip.gemm_unit_rows((uint32_t)m, desc->repack_row_group);
    // Weights as the engine uploads them: repacked by upload_matrix when the dtype's kernels want
    // another layout, so also on the same huge pages, without which a GEMV streaming from DRAM read
    // 0.73-0.92x of the engine's rate ("w" keeps the file layout for the harness's reference).
    Buffer w_run = kb->buffer("w");
    if (desc->repack)
        w_run = kb->adopt("w_packed", dev.upload_matrix(kb->buffer("w").contents, w_row_bytes * (size_t)n_rows, *desc,
                                                        (size_t)n_rows, (size_t)k));
    akunu::CmdBuilder(kb->table, dev, desc->gemm_kernel, {ceil_div((uint64_t)n_rows, p.rows_per_unit), 1, 1})
        .buf(input)
        .buf(kb->buffer("y"))
        .buf(w_run)
        .params(p)
        .label("bench.gemm")
        .emit();
    kb->bytes_read = w_row_bytes * (size_t)n_rows;
    kb->info["weight_bytes"] = kb->bytes_read;
    kb->info["w_row_bytes"] = w_row_bytes;
    kb->info["rows_per_unit"] = p.rows_per_unit;
    return kb;
}

// Decode attention of one query row at position kv_len - 1 over a cache of kv_len positions.
// Buffers: qkv [q_dim + 2 kv_dim] F32 (q first), k_cache / v_cache [n_kv_heads, kv_len, head_dim] F16,
// out [q_dim] F32.
std::unique_ptr<KernelBench> setup_attention(int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t kv_len,
                                             int threads, uint64_t seed) {
    check_positive(n_heads, "n_heads");
    check_positive(n_kv_heads, "n_kv_heads");
    check_positive(head_dim, "head_dim");
    check_positive(kv_len, "kv_len");
    if (n_heads % n_kv_heads != 0) throw nb::value_error("n_heads must be a multiple of n_kv_heads");
    auto kb = std::make_unique<KernelBench>(threads);
    akunu::Device &dev = kb->device();
    Rng rng(seed);
    const size_t q_dim = (size_t)(n_heads * head_dim), kv_dim = (size_t)(n_kv_heads * head_dim);
    const size_t cache_elems = kv_dim * (size_t)kv_len;
    kb->alloc("qkv", (q_dim + 2 * kv_dim) * sizeof(float));
    kb->fill_floats("qkv", q_dim + 2 * kv_dim, -1.f, 1.f, rng);
    kb->alloc("k_cache", cache_elems * 2);
    kb->fill_halves("k_cache", cache_elems, -1.f, 1.f, rng);
    kb->alloc("v_cache", cache_elems * 2);
    kb->fill_halves("v_cache", cache_elems, -1.f, 1.f, rng);
    kb->alloc("out", q_dim * sizeof(float));

    const akunu::ArchDescriptor arch = akunu::arch_llama();
    akunu::AttentionParams p{};  // as table_builder.cpp's emit_attention, decode (rows = 1)
    p.position = (uint32_t)(kv_len - 1);
    p.kv_len = (uint32_t)kv_len;
    p.rows = 1;
    p.n_heads = (uint32_t)n_heads;
    p.n_kv_heads = (uint32_t)n_kv_heads;
    p.head_dim = (uint32_t)head_dim;
    p.max_seq = (uint32_t)kv_len;
    p.q_stride = (uint32_t)(q_dim + 2 * kv_dim);
    p.out_stride = (uint32_t)q_dim;
    p.scale = 1.0f / std::sqrt((float)head_dim);
    akunu::CmdBuilder(kb->table, dev, arch.attention_kernel, {(uint32_t)n_heads, 1, 1})
        .buf(kb->buffer("qkv"))
        .buf(kb->buffer("k_cache"))
        .buf(kb->buffer("v_cache"))
        .buf(kb->buffer("out"))
        .params(p)
        .label("bench.attention")
        .emit();
    kb->bytes_read = 2 * cache_elems * 2;
    kb->info["kv_bytes"] = kb->bytes_read;
    return kb;
}

// Buffers: x [rows, dim] F32, weight [dim] F32, out [rows, dim] F32.
std::unique_ptr<KernelBench> setup_rmsnorm(int64_t dim, int64_t rows, int threads, uint64_t seed) {
    check_positive(dim, "dim");
    check_positive(rows, "rows");
    auto kb = std::make_unique<KernelBench>(threads);
    akunu::Device &dev = kb->device();
    Rng rng(seed);
    kb->alloc("x", (size_t)(dim * rows) * sizeof(float));
    kb->fill_floats("x", (size_t)(dim * rows), -2.f, 2.f, rng);
    kb->alloc("weight", (size_t)dim * sizeof(float));
    kb->fill_floats("weight", (size_t)dim, 0.5f, 1.5f, rng);
    kb->alloc("out", (size_t)(dim * rows) * sizeof(float));
    const akunu::ArchDescriptor arch = akunu::arch_llama();
    akunu::RMSNormParams p{};  // as table_builder.cpp's emit_norm
    p.dim = (uint32_t)dim;
    p.rows = (uint32_t)rows;
    p.x_stride = (uint32_t)dim;
    p.out_stride = (uint32_t)dim;
    p.eps = 1e-5f;
    akunu::CmdBuilder(kb->table, dev, arch.norm_kernel, {(uint32_t)rows, 1, 1})
        .buf(kb->buffer("x"))
        .buf(kb->buffer("weight"))
        .buf(kb->buffer("out"))
        .params(p)
        .label("bench.rmsnorm")
        .emit();
    kb->bytes_read = (size_t)(dim * rows) * sizeof(float);
    kb->info["x_bytes"] = kb->bytes_read;
    return kb;
}

double timed(std::unique_ptr<KernelBench> kb, int iters) {
    nb::gil_scoped_release release;
    return kb->run(iters);
}

}  // namespace

void bind_testing_bench(nb::module_ &m) {
    nb::class_<KernelBench>(m, "KernelBench", "One kernel as a dispatch table on its own CPU device (benchmarks).")
        .def("run", &KernelBench::run, nb::arg("iters"), nb::arg("warmup") = true,
             nb::call_guard<nb::gil_scoped_release>(),
             "Replay the table `iters` times (after one untimed warm-up replay when `warmup`); returns seconds "
             "per replay.")
        .def(
            "buffer",
            [](const KernelBench &kb, const std::string &name) {
                const Buffer &b = kb.buffer(name);
                return nb::bytes(static_cast<const char *>(b.contents), b.size);
            },
            nb::arg("name"), "A copy of a buffer's bytes.")
        .def_prop_ro("buffer_names", &KernelBench::buffer_names)
        .def_prop_ro("bytes_read", [](const KernelBench &kb) { return (uint64_t)kb.bytes_read; },
                     "Bytes one replay must read: the weights (GEMM), the KV cache (attention), x (RMSNorm).")
        .def_prop_ro("info", [](const KernelBench &kb) { return kb.info; })
        .def_prop_ro("kernels", [](const KernelBench &kb) { return kb.table.kernel_names; })
        .def_prop_ro("threads", &KernelBench::threads)
        .def_prop_ro("device_name", &KernelBench::device_name);

    m.def(
        "bench_gemm_setup",
        [](const std::string &dtype, int64_t n_rows, int64_t k, int64_t m, int threads, uint64_t seed) {
            nb::gil_scoped_release release;
            return setup_gemm(dtype, n_rows, k, m, threads, seed);
        },
        nb::arg("dtype"), nb::arg("n_rows"), nb::arg("k"), nb::arg("m") = 1, nb::arg("threads") = 0,
        nb::arg("seed") = 0,
        "y[m, n_rows] = x[m, k] . W[n_rows, k]^T with random W of `dtype` (F32, F16, Q8_0, Q4_0, Q4_1 and the group-scaled Q5_0 .. IQ4_XS), built as "
        "the table builder builds a matmul (activation quantization included when the dtype wants it).");
    m.def(
        "bench_attention_setup",
        [](int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t kv_len, int threads, uint64_t seed) {
            nb::gil_scoped_release release;
            return setup_attention(n_heads, n_kv_heads, head_dim, kv_len, threads, seed);
        },
        nb::arg("n_heads"), nb::arg("n_kv_heads"), nb::arg("head_dim"), nb::arg("kv_len"), nb::arg("threads") = 0,
        nb::arg("seed") = 0, "Decode attention of one query over a random F16 KV cache of kv_len positions.");
    m.def(
        "bench_rmsnorm_setup",
        [](int64_t dim, int64_t rows, int threads, uint64_t seed) {
            nb::gil_scoped_release release;
            return setup_rmsnorm(dim, rows, threads, seed);
        },
        nb::arg("dim"), nb::arg("rows"), nb::arg("threads") = 0, nb::arg("seed") = 0, "RMSNorm of rows x dim.");

    m.def(
        "bench_gemm",
        [](const std::string &dtype, int64_t n_rows, int64_t k, int64_t m, int iters, int threads) {
            return timed(setup_gemm(dtype, n_rows, k, m, threads, 0), iters);
        },
        nb::arg("dtype"), nb::arg("n_rows"), nb::arg("k"), nb::arg("m"), nb::arg("iters"), nb::arg("threads") = 0,
        "Seconds per replay of a one-GEMM dispatch table (see bench_gemm_setup).");
    m.def(
        "bench_attention",
        [](int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t kv_len, int iters, int threads) {
            return timed(setup_attention(n_heads, n_kv_heads, head_dim, kv_len, threads, 0), iters);
        },
        nb::arg("n_heads"), nb::arg("n_kv_heads"), nb::arg("head_dim"), nb::arg("kv_len"), nb::arg("iters"),
        nb::arg("threads") = 0, "Seconds per replay of one decode attention command.");
    m.def(
        "bench_rmsnorm",
        [](int64_t dim, int64_t rows, int iters, int threads) { return timed(setup_rmsnorm(dim, rows, threads, 0), iters); },
        nb::arg("dim"), nb::arg("rows"), nb::arg("iters"), nb::arg("threads") = 0,
        "Seconds per replay of one RMSNorm command.");
}
