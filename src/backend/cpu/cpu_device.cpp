#include "backend/cpu/cpu_device.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "backend/cpu/cpu_kernel.h"
#include "backend/cpu/quant_kernels.h"
#include "core/dispatch_table.h"
#include "core/errors.h"

namespace akunu::cpu {

namespace {

size_t q16_act_row_bytes(size_t K) { return (K / QK_ACT) * sizeof(BlockQ16Act); }

// What the CPU runs for each weight dtype. Quantized weights take int16 activation blocks
// (BlockQ16Act) so the dot products run in integer SIMD; float weights take F32 activations.
const DTypeDescriptor kCpuDTypes[] = {
    {DType::F32, "gemm_f32", "embedding_f32", nullptr, nullptr},
    {DType::F16, "gemm_f16", "embedding_f16", nullptr, nullptr},
    {DType::BF16, "gemm_bf16", "embedding_bf16", nullptr, nullptr},
    {DType::Q8_0, "gemm_q8_0", "embedding_q8_0", "quantize_act_q16", q16_act_row_bytes},
    {DType::Q4_0, "gemm_q4_0", "embedding_q4_0", "quantize_act_q16", q16_act_row_bytes},
    {DType::Q4_1, "gemm_q4_1", "embedding_q4_1", "quantize_act_q16", q16_act_row_bytes},
};

std::string cpu_model_name() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) {
            size_t colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    return "CPU";
}

size_t last_level_cache_bytes() {
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) return (size_t)l3;
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 > 0) return (size_t)l2;
#endif
    return 8u << 20;
}

int default_threads() {
    unsigned n = std::thread::hardware_concurrency();
    return n ? (int)n : 1;
}

// Everything a thread needs to run units of one command.
struct CommandJob {
    KernelFn fn;
    KernelArgs args;
};

void run_units(const void *ctx, int64_t begin, int64_t end) {
    const CommandJob *job = static_cast<const CommandJob *>(ctx);
    job->fn(job->args, begin, end);
}

}  // namespace

CpuDevice::CpuDevice(int threads) : pool_(threads > 0 ? threads : default_threads()) {}

std::string CpuDevice::name() const { return cpu_model_name() + " (" + std::to_string(pool_.size()) + " threads)"; }

size_t CpuDevice::total_memory() const { return (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGE_SIZE); }

ChipConfig CpuDevice::chip_config() const { return ChipConfig::for_cpu(pool_.size(), last_level_cache_bytes()); }

const DTypeDescriptor *CpuDevice::dtype_lookup(DType t) const {
    for (const DTypeDescriptor &d : kCpuDTypes)
        if (d.dtype == t) return &d;
    return nullptr;
}

Pipeline CpuDevice::get_pipeline(const std::string &kernel_name) {
    KernelFn fn = find_kernel(kernel_name.c_str());
    if (!fn) throw UnsupportedError("the cpu backend has no kernel '" + kernel_name + "'");
    Pipeline p;
    p.handle = reinterpret_cast<void *>(fn);
    return p;
}

Buffer CpuDevice::allocate(size_t bytes) {
    // 64-byte alignment: cache lines and any SIMD width. Owned buffers have handle == contents.
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = std::aligned_alloc(64, rounded ? rounded : 64);
    if (!p) throw AkunuError("out of memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded ? rounded : 64);
    Buffer b;
    b.handle = p;
    b.contents = p;
    b.size = bytes;
    return b;
}

Buffer CpuDevice::upload_weights(const void *host, size_t bytes) {
    // Alias the mapping: weights are read in place, paged in by the OS on first use.
    Buffer b;
    b.handle = nullptr;
    b.contents = const_cast<void *>(host);
    b.size = bytes;
    return b;
}

void CpuDevice::free_buffer(Buffer &buf) {
    if (buf.handle) std::free(buf.handle);
    buf = Buffer{};
}

void CpuDevice::write_buffer(const Buffer &dst, const void *src, size_t bytes, size_t offset) {
    std::memcpy(static_cast<uint8_t *>(dst.contents) + offset, src, bytes);
}

void CpuDevice::read_buffer(void *dst, const Buffer &src, size_t bytes, size_t offset) {
    std::memcpy(dst, static_cast<const uint8_t *>(src.contents) + offset, bytes);
}

void CpuDevice::run_command(const DispatchCmd &command, int token_index, int position) {
    DispatchCmd patched;
    const DispatchCmd *cmd = &command;
    if (cmd->patch != PatchType::None) {
        apply_patch(*cmd, token_index, position, patched);
        cmd = &patched;
    }
    CommandJob job;
    job.fn = reinterpret_cast<KernelFn>(cmd->pipeline.handle);
    for (int b = 0; b < cmd->buffer_count; ++b)
        job.args.buffers[b] = static_cast<uint8_t *>(cmd->buffers[b].contents) + cmd->offsets[b];
    job.args.params = cmd->params;
    job.args.grid = cmd->grid;
    pool_.run(run_units, &job, (int64_t)cmd->grid.x * cmd->grid.y * cmd->grid.z);
}

void CpuDevice::encode_dispatch_table(const DispatchTable &table, int start_position, int count, int cmd_begin,
                                      int cmd_end) {
    if (cmd_end < 0) cmd_end = (int)table.commands.size();
    for (int t = 0; t < count; ++t)
        for (int c = cmd_begin; c < cmd_end; ++c) run_command(table.commands[(size_t)c], t, start_position + t);
}

std::vector<double> CpuDevice::profile_dispatch_table(const DispatchTable &table, int position) {
    std::vector<double> ms;
    ms.reserve(table.commands.size());
    for (const DispatchCmd &cmd : table.commands) {
        auto t0 = std::chrono::steady_clock::now();
        run_command(cmd, 0, position);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return ms;
}

}  // namespace akunu::cpu
