// CpuDevice: runs dispatch tables on the host's cores. Buffers are host memory, weights alias the
// mmapped file, and a replay is a loop over commands feeding each one to the thread pool.
#pragma once
#include <memory>
#include <string>

#include "backend/cpu/thread_pool.h"
#include "core/device.h"

namespace akunu::cpu {

class CpuDevice final : public Device {
public:
    explicit CpuDevice(int threads);  // threads <= 0: one per hardware thread

    std::string name() const override;
    const char *backend_name() const override { return "cpu"; }
    size_t total_memory() const override;
    MemoryAvailable available_memory() const override;  // the host's (core/host_memory.h)
    bool buffers_in_host_memory() const override { return true; }
    ChipConfig chip_config() const override;
    const DTypeDescriptor *dtype_lookup(DType t) const override;

    Pipeline get_pipeline(const std::string &kernel_name) override;
    bool has_kernel(const std::string &kernel_name) override;

    Buffer allocate(size_t bytes) override;
    Buffer upload_weights(const void *host, size_t bytes) override;
    Buffer upload_matrix(const void *host, size_t bytes, const DTypeDescriptor &desc, size_t rows,
                         size_t cols) override;
    void free_buffer(Buffer &buf) override;
    void write_buffer(const Buffer &dst, const void *src, size_t bytes, size_t offset) override;
    void read_buffer(void *dst, const Buffer &src, size_t bytes, size_t offset) override;

    void encode_dispatch_table(const DispatchTable &table, int start_position, int count, int cmd_begin,
                               int cmd_end) override;
    void synchronize() override {}  // replays run synchronously
    std::vector<double> profile_dispatch_table(const DispatchTable &table, int position) override;

    int threads() const { return pool_.size(); }

private:
    void run_command(const DispatchCmd &cmd, int token_index, int position);
    ThreadPool pool_;
};

}  // namespace akunu::cpu
