// MetalDevice: runs dispatch tables on an Apple GPU (metal_device.mm, built on macOS only). Buffers
// are shared-storage MTLBuffers in unified memory (Buffer.contents is the CPU's view of the same
// bytes), page-aligned weights alias the mmapped file, and a replay is one command buffer with one
// serial compute encoder holding every command of every token.
//
// Plain C++ (the Objective-C objects live behind Impl), so that create_device.cpp and anything
// else can include it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace akunu::metal {

// Whether this machine has a GPU the Metal kernels run on: an Apple GPU of the Apple7 family or
// later (M1 on), which simdgroup matrices need. Never throws.
bool metal_device_available();

class MetalDevice final : public Device {
public:
    MetalDevice();  // the system default GPU; UnsupportedError when there is none usable
    ~MetalDevice() override;
    MetalDevice(const MetalDevice &) = delete;
    MetalDevice &operator=(const MetalDevice &) = delete;

    std::string name() const override;
    const char *backend_name() const override { return "metal"; }
    size_t total_memory() const override;
    // recommendedMaxWorkingSetSize - currentAllocatedSize: what the GPU may still use without the
    // system paging its memory (unified memory, so the host's buffers are the same memory).
    MemoryAvailable available_memory() const override;
    bool buffers_in_host_memory() const override { return true; }
    ChipConfig chip_config() const override;
    const DTypeDescriptor *dtype_lookup(DType t) const override;

    Pipeline get_pipeline(const std::string &kernel_name) override;

    Buffer allocate(size_t bytes) override;
    Buffer upload_weights(const void *host, size_t bytes) override;
    // upload_matrix: Device's default (the Metal kernels read every dtype as stored).
    void free_buffer(Buffer &buf) override;
    void write_buffer(const Buffer &dst, const void *src, size_t bytes, size_t offset) override;
    void read_buffer(void *dst, const Buffer &src, size_t bytes, size_t offset) override;

    void encode_dispatch_table(const DispatchTable &table, int start_position, int count, int cmd_begin,
                               int cmd_end) override;
    void synchronize() override;
    std::vector<double> profile_dispatch_table(const DispatchTable &table, int position) override;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace akunu::metal
