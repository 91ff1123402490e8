#include "backend/cuda/cuda_device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/convert.h"
#include "backend/cuda/g8_layout.h"
#include "core/dispatch_table.h"
#include "core/errors.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "cuda/layout_g8.h"

namespace akunu::cuda {

namespace {

// An A/B timing switch set to "0" / "1" in the environment.
bool switched_off(const char *name) {
    const char *v = std::getenv(name);
    return v && std::strcmp(v, "0") == 0;
}
bool switched_on(const char *name) {
    const char *v = std::getenv(name);
    return v && std::strcmp(v, "1") == 0;
}

void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) throw AkunuError(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(e));
}

// Every quantized format but Q2_K / Q3_K is repacked at load into the g8 layout (cuda/layout_g8.h:
// 16-byte aligned quants, one load per block); those two and the float formats are read as stored.
template <DType T> size_t g8_matrix_bytes(size_t rows, size_t cols) { return g8_bytes(T, rows, cols); }
template <DType T> void g8_matrix_repack(const void *src, void *dst, size_t rows, size_t cols) {
    g8_repack(T, src, dst, rows, cols);
}

// BF16 matrices run as F16 (docs/adr/0010): the prefill GEMM's library takes one input type, and
// f16 activations are the accurate choice (bf16 ones fail the reference bar on a Gemma 3
// checkpoint: mean KL 6.5e-3). The conversion is exact wherever F16 is normal (|w| >= 2^-14): a
// bf16 mantissa has 7 bits, f16 10. Smaller magnitudes round to f16 subnormals (error <= 2^-25),
// as akunu's own prefill tiles always rounded them; a magnitude beyond F16's range is refused.
uint16_t bf16_as_f16(uint16_t b) {
    const uint32_t e = (b >> 7) & 0xff;
    if (e >= 113 && e <= 142) return (uint16_t)((b & 0x8000) | (e - 112) << 10 | (b & 0x7f) << 3);
    if (e != 0xff && e > 142)
        throw UnsupportedError("a BF16 weight of " + std::to_string(bf16_bits_to_float(b)) +
                               " is beyond the F16 range that the cuda backend runs BF16 matrices in; use backend='cpu'");
    return cpu::f32_to_fp16(bf16_bits_to_float(b));  // zero, the subnormal range, inf / nan
}
size_t bf16_matrix_bytes(size_t rows, size_t cols) { return rows * cols * 2; }
void bf16_matrix_as_f16(const void *src, void *dst, size_t rows, size_t cols) {
    const uint16_t *in = static_cast<const uint16_t *>(src);
    uint16_t *out = static_cast<uint16_t *>(dst);
    for (size_t i = 0; i < rows * cols; ++i) out[i] = bf16_as_f16(in[i]);
}

// Quantized GEMMs take the F32 activations directly (dequantize-and-dot in the kernel): on a GPU
// the activation row is tiny next to the weights, and one kernel beats two launches.
const DTypeDescriptor kCudaDTypes[] = {
    {DType::F32, "gemm_f32", "embedding_f32", nullptr, nullptr},
    {DType::F16, "gemm_f16", "embedding_f16", nullptr, nullptr},
    {DType::BF16, "gemm_f16", "embedding_f16", nullptr, nullptr, bf16_matrix_bytes, bf16_matrix_as_f16, 1},
    // The g8 formats (g8_matrix_repack above).
#define AKUNU_G8_ENTRY(lower, upper, fmt)                                                          \
    {DType::upper, "gemm_" #lower "_g8", "embedding_" #lower "_g8", nullptr, nullptr, g8_matrix_bytes<DType::upper>, \
     g8_matrix_repack<DType::upper>, kG8Rows, true},
    AKUNU_CUDA_G8_FORMATS(AKUNU_G8_ENTRY)
#undef AKUNU_G8_ENTRY
    // The other group-scaled dtypes, read as stored.
#define AKUNU_ENTRY(lower, upper) {DType::upper, "gemm_" #lower, "embedding_" #lower, nullptr, nullptr},
    AKUNU_CUDA_KQUANT_FORMATS(AKUNU_ENTRY)
#undef AKUNU_ENTRY
};

constexpr size_t kStagingHalf = 16u << 20;        // bytes per pinned staging half
// 16 MB: split-attention partials (decode), or a prefill GEMM's f16 activations (512 x 16384)
constexpr size_t kWorkspaceFloats = 4u << 20;
// From this many cached keys, decode attention runs on the tensor cores, a block per KV head
// (docs/adr/0012-cuda-long-context-decode-attention.md); below it, the per-query-head kernel.
constexpr uint32_t kLongContextKeys = 1024;
// From this many, that kernel's F16-cache blocks are 8 warps of 2 stages instead of 4 of 4: H200,
// tg128 at 16384 keys +6.7 % (8B shape) and +6.8 % (1B), at 2048-8192 keys -0.2 to -2.8 %
// (docs/experiments.md, "Fewer K/V stages, or more warps").
constexpr uint32_t kVeryLongContextKeys = 12288;
constexpr uint32_t kWorkspaceCounters = 4096;      // split-attention arrival counts, one per head
constexpr size_t kQ16RowBytes = 1u << 20;          // a handed-off row: up to ~440k floats

std::atomic<uint64_t> g_q16_handoffs{0};
std::atomic<uint64_t> g_settled_accumulates{0};

}  // namespace

uint64_t q16_handoffs_launched() { return g_q16_handoffs.load(); }
uint64_t settled_accumulates_launched() { return g_settled_accumulates.load(); }

int device_count() {
    int n = 0;
    // No driver, no GPU, or a driver older than the runtime: all mean "no CUDA device".
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

CudaDevice::CudaDevice(int device_index) : device_(device_index) {
    if (device_count() <= device_index) throw UnsupportedError("backend 'cuda': no CUDA device is available");
    check(cudaSetDevice(device_), "set device");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device_), "device properties");
    name_ = prop.name;
    total_memory_ = prop.totalGlobalMem;
    sm_count_ = prop.multiProcessorCount;
    l2_bytes_ = (size_t)prop.l2CacheSize;
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream create");
    check(cudaMalloc(reinterpret_cast<void **>(&base_position_), sizeof(uint32_t)), "malloc");
    check(cudaMemset(base_position_, 0, sizeof(uint32_t)), "memset");
    check(cudaMalloc(reinterpret_cast<void **>(&workspace_.data), kWorkspaceFloats * sizeof(float)), "malloc");
    workspace_.floats = kWorkspaceFloats;
    check(cudaMalloc(reinterpret_cast<void **>(&workspace_.counters), kWorkspaceCounters * sizeof(unsigned)), "malloc");
    check(cudaMemset(workspace_.counters, 0, kWorkspaceCounters * sizeof(unsigned)), "memset");
    workspace_.n_counters = kWorkspaceCounters;
    workspace_.sm_count = sm_count_;
    workspace_.warp_slots = (uint32_t)sm_count_ * (uint32_t)(prop.maxThreadsPerMultiProcessor / 32);
    workspace_.l2_bytes = l2_bytes_;
    // The switches below are listed in docs/switches.md.
    // Programmatic dependent launch needs Hopper; AKUNU_CUDA_PDL=0 turns it off, as
    // AKUNU_CUDA_PREFETCH=0 turns off the float GEMVs' early weight prefetch, AKUNU_CUDA_Q16=0 the
    // integer GEMV, AKUNU_CUDA_PDL_LATE=0 its late release of the next kernel,
    // AKUNU_CUDA_GEMV16=0 its 16-warp blocks, AKUNU_CUDA_Q16_GRID=0 its one-wave grids and
    // AKUNU_CUDA_EARLY_OUTPUT=0 its early read of an accumulated output, AKUNU_CUDA_PAIRS=0 the
    // commands of two weight dtypes (Q/K/V of mixed files: two commands instead),
    // AKUNU_CUDA_SPLIT_K=0 the split K steps of tiled GEMMs over few rows,
    // AKUNU_CUDA_DEQUANT_CUBLAS=0 the quantized prefill GEMMs through cuBLAS (docs/adr/0025);
    // AKUNU_CUDA_ATTN_CLUSTER=1 turns on the cluster merge of decode attention (Hopper; off by
    // default, see cluster_wanted in cuda/attention_decode.cu), AKUNU_CUDA_ATTN_MIN_KEYS=n sets
    // its fewest keys per split and AKUNU_CUDA_ATTN_WARPS=4/8/16 its warps per block,
    // AKUNU_CUDA_PREFILL_ATTN_WARPS=4/8 those of the F16 prefill attention (A/B timing).
    workspace_.pdl = prop.major >= 9 && !switched_off("AKUNU_CUDA_PDL");
    workspace_.prefetch_weights = !switched_off("AKUNU_CUDA_PREFETCH");
    workspace_.integer_gemv = !switched_off("AKUNU_CUDA_Q16");
    workspace_.q16_late_release = !switched_off("AKUNU_CUDA_PDL_LATE");
    workspace_.sixteen_warp_gemv = !switched_off("AKUNU_CUDA_GEMV16");
    workspace_.q16_grid_stride = !switched_off("AKUNU_CUDA_Q16_GRID");
    workspace_.early_output = !switched_off("AKUNU_CUDA_EARLY_OUTPUT");
    pair_kernels_ = !switched_off("AKUNU_CUDA_PAIRS");
    workspace_.split_k = !switched_off("AKUNU_CUDA_SPLIT_K");
    workspace_.dequant_library_gemm = !switched_off("AKUNU_CUDA_DEQUANT_CUBLAS");
    workspace_.clusters = prop.major >= 9 && switched_on("AKUNU_CUDA_ATTN_CLUSTER");
    if (const char *v = std::getenv("AKUNU_CUDA_ATTN_MIN_KEYS")) workspace_.attention_min_keys = (uint32_t)std::atoi(v);
    if (const char *v = std::getenv("AKUNU_CUDA_ATTN_WARPS")) workspace_.attention_warps = (uint32_t)std::atoi(v);
    if (const char *v = std::getenv("AKUNU_CUDA_PREFILL_ATTN_WARPS"))
        workspace_.prefill_attention_warps = (uint32_t)std::atoi(v);
    // Decode attention on the tensor cores from this many cached keys (AKUNU_CUDA_ATTN_LONG=n;
    // 0: never): below it the per-query-head kernel's lower latency wins.
    workspace_.long_context_keys = kLongContextKeys;
    if (const char *v = std::getenv("AKUNU_CUDA_ATTN_LONG")) workspace_.long_context_keys = (uint32_t)std::atoi(v);
    // ... and in blocks of 8 warps from this many (AKUNU_CUDA_ATTN_VERY_LONG=n; 0: never).
    workspace_.very_long_context_keys = kVeryLongContextKeys;
    if (const char *v = std::getenv("AKUNU_CUDA_ATTN_VERY_LONG"))
        workspace_.very_long_context_keys = (uint32_t)std::atoi(v);
    if (const char *v = std::getenv("AKUNU_CUDA_ATTN_GQA_SPLITS"))
        workspace_.attention_gqa_splits = (uint32_t)std::atoi(v);
    // AKUNU_CUDA_CUBLAS=0: the F16 (and so BF16) prefill GEMMs on akunu's own tiles, not cuBLAS.
    cublas_ = std::make_unique<CublasGemm>(stream_);
    workspace_.cublas = cublas_.get();
    // AKUNU_CUDA_Q16_HANDOFF=0: every integer GEMV quantizes its own x (no Q16Handoff).
    if (!switched_off("AKUNU_CUDA_Q16_HANDOFF"))
        for (void *&rows : q16_rows_) check(cudaMalloc(&rows, kQ16RowBytes), "malloc");
}

CudaDevice::~CudaDevice() {
    cudaSetDevice(device_);
    if (stream_) cudaStreamSynchronize(stream_);
    graphs_.clear();
    cublas_.reset();
    if (staging_) cudaFreeHost(staging_);
    for (cudaEvent_t e : staging_done_)
        if (e) cudaEventDestroy(e);
    cudaFree(workspace_.data);
    cudaFree(workspace_.counters);
    for (void *rows : q16_rows_) cudaFree(rows);
    cudaFree(base_position_);
    if (stream_) cudaStreamDestroy(stream_);
}

ChipConfig CudaDevice::chip_config() const {
    ChipConfig c = ChipConfig::for_gpu(sm_count_, l2_bytes_);
    // AKUNU_CUDA_FUSE=0: separate norm and activation commands in decode; =all: both fused at
    // every model width; =norm / =act: only that one at every width (A/B timing).
    const char *fuse = std::getenv("AKUNU_CUDA_FUSE");
    const std::string f = fuse ? fuse : "";
    if (f == "0" || f == "act") c.fuse_gemv_norm_max_dim = c.fuse_streamed_norm_max_dim = 0;
    if (f == "all" || f == "norm") c.fuse_gemv_norm_max_dim = c.fuse_streamed_norm_max_dim = ~0u;
    if (f == "0" || f == "norm") c.fuse_gemv_activation = false;
    if (f == "all" || f == "act") c.fuse_gemv_activation = true;
    // AKUNU_CUDA_FUSE_ROPE=0: RoPE + KV write as its own command before decode attention.
    if (switched_off("AKUNU_CUDA_FUSE_ROPE")) c.fuse_rope_into_attention = false;
    // AKUNU_CUDA_FORCED_TABLES=0: a grammar's forced runs past the decode steps as prefill passes
    // built per call, not kept tables replayed as graphs.
    if (switched_off("AKUNU_CUDA_FORCED_TABLES")) c.max_forced_table_rows = 0;
    return c;
}

const DTypeDescriptor *CudaDevice::dtype_lookup(DType t) const {
    for (const DTypeDescriptor &d : kCudaDTypes)
        if (d.dtype == t) return &d;
    return nullptr;
}

Pipeline CudaDevice::get_pipeline(const std::string &kernel_name) {
    LaunchFn fn = find_launcher(kernel_name.c_str());
    if (!fn) throw UnsupportedError("the cuda backend has no kernel '" + kernel_name + "'");
    Pipeline p;
    p.handle = reinterpret_cast<void *>(fn);
    return p;
}

bool CudaDevice::has_kernel(const std::string &kernel_name) {
    if (!pair_kernels_ && kernel_name.find('+') != std::string::npos) return false;
    return find_launcher(kernel_name.c_str()) != nullptr;
}

// Free device memory as the driver counts it: this process's context, its allocations and every
// other process's are already taken out.
MemoryAvailable CudaDevice::available_memory() const {
    MemoryAvailable a;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(device_) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        a.bytes = free_bytes;
        a.source = "cudaMemGetInfo free on " + name_;
    } else {
        cudaGetLastError();  // unknown: no limit from the driver; an allocation failure still says so
    }
    return a;
}

Buffer CudaDevice::allocate(size_t bytes) {
    void *p = nullptr;
    const size_t n = bytes ? bytes : 4;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        const MemoryAvailable free_now = available_memory();
        throw OutOfMemoryError("CUDA out of memory allocating " + std::to_string(bytes) + " bytes" +
                                   (free_now.known() ? " (" + std::to_string(free_now.bytes) + " free)" : std::string()),
                               bytes, free_now.bytes);
    }
    check(cudaMemsetAsync(p, 0, n, stream_), "memset");
    Buffer b;
    b.handle = p;
    b.size = bytes;
    return b;
}

// mmap -> pinned staging -> device, in chunks, double buffered: the memcpy into one staging half
// overlaps the DMA out of the other. Pageable-to-device copies would stage through the driver's
// own small buffer at a fraction of the bandwidth.
Buffer CudaDevice::upload_weights(const void *host, size_t bytes) {
    Buffer b = allocate(bytes);
    if (!staging_) {
        check(cudaMallocHost(&staging_, 2 * kStagingHalf), "pinned staging alloc");
        for (cudaEvent_t &e : staging_done_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
        for (cudaEvent_t e : staging_done_) check(cudaEventRecord(e, stream_), "event record");
    }
    const uint8_t *src = static_cast<const uint8_t *>(host);
    uint8_t *dst = static_cast<uint8_t *>(b.handle);
    for (size_t off = 0, i = 0; off < bytes; off += kStagingHalf, ++i) {
        const size_t n = std::min(kStagingHalf, bytes - off);
        const int half = (int)(i & 1);
        uint8_t *stage = static_cast<uint8_t *>(staging_) + half * kStagingHalf;
        check(cudaEventSynchronize(staging_done_[half]), "staging wait");
        std::memcpy(stage, src + off, n);
        check(cudaMemcpyAsync(dst + off, stage, n, cudaMemcpyHostToDevice, stream_), "weight upload");
        check(cudaEventRecord(staging_done_[half], stream_), "event record");
    }
    return b;
}

void CudaDevice::free_buffer(Buffer &buf) {
    if (buf.handle) {
        cudaStreamSynchronize(stream_);
        cudaFree(buf.handle);
    }
    buf = Buffer{};
}

// Stream-ordered: pageable host memory is staged before cudaMemcpyAsync returns, so `src` may be
// reused at once, and the copy lands after everything encoded before it.
void CudaDevice::write_buffer(const Buffer &dst, const void *src, size_t bytes, size_t offset) {
    check(cudaMemcpyAsync(static_cast<uint8_t *>(dst.handle) + offset, src, bytes, cudaMemcpyHostToDevice, stream_),
          "write");
}

void CudaDevice::read_buffer(void *dst, const Buffer &src, size_t bytes, size_t offset) {
    check(cudaMemcpyAsync(dst, static_cast<const uint8_t *>(src.handle) + offset, bytes, cudaMemcpyDeviceToHost,
                          stream_),
          "read");
    synchronize();
}

LaunchArgs CudaDevice::command_args(const DispatchTable &table, int c, int t, DispatchCmd &patched) const {
    const DispatchCmd *cmd = &table.commands[(size_t)c];
    if (cmd->patch == PatchType::TokenOffset || cmd->patch == PatchType::ArgmaxOutput ||
        cmd->patch == PatchType::SampleOutput) {
        // Token-slot patches depend on the token index alone: resolved here, once (the
        // sampler's position, like every position, by the kernel from base_position_).
        apply_patch(*cmd, t, 0, patched);
        cmd = &patched;
    }
    LaunchArgs args{};
    args.stream = stream_;
    args.workspace = &workspace_;
    for (int i = 0; i < cmd->buffer_count; ++i)
        args.buffers[i] = static_cast<uint8_t *>(cmd->buffers[i].handle) + cmd->offsets[i];
    args.params = cmd->params;
    // Position patches are applied by the kernel from base_position_ (device memory).
    args.patch = PatchContext{base_position_, (uint32_t)t, cmd->patch,
                              cmd->patch == PatchType::PosAndKV ? patched_kv_span(*cmd) : 1u};
    args.context = context_;
    return args;
}

// The quantized handoff (cuda/q16_activation.cuh): when the next command is an integer decode
// GEMV, this command is offered chunks for the row it reads; if its kernel wrote them, that GEMV
// copies them instead of quantizing its x. The two row buffers alternate: the GEMV reading one
// runs (and, through the waits of programmatic dependent launch, completes) before the next
// producer of that buffer writes.
//
// A GEMM's output is settled (LaunchArgs::output_settled) when the command launched before it,
// `prev`, cannot write it: a GEMM writes only its own output, any other command is taken to write
// every buffer it binds.
void CudaDevice::launch_command(const DispatchTable &table, int c, int t, int next, int prev) {
    DispatchCmd patched, next_patched;
    LaunchArgs args = command_args(table, c, t, patched);
    const DispatchCmd &cmd = table.commands[(size_t)c];
    const auto fn_of = [](const DispatchCmd &d) { return reinterpret_cast<LaunchFn>(d.pipeline.handle); };
    if (prev >= 0 && is_gemm_launcher(fn_of(cmd)) && cmd.buffer_count > 1) {
        const DispatchCmd &before = table.commands[(size_t)prev];
        const auto overlaps_out = [&](const Buffer &b) {  // whole allocations: views may share memory
            const Buffer &o = cmd.buffers[1];
            if (b.size == 0 || o.size == 0) return true;  // extent unknown
            const auto *lo = static_cast<const uint8_t *>(b.handle), *out = static_cast<const uint8_t *>(o.handle);
            return lo < out + o.size && out < lo + b.size;
        };
        bool written = false;
        if (is_gemm_launcher(fn_of(before)))
            written = before.buffer_count > 1 && overlaps_out(before.buffers[1]);
        else
            for (int i = 0; i < before.buffer_count; ++i) written = written || overlaps_out(before.buffers[i]);
        args.output_settled = !written;
        if (args.output_settled && cmd.param_size >= (int)sizeof(GemmParams) &&
            reinterpret_cast<const GemmParams *>(cmd.params)->accumulate)
            ++g_settled_accumulates;
    }
    args.q16_in = q16_pending_;
    if (q16_pending_) ++g_q16_handoffs;
    q16_pending_ = nullptr;
    bool written = false;
    if (next >= 0 && q16_rows_[0]) {
        const LaunchArgs next_args = command_args(table, next, t, next_patched);
        const float *row = nullptr, *norm_w = nullptr;
        uint32_t len = 0;
        if (gemv_takes_q16_input(reinterpret_cast<LaunchFn>(table.commands[(size_t)next].pipeline.handle), next_args,
                                 &row, &len, &norm_w) &&
            q16_handoff_bytes(len) <= kQ16RowBytes)
            args.q16_out = Q16Handoff{q16_rows_[q16_turn_], row, len, norm_w, &written};
    }
    reinterpret_cast<LaunchFn>(table.commands[(size_t)c].pipeline.handle)(args);
    if (written) {
        q16_pending_ = q16_rows_[q16_turn_];
        q16_turn_ ^= 1;
    }
}

void CudaDevice::launch_commands(const DispatchTable &table, int count, int begin, int end) {
    q16_pending_ = nullptr;
    for (int t = 0; t < count; ++t)
        for (int c = begin; c < end; ++c)
            launch_command(table, c, t, c + 1 < end ? c + 1 : -1, c > begin ? c - 1 : t > 0 ? end - 1 : -1);
    q16_pending_ = nullptr;
}

void CudaDevice::encode_dispatch_table(const DispatchTable &table, int start_position, int count, int cmd_begin,
                                       int cmd_end) {
    if (cmd_end < 0) cmd_end = (int)table.commands.size();
    if (count <= 0 || cmd_begin >= cmd_end) return;
    launch_set_u32(base_position_, (uint32_t)start_position, stream_);
    context_ = context_length(start_position);
    if (!table.persistent) {
        // Built per call (prefill, evaluation): capturing would cost more than it saves.
        launch_commands(table, count, cmd_begin, cmd_end);
        return;
    }
    GraphCache::Key key{table.commands.data(), table.commands.size(), count, cmd_begin, cmd_end, (int)context_};
    cudaGraphExec_t exec = graphs_.get_or_capture(key, stream_, [&] { launch_commands(table, count, cmd_begin, cmd_end); });
    check(cudaGraphLaunch(exec, stream_), "graph launch");
}

// Eager, one event pair per command: timings include each launch's own gap, not a graph's.
std::vector<double> CudaDevice::profile_dispatch_table(const DispatchTable &table, int position) {
    const size_t n = table.commands.size();
    std::vector<cudaEvent_t> events(n + 1);
    for (cudaEvent_t &e : events) check(cudaEventCreate(&e), "event");
    launch_set_u32(base_position_, (uint32_t)position, stream_);
    context_ = context_length(position);
    check(cudaEventRecord(events[0], stream_), "event record");
    q16_pending_ = nullptr;  // eager and timed one by one: no handoffs
    for (size_t c = 0; c < n; ++c) {
        launch_command(table, (int)c, 0);
        check(cudaEventRecord(events[c + 1], stream_), "event record");
    }
    synchronize();
    std::vector<double> ms(n);
    for (size_t c = 0; c < n; ++c) {
        float t = 0.f;
        check(cudaEventElapsedTime(&t, events[c], events[c + 1]), "event time");
        ms[c] = t;
    }
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    return ms;
}

void CudaDevice::synchronize() { check(cudaStreamSynchronize(stream_), "synchronize"); }

}  // namespace akunu::cuda
