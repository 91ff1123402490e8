// Tensor element types. Codes are GGML's (ggml_type), so GGUF files map directly.
#pragma once
#include <cstddef>
#include <cstdint>

namespace akunu {

enum class DType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ4_NL = 20,
    IQ4_XS = 23,
    BF16 = 30,
};

struct DTypeInfo {
    const char *name;     // "Q4_0"
    uint32_t block_size;  // elements per block (1 for plain floats)
    uint32_t type_size;   // bytes per block
};

// Layout facts for any GGML type code we know by name; nullptr for codes we have never heard of.
const DTypeInfo *dtype_info(uint32_t ggml_type);

// Bytes of one row of `n` elements; n must be a multiple of the block size.
inline size_t row_bytes(const DTypeInfo &info, uint64_t n) { return (size_t)(n / info.block_size) * info.type_size; }

const char *dtype_name(DType t);

}  // namespace akunu
