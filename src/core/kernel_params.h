// Kernel parameter structs, defined once and shared by every backend (the book's ShaderTypes.h).
// Each comment lists the command's buffer bindings in order. All activations are F32 rows;
// the KV cache is head-major, cache[kv_head][position][head_dim], F16 for the kernels named
// *_kv_write / *_f16kv and Q8_0 planes (core/kv_cache_q8.h) for their *_q8 / *_q8kv variants,
// which take the same parameters.
//
// The Metal kernels (metal/*.metal) include this file too, so it stays within what both C++17
// and the Metal Shading Language accept: plain structs of 32-bit fields, enums, no static data.
#pragma once
#if defined(__METAL_VERSION__)
#include <metal_stdlib>  // uint32_t
#else
#include <cstdint>
#endif

namespace akunu {

// buffers: 0 token ids (u32), 1 embedding table, 2 out [rows, dim]
struct EmbeddingParams {
    uint32_t dim;
    uint32_t rows;
    uint32_t vocab_size;  // ids >= vocab_size are clamped (they were validated on the host)
    uint32_t row_bytes;   // bytes of one table row
    float scale;          // multiplies the embedding (Gemma: sqrt(dim)); 1 for Llama
};

// buffers: 0 x [rows, dim], 1 weight F32 [dim], 2 out [rows, dim]
// (rmsnorm_add_f32, the post-norm: out += norm(x) * w)
struct RMSNormParams {
    uint32_t dim;
    uint32_t rows;
    uint32_t x_stride;    // floats between input rows
    uint32_t out_stride;  // floats between output rows
    float eps;
};

// buffers: 0 x [rows, K] F32, 1 out [rows, act_row_bytes]
struct ActQuantParams {
    uint32_t K;
    uint32_t rows;
    uint32_t x_stride;        // floats between input rows
    uint32_t out_row_bytes;
};

// What a decode GEMV (M = 1) may do besides the product, so that the norm before it and the gated
// activation after it cost no launch of their own (GPU backends; ChipConfig::fuse_gemv_norm_max_dim / fuse_gemv_activation).
enum GemmInputOp : uint32_t {
    kGemmInputAsIs = 0,
    kGemmInputRMSNorm = 1,  // x is RMS-normalized first (eps below; weight: the buffer after the matrices)
};
enum GemmOutputOp : uint32_t {
    kGemmOutputPlain = 0,
    // Two parts of equal N (gate, up): y[i] = act(gate . x) * (up . x), N[0] columns at y_col[0].
    kGemmOutputSiluMul = 1,
    kGemmOutputGeluTanhMul = 2,
};

// Up to three weight matrices sharing one input (fused Q/K/V or gate/up without copying them).
// buffers: 0 x (converted activations), 1 y [M, y_stride], 2.. weights W_i [N_i, K],
// then the norm weight F32 [K] when input_op is kGemmInputRMSNorm
struct GemmParams {
    enum { kMaxParts = 3 };
    uint32_t M;
    uint32_t K;
    uint32_t n_parts;
    uint32_t N[kMaxParts];         // rows of each weight
    uint32_t y_col[kMaxParts];     // output column where part i starts
    uint32_t w_row_bytes[kMaxParts];
    uint32_t x_row_bytes;
    uint32_t y_stride;             // floats between output rows
    uint32_t accumulate;           // 1: y += (the residual add, fused)
    uint32_t rows_per_unit;        // weight rows per work unit
    uint32_t input_op;             // GemmInputOp (M = 1 only)
    uint32_t output_op;            // GemmOutputOp (M = 1 only; not with accumulate)
    float eps;                     // of the input RMSNorm
    // A pair command (kernel "gemm_A+gemm_B": two weight dtypes, Device::has_kernel): parts
    // second_part .. n_parts - 1 are B's, the ones before A's. 0: one dtype.
    uint32_t second_part;
};

// RoPE on Q and K in place, then K and V appended to the cache.
// buffers: 0 qkv [rows, q_dim + 2 kv_dim], 1 k_cache, 2 v_cache, 3 inv_freq F32 [rope_dim / 2]
struct RopeKVParams {
    uint32_t position;  // of row 0 (patched per token in decode)
    uint32_t rows;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t rope_dim;   // leading dims of each head that rotate (usually head_dim)
    uint32_t max_seq;    // cache rows per kv head: position p goes to row p % max_seq (a window's ring)
    uint32_t qkv_stride; // floats between rows
};

// Causal attention over the cache for `rows` query rows at positions position..position+rows-1.
// buffers: 0 q (inside qkv) [rows, qkv_stride], 1 k_cache, 2 v_cache, 3 out [rows, out_stride]
struct AttentionParams {
    uint32_t position;  // of query row 0 (patched)
    uint32_t kv_len;    // cache rows valid for the last query row (patched: position + rows)
    uint32_t rows;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t max_seq;   // cache rows per kv head: the key at position p is row p % max_seq (a window's ring)
    uint32_t q_stride;
    uint32_t out_stride;
    float scale;
    uint32_t window;  // sliding window: row at position i sees keys i - window + 1..i; 0: all
    float softcap;    // scores = softcap * tanh(scores / softcap) after scaling; 0: off
};

// Decode attention (one query row) that does the RoPE + KV-write command's work itself: each
// block takes its query head and the token's own key (K-head RMSNorm first when qk_norm) straight
// from qkv, rotates them, and one block per KV head appends K and V to the cache. A GPU saves a
// launch per layer (ChipConfig::fuse_rope_into_attention); qkv itself is left as it was.
// buffers: 0 qkv [1, attention.q_stride] (Q, K, V), 1 k_cache, 2 v_cache, 3 out [1, out_stride],
// 4 inv_freq F32 [rope_dim / 2], then when qk_norm: 5 q weight F32 [head_dim], 6 k weight
struct RopeAttentionParams {
    AttentionParams attention;  // its position / kv_len are the patched fields
    uint32_t rope_dim;
    uint32_t qk_norm;  // 1: RMSNorm each head (HeadNormParams' semantics) before RoPE
    float norm_eps;
};

// Per-head RMSNorm of Q and K in place (QK-norm), one weight vector for all Q heads and one for
// all K heads. buffers: 0 qkv [rows, stride] (Q heads then K heads at the row start), 1 q weight
// F32 [head_dim], 2 k weight F32 [head_dim]
struct HeadNormParams {
    uint32_t rows;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t stride;  // floats between rows
    float eps;
};

// x[r][i] += bias[i] for i < n.  buffers: 0 x [rows, stride], 1 bias F32 [n]
struct BiasAddParams {
    uint32_t n;
    uint32_t rows;
    uint32_t stride;  // floats between rows
};

// x = cap * tanh(x / cap), in place.  buffers: 0 x [rows, n]
struct SoftcapParams {
    uint32_t n;
    uint32_t rows;
    float cap;
};

// A grammar's allowed-token mask applied to the logits: logits[i] = -inf where bit i of the mask
// is clear (bit i % 32 of word i / 32, llguidance's and XGrammar's layout).
// buffers: 0 logits F32 [n] (in place), 1 mask u32 [(n + 31) / 32]
struct GrammarBitmaskParams {
    uint32_t n;
};

// out = act(gate) * up.  buffers: 0 gate_up [rows, 2 * ffn] (gate then up), 1 out [rows, ffn]
struct GatedActParams {
    uint32_t ffn_dim;
    uint32_t rows;
};

// buffers: 0 logits F32 [n], 1 token ids (u32; writes one slot)
struct ArgmaxParams {
    uint32_t n;
};

// Draws one token by the sampling rule (core/sampling_rule.h), penalizing the logits in place.
// buffers: 0 logits F32 [n], 1 token ids (u32; writes one slot; the `chain_index` slots before it
// hold this replay's earlier draws), 2 the sampling buffer (SamplingRule, SamplingCut, tokens)
struct SampleParams {
    uint32_t n;
    uint32_t position;     // absolute index of the drawn token (patched: position + 1)
    uint32_t chain_index;  // draws of this replay before this one (patched: token index)
};

}  // namespace akunu
