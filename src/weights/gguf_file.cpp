// GGUF v2/v3 reader. Layout (all little-endian):
//   header:  "GGUF" u32 version, u64 tensor_count, u64 kv_count
//   kv_count metadata pairs:  string key, u32 value type, value
//   tensor_count infos:       string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset
//   padding to general.alignment, then the data section (tensor offsets are relative to it).
// A string is u64 length + bytes; an array is u32 element type + u64 count + elements.
//
// The file is treated as hostile: every length is checked against the bytes actually left in
// the mapping before anything is allocated, and all size arithmetic is overflow-checked.
#include "weights/gguf_file.h"

#include <cstring>
#include <limits>

#include "core/quoted_text.h"
#include "weights/mapped_file.h"

namespace akunu {

namespace {

constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 8;      // arrays of arrays are legal; bound the recursion
constexpr size_t kDefaultAlignment = 32; // GGUF_DEFAULT_ALIGNMENT

// Smallest possible encodings, used to reject absurd counts before looping over them.
constexpr uint64_t kMinKVBytes = 8 + 4 + 1;              // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset
// Array elements decoded in all (nested arrays are skipped, not decoded). A decoded element takes
// 8 bytes (a number) to 32 (a string) against 1 to 8 in the file, so a file of large arrays would
// cost several times its size in memory. Real metadata holds about 2M (a 262k vocabulary's tokens,
// scores and types, its merges): 32M is far above it and caps the decoded size near 1 GiB.
constexpr uint64_t kMaxDecodedArrayElements = uint64_t(1) << 25;

const char *value_type_name(GGUFValueType t) {
    static const char *const names[] = {"UINT8", "INT8",  "UINT16", "INT16", "UINT32",
                                        "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY",
                                        "UINT64", "INT64", "FLOAT64"};
    auto index = static_cast<uint32_t>(t);
    return index < sizeof(names) / sizeof(names[0]) ? names[index] : "UNKNOWN";
}

bool is_valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GGUFValueType::FLOAT64); }

bool is_integer_type(GGUFValueType t) {
    switch (t) {
    case GGUFValueType::UINT8: case GGUFValueType::INT8: case GGUFValueType::UINT16:
    case GGUFValueType::INT16: case GGUFValueType::UINT32: case GGUFValueType::INT32:
    case GGUFValueType::UINT64: case GGUFValueType::INT64:
        return true;
    default:
        return false;
    }
}

bool is_float_type(GGUFValueType t) {
    return t == GGUFValueType::FLOAT32 || t == GGUFValueType::FLOAT64;
}

// Encoded size of a fixed-size scalar; 0 for STRING and ARRAY.
uint64_t fixed_value_size(GGUFValueType t) {
    switch (t) {
    case GGUFValueType::UINT8: case GGUFValueType::INT8: case GGUFValueType::BOOL: return 1;
    case GGUFValueType::UINT16: case GGUFValueType::INT16: return 2;
    case GGUFValueType::UINT32: case GGUFValueType::INT32: case GGUFValueType::FLOAT32: return 4;
    case GGUFValueType::UINT64: case GGUFValueType::INT64: case GGUFValueType::FLOAT64: return 8;
    default: return 0;
    }
}

// Smallest encoding of one array element: strings need their length, arrays their type + count.
uint64_t min_element_size(GGUFValueType t) {
    if (t == GGUFValueType::STRING) return 8;
    if (t == GGUFValueType::ARRAY) return 4 + 8;
    return fixed_value_size(t);
}

template <size_t N> struct UnsignedOfSize;
template <> struct UnsignedOfSize<1> { using type = uint8_t; };
template <> struct UnsignedOfSize<2> { using type = uint16_t; };
template <> struct UnsignedOfSize<4> { using type = uint32_t; };
template <> struct UnsignedOfSize<8> { using type = uint64_t; };

// Little-endian decode that is correct on any host (compilers turn it into a single load).
template <typename T>
T load_le(const uint8_t *p) {
    using U = typename UnsignedOfSize<sizeof(T)>::type;
    U bits = 0;
    for (size_t i = 0; i < sizeof(T); ++i) bits |= static_cast<U>(static_cast<U>(p[i]) << (8 * i));
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

// Walks the mapping once, filling in the GGUFFile. `where_` names the item being read so that a
// truncation error can say what was cut off without formatting a string for every read.
struct GGUFParser {
    GGUFFile &file;
    const uint8_t *base;
    uint64_t size;
    uint64_t pos = 0;
    uint64_t decoded_elements = 0;  // see kMaxDecodedArrayElements
    std::string where_ = "header";

    GGUFParser(GGUFFile &f, const uint8_t *b, uint64_t s) : file(f), base(b), size(s) {}

    [[noreturn]] void fail(const std::string &msg) const {
        throw GGUFError(file.path_ + ": " + msg);
    }

    uint64_t remaining() const { return size - pos; }

    void need(uint64_t n) const {
        if (n > remaining())
            fail("truncated file: " + where_ + " extends past end of file (offset " +
                 std::to_string(pos) + ", needs " + std::to_string(n) + " bytes, file size " +
                 std::to_string(size) + ")");
    }

    template <typename T>
    T read() {
        need(sizeof(T));
        T v = load_le<T>(base + pos);
        pos += sizeof(T);
        return v;
    }

    std::string read_string() {
        uint64_t length_offset = pos;
        auto length = read<uint64_t>();
        check_string_length(length, length_offset);
        std::string s(reinterpret_cast<const char *>(base + pos), static_cast<size_t>(length));
        pos += length;
        return s;
    }

    GGUFValueType read_value_type() {
        uint64_t type_offset = pos;
        auto raw = read<uint32_t>();
        if (!is_valid_value_type(raw))
            fail(where_ + " has unknown value type " + std::to_string(raw) + " at offset " +
                 std::to_string(type_offset));
        return static_cast<GGUFValueType>(raw);
    }

    // ---- header ----

    void read_header(uint64_t &tensor_count, uint64_t &kv_count) {
        if (size == 0) fail("empty file (0 bytes), not a GGUF file");
        need(4);
        if (std::memcmp(base, "GGUF", 4) != 0)
            fail("not a GGUF file (bad magic " + magic_text() + ")");
        pos = 4;
        file.version_ = read<uint32_t>();
        check_version(file.version_);
        tensor_count = read<uint64_t>();
        kv_count = read<uint64_t>();
        // Each entry takes a minimum number of bytes, so counts beyond that are lies.
        if (kv_count > remaining() / kMinKVBytes)
            fail("truncated file or corrupt header: header claims " + std::to_string(kv_count) +
                 " metadata entries but only " + std::to_string(remaining()) +
                 " bytes follow the header");
        if (tensor_count > remaining() / kMinTensorInfoBytes)
            fail("truncated file or corrupt header: header claims " + std::to_string(tensor_count) +
                 " tensors but only " + std::to_string(remaining()) + " bytes follow the header");
    }

    std::string magic_text() const {
        static const char hex[] = "0123456789abcdef";
        std::string out = "0x";
        for (uint64_t i = 0; i < 4 && i < size; ++i) {
            out += hex[base[i] >> 4];
            out += hex[base[i] & 15];
        }
        return out;
    }

    void check_version(uint32_t version) const {
        if (version == 2 || version == 3) return;
        if (version == 1) fail("GGUF version 1 is not supported (only versions 2 and 3)");
        uint32_t swapped = __builtin_bswap32(version);
        if (swapped == 2 || swapped == 3)
            fail("big-endian GGUF files are not supported (version field reads " +
                 std::to_string(version) + ")");
        fail("unsupported GGUF version " + std::to_string(version) + " (only versions 2 and 3)");
    }

    // ---- metadata ----

    void read_metadata(uint64_t kv_count) {
        for (uint64_t i = 0; i < kv_count; ++i) {
            where_ = "metadata key " + std::to_string(i);
            std::string key = read_string();
            where_ = "metadata value " + quoted(key);
            GGUFValue value = read_value(read_value_type());
            if (file.metadata_.count(key)) fail("duplicate metadata key " + quoted(key));
            file.metadata_.emplace(std::move(key), std::move(value));
        }
    }

    GGUFValue read_value(GGUFValueType type) {
        GGUFValue v;
        v.type = type;
        if (type == GGUFValueType::STRING)
            v.str = read_string();
        else if (type == GGUFValueType::ARRAY)
            read_array(v);
        else
            read_scalar(type, v);
        return v;
    }

    void read_scalar(GGUFValueType type, GGUFValue &v) {
        switch (type) {
        case GGUFValueType::UINT8: set_unsigned(v, read<uint8_t>()); break;
        case GGUFValueType::UINT16: set_unsigned(v, read<uint16_t>()); break;
        case GGUFValueType::UINT32: set_unsigned(v, read<uint32_t>()); break;
        case GGUFValueType::UINT64: set_unsigned(v, read<uint64_t>()); break;
        case GGUFValueType::INT8: set_signed(v, read<int8_t>()); break;
        case GGUFValueType::INT16: set_signed(v, read<int16_t>()); break;
        case GGUFValueType::INT32: set_signed(v, read<int32_t>()); break;
        case GGUFValueType::INT64: set_signed(v, read<int64_t>()); break;
        case GGUFValueType::FLOAT32: v.f = read<float>(); break;
        case GGUFValueType::FLOAT64: v.f = read<double>(); break;
        case GGUFValueType::BOOL:
            v.b = read<uint8_t>() != 0;
            set_unsigned(v, v.b ? 1 : 0);
            break;
        default: break;  // STRING/ARRAY handled by the caller
        }
    }

    static void set_unsigned(GGUFValue &v, uint64_t x) {
        v.u = x;
        v.i = static_cast<int64_t>(x);  // may wrap for u64 > INT64_MAX; get_int checks
        v.f = static_cast<double>(x);
    }
    static void set_signed(GGUFValue &v, int64_t x) {
        v.i = x;
        v.u = static_cast<uint64_t>(x);
        v.f = static_cast<double>(x);
    }

    // Reads an array header and checks the count against the bytes left, before any allocation.
    uint64_t read_array_header(GGUFValueType &elem_type) {
        elem_type = read_value_type();
        uint64_t count_offset = pos;
        auto count = read<uint64_t>();
        uint64_t min_size = min_element_size(elem_type);
        if (count > remaining() / min_size)
            fail("truncated file: " + where_ + " claims an array of " + std::to_string(count) +
                 " " + value_type_name(elem_type) + " elements at offset " +
                 std::to_string(count_offset) + " but only " + std::to_string(remaining()) +
                 " bytes remain");
        return count;
    }

    void read_array(GGUFValue &v) {
        uint64_t count = read_array_header(v.array_type);
        v.array_length = static_cast<size_t>(count);
        GGUFValueType elem = v.array_type;
        if (elem != GGUFValueType::ARRAY) {
            decoded_elements += count;  // no overflow: count <= the file's size
            if (decoded_elements > kMaxDecodedArrayElements)
                fail(where_ + " brings the metadata arrays to " + std::to_string(decoded_elements) +
                     " elements, more than the " + std::to_string(kMaxDecodedArrayElements) +
                     " a model's metadata could need");
        }
        if (elem == GGUFValueType::STRING) {
            v.strings.reserve(count);
            for (uint64_t i = 0; i < count; ++i) v.strings.push_back(read_string());
        } else if (elem == GGUFValueType::ARRAY) {
            for (uint64_t i = 0; i < count; ++i) skip_array(1);
        } else if (is_float_type(elem)) {
            v.numbers.reserve(count);
            for (uint64_t i = 0; i < count; ++i) v.numbers.push_back(read_array_scalar(elem).f);
        } else {  // integers and bools
            v.ints.reserve(count);
            for (uint64_t i = 0; i < count; ++i) v.ints.push_back(read_array_scalar(elem).i);
        }
    }

    GGUFValue read_array_scalar(GGUFValueType elem) {
        GGUFValue item;
        read_scalar(elem, item);
        return item;
    }

    // Validates and steps over a nested array without keeping its contents.
    void skip_array(int depth) {
        if (depth >= kMaxArrayNesting)
            fail(where_ + " nests arrays more than " + std::to_string(kMaxArrayNesting) + " deep");
        GGUFValueType elem;
        uint64_t count = read_array_header(elem);
        if (elem == GGUFValueType::ARRAY) {
            for (uint64_t i = 0; i < count; ++i) skip_array(depth + 1);
        } else if (elem == GGUFValueType::STRING) {
            for (uint64_t i = 0; i < count; ++i) skip_string();
        } else {
            pos += count * fixed_value_size(elem);  // already bounded by read_array_header
        }
    }

    void skip_string() {
        uint64_t length_offset = pos;
        auto length = read<uint64_t>();
        check_string_length(length, length_offset);
        pos += length;
    }

    void check_string_length(uint64_t length, uint64_t length_offset) const {
        if (length > remaining())
            fail("truncated file: " + where_ + " has a string of length " + std::to_string(length) +
                 " at offset " + std::to_string(length_offset) + " but only " +
                 std::to_string(remaining()) + " bytes remain");
    }

    // ---- alignment and tensors ----

    void read_alignment() {
        const GGUFValue *v = file.find("general.alignment");
        if (!v) return;
        if (v->type != GGUFValueType::UINT32)
            fail("general.alignment has type " + std::string(value_type_name(v->type)) +
                 ", expected UINT32");
        if (!is_power_of_two(v->u))
            fail("invalid general.alignment " + std::to_string(v->u) +
                 " (must be a nonzero power of two)");
        file.alignment_ = static_cast<size_t>(v->u);
    }

    void read_tensor_infos(uint64_t tensor_count) {
        file.tensors_.reserve(tensor_count);
        for (uint64_t i = 0; i < tensor_count; ++i) {
            where_ = "tensor info " + std::to_string(i);
            file.tensors_.push_back(read_tensor_info());
            const GGUFTensor &t = file.tensors_.back();
            if (!file.tensor_index_.emplace(t.name, i).second)
                fail("duplicate tensor name " + quoted(t.name));
        }
    }

    GGUFTensor read_tensor_info() {
        GGUFTensor t;
        t.name = read_string();
        where_ += " (" + quoted(t.name) + ")";
        auto n_dims = read<uint32_t>();
        if (n_dims < 1 || n_dims > kMaxDims)
            fail("tensor " + quoted(t.name) + " has " + std::to_string(n_dims) +
                 " dimensions (n_dims must be between 1 and " + std::to_string(kMaxDims) + ")");
        for (uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(read<uint64_t>());
        auto type_code = read<uint32_t>();
        t.offset = read<uint64_t>();
        const DTypeInfo *info = dtype_info(type_code);
        if (!info)
            throw UnsupportedError(file.path_ + ": tensor " + quoted(t.name) +
                                   " has unknown GGML type " + std::to_string(type_code) +
                                   " (not a type this reader knows)");
        t.dtype = static_cast<DType>(type_code);
        compute_sizes(t, *info);
        return t;
    }

    void compute_sizes(GGUFTensor &t, const DTypeInfo &info) const {
        uint64_t n = 1;
        for (size_t d = 0; d < t.dims.size(); ++d) {
            if (t.dims[d] == 0)
                fail("tensor " + quoted(t.name) + " has dimension " + std::to_string(d) +
                     " equal to 0");
            if (__builtin_mul_overflow(n, t.dims[d], &n))
                fail("tensor " + quoted(t.name) + " has dimensions whose product overflows "
                     "(element count does not fit in 64 bits)");
        }
        t.n_elements = n;
        if (t.dims[0] % info.block_size != 0)
            fail("tensor " + quoted(t.name) + " of type " + info.name + " has row length " +
                 std::to_string(t.dims[0]) + " not divisible by the block size " +
                 std::to_string(info.block_size));
        uint64_t n_bytes = 0;
        // n is a multiple of block_size because dims[0] is.
        if (__builtin_mul_overflow(n / info.block_size, uint64_t(info.type_size), &n_bytes) ||
            n_bytes > std::numeric_limits<size_t>::max())
            fail("tensor " + quoted(t.name) + " byte size overflows");
        t.n_bytes = static_cast<size_t>(n_bytes);
    }

    // Data starts at the first aligned offset after the tensor infos; each tensor must be
    // aligned within it and lie entirely inside the file.
    void locate_tensor_data() {
        uint64_t align = file.alignment_;
        uint64_t data_start = (pos + align - 1) / align * align;  // pos <= size, no overflow
        for (GGUFTensor &t : file.tensors_) {
            if (t.offset % align != 0)
                fail("tensor " + quoted(t.name) + " data offset " + std::to_string(t.offset) +
                     " is not a multiple of the alignment " + std::to_string(align));
            uint64_t begin = 0, end = 0;
            if (__builtin_add_overflow(data_start, t.offset, &begin) ||
                __builtin_add_overflow(begin, uint64_t(t.n_bytes), &end) || end > size)
                fail("truncated file or bad tensor offset: tensor " + quoted(t.name) +
                     " data [offset " + std::to_string(t.offset) + ", " +
                     std::to_string(t.n_bytes) + " bytes) extends past end of file (data section "
                     "starts at " + std::to_string(data_start) + ", file size " +
                     std::to_string(size) + ")");
            t.data = base + begin;
        }
    }

    void parse() {
        uint64_t tensor_count = 0, kv_count = 0;
        read_header(tensor_count, kv_count);
        read_metadata(kv_count);
        read_alignment();
        read_tensor_infos(tensor_count);
        locate_tensor_data();
    }
};

// ---- GGUFFile ----

std::unique_ptr<GGUFFile> GGUFFile::open(const std::string &path) {
    std::unique_ptr<GGUFFile> file(new GGUFFile());
    file->path_ = path;
    file->alignment_ = kDefaultAlignment;
    file->mapping_ = MappedFile::open(path, "GGUF file");
    GGUFParser(*file, file->mapping_->data(), file->mapping_->size()).parse();
    return file;
}

GGUFFile::~GGUFFile() = default;

const GGUFValue *GGUFFile::find(const std::string &key) const {
    auto it = metadata_.find(key);
    return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void wrong_type(const std::string &path, const std::string &key, GGUFValueType t,
                             const char *expected) {
    throw GGUFError(path + ": metadata key " + quoted(key) + " has type " + value_type_name(t) +
                    ", expected " + expected);
}
}  // namespace

std::string GGUFFile::get_string(const std::string &key, const std::string &fallback) const {
    const GGUFValue *v = find(key);
    if (!v) return fallback;
    if (v->type != GGUFValueType::STRING) wrong_type(path_, key, v->type, "a string");
    return v->str;
}

int64_t GGUFFile::get_int(const std::string &key, int64_t fallback) const {
    const GGUFValue *v = find(key);
    if (!v) return fallback;
    if (!is_integer_type(v->type) && v->type != GGUFValueType::BOOL)
        wrong_type(path_, key, v->type, "an integer");
    if (v->type == GGUFValueType::UINT64 && v->u > uint64_t(std::numeric_limits<int64_t>::max()))
        throw GGUFError(path_ + ": metadata key " + quoted(key) + " value " + std::to_string(v->u) +
                        " does not fit in a signed 64-bit integer");
    return v->i;
}

double GGUFFile::get_float(const std::string &key, double fallback) const {
    const GGUFValue *v = find(key);
    if (!v) return fallback;
    if (!is_float_type(v->type) && !is_integer_type(v->type))
        wrong_type(path_, key, v->type, "a number");
    return v->f;
}

bool GGUFFile::get_bool(const std::string &key, bool fallback) const {
    const GGUFValue *v = find(key);
    if (!v) return fallback;
    if (v->type == GGUFValueType::BOOL) return v->b;
    if (is_integer_type(v->type)) return v->u != 0;  // some converters write flags as integers
    wrong_type(path_, key, v->type, "a bool");
}

const GGUFTensor *GGUFFile::tensor(const std::string &name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace akunu
