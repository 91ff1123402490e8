// The Device abstraction: everything the engine needs from a compute backend, and nothing
// backend-specific. CPU and CUDA implement it in src/backend/<name>/.
//
// The engine never calls a GPU API. It asks the device for buffers and pipelines (kernels by
// name), builds DispatchCmds out of them once, and hands whole DispatchTables back to the device
// to replay. How a replay happens (a loop on worker threads, a CUDA graph, a Metal encoder) is the
// backend's business.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/chip_config.h"
#include "core/dtype.h"
#include "core/dtype_descriptor.h"

namespace akunu {

struct Buffer {
    void *handle = nullptr;    // backend object (CPU: same as contents; CUDA: device pointer)
    size_t size = 0;
    void *contents = nullptr;  // host-visible pointer, or nullptr when the memory is device-only
};

struct Pipeline {
    void *handle = nullptr;  // backend kernel object (CPU: function pointer; CUDA: launcher)
};

struct Dim3 {
    uint32_t x = 1, y = 1, z = 1;
};

// Memory a device can still give out, and where that number came from (for messages).
struct MemoryAvailable {
    static constexpr uint64_t kUnknown = UINT64_MAX;
    uint64_t bytes = kUnknown;  // kUnknown: no source set a limit
    std::string source;         // e.g. "/proc/meminfo MemAvailable", "cudaMemGetInfo free"
    bool known() const { return bytes != kUnknown; }
};

struct DispatchCmd;
struct DispatchTable;

class Device {
public:
    virtual ~Device() = default;

    // --- information ------------------------------------------------------------------
    virtual std::string name() const = 0;          // "AMD EPYC (2 threads)", "NVIDIA H100 80GB HBM3"
    virtual const char *backend_name() const = 0;  // "cpu", "cuda"
    virtual size_t total_memory() const = 0;
    // What this device can still allocate now: the budget of the memory plan that every load
    // checks before allocating (inference/memory_plan.h, docs/adr/0021-memory-plan.md).
    virtual MemoryAvailable available_memory() const = 0;
    // Whether allocate()'s buffers are the host's own memory (the CPU; Apple's unified memory), so
    // that host-side caches (the prompt cache) draw on the same memory as the device's buffers.
    virtual bool buffers_in_host_memory() const = 0;
    // Every tuning number, derived from what this device is (see chip_config.h).
    virtual ChipConfig chip_config() const = 0;
    // Kernel names and geometry for weights of this dtype, or nullptr if this device cannot run them.
    virtual const DTypeDescriptor *dtype_lookup(DType t) const = 0;

    // --- kernels ----------------------------------------------------------------------
    // Resolved once while building a table; throws UnsupportedError for an unknown name.
    virtual Pipeline get_pipeline(const std::string &kernel_name) = 0;
    // Whether get_pipeline knows the name (the table builder asks before choosing an optional kernel).
    virtual bool has_kernel(const std::string &kernel_name);

    // --- memory -----------------------------------------------------------------------
    virtual Buffer allocate(size_t bytes) = 0;  // zero-filled; OutOfMemoryError when it cannot
    // Weights: make `bytes` of host memory (usually an mmap that outlives the model) visible to
    // kernels. Unified-memory devices alias it; discrete GPUs copy it up once.
    virtual Buffer upload_weights(const void *host, size_t bytes) = 0;
    // A [rows, cols] weight matrix that kernels of `desc` will read: the bytes as stored, or,
    // when desc.repack is set, repacked into the layout those kernels want (an owned buffer).
    virtual Buffer upload_matrix(const void *host, size_t bytes, const DTypeDescriptor &desc, size_t rows,
                                 size_t cols) {
        if (!desc.repack) return upload_weights(host, bytes);
        std::vector<uint8_t> packed(desc.repacked_bytes(rows, cols));
        desc.repack(host, packed.data(), rows, cols);
        Buffer b = allocate(packed.size());
        write_buffer(b, packed.data(), packed.size());
        return b;
    }
    virtual void free_buffer(Buffer &buf) = 0;
    virtual void write_buffer(const Buffer &dst, const void *src, size_t bytes, size_t offset = 0) = 0;
    virtual void read_buffer(void *dst, const Buffer &src, size_t bytes, size_t offset = 0) = 0;

    // --- execution --------------------------------------------------------------------
    // Replays commands [cmd_begin, cmd_end) of `table` for `count` consecutive tokens starting at
    // `start_position`, applying each command's patch per token (see dispatch_table.h).
    // cmd_end < 0 means "to the end". Commands run in order; each sees all earlier writes.
    virtual void encode_dispatch_table(const DispatchTable &table, int start_position, int count,
                                       int cmd_begin = 0, int cmd_end = -1) = 0;
    // Waits until everything encoded so far has finished.
    virtual void synchronize() = 0;

    // Runs one token of `table` at `position` and returns each command's execution time in
    // milliseconds (profiling; slower than a replay).
    virtual std::vector<double> profile_dispatch_table(const DispatchTable &table, int position) = 0;
};

// The backends compiled into this build: "cpu", "cuda" when built with nvcc, "metal" when built on macOS.
const std::vector<std::string> &built_backends();

// The best device available: CUDA or Metal when built in and a GPU is present, else the CPU.
// `backend` is "auto" or one of built_backends() (std::invalid_argument naming them otherwise);
// threads <= 0 means one per core.
std::unique_ptr<Device> create_device(const std::string &backend, int threads);

}  // namespace akunu
