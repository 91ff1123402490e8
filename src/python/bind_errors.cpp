// Engine exceptions -> Python exception classes (akunu.AkunuError and subclasses).
// std::invalid_argument already becomes ValueError through nanobind.
#include <nanobind/nanobind.h>

#include "core/errors.h"

namespace nb = nanobind;

void bind_errors(nb::module_ &m) {
    // Registered base first: nanobind tries the most recently registered translator first.
    auto base = nb::exception<akunu::AkunuError>(m, "AkunuError");
    nb::exception<akunu::ModelFormatError>(m, "ModelFormatError", base);
    nb::exception<akunu::UnsupportedError>(m, "UnsupportedError", base);
    nb::exception<akunu::ContextOverflowError>(m, "ContextOverflowError", base);
    nb::exception<akunu::TokenizerError>(m, "TokenizerError", base);
}
