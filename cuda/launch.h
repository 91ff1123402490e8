// The CUDA kernel ABI, seen from the host: every kernel family in cuda/*.cu exports launchers of
// one signature, looked up by name (src/backend/cuda/kernel_registry.cpp) exactly like the CPU's
// kernel functions. Plain C++: included by host code and by the .cu files.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dispatch_table.h"

namespace akunu::cuda {

class CublasGemm;  // src/backend/cuda/cublas_runtime.h

// How a kernel finds the per-token values of its command's patch. Position-type patches
// (Position, KVSeqLen, PosAndKV) are applied by the kernel itself at entry from device memory:
// position = *base_position + token_index. One captured graph therefore serves every start
// position; the host only rewrites *base_position before a replay. TokenOffset/ArgmaxOutput
// depend on token_index alone and are resolved on the host (into the buffer pointers);
// SampleOutput's slot and chain index too, its position by the kernel.
struct PatchContext {
    const uint32_t *base_position;  // device memory: the table's start position
    uint32_t token_index;           // which token of the replay this command belongs to
    PatchType patch;                // the command's patch type
    uint32_t kv_span;               // KV length = position + kv_span (PosAndKV, KVSeqLen; core/dispatch_table.h)
};

// Workspace the device lends to kernels that need more than their buffers: split-attention
// partials, argmax's or the sampler's block results (the last 128 floats), a prefill GEMM's f16
// activations.
// Commands run one after another, so they take turns with it.
struct Workspace {
    float *data = nullptr;
    size_t floats = 0;
    unsigned *counters = nullptr;  // zeroed at creation; a kernel that counts returns its counter to 0
    uint32_t n_counters = 0;
    int sm_count = 1;
    uint32_t warp_slots = 64;  // warps resident on the whole GPU at once (SMs x warps per SM)
    bool pdl = false;  // programmatic dependent launch (compute capability >= 9.0)
    bool prefetch_weights = true;  // GEMVs ask L2 for their first weights before waiting (PDL)
    bool integer_gemv = true;      // g8 GEMVs on int16 x and dp2a (cuda/gemv_q16.cuh)
    bool q16_late_release = true;  // those that fill the GPU let the next kernel launch after their main loop
    bool sixteen_warp_gemv = true;  // small integer-GEMV grids get 16-warp blocks
    bool q16_grid_stride = true;    // integer GEMVs of many more items than fit at once walk them in one wave
    bool early_output = true;       // accumulating integer GEMVs read their output's old values before the wait
    bool split_k = true;            // tiled GEMMs of too few tiles to fill the GPU split their K steps
    bool dequant_library_gemm = true;  // quantized GEMMs of many rows: weights to f16, then cuBLAS
    bool clusters = false;          // thread-block clusters (Hopper, opt-in): decode attention merges in one
    uint32_t attention_min_keys = 0;  // decode attention's fewest keys per split; 0: its own rule
    uint32_t attention_warps = 0;     // warps per decode-attention block (4, 8, 16); 0: its own rule
    uint32_t prefill_attention_warps = 0;  // warps per F16 prefill-attention block (4, 8); 0: its own rule
    // Replays starting at this position or later run decode attention on the tensor cores, one
    // block per KV head (cuda/attention_decode_gqa.cu); earlier ones the per-query-head kernel
    // built for short contexts. From very_long_context_keys on, that kernel's F16-cache blocks
    // take twice the warps and half the stages. The captured graphs are keyed on the class of
    // context (ContextLength, GraphCache).
    uint32_t long_context_keys = 0;
    uint32_t very_long_context_keys = 0;
    uint32_t attention_gqa_splits = 0;  // most splits per KV head of that kernel; 0: its own rule
    size_t l2_bytes = 0;
    const CublasGemm *cublas = nullptr;  // the F16 prefill GEMMs' library (cuBLAS), when it loads
};

// A decode activation row handed from one command to the next in the integer GEMV's quantized
// form (cuda/q16_activation.cuh), set up by CudaDevice::launch_command: the producer is offered
// `chunks` for the row the next command's GEMV reads (row, len floats; norm_w: that GEMV's input
// norm weight, or null), writes them if its kernel can and says so through `written`; the GEMV is
// then launched with q16_in = the same chunks.
struct Q16Handoff {
    void *chunks = nullptr;  // null: none
    const float *row = nullptr;
    uint32_t len = 0;
    const float *norm_w = nullptr;
    bool *written = nullptr;

    // Whether the offer is for exactly the row of `n` floats at `out`, in whole 32-element blocks.
    bool offered_for(const float *out, uint32_t n) const { return chunks && row == out && len == n && n % 32 == 0; }
};

// Decode replays by the positions they start at: below Workspace::long_context_keys, from it, and
// from very_long_context_keys on.
enum class ContextLength : uint8_t { Short, Long, VeryLong };

struct LaunchArgs {
    uint8_t *buffers[DispatchCmd::kMaxBuffers];  // device pointer + offset, in binding order
    const void *params;                          // the command's parameter struct (host memory)
    PatchContext patch;
    cudaStream_t stream;
    const Workspace *workspace;
    Q16Handoff q16_out;         // offered to this command's output row (producer side)
    const void *q16_in = nullptr;  // this GEMV's x, already quantized by the previous command
    // The class of every position of this launch (Workspace::long_context_keys and
    // very_long_context_keys): one graph serves all replays of a class, so kernels may be chosen by it.
    ContextLength context = ContextLength::Short;
    // This command's output (a GEMM's y, buffers[1]) is not written by the command before it. With
    // programmatic dependent launch a kernel starts only after the one before it has passed its
    // wait, so every earlier command has completed: the output's old values (an accumulating
    // GEMV's residual) are final and may be read before the kernel's own wait.
    bool output_settled = false;
};

// Enqueues one command on args.stream (possibly several kernels). Throws on invalid shapes.
using LaunchFn = void (*)(const LaunchArgs &args);

// Whether command `fn` with `a` is a decode GEMV that would run the integer kernel, and so can
// take its x quantized by the command before it: then *row / *len / *norm_w describe its input.
bool gemv_takes_q16_input(LaunchFn fn, const LaunchArgs &a, const float **row, uint32_t *len, const float **norm_w);
// Chunk bytes of a handed-off row of `len` floats.
size_t q16_handoff_bytes(uint32_t len);
// Whether `fn` launches a GEMM: reads buffers[0] and its weights, writes buffers[1] only.
bool is_gemm_launcher(LaunchFn fn);
// Pair commands' decode GEMVs run as one launch (gemv_g8_q16_pair_kernel) so far. For tests.
uint64_t pair_gemvs_launched();

// --- launchers, one per kernel name (names as in the CPU backend; _g8: the g8 layout) -------
void launch_embedding_f32(const LaunchArgs &);
void launch_embedding_f16(const LaunchArgs &);
void launch_gemm_f32(const LaunchArgs &);
void launch_gemm_f16(const LaunchArgs &);
// The g8 formats (cuda/layout_g8.h, repacked at load): X(kernel-name suffix, DType, device format
// of cuda/formats_g8.cuh). Q5_0 runs as Q8_0 (int8 q - 16).
#define AKUNU_CUDA_G8_FORMATS(X)                                                                      \
    X(q8_0, Q8_0, G8FmtQ8_0) X(q4_0, Q4_0, G8FmtQ4_0) X(q4_1, Q4_1, G8FmtQ4_1) X(q4_k, Q4_K, G8FmtQ4_K) \
    X(q6_k, Q6_K, G8FmtQ6_K) X(q5_k, Q5_K, G8FmtQ5_K) X(iq4_nl, IQ4_NL, G8FmtIQ4_NL)                    \
    X(iq4_xs, IQ4_XS, G8FmtIQ4_XS) X(q5_0, Q5_0, G8FmtQ8_0) X(q5_1, Q5_1, G8FmtQ5_1)
#define AKUNU_DECLARE_G8(lower, upper, fmt)                   \
    void launch_gemm_##lower##_g8(const LaunchArgs &); \
    void launch_embedding_##lower##_g8(const LaunchArgs &);
AKUNU_CUDA_G8_FORMATS(AKUNU_DECLARE_G8)
#undef AKUNU_DECLARE_G8
// Pairs of g8 formats one command may hold (a table builder's pair: GemmParams::second_part), as
// llama.cpp's mixes put them in one layer's Q/K/V: X(first kernel-name suffix, its Fmt, second's, Fmt).
// Q4_K_M / Q5_K_M: attn_v Q6_K in some layers; IQ4_XS / IQ4_NL (GQA groups of 4 or more) and
// Q4_K_S: attn_v Q5_K.
#define AKUNU_CUDA_G8_PAIRS(X)                                                                            \
    X(q4_k, G8FmtQ4_K, q6_k, G8FmtQ6_K) X(q5_k, G8FmtQ5_K, q6_k, G8FmtQ6_K) X(iq4_xs, G8FmtIQ4_XS, q5_k, G8FmtQ5_K) \
    X(iq4_nl, G8FmtIQ4_NL, q5_k, G8FmtQ5_K) X(q4_k, G8FmtQ4_K, q5_k, G8FmtQ5_K)
#define AKUNU_DECLARE_G8_PAIR(a, fa, b, fb) void launch_gemm_##a##_g8_pair_##b##_g8(const LaunchArgs &);
AKUNU_CUDA_G8_PAIRS(AKUNU_DECLARE_G8_PAIR)
#undef AKUNU_DECLARE_G8_PAIR
// The group-scaled dtypes read as stored (cuda/formats_kquant.cuh): X(kernel-name suffix, Fmt suffix / DType).
#define AKUNU_CUDA_KQUANT_FORMATS(X) \
    X(q2_k, Q2_K) X(q3_k, Q3_K)
#define AKUNU_DECLARE(lower, upper) \
    void launch_gemm_##lower(const LaunchArgs &); \
    void launch_embedding_##lower(const LaunchArgs &);
AKUNU_CUDA_KQUANT_FORMATS(AKUNU_DECLARE)
#undef AKUNU_DECLARE
void launch_rmsnorm_f32(const LaunchArgs &);
void launch_rmsnorm_add_f32(const LaunchArgs &);
void launch_head_rmsnorm_f32(const LaunchArgs &);
void launch_bias_add_f32(const LaunchArgs &);
void launch_softcap_f32(const LaunchArgs &);
void launch_grammar_bitmask_f32(const LaunchArgs &);
void launch_gelu_tanh_mul_f32(const LaunchArgs &);
void launch_rope_interleaved_kv_write(const LaunchArgs &);
void launch_rope_neox_kv_write(const LaunchArgs &);
void launch_attention_f16kv(const LaunchArgs &);
void launch_attention_rope_interleaved_f16kv(const LaunchArgs &);
void launch_attention_rope_neox_f16kv(const LaunchArgs &);
void launch_rope_interleaved_kv_write_q8(const LaunchArgs &);
void launch_rope_neox_kv_write_q8(const LaunchArgs &);
void launch_attention_q8kv(const LaunchArgs &);
void launch_attention_rope_interleaved_q8kv(const LaunchArgs &);
void launch_attention_rope_neox_q8kv(const LaunchArgs &);
void launch_silu_mul_f32(const LaunchArgs &);
void launch_argmax_f32(const LaunchArgs &);
void launch_sample_f32(const LaunchArgs &);

// Writes `value` into device memory `dst` on `stream` (stream-ordered, graph-safe).
void launch_set_u32(uint32_t *dst, uint32_t value, cudaStream_t stream);

}  // namespace akunu::cuda
