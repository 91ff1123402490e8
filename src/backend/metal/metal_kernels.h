// The Metal kernel library as the host sees it: every kernel in metal/ by name, with the
// threads per threadgroup it is written for. Plain C++ (no Metal API), shared by MetalDevice
// (metal_device.mm) and the Linux shim tests (tests/metal_shim/), which run each command the
// way MetalDevice encodes it: threadgroups = the command's grid, threads = threads_per_group,
// the command's buffers at indices 0.. in their order (kernel_params.h), a placeholder buffer in
// each slot the command leaves empty (optional inputs), and the parameter struct at index
// buffer_slots.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace akunu::metal {

struct MetalKernelInfo {
    const char *name;
    uint32_t threads_per_group;
    uint32_t buffer_slots;  // buffer arguments before the parameter struct
};

// Every kernel the Metal backend has.
const std::vector<MetalKernelInfo> &metal_kernels();
// The kernel of that name, or nullptr.
const MetalKernelInfo *find_metal_kernel(const std::string &name);

}  // namespace akunu::metal
