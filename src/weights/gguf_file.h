// GGUF v2/v3 reader: memory-maps the file, parses metadata and the tensor directory with every
// bounds and overflow check, and hands out pointers into the mapping. Never copies tensor data.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/errors.h"

namespace akunu {

class MappedFile;

// Thrown for anything wrong with the file itself: the message names the file and the problem.
// Unknown tensor type codes throw UnsupportedError instead (the file may be fine, we are not).
using GGUFError = ModelFormatError;

enum class GGUFValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// One metadata value. Scalars are widened into i/u/f; strings and arrays are decoded eagerly:
// arrays of strings into `strings`, float arrays into `numbers`, integer/bool arrays into `ints`.
struct GGUFValue {
    GGUFValueType type = GGUFValueType::UINT8;
    GGUFValueType array_type = GGUFValueType::UINT8;  // element type when type == ARRAY
    int64_t i = 0;
    uint64_t u = 0;
    double f = 0;
    bool b = false;
    std::string str;
    std::vector<std::string> strings;  // ARRAY of STRING
    std::vector<double> numbers;       // ARRAY of float types
    std::vector<int64_t> ints;         // ARRAY of integer/bool types
    size_t array_length = 0;
};

struct GGUFTensor {
    std::string name;
    DType dtype;                 // validated: a type we know the layout of
    std::vector<uint64_t> dims;  // GGUF order: dims[0] is the innermost (row length)
    uint64_t n_elements = 0;
    uint64_t offset = 0;         // from the start of the data section
    size_t n_bytes = 0;
    const uint8_t *data = nullptr;  // into the mapping
};

class GGUFFile {
public:
    // Opens and validates; throws GGUFError naming the problem (bad magic, unsupported version,
    // truncated header, string/array lengths past the end, tensor data out of bounds, overflow,
    // duplicate tensor names, unknown tensor type codes, bad alignment...).
    static std::unique_ptr<GGUFFile> open(const std::string &path);
    ~GGUFFile();
    GGUFFile(const GGUFFile &) = delete;
    GGUFFile &operator=(const GGUFFile &) = delete;

    const std::string &path() const { return path_; }
    uint32_t version() const { return version_; }
    size_t alignment() const { return alignment_; }

    bool has(const std::string &key) const { return metadata_.count(key) != 0; }
    const GGUFValue *find(const std::string &key) const;
    // Typed getters: throw GGUFError if present with the wrong type; return `fallback` if absent.
    std::string get_string(const std::string &key, const std::string &fallback = "") const;
    int64_t get_int(const std::string &key, int64_t fallback) const;      // any integer type
    double get_float(const std::string &key, double fallback) const;      // float or integer types
    bool get_bool(const std::string &key, bool fallback) const;
    const std::map<std::string, GGUFValue> &metadata() const { return metadata_; }

    const std::vector<GGUFTensor> &tensors() const { return tensors_; }
    const GGUFTensor *tensor(const std::string &name) const;  // nullptr if absent

private:
    GGUFFile() = default;
    std::string path_;
    uint32_t version_ = 0;
    size_t alignment_ = 32;
    std::map<std::string, GGUFValue> metadata_;
    std::vector<GGUFTensor> tensors_;
    std::map<std::string, size_t> tensor_index_;
    std::unique_ptr<MappedFile> mapping_;
    friend struct GGUFParser;
};

}  // namespace akunu
