// akunu._testing's device commands: one GEMM / GEMV / embedding / RoPE + KV write / attention /
// argmax / sampling command on a new device of any backend (the CUDA kernels included), built as
// table_builder.cpp builds it, weights and KV caches uploaded as the loader and KVCache do. For
// tests/test_quant_kernels.py, test_kv_cache_dtype.py, test_sampling.py and test_cuda.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/dtypes.h"
#include "backend/cpu/repacked_layout.h"
#include "core/device.h"
#include "core/dispatch_table.h"
#include "core/dtype.h"
#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"
#include "core/kv_cache.h"
#include "core/sampling_rule.h"
#include "inference/sampler.h"
#include "python/bind_testing.h"

namespace nb = nanobind;
using akunu::DType;
using akunu::testing::FloatMatrix;
using akunu::testing::FloatVector;
using akunu::testing::IdVector;
using akunu::testing::owner_of;

namespace {

// A device of `backend` with the descriptor it runs weights of `dtype_name` with, and the raw
// weight matrix ([n_rows, k] GGUF rows) uploaded as the model loader uploads it.
struct DeviceMatrix {
    std::unique_ptr<akunu::Device> dev;
    const akunu::DTypeDescriptor *desc = nullptr;
    akunu::Buffer w;
    size_t row_bytes = 0;
    std::vector<akunu::Buffer> owned;
    ~DeviceMatrix() {
        if (!dev) return;  // creating the device failed
        for (akunu::Buffer &b : owned) dev->free_buffer(b);
        dev->free_buffer(w);  // (a no-op for weights the device aliases)
    }
    akunu::Buffer alloc(size_t bytes) {
        owned.push_back(dev->allocate(bytes));
        return owned.back();
    }
    // Runs `table` once (token 0 of a replay at position 0) and reads `bytes` of `from` into dst.
    void run_and_read(const akunu::DispatchTable &table, void *dst, const akunu::Buffer &from, size_t bytes) {
        dev->encode_dispatch_table(table, 0, 1);
        dev->synchronize();
        dev->read_buffer(dst, from, bytes);
    }
};

// A device of `backend` with no matrix yet: the owner of the buffers a helper allocates.
std::unique_ptr<DeviceMatrix> new_device(const std::string &backend) {
    auto m = std::make_unique<DeviceMatrix>();
    m->dev = akunu::create_device(backend, 0);
    return m;
}

std::unique_ptr<DeviceMatrix> upload_matrix(const std::string &backend, const std::string &dtype_name, const nb::bytes &raw,
                                            int64_t n_rows, int64_t k) {
    DType t;
    if (!akunu::cpu::dtype_from_name(dtype_name, &t)) throw nb::value_error(("unknown dtype '" + dtype_name + "'").c_str());
    const akunu::DTypeInfo *info = akunu::dtype_info(static_cast<uint32_t>(t));
    if (n_rows <= 0 || k <= 0 || k % info->block_size != 0) throw nb::value_error("bad matrix shape for this dtype");
    auto m = new_device(backend);
    m->row_bytes = akunu::row_bytes(*info, (uint64_t)k);
    if (raw.size() != m->row_bytes * (size_t)n_rows) throw nb::value_error("raw size != n_rows rows of k elements");
    m->desc = m->dev->dtype_lookup(t);
    if (!m->desc) throw nb::value_error((backend + " does not run " + dtype_name + " weights").c_str());
    m->w = m->dev->upload_matrix(raw.c_str(), raw.size(), *m->desc, (size_t)n_rows, (size_t)k);
    return m;
}

akunu::KVCacheDType kv_dtype_arg(const std::string &name) {
    akunu::KVCacheDType d;
    if (!akunu::kv_cache_dtype_from_name(name, &d)) throw nb::value_error(("unknown kv_cache_dtype '" + name + "'").c_str());
    return d;
}

// A one-layer KV cache of `dtype` on dm's device, its buffers owned by dm.
akunu::KVCache new_kv_cache(DeviceMatrix &dm, akunu::KVCacheDType dtype, uint32_t n_heads, uint32_t n_kv_heads,
                            uint32_t head_dim, uint32_t max_seq) {
    if (n_kv_heads == 0 || n_heads % n_kv_heads != 0) throw nb::value_error("n_heads must be a multiple of n_kv_heads");
    if (max_seq == 0) throw nb::value_error("max_seq must be positive");
    akunu::KVCache kv = akunu::KVCache::create(*dm.dev, 1, (int)n_kv_heads, (int)head_dim, (int)max_seq, dtype);
    dm.owned.push_back(kv.k_buffers[0]);
    dm.owned.push_back(kv.v_buffers[0]);
    return kv;
}

nb::bytes read_bytes(akunu::Device &dev, const akunu::Buffer &b) {
    std::string bytes(b.size, '\0');
    dev.read_buffer(bytes.data(), b, b.size);
    return nb::bytes(bytes.data(), bytes.size());
}

}  // namespace

void bind_testing_device(nb::module_ &m) {
    m.def(
        "device_gemm",
        [](const std::string &backend, const std::string &dtype_name, nb::bytes w_raw, int64_t n_rows, int64_t k,
           FloatMatrix x) {
            if ((int64_t)x.shape(1) != k) throw nb::value_error("x must have k columns");
            const int64_t M = (int64_t)x.shape(0);
            if (M <= 0) throw nb::value_error("x needs at least one row");
            auto *y = new std::vector<float>((size_t)(M * n_rows));
            std::vector<float> x_host(x.data(), x.data() + M * k);
            {
                std::unique_ptr<DeviceMatrix> dm = upload_matrix(backend, dtype_name, w_raw, n_rows, k);
                nb::gil_scoped_release release;
                akunu::Device &dev = *dm->dev;
                const akunu::DTypeDescriptor &desc = *dm->desc;
                akunu::Buffer xb = dm->alloc(x_host.size() * sizeof(float)), yb = dm->alloc(y->size() * sizeof(float));
                dev.write_buffer(xb, x_host.data(), x_host.size() * sizeof(float));
                akunu::DispatchTable table;
                akunu::Buffer input = xb;
                uint32_t x_row_bytes = (uint32_t)(k * sizeof(float));
                if (desc.act_quant_kernel) {  // as table_builder.cpp's emit_act_quant
                    x_row_bytes = (uint32_t)desc.act_row_bytes((size_t)k);
                    input = dm->alloc((size_t)x_row_bytes * (size_t)M);
                    akunu::ActQuantParams ap{(uint32_t)k, (uint32_t)M, (uint32_t)k, x_row_bytes};
                    akunu::CmdBuilder(table, dev, desc.act_quant_kernel, {(uint32_t)M, 1, 1}).buf(xb).buf(input).params(ap).emit();
                }
                akunu::GemmParams p{};  // as table_builder.cpp's emit_matmul, one part
                p.M = (uint32_t)M;
                p.K = (uint32_t)k;
                p.n_parts = 1;
                p.N[0] = (uint32_t)n_rows;
                p.w_row_bytes[0] = (uint32_t)dm->row_bytes;
                p.x_row_bytes = x_row_bytes;
                p.y_stride = (uint32_t)n_rows;
                const akunu::ChipConfig chip = dev.chip_config();
                p.rows_per_unit = chip.gemm_unit_rows((uint32_t)M, desc.repack_row_group);
                akunu::CmdBuilder(table, dev, desc.gemm_kernel, {(uint32_t)((n_rows + p.rows_per_unit - 1) / p.rows_per_unit), 1, 1})
                    .buf(input)
                    .buf(yb)
                    .buf(dm->w)
                    .params(p)
                    .emit();
                dm->run_and_read(table, y->data(), yb, y->size() * sizeof(float));
            }
            return nb::ndarray<nb::numpy, float, nb::ndim<2>>(y->data(), {(size_t)M, (size_t)n_rows}, owner_of(y));
        },
        nb::arg("backend"), nb::arg("dtype_name"), nb::arg("w_raw"), nb::arg("n_rows"), nb::arg("k"), nb::arg("x"),
        "y[M, N] = x[M, K] @ W[N, K]^T as one GEMM command (plus its activation conversion) on a new device of "
        "`backend`, weights uploaded as the model loader uploads them.");
    m.def(
        "device_gemv_fused",
        [](const std::string &backend, const std::string &dtype_name, nb::bytes w_raw, int64_t n_rows, int64_t k,
           FloatVector x, std::optional<FloatVector> norm_weight, float eps, const std::string &activation) {
            if ((int64_t)x.shape(0) != k) throw nb::value_error("x must have k elements");
            if (norm_weight && (int64_t)norm_weight->shape(0) != k) throw nb::value_error("norm_weight must have k elements");
            uint32_t output_op = akunu::kGemmOutputPlain;
            if (activation == "silu") output_op = akunu::kGemmOutputSiluMul;
            else if (activation == "gelu_tanh") output_op = akunu::kGemmOutputGeluTanhMul;
            else if (!activation.empty()) throw nb::value_error("activation must be '', 'silu' or 'gelu_tanh'");
            const int64_t parts = output_op == akunu::kGemmOutputPlain ? 1 : 2;
            if (w_raw.size() % (size_t)parts != 0) throw nb::value_error("w_raw must hold gate rows then as many up rows");
            const std::string part_bytes(w_raw.c_str(), w_raw.size() / (size_t)parts);
            std::unique_ptr<DeviceMatrix> dm =
                upload_matrix(backend, dtype_name, nb::bytes(part_bytes.data(), part_bytes.size()), n_rows, k);
            const akunu::ChipConfig chip = dm->dev->chip_config();
            if (chip.fuse_gemv_norm_max_dim == 0 || !chip.fuse_gemv_activation)
                throw nb::value_error(("backend '" + backend + "' has no fused GEMV input norm / gated output").c_str());
            auto *y = new std::vector<float>((size_t)n_rows);
            std::vector<float> x_host(x.data(), x.data() + k);
            std::vector<float> norm_host;
            if (norm_weight) norm_host.assign(norm_weight->data(), norm_weight->data() + k);
            {
                nb::gil_scoped_release release;
                akunu::Device &dev = *dm->dev;
                akunu::Buffer xb = dm->alloc((size_t)k * sizeof(float)), yb = dm->alloc((size_t)n_rows * sizeof(float));
                dev.write_buffer(xb, x_host.data(), x_host.size() * sizeof(float));
                akunu::GemmParams p{};  // as table_builder.cpp's emit_matmul with a GemvFusion
                p.M = 1;
                p.K = (uint32_t)k;
                p.n_parts = (uint32_t)parts;
                for (int64_t i = 0; i < parts; ++i) {
                    p.N[i] = (uint32_t)n_rows;
                    p.y_col[i] = (uint32_t)(i * n_rows);
                    p.w_row_bytes[i] = (uint32_t)dm->row_bytes;
                }
                p.x_row_bytes = (uint32_t)(k * sizeof(float));
                p.y_stride = (uint32_t)n_rows;
                p.rows_per_unit = (uint32_t)dev.chip_config().gemv_rows_per_unit;
                p.input_op = norm_weight ? akunu::kGemmInputRMSNorm : akunu::kGemmInputAsIs;
                p.output_op = output_op;
                p.eps = eps;
                akunu::DispatchTable table;
                akunu::CmdBuilder b(table, dev, dm->desc->gemm_kernel, {1, 1, 1});
                b.buf(xb).buf(yb).buf(dm->w);
                if (parts == 2) {
                    dm->owned.push_back(dev.upload_matrix(w_raw.c_str() + part_bytes.size(), part_bytes.size(), *dm->desc,
                                                          (size_t)n_rows, (size_t)k));
                    b.buf(dm->owned.back());
                }
                if (norm_weight) {
                    akunu::Buffer nb_ = dm->alloc((size_t)k * sizeof(float));
                    dev.write_buffer(nb_, norm_host.data(), norm_host.size() * sizeof(float));
                    b.buf(nb_);
                }
                b.params(p).emit();
                dm->run_and_read(table, y->data(), yb, y->size() * sizeof(float));
            }
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(y->data(), {(size_t)n_rows}, owner_of(y));
        },
        nb::arg("backend"), nb::arg("dtype_name"), nb::arg("w_raw"), nb::arg("n_rows"), nb::arg("k"), nb::arg("x"),
        nb::arg("norm_weight").none() = nb::none(), nb::arg("eps") = 1e-5f, nb::arg("activation") = "",
        "One decode GEMV command with the GPU fusions: y = W . rmsnorm(x) * norm_weight (when given), or with "
        "activation 'silu' / 'gelu_tanh' (w_raw: n_rows gate rows then n_rows up rows) y = act(gate . x') * "
        "(up . x'). Backends without the fusions raise ValueError.");
    m.def(
        "device_embedding",
        [](const std::string &backend, const std::string &dtype_name, nb::bytes table_raw, int64_t n_rows, int64_t k,
           IdVector ids) {
            const int64_t n = (int64_t)ids.shape(0);
            if (n <= 0) throw nb::value_error("ids must not be empty");
            for (int64_t i = 0; i < n; ++i)
                if (ids.data()[i] >= (uint64_t)n_rows) throw nb::value_error("token id out of range");
            auto *out = new std::vector<float>((size_t)(n * k));
            std::vector<uint32_t> id_host(ids.data(), ids.data() + n);
            {
                std::unique_ptr<DeviceMatrix> dm = upload_matrix(backend, dtype_name, table_raw, n_rows, k);
                nb::gil_scoped_release release;
                akunu::Device &dev = *dm->dev;
                akunu::Buffer idb = dm->alloc(id_host.size() * 4), ob = dm->alloc(out->size() * sizeof(float));
                dev.write_buffer(idb, id_host.data(), id_host.size() * 4);
                akunu::EmbeddingParams p{(uint32_t)k, (uint32_t)n, (uint32_t)n_rows, (uint32_t)dm->row_bytes, 1.0f};
                akunu::DispatchTable table;
                akunu::CmdBuilder(table, dev, dm->desc->embedding_kernel, {(uint32_t)n, 1, 1})
                    .buf(idb)
                    .buf(dm->w)
                    .buf(ob)
                    .params(p)
                    .emit();
                dm->run_and_read(table, out->data(), ob, out->size() * sizeof(float));
            }
            return nb::ndarray<nb::numpy, float, nb::ndim<2>>(out->data(), {(size_t)n, (size_t)k}, owner_of(out));
        },
        nb::arg("backend"), nb::arg("dtype_name"), nb::arg("table_raw"), nb::arg("n_rows"), nb::arg("k"), nb::arg("ids"),
        "Rows `ids` of a [n_rows, k] embedding table of raw GGUF rows, through one embedding command on a new "
        "device of `backend`.");
    m.def(
        "device_rope_kv_write",
        [](const std::string &backend, const std::string &kv_cache_dtype, FloatMatrix qkv, uint32_t n_heads,
           uint32_t n_kv_heads, uint32_t head_dim, uint32_t rope_dim, uint32_t max_seq, uint32_t position,
           FloatVector inv_freq, bool neox) {
            const akunu::KVCacheDType dtype = kv_dtype_arg(kv_cache_dtype);
            const uint32_t rows = (uint32_t)qkv.shape(0), stride = (uint32_t)qkv.shape(1);
            if (rows == 0 || stride < (n_heads + 2 * n_kv_heads) * head_dim)
                throw nb::value_error("qkv must hold rows of at least (n_heads + 2 n_kv_heads) head_dim floats");
            if (rope_dim % 2 != 0 || rope_dim > head_dim || inv_freq.shape(0) < std::max<size_t>(rope_dim / 2, 1))
                throw nb::value_error("rope_dim must be even and <= head_dim, with rope_dim / 2 (at least 1) inv_freq entries");
            if ((uint64_t)position + rows > max_seq) throw nb::value_error("position + rows exceeds max_seq");
            std::vector<float> freq(inv_freq.data(), inv_freq.data() + inv_freq.shape(0));
            std::unique_ptr<DeviceMatrix> dm = new_device(backend);
            akunu::KVCache kv = new_kv_cache(*dm, dtype, n_heads, n_kv_heads, head_dim, max_seq);
            auto *rotated = new std::vector<float>(qkv.data(), qkv.data() + (size_t)rows * stride);
            {
                nb::gil_scoped_release release;
                akunu::Device &dev = *dm->dev;
                akunu::Buffer qb = dm->alloc(rotated->size() * sizeof(float)), fb = dm->alloc(freq.size() * sizeof(float));
                dev.write_buffer(qb, rotated->data(), rotated->size() * sizeof(float));
                dev.write_buffer(fb, freq.data(), freq.size() * sizeof(float));
                akunu::RopeKVParams p{position, rows, n_heads, n_kv_heads, head_dim, rope_dim, max_seq, stride};
                const std::string kernel =
                    akunu::kv_kernel_name(neox ? "rope_neox_kv_write" : "rope_interleaved_kv_write", dtype);
                akunu::DispatchTable table;  // as table_builder.cpp's emit_rope_kv_write
                akunu::CmdBuilder(table, dev, kernel, {rows, 1, 1})
                    .buf(qb)
                    .buf(kv.k_buffers[0])
                    .buf(kv.v_buffers[0])
                    .buf(fb)
                    .params(p)
                    .emit();
                dm->run_and_read(table, rotated->data(), qb, rotated->size() * sizeof(float));
            }
            return nb::make_tuple(
                nb::ndarray<nb::numpy, float, nb::ndim<2>>(rotated->data(), {(size_t)rows, (size_t)stride}, owner_of(rotated)),
                read_bytes(*dm->dev, kv.k_buffers[0]), read_bytes(*dm->dev, kv.v_buffers[0]));
        },
        nb::arg("backend"), nb::arg("kv_cache_dtype"), nb::arg("qkv"), nb::arg("n_heads"), nb::arg("n_kv_heads"),
        nb::arg("head_dim"), nb::arg("rope_dim"), nb::arg("max_seq"), nb::arg("position"), nb::arg("inv_freq"),
        nb::arg("neox") = true,
        "One RoPE + KV-write command (rope_{neox,interleaved}_kv_write, or its _q8 variant for kv_cache_dtype "
        "'q8_0') over qkv [rows, stride] into a fresh one-layer cache of max_seq positions on a new device of "
        "`backend`: (qkv after the in-place rotation, K cache bytes, V cache bytes).");
    m.def(
        "device_attention",
        [](const std::string &backend, const std::string &kv_cache_dtype, FloatMatrix q, nb::bytes k_cache,
           nb::bytes v_cache, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim, uint32_t max_seq,
           uint32_t position, float scale, uint32_t window, float softcap) {
            const akunu::KVCacheDType dtype = kv_dtype_arg(kv_cache_dtype);
            const uint32_t rows = (uint32_t)q.shape(0), q_stride = (uint32_t)q.shape(1), out_stride = n_heads * head_dim;
            if (rows == 0 || q_stride < out_stride) throw nb::value_error("q must hold rows of at least n_heads head_dim floats");
            if ((uint64_t)position + rows > max_seq) throw nb::value_error("position + rows exceeds max_seq");
            std::vector<float> q_host(q.data(), q.data() + (size_t)rows * q_stride);
            std::unique_ptr<DeviceMatrix> dm = new_device(backend);
            akunu::KVCache kv = new_kv_cache(*dm, dtype, n_heads, n_kv_heads, head_dim, max_seq);
            const size_t cache_bytes = kv.k_buffers[0].size;
            if (k_cache.size() != cache_bytes || v_cache.size() != cache_bytes)
                throw nb::value_error(("k_cache and v_cache must hold " + std::to_string(cache_bytes) + " bytes each").c_str());
            auto *out = new std::vector<float>((size_t)rows * out_stride);
            {
                nb::gil_scoped_release release;
                akunu::Device &dev = *dm->dev;
                dev.write_buffer(kv.k_buffers[0], k_cache.c_str(), k_cache.size());
                dev.write_buffer(kv.v_buffers[0], v_cache.c_str(), v_cache.size());
                akunu::Buffer qb = dm->alloc(q_host.size() * sizeof(float)), ob = dm->alloc(out->size() * sizeof(float));
                dev.write_buffer(qb, q_host.data(), q_host.size() * sizeof(float));
                akunu::AttentionParams p{};  // as table_builder.cpp's attention_params
                p.position = position;
                p.kv_len = position + rows;
                p.rows = rows;
                p.n_heads = n_heads;
                p.n_kv_heads = n_kv_heads;
                p.head_dim = head_dim;
                p.max_seq = max_seq;
                p.q_stride = q_stride;
                p.out_stride = out_stride;
                p.scale = scale;
                p.window = window;
                p.softcap = softcap;
                akunu::DispatchTable table;
                akunu::CmdBuilder(table, dev, akunu::kv_kernel_name("attention_f16kv", dtype), {n_heads, rows, 1})
                    .buf(qb)
                    .buf(kv.k_buffers[0])
                    .buf(kv.v_buffers[0])
                    .buf(ob)
                    .params(p)
                    .emit();
                dm->run_and_read(table, out->data(), ob, out->size() * sizeof(float));
            }
            return nb::ndarray<nb::numpy, float, nb::ndim<2>>(out->data(), {(size_t)rows, (size_t)out_stride}, owner_of(out));
        },
        nb::arg("backend"), nb::arg("kv_cache_dtype"), nb::arg("q"), nb::arg("k_cache"), nb::arg("v_cache"),
        nb::arg("n_heads"), nb::arg("n_kv_heads"), nb::arg("head_dim"), nb::arg("max_seq"), nb::arg("position"),
        nb::arg("scale"), nb::arg("window") = 0, nb::arg("softcap") = 0.0f,
        "One attention command (attention_f16kv, or attention_q8kv for kv_cache_dtype 'q8_0') for the query rows "
        "q [rows, q_stride] at positions position.. over one-layer K/V cache bytes (as device_rope_kv_write "
        "returns them) on a new device of `backend`: out [rows, n_heads * head_dim].");
    m.def(
        "device_argmax",
        [](const std::string &backend, FloatVector logits) {
            const int64_t n = (int64_t)logits.shape(0);
            if (n <= 0) throw nb::value_error("logits must not be empty");
            std::unique_ptr<DeviceMatrix> dm = new_device(backend);
            uint32_t token = 0;
            {
                nb::gil_scoped_release release;
                akunu::Device &dev = *dm->dev;
                akunu::Buffer xb = dm->alloc((size_t)n * sizeof(float)), tb = dm->alloc(sizeof(uint32_t));
                dev.write_buffer(xb, logits.data(), (size_t)n * sizeof(float));
                akunu::ArgmaxParams p{(uint32_t)n};
                akunu::DispatchTable table;
                akunu::CmdBuilder(table, dev, "argmax_f32", {1, 1, 1}).buf(xb).buf(tb).params(p).emit();
                dm->run_and_read(table, &token, tb, sizeof(token));
            }
            return token;
        },
        nb::arg("backend"), nb::arg("logits"),
        "The argmax command (first index on ties) over `logits` on a new device of `backend`.");
    m.def(
        "device_sample",
        [](const std::string &backend, FloatVector logits, IdVector positions, float temperature, int top_k, float top_p,
           float min_p, float repeat_penalty, int repeat_last_n, float frequency_penalty, float presence_penalty,
           uint64_t seed, std::vector<uint32_t> recent, uint32_t recent_generated, std::vector<uint32_t> chain) {
            const int64_t n = (int64_t)logits.shape(0);
            if (n <= 0) throw nb::value_error("logits must not be empty");
            if (recent_generated > recent.size()) throw nb::value_error("recent_generated exceeds the recent tokens");
            akunu::SamplingConfig cfg;
            cfg.temperature = temperature;
            cfg.top_k = top_k;
            cfg.top_p = top_p;
            cfg.min_p = min_p;
            cfg.repeat_penalty = repeat_penalty;
            cfg.repeat_last_n = repeat_last_n;
            cfg.frequency_penalty = frequency_penalty;
            cfg.presence_penalty = presence_penalty;
            cfg.seed = seed;
            try {
                cfg.validate();
            } catch (const std::invalid_argument &e) {
                throw nb::value_error(e.what());
            }
            akunu::SamplingRule rule = cfg.rule();
            rule.recent_count = (uint32_t)recent.size();
            rule.recent_generated = recent_generated;
            const size_t draws = positions.shape(0);
            auto *out = new std::vector<uint32_t>(draws);
            std::unique_ptr<DeviceMatrix> dm = new_device(backend);
            {
                nb::gil_scoped_release release;
                akunu::Device &dev = *dm->dev;
                const size_t x_bytes = (size_t)n * sizeof(float);
                akunu::Buffer xb = dm->alloc(x_bytes), tb = dm->alloc((chain.size() + 1) * 4),
                              sb = dm->alloc(akunu::sampling_buffer_bytes(recent.size()));
                dev.write_buffer(sb, &rule, sizeof rule);
                if (!recent.empty()) dev.write_buffer(sb, recent.data(), recent.size() * 4, akunu::kSamplingRecentOffset);
                if (!chain.empty()) dev.write_buffer(tb, chain.data(), chain.size() * 4);
                akunu::DispatchTable table;
                akunu::SampleParams p{(uint32_t)n, 0, (uint32_t)chain.size()};
                akunu::CmdBuilder(table, dev, "sample_f32", {1, 1, 1})
                    .buf(xb)
                    .buf(tb, chain.size() * 4)
                    .buf(sb)
                    .params(p)
                    .emit();
                for (size_t d = 0; d < draws; ++d) {
                    p.position = positions.data()[d];
                    std::memcpy(table.commands[0].params, &p, sizeof p);
                    dev.write_buffer(xb, logits.data(), x_bytes);  // the penalty changes them in place
                    dev.encode_dispatch_table(table, 0, 1);
                    dev.read_buffer(&(*out)[d], tb, 4, chain.size() * 4);
                }
            }
            return nb::ndarray<nb::numpy, uint32_t, nb::ndim<1>>(out->data(), {draws}, owner_of(out));
        },
        nb::arg("backend"), nb::arg("logits"), nb::arg("positions"), nb::arg("temperature"), nb::arg("top_k") = 0,
        nb::arg("top_p") = 1.0f, nb::arg("min_p") = 0.0f, nb::arg("repeat_penalty") = 1.0f, nb::arg("repeat_last_n") = 64,
        nb::arg("frequency_penalty") = 0.0f, nb::arg("presence_penalty") = 0.0f, nb::arg("seed") = 0,
        nb::arg("recent") = std::vector<uint32_t>{}, nb::arg("recent_generated") = 0u,
        nb::arg("chain") = std::vector<uint32_t>{},
        "One draw of the sampling command per position over `logits` on a new device of `backend`. `recent`: the "
        "latest tokens in the sampling buffer, of which the last `recent_generated` were generated; `chain`: this "
        "replay's earlier draws in the token slots before the drawn one (generated too).");
}
