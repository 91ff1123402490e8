#include "backend/cpu/cpu_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "backend/cpu/cpu_kernel.h"
#include "backend/cpu/repacked_layout.h"
#include "backend/cpu/simd_config.h"
#include "core/dispatch_table.h"
#include "core/errors.h"
#include "core/host_memory.h"
#include "core/quant_blocks.h"

namespace akunu::cpu {

namespace {

size_t q16_act_row_bytes(size_t K) { return (K / QK_ACT) * sizeof(BlockQ16Act); }

// Q4_0 / Q4_1 / Q8_0 are repacked at load into groups of interleaved rows (repacked_layout.h: "r16"
// on AVX-512 VNNI builds, "r8" elsewhere; builds with AVX2 or more also repack Q5_0, Q5_1, IQ4_NL,
// Q4_K, Q5_K, Q6_K and IQ4_XS) so that the decode GEMV streams one contiguous run per group. The copy
// replaces the aliased mmap pages.
template <DType T> size_t repacked_size(size_t rows, size_t cols) { return repacked_bytes(T, (int64_t)rows, (int64_t)cols); }
template <DType T> void repack(const void *src, void *dst, size_t rows, size_t cols) {
    repack_weights(T, src, dst, (int64_t)rows, (int64_t)cols);
}
template <DType T> size_t repacked_act_bytes(size_t K) { return repacked_act_row_bytes(T, (int64_t)K); }
#if defined(AKUNU_CPU_VNNI512)
constexpr const char *kRepackedActQuant = "quantize_act_q8x2";
// Q6_K's rows take one scale per superblock and also carry the int16 values its prefill GEMM takes
// (r16_panel_gemm.cpp, docs/adr/0027).
constexpr const char *kQ6KActQuant = "quantize_act_q8x2_superblocks";
#else
constexpr const char *kRepackedActQuant = "quantize_act_q16";
[[maybe_unused]] constexpr const char *kQ6KActQuant = kRepackedActQuant;
#endif

// A dtype this build repacks at load (repacked_layout.h), its kernels named by `name` (q4_0, ...).
#define AKUNU_REPACKED(T, name, act_quant)                                                                       \
    {DType::T, "gemm_" #name "_repacked", "embedding_" #name "_repacked", act_quant, repacked_act_bytes<DType::T>, \
     repacked_size<DType::T>, repack<DType::T>, (uint32_t)repack_row_group(DType::T)}
// A group-scaled dtype read as GGUF rows (kquant_kernels.h).
#define AKUNU_GGUF_ROWS(T, name) {DType::T, "gemm_" #name, "embedding_" #name, "quantize_act_q16", q16_act_row_bytes}

// What the CPU runs for each weight dtype. Quantized weights take integer activation blocks
// (BlockQ16Act, or BlockQ8x2Act for the r16 layout) so the dot products run in integer SIMD;
// float weights take F32 activations.
const DTypeDescriptor kCpuDTypes[] = {
    {DType::F32, "gemm_f32", "embedding_f32", nullptr, nullptr},
    {DType::F16, "gemm_f16", "embedding_f16", nullptr, nullptr},
    {DType::BF16, "gemm_bf16", "embedding_bf16", nullptr, nullptr},
    AKUNU_REPACKED(Q8_0, q8_0, kRepackedActQuant),
    AKUNU_REPACKED(Q4_0, q4_0, kRepackedActQuant),
    AKUNU_REPACKED(Q4_1, q4_1, kRepackedActQuant),
    // Group-scaled dtypes (kquant_kernels.h): GGUF rows as they are, except where this build has
    // an r16 layout for them (r16_kquant_layout.h) or, with AVX2, an r8 one (r8_kquant_layout.h).
#if defined(AKUNU_CPU_AVX2)  // r16 or r8
    AKUNU_REPACKED(Q5_0, q5_0, kRepackedActQuant),
    AKUNU_REPACKED(Q5_1, q5_1, kRepackedActQuant),
    AKUNU_REPACKED(IQ4_NL, iq4_nl, kRepackedActQuant),
    AKUNU_REPACKED(Q4_K, q4_k, kRepackedActQuant),
    AKUNU_REPACKED(Q5_K, q5_k, kRepackedActQuant),
    AKUNU_REPACKED(Q6_K, q6_k, kQ6KActQuant),
    AKUNU_REPACKED(IQ4_XS, iq4_xs, kRepackedActQuant),
#else
    AKUNU_GGUF_ROWS(Q5_0, q5_0),
    AKUNU_GGUF_ROWS(Q5_1, q5_1),
    AKUNU_GGUF_ROWS(IQ4_NL, iq4_nl),
    AKUNU_GGUF_ROWS(Q4_K, q4_k),
    AKUNU_GGUF_ROWS(Q5_K, q5_k),
    AKUNU_GGUF_ROWS(Q6_K, q6_k),
    AKUNU_GGUF_ROWS(IQ4_XS, iq4_xs),
#endif
    AKUNU_GGUF_ROWS(Q2_K, q2_k),
    AKUNU_GGUF_ROWS(Q3_K, q3_k),
};
#undef AKUNU_REPACKED
#undef AKUNU_GGUF_ROWS

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

// A matrix being repacked in parallel: unit i = rows [i * rows_per_unit, ...).
struct RepackJob {
    const DTypeDescriptor *desc;
    const uint8_t *src;
    uint8_t *dst;
    size_t rows, cols, row_bytes, rows_per_unit;
};

void repack_units(const void *ctx, int64_t begin, int64_t end) {
    const RepackJob *j = static_cast<const RepackJob *>(ctx);
    const size_t r0 = (size_t)begin * j->rows_per_unit, r1 = std::min(j->rows, (size_t)end * j->rows_per_unit);
    j->desc->repack(j->src + r0 * j->row_bytes, j->dst + r0 * j->row_bytes, r1 - r0, j->cols);
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

MemoryAvailable CpuDevice::available_memory() const { return host_available_memory(); }

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

bool CpuDevice::has_kernel(const std::string &kernel_name) { return find_kernel(kernel_name.c_str()) != nullptr; }

Buffer CpuDevice::allocate(size_t bytes) {
    // 64-byte alignment: cache lines and any SIMD width. Owned buffers have handle == contents.
    const size_t rounded = (bytes + 63) / 64 * 64;  // 0 only for 0 bytes, or past SIZE_MAX - 63 (refused below)
    void *p = bytes <= SIZE_MAX - 63 ? std::aligned_alloc(64, rounded ? rounded : 64) : nullptr;
    if (!p) throw OutOfMemoryError("out of memory allocating " + std::to_string(bytes) + " bytes", bytes);
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

Buffer CpuDevice::upload_matrix(const void *host, size_t bytes, const DTypeDescriptor &desc, size_t rows,
                                size_t cols) {
    if (!desc.repack) return upload_weights(host, bytes);
    // Repack straight into the owned buffer (repack writes every byte, so no zero fill).
    const size_t packed = desc.repacked_bytes(rows, cols);
    // Large matrices on transparent huge pages where the kernel allows it: fewer page faults
    // while repacking and fewer TLB misses while streaming the weights.
    constexpr size_t kHuge = 2u << 20;
    const size_t align = packed >= kHuge ? kHuge : 64;
    const size_t rounded = (packed + align - 1) / align * align;
    void *p = packed <= SIZE_MAX - align ? std::aligned_alloc(align, rounded ? rounded : align) : nullptr;
    if (!p) throw OutOfMemoryError("out of memory allocating " + std::to_string(packed) + " bytes", packed);
#ifdef MADV_HUGEPAGE
    if (align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);  // advisory; failure is harmless
#endif
    if (desc.repack_row_group && rows > 0 && bytes % rows == 0) {  // slices of whole groups on all threads
        RepackJob job{&desc, static_cast<const uint8_t *>(host), static_cast<uint8_t *>(p), rows, cols, bytes / rows,
                      (size_t)desc.repack_row_group * 16};
        pool_.run(repack_units, &job, (int64_t)((rows + job.rows_per_unit - 1) / job.rows_per_unit));
    } else {
        desc.repack(host, p, rows, cols);
    }
    Buffer b;
    b.handle = p;
    b.contents = p;
    b.size = packed;
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
