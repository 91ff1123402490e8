// ShimMetalDevice: a Device that runs dispatch tables the way MetalDevice (metal_device.mm) does
// — the Metal dtype table and ChipConfig, threadgroups = each command's grid, the kernel table's
// threads and buffer slots, a placeholder in empty slots, patches applied per token — with the
// metal/ kernels compiled through the shim on CPU threads. Lets whole models run on the Metal
// kernels on Linux (model_check.cpp). Memory is host memory; weights alias the mmap, as Metal's
// unified memory does.
#pragma once
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/host_memory.h"

namespace metal_check {

class ShimMetalDevice final : public akunu::Device {
public:
    ShimMetalDevice();
    ~ShimMetalDevice() override;

    std::string name() const override { return "Metal kernels on CPU threads (shim)"; }
    const char *backend_name() const override { return "metal"; }
    size_t total_memory() const override { return size_t(1) << 34; }
    // Host memory, as the CPU backend's (unified memory, as on a Mac).
    akunu::MemoryAvailable available_memory() const override { return akunu::host_available_memory(); }
    bool buffers_in_host_memory() const override { return true; }
    akunu::ChipConfig chip_config() const override;
    const akunu::DTypeDescriptor *dtype_lookup(akunu::DType t) const override;

    akunu::Pipeline get_pipeline(const std::string &kernel_name) override;

    akunu::Buffer allocate(size_t bytes) override;
    akunu::Buffer upload_weights(const void *host, size_t bytes) override;
    void free_buffer(akunu::Buffer &buf) override;
    void write_buffer(const akunu::Buffer &dst, const void *src, size_t bytes, size_t offset) override;
    void read_buffer(void *dst, const akunu::Buffer &src, size_t bytes, size_t offset) override;

    void encode_dispatch_table(const akunu::DispatchTable &table, int start_position, int count, int cmd_begin,
                               int cmd_end) override;
    void synchronize() override {}
    std::vector<double> profile_dispatch_table(const akunu::DispatchTable &table, int position) override;

    // Every kernel a table asked for so far (coverage: what the table builder emits on Metal).
    const std::set<std::string> &kernels_used() const { return kernels_used_; }
    // Wall time spent in each kernel's dispatches so far (what makes a shim run slow).
    const std::map<std::string, double> &kernel_ms() const { return kernel_ms_; }

private:
    struct ShimPipeline;
    void run_command(const akunu::DispatchCmd &cmd);
    std::deque<ShimPipeline> pipelines_;
    std::set<void *> owned_;
    std::set<std::string> kernels_used_;
    std::map<std::string, double> kernel_ms_;
};

}  // namespace metal_check
