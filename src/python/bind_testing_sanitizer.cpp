// akunu._testing's sanitizer seams (docs/adr/0023-sanitizer-build.md): which sanitizers this build
// of the module was compiled with, and a deliberate bug of each kind they catch, so
// tests/test_sanitizer_build.py can prove that a sanitizer run of the tests (tools/sanitizer_tests.sh)
// would report one: the code is instrumented, the runtime is loaded and the report reaches its file.
// The bugs exist only in a sanitizer build (AKUNU_SANITIZE, cmake/sanitizers.cmake); elsewhere the
// self-test raises RuntimeError without doing anything.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <climits>
#include <stdexcept>
#include <string>

#include "python/bind_testing.h"

namespace nb = nanobind;

namespace {

#ifdef AKUNU_SANITIZE_BUILD
// volatile: the compiler cannot see the index, the pointer or the operand, so it keeps the bad
// access, and UBSan's object-size check (which would report the read first) cannot see the array.
int read_one_past_a_heap_array() {
    int *four = new int[4]();
    int *volatile array = four;
    volatile int index = 4;
    int value = array[index];  // AddressSanitizer: heap-buffer-overflow
    delete[] four;
    return value;
}

int overflow_a_signed_int() {
    volatile int largest = INT_MAX;
    return largest + 1;  // UndefinedBehaviorSanitizer: signed integer overflow
}
#endif

}  // namespace

void bind_testing_sanitizer(nb::module_ &m) {
#ifdef AKUNU_SANITIZE_BUILD
    const char *built_with = AKUNU_SANITIZE_BUILD;
#else
    const char *built_with = "";
#endif
    m.def("sanitizers", [built_with] { return std::string(built_with); },
          "The sanitizers this module was built with (AKUNU_SANITIZE, e.g. 'address,undefined'; '' for none).");
    m.def(
        "sanitizer_self_test",
        [built_with](const std::string &bug) -> int {
            if (bug != "heap-buffer-overflow" && bug != "signed-integer-overflow")
                throw nb::value_error(("unknown sanitizer self-test '" + bug +
                                       "' (heap-buffer-overflow or signed-integer-overflow)")
                                          .c_str());
            // Commit a bug only where a sanitizer catches it: elsewhere it would be a real one.
            const std::string catcher = bug == "heap-buffer-overflow" ? "address" : "undefined";
            if (std::string(built_with).empty())
                throw std::runtime_error("sanitizer_self_test needs a sanitizer build (AKUNU_SANITIZE); this one has none");
            if (("," + std::string(built_with) + ",").find("," + catcher + ",") == std::string::npos)
                throw std::runtime_error("sanitizer_self_test('" + bug + "'): this build has no " + catcher +
                                         " sanitizer (AKUNU_SANITIZE=" + built_with + ")");
#ifdef AKUNU_SANITIZE_BUILD
            return bug == "heap-buffer-overflow" ? read_one_past_a_heap_array() : overflow_a_signed_int();
#else
            return 0;  // not reached: built_with is empty without AKUNU_SANITIZE_BUILD
#endif
        },
        nb::arg("bug"),
        "Commit the bug named ('heap-buffer-overflow' or 'signed-integer-overflow') in a build with the "
        "sanitizer that catches it, whose runtime then ends the process with a report; RuntimeError elsewhere.");
}
