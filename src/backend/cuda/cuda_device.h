// CudaDevice: runs dispatch tables on one NVIDIA GPU. Buffers are device memory (Buffer.handle is
// the device pointer, contents is null), weights are copied up once through pinned staging, and
// a replay of a long-lived table is one CUDA graph launch (see graph_cache.h and
// docs/adr/0001-cuda-graph-replay.md).
#pragma once
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cublas_runtime.h"
#include "backend/cuda/graph_cache.h"
#include "core/device.h"
#include "cuda/launch.h"

namespace akunu::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no GPU (never throws).
int device_count();

// Launcher for a kernel name, or nullptr (kernel_registry.cpp).
LaunchFn find_launcher(const char *name);

// GEMV commands launched (or captured) with a quantized input handed off by the command before.
uint64_t q16_handoffs_launched();
// Accumulating GEMMs launched (or captured) so far with LaunchArgs::output_settled. For tests.
uint64_t settled_accumulates_launched();

class CudaDevice final : public Device {
public:
    explicit CudaDevice(int device_index = 0);
    ~CudaDevice() override;

    std::string name() const override { return name_; }
    const char *backend_name() const override { return "cuda"; }
    size_t total_memory() const override { return total_memory_; }
    MemoryAvailable available_memory() const override;  // cudaMemGetInfo's free bytes
    bool buffers_in_host_memory() const override { return false; }
    ChipConfig chip_config() const override;
    const DTypeDescriptor *dtype_lookup(DType t) const override;

    Pipeline get_pipeline(const std::string &kernel_name) override;
    // AKUNU_CUDA_PAIRS=0 hides the pair kernels ("gemm_A+gemm_B") from the table builder (A/B timing).
    bool has_kernel(const std::string &kernel_name) override;

    Buffer allocate(size_t bytes) override;
    Buffer upload_weights(const void *host, size_t bytes) override;
    void free_buffer(Buffer &buf) override;
    void write_buffer(const Buffer &dst, const void *src, size_t bytes, size_t offset) override;
    void read_buffer(void *dst, const Buffer &src, size_t bytes, size_t offset) override;

    void encode_dispatch_table(const DispatchTable &table, int start_position, int count, int cmd_begin,
                               int cmd_end) override;
    void synchronize() override;
    std::vector<double> profile_dispatch_table(const DispatchTable &table, int position) override;

    size_t graphs_captured() const { return graphs_.size(); }

private:
    // Enqueues commands [begin, end) for `count` tokens on stream_ (eagerly, or into a capture).
    void launch_commands(const DispatchTable &table, int count, int begin, int end);
    // Enqueues command `c` of `table` for token `t` of a replay; `next` (or -1): the command after
    // it in this launch sequence, which may take c's output quantized (cuda/q16_activation.cuh);
    // `prev` (or -1): the command launched just before it, which decides LaunchArgs::output_settled.
    void launch_command(const DispatchTable &table, int c, int t, int next = -1, int prev = -1);
    LaunchArgs command_args(const DispatchTable &table, int c, int t, DispatchCmd &patched) const;

    int device_ = 0;
    std::string name_;
    size_t total_memory_ = 0;
    int sm_count_ = 1;
    size_t l2_bytes_ = 0;
    cudaStream_t stream_ = nullptr;
    uint32_t *base_position_ = nullptr;  // device: start position of the replay in flight
    ContextLength context_ = ContextLength::Short;  // of the replay being encoded: LaunchArgs::context
    bool pair_kernels_ = true;           // has_kernel offers the pair kernels
    ContextLength context_length(int start_position) const {
        const auto from = [&](uint32_t keys) { return keys != 0 && (uint32_t)start_position >= keys; };
        if (!from(workspace_.long_context_keys)) return ContextLength::Short;
        return from(workspace_.very_long_context_keys) ? ContextLength::VeryLong : ContextLength::Long;
    }
    Workspace workspace_;                // device: split-attention partials
    // Pinned staging for weight uploads: two halves, so one fills while the other copies.
    void *staging_ = nullptr;
    cudaEvent_t staging_done_[2] = {nullptr, nullptr};
    GraphCache graphs_;
    std::unique_ptr<CublasGemm> cublas_;  // loaded on the first F16 / BF16 prefill GEMM
    // Quantized rows handed from a command to the next (Q16Handoff): two buffers used in turn, so
    // a producer never writes the chunks that the GEMV before it may still be reading.
    void *q16_rows_[2] = {nullptr, nullptr};
    int q16_turn_ = 0;
    const void *q16_pending_ = nullptr;  // chunks written for the next command launched, or null
};

}  // namespace akunu::cuda
