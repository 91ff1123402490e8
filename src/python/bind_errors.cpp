// Engine exceptions -> Python exception classes (akunu.AkunuError and subclasses).
// std::invalid_argument already becomes ValueError through nanobind.
#include <nanobind/nanobind.h>

#include "core/errors.h"

namespace nb = nanobind;

namespace {

// akunu.OutOfMemoryError is an AkunuError and a MemoryError, so that `except MemoryError` catches
// it too; nb::exception takes one base, so the class is made here with both. Its instances carry
// the plan's numbers: needed, available (None: not known) and largest_context (None: not known).
PyObject *g_out_of_memory = nullptr;

void raise_out_of_memory(const akunu::OutOfMemoryError &e) {
    nb::object error = nb::steal(PyObject_CallFunction(g_out_of_memory, "s", e.what()));
    if (!error.is_valid()) return;  // the call set its own Python error
    error.attr("needed") = nb::int_(e.needed);
    error.attr("available") =
        e.available == akunu::OutOfMemoryError::kUnknownBytes ? nb::none() : nb::object(nb::int_(e.available));
    error.attr("largest_context") = e.largest_context < 0 ? nb::none() : nb::object(nb::int_(e.largest_context));
    PyErr_SetObject(g_out_of_memory, error.ptr());
}

}  // namespace

void bind_errors(nb::module_ &m) {
    // Registered base first: nanobind tries the most recently registered translator first.
    auto base = nb::exception<akunu::AkunuError>(m, "AkunuError");
    nb::exception<akunu::ModelFormatError>(m, "ModelFormatError", base);
    nb::exception<akunu::UnsupportedError>(m, "UnsupportedError", base);
    nb::exception<akunu::ContextOverflowError>(m, "ContextOverflowError", base);
    nb::exception<akunu::TokenizerError>(m, "TokenizerError", base);

    nb::object bases = nb::steal(PyTuple_Pack(2, base.ptr(), PyExc_MemoryError));
    g_out_of_memory = PyErr_NewExceptionWithDoc(
        "akunu._core.OutOfMemoryError",
        "The model does not fit in the memory available: refused before anything was allocated, or an allocation "
        "failed. Attributes: needed and available (bytes; available None when not known) and largest_context (the "
        "longest context_length that fits: 0 when none does, None when not known).",
        bases.ptr(), nullptr);
    if (!g_out_of_memory) throw nb::python_error();
    m.attr("OutOfMemoryError") = nb::handle(g_out_of_memory);  // the module holds the reference
    nb::register_exception_translator([](const std::exception_ptr &p, void *) {
        try {
            std::rethrow_exception(p);
        } catch (const akunu::OutOfMemoryError &e) {
            raise_out_of_memory(e);
        }
    });
}
