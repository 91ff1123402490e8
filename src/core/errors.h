// Exceptions the engine throws. Each maps to a Python exception class of the same name
// (src/python/bind_errors.cpp), so users see a clear, catchable error naming the problem.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace akunu {

struct AkunuError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// The file is not a valid model file: bad magic, truncated, out-of-bounds offsets, overflow...
struct ModelFormatError : AkunuError {
    using AkunuError::AkunuError;
};
// A valid file asks for something we do not support: architecture, tensor dtype, tokenizer.
struct UnsupportedError : AkunuError {
    using AkunuError::AkunuError;
};
// The request does not fit in the model's context window.
struct ContextOverflowError : AkunuError {
    using AkunuError::AkunuError;
};
// Tokenizer metadata is missing or inconsistent.
struct TokenizerError : AkunuError {
    using AkunuError::AkunuError;
};
// The model does not fit in the memory available: refused by the memory plan before anything was
// allocated (inference/memory_plan.h), or an allocation the device could not make. Python sees
// akunu.OutOfMemoryError, an AkunuError and a MemoryError, with these numbers as attributes.
struct OutOfMemoryError : AkunuError {
    static constexpr uint64_t kUnknownBytes = UINT64_MAX;
    OutOfMemoryError(const std::string &what, uint64_t needed, uint64_t available = kUnknownBytes,
                     int64_t largest_context = -1)
        : AkunuError(what), needed(needed), available(available), largest_context(largest_context) {}
    uint64_t needed;          // bytes asked for
    uint64_t available;       // bytes the device had; kUnknownBytes when not known
    int64_t largest_context;  // the longest context_length that fits (0: none); -1 when not known
};

}  // namespace akunu
