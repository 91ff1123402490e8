// Text read from a model file, made safe to put in an error message. A message travels to Python
// as UTF-8 (akunu.ModelFormatError & co.): raw bytes of a hostile file there would surface as a
// UnicodeDecodeError instead of the error naming the problem (found by fuzz/fuzz_model_config).
#pragma once
#include <string>

namespace akunu {

// `text` in single quotes: valid UTF-8 characters kept, control characters, backslashes and bytes
// that are not UTF-8 written as \xNN, at most 80 characters shown ("..." after the cut).
std::string quoted(const std::string &text);

}  // namespace akunu
