// Python binding of akunu::Tokenizer (class akunu.Tokenizer); other bindings use
// make_py_tokenizer to hand a model's tokenizer to Python.
#pragma once
#include <memory>

#include <nanobind/nanobind.h>

#include "tokenizer/tokenizer.h"

void bind_tokenizer(nanobind::module_ &m);

// Wraps a tokenizer (shared with its owner, e.g. a Model) as an akunu.Tokenizer object.
// bind_tokenizer must have run first.
nanobind::object make_py_tokenizer(std::shared_ptr<akunu::Tokenizer> tok);
