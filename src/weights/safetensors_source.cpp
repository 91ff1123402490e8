#include "weights/safetensors_source.h"

#include <cstring>
#include <limits>

#include "core/errors.h"
#include "core/half.h"
#include "weights/mlx_quant.h"

namespace akunu {

namespace {

// SafeTensors dtypes the loader reads: the float types run as they are; U32 carries MLX's
// packed integers.
struct StoredType {
    const char *name;
    DType dtype;
    size_t size;
};
const StoredType kFloatTypes[] = {{"F32", DType::F32, 4}, {"F16", DType::F16, 2}, {"BF16", DType::BF16, 2}};

const StoredType *float_type(const std::string &name) {
    for (const StoredType &t : kFloatTypes)
        if (name == t.name) return &t;
    return nullptr;
}

size_t element_size(const std::string &dtype) {
    if (const StoredType *t = float_type(dtype)) return t->size;
    if (dtype == "U32") return 4;
    return 0;
}

std::string where(const CheckpointSlice &s) { return s.file + ": tensor '" + s.name + "'"; }

std::string shape_str(const std::vector<uint64_t> &shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// HF keeps each head's rotation pairs half a head apart (rotate-half); the interleaved RoPE
// kernel wants them adjacent: row h*hd + 2i + j comes from row h*hd + j*hd/2 + i.
void rotate_half_to_interleaved(const uint8_t *src, uint8_t *dst, uint64_t rows, size_t row_bytes, uint32_t heads) {
    const uint64_t head_rows = rows / heads, half = head_rows / 2;
    for (uint64_t h = 0; h < heads; ++h)
        for (uint64_t i = 0; i < half; ++i)
            for (uint64_t j = 0; j < 2; ++j)
                std::memcpy(dst + (h * head_rows + 2 * i + j) * row_bytes, src + (h * head_rows + j * half + i) * row_bytes,
                            row_bytes);
}

}  // namespace

std::unique_ptr<SafeTensorsSource> SafeTensorsSource::open(const HFCheckpoint &checkpoint) {
    std::unique_ptr<SafeTensorsSource> src(new SafeTensorsSource());
    src->dir_ = checkpoint.path;
    for (const CheckpointTensor &t : checkpoint.tensors) {
        if (src->views_.count(t.canonical))
            throw ModelFormatError(checkpoint.path + ": two tensors map to '" + t.canonical + "' (the second is '" +
                                   t.data.name + "')");
        TensorView v = t.bits ? src->quantized_tensor(t) : src->plain_tensor(t);
        src->views_.emplace(t.canonical, std::move(v));
        src->order_.push_back(t.canonical);
    }
    return src;
}

const MappedFile &SafeTensorsSource::map(const std::string &path) {
    auto it = files_.find(path);
    if (it == files_.end()) it = files_.emplace(path, MappedFile::open(path)).first;
    return *it->second;
}

const uint8_t *SafeTensorsSource::locate(const CheckpointSlice &s) {
    const size_t esize = element_size(s.dtype);
    if (!esize)
        throw UnsupportedError(where(s) + " has dtype '" + s.dtype +
                               "'; supported: F32, F16, BF16 (and U32 for MLX-packed weights)");
    uint64_t n = 1;
    for (uint64_t d : s.shape) {
        if (d != 0 && n > std::numeric_limits<uint64_t>::max() / d)
            throw ModelFormatError(where(s) + ": shape " + shape_str(s.shape) + " overflows");
        n *= d;
    }
    if (n == 0) throw ModelFormatError(where(s) + ": empty shape " + shape_str(s.shape));
    if (n > std::numeric_limits<uint64_t>::max() / esize || n * esize != s.n_bytes)
        throw ModelFormatError(where(s) + ": the header gives " + std::to_string(s.n_bytes) + " bytes, but shape " +
                               shape_str(s.shape) + " of " + s.dtype + " needs " + std::to_string(n * esize));
    const MappedFile &f = map(s.file);
    if (s.offset > f.size() || s.n_bytes > f.size() - s.offset)
        throw ModelFormatError(where(s) + ": data [" + std::to_string(s.offset) + ", " +
                               std::to_string(s.offset + s.n_bytes) + ") lies past the end of the file (" +
                               std::to_string(f.size()) + " bytes): truncated file?");
    return f.data() + s.offset;
}

TensorView SafeTensorsSource::owned_view(const CheckpointTensor &t, DType dtype, AlignedBytes bytes, uint64_t rows,
                                         uint64_t cols) {
    TensorView v;
    v.file_name = t.data.name;
    v.dtype = dtype;
    v.dims = rows ? std::vector<uint64_t>{cols, rows} : std::vector<uint64_t>{cols};
    v.data = bytes.data();
    v.n_bytes = bytes.size();
    owned_.push_back(std::move(bytes));
    return v;
}

TensorView SafeTensorsSource::plain_tensor(const CheckpointTensor &t) {
    const CheckpointSlice &s = t.data;
    const StoredType *type = float_type(s.dtype);
    if (!type) {
        if (s.dtype == "U32")
            throw ModelFormatError(where(s) + " is packed (U32) but config.json has no \"quantization\" for it "
                                   "(scales/biases missing?)");
        locate(s);  // throws the unsupported-dtype message
    }
    if (s.shape.empty() || s.shape.size() > 2)
        throw ModelFormatError(where(s) + " has shape " + shape_str(s.shape) + "; expected a vector or a matrix");
    const uint8_t *data = locate(s);
    const uint64_t rows = s.shape.size() == 2 ? s.shape[0] : 0;
    const uint64_t cols = s.shape.back();
    if (t.add_one) {  // (1 + w) norm weight: F32 w + 1, rounded once, as transformers computes it
        if (rows || t.permute_heads)
            throw ModelFormatError(where(s) + " has shape " + shape_str(s.shape) +
                                   "; a (1 + w) norm weight must be a vector");
        AlignedBytes out(cols * sizeof(float));
        for (uint64_t i = 0; i < cols; ++i) {
            float w;
            if (type->dtype == DType::F32) {
                std::memcpy(&w, data + 4 * i, 4);
            } else {
                uint16_t h;
                std::memcpy(&h, data + 2 * i, 2);
                w = type->dtype == DType::F16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
            }
            w += 1.0f;
            std::memcpy(out.data() + 4 * i, &w, 4);
        }
        return owned_view(t, DType::F32, std::move(out), 0, cols);
    }
    if (t.permute_heads) {  // a matrix's rows, or a vector's elements (a projection's bias)
        const uint64_t units = s.shape[0];
        if (units % (2ull * t.permute_heads) != 0)
            throw ModelFormatError(where(s) + " has shape " + shape_str(s.shape) + ", which does not split into " +
                                   std::to_string(t.permute_heads) + " heads of rotation pairs");
        AlignedBytes out(s.n_bytes);
        rotate_half_to_interleaved(data, out.data(), units, s.n_bytes / units, t.permute_heads);
        return owned_view(t, type->dtype, std::move(out), rows, cols);
    }
    // SafeTensors pads its header to 8 bytes, so tensors are rarely 32-byte aligned; the CPU
    // kernels load unaligned and only need whole elements (the CUDA upload copies anyway).
    if (reinterpret_cast<uintptr_t>(data) % type->size != 0) {
        AlignedBytes out(s.n_bytes);
        std::memcpy(out.data(), data, s.n_bytes);
        return owned_view(t, type->dtype, std::move(out), rows, cols);
    }
    TensorView v;  // zero copy: straight from the mapping
    v.file_name = s.name;
    v.dtype = type->dtype;
    v.dims = rows ? std::vector<uint64_t>{cols, rows} : std::vector<uint64_t>{cols};
    v.data = data;
    v.n_bytes = s.n_bytes;
    return v;
}

TensorView SafeTensorsSource::quantized_tensor(const CheckpointTensor &t) {
    const CheckpointSlice &w = t.data;
    if (t.add_one) throw ModelFormatError(where(w) + " is quantized, but it is a (1 + w) norm weight (a vector)");
    if (t.bits < 2 || t.bits > 8 || t.bits == 7)
        throw UnsupportedError(where(w) + ": MLX quantization with " + std::to_string(t.bits) +
                               " bits is not supported (2, 3, 4, 5, 6, 8)");
    if (t.group_size == 0) throw ModelFormatError(where(w) + ": MLX group_size must be positive");
    if (w.dtype != "U32" || w.shape.size() != 2)
        throw ModelFormatError(where(w) + " is " + w.dtype + " " + shape_str(w.shape) +
                               "; an MLX-quantized weight must be a U32 matrix");
    const uint64_t rows = w.shape[0], words = w.shape[1];
    if (words * 32 % t.bits != 0)
        throw ModelFormatError(where(w) + ": " + std::to_string(words) + " words per row do not hold a whole number of " +
                               std::to_string(t.bits) + "-bit values");
    const uint64_t cols = words * 32 / t.bits;
    if (cols % t.group_size != 0)
        throw ModelFormatError(where(w) + ": " + std::to_string(cols) + " columns are not a multiple of group_size " +
                               std::to_string(t.group_size));
    if (rows > UINT32_MAX || cols > UINT32_MAX) throw ModelFormatError(where(w) + ": matrix too large");
    const std::vector<uint64_t> group_shape = {rows, cols / t.group_size};
    for (const CheckpointSlice *s : {&t.scales, &t.biases}) {
        if (!float_type(s->dtype))
            throw ModelFormatError(where(*s) + " has dtype '" + s->dtype + "'; MLX scales/biases must be F16, BF16 or F32");
        if (s->shape != group_shape)
            throw ModelFormatError(where(*s) + " has shape " + shape_str(s->shape) + ", expected " +
                                   shape_str(group_shape) + " for " + shape_str(w.shape) + " at " +
                                   std::to_string(t.bits) + " bits, group_size " + std::to_string(t.group_size));
    }
    if (t.scales.dtype != t.biases.dtype)
        throw ModelFormatError(where(t.scales) + ": scales are " + t.scales.dtype + " but biases are " + t.biases.dtype);

    MLXQuantMatrix m;
    m.packed = locate(w);
    m.scales = locate(t.scales);
    m.biases = locate(t.biases);
    m.scale_dtype = float_type(t.scales.dtype)->dtype;
    m.rows = (uint32_t)rows;
    m.cols = (uint32_t)cols;
    m.bits = t.bits;
    m.group_size = t.group_size;
    ConvertedMatrix c = convert_mlx_matrix(m);
    if (t.permute_heads) {
        if (rows % (2ull * t.permute_heads) != 0)
            throw ModelFormatError(where(w) + ": " + std::to_string(rows) + " rows do not split into " +
                                   std::to_string(t.permute_heads) + " heads of rotation pairs");
        AlignedBytes out(c.bytes.size());
        rotate_half_to_interleaved(c.bytes.data(), out.data(), rows, c.bytes.size() / rows, t.permute_heads);
        c.bytes = std::move(out);
    }
    return owned_view(t, c.dtype, std::move(c.bytes), rows, cols);
}

std::vector<TensorView> SafeTensorsSource::all_tensors() const {
    std::vector<TensorView> out;
    for (const std::string &name : order_) out.push_back(views_.at(name));
    return out;
}

void SafeTensorsSource::release_unused(const std::set<const void *> &in_use) {
    std::vector<AlignedBytes> kept;
    for (AlignedBytes &b : owned_) {
        if (in_use.count(b.data())) {
            kept.push_back(std::move(b));
            continue;
        }
        for (auto &kv : views_)
            if (kv.second.data == b.data()) kv.second.data = nullptr;
    }
    owned_ = std::move(kept);
}

size_t SafeTensorsSource::converted_bytes() const {
    size_t n = 0;
    for (const AlignedBytes &b : owned_) n += b.size();
    return n;
}

}  // namespace akunu
