// akunu._testing's memory seams: force what the memory plan sees as available, so that tests can
// provoke OutOfMemoryError deterministically (inference/memory_plan.h), and read the host's
// available memory from a fake /proc and cgroup tree (core/host_memory.h).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "core/host_memory.h"
#include "inference/memory_plan.h"
#include "python/bind_testing.h"

namespace nb = nanobind;

void bind_testing_memory(nb::module_ &m) {
    m.def(
        "set_available_memory_override", [](uint64_t bytes) { akunu::set_available_memory_override(bytes); },
        nb::arg("bytes"),
        "Every memory plan from now on (Model loads, plan_memory) takes `bytes` as the memory available, instead of "
        "asking the device; clear_available_memory_override() ends it.");
    m.def(
        "clear_available_memory_override", [] { akunu::set_available_memory_override(std::nullopt); },
        "Memory plans ask the device again for the memory available.");
    m.def(
        "host_available_memory",
        [](const std::string &root) {
            const akunu::MemoryAvailable a = akunu::host_available_memory(root);
            return nb::make_tuple(a.known() ? nb::object(nb::int_(a.bytes)) : nb::none(), a.source);
        },
        nb::arg("root") = "",
        "(bytes or None, source): the host memory this process may still take, read from /proc and the cgroup "
        "files under `root` (\"\": the real ones).");
}
