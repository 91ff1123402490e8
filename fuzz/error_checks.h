// What every fuzz target asserts about an error the engine raised for a bad input: it is one of
// the engine's own exception classes (anything else escapes the target and libFuzzer reports it
// as a crash), and its message is valid UTF-8, which the Python binding needs to turn it into
// akunu.ModelFormatError & co. (a message cut inside a multi-byte character, or raw bytes from the
// file, would surface as a UnicodeDecodeError instead).
#pragma once
#include <exception>

namespace akunu_fuzz {

// Aborts (a finding) if `e`'s message is not valid UTF-8.
void check_error_message(const std::exception &e);

}  // namespace akunu_fuzz
