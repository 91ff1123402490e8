// Exceptions the engine throws. Each maps to a Python exception class of the same name
// (src/python/bind_errors.cpp), so users see a clear, catchable error naming the problem.
#pragma once
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

}  // namespace akunu
