// The CPU backend's kernel ABI. A "pipeline" on the CPU is a plain function that processes a
// range of work units of one command; the thread pool splits the command's grid across threads.
#pragma once
#include <cstdint>

#include "core/device.h"

namespace akunu::cpu {

struct KernelArgs {
    uint8_t *buffers[8];   // buffer contents + offset, in binding order
    const void *params;    // the command's parameter struct
    Dim3 grid;
};

template <typename P>
const P &params_of(const KernelArgs &a) {
    return *static_cast<const P *>(a.params);
}

// Processes work units [begin, end) of a command (units are numbered x-fastest over the grid).
using KernelFn = void (*)(const KernelArgs &args, int64_t begin, int64_t end);

// Kernel lookup by name (the CPU's "library"); nullptr for unknown names.
KernelFn find_kernel(const char *name);

}  // namespace akunu::cpu
