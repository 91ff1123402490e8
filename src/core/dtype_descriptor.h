// DTypeDescriptor: what a device runs for weights of one dtype. The table builder never branches
// on the dtype itself; it reads these names. Each backend owns its own table (dtype_lookup).
#pragma once
#include "core/dtype.h"

namespace akunu {

struct DTypeDescriptor {
    DType dtype;
    const char *gemm_kernel;       // y[M,N] (+)= x[M,K] . W[N,K]^T; M = 1 is the decode GEMV
    const char *embedding_kernel;  // one dequantized row per token id
    // Kernel that converts F32 activations into the form the GEMM wants, or nullptr when the
    // GEMM takes F32 directly. Activations are converted once per consumer group, not per GEMM.
    const char *act_quant_kernel;
    // Bytes of one converted activation row of K elements (0 when act_quant_kernel is null).
    size_t (*act_row_bytes)(size_t K);
    // Load-time weight layout, or nullptr when gemm_kernel / embedding_kernel read the file's
    // rows as they are. Device::upload_matrix applies it: a [rows, cols] matrix becomes
    // repacked_bytes(rows, cols) bytes written by repack(src, dst, rows, cols). Row geometry seen
    // by the table builder (row_bytes) stays the file's; only the kernels know the layout.
    size_t (*repacked_bytes)(size_t rows, size_t cols) = nullptr;
    void (*repack)(const void *src, void *dst, size_t rows, size_t cols) = nullptr;
    // Rows per group of the repacked layout: repack of a slice of whole groups (starting at row
    // r, src and dst both offset by r * row_bytes) writes that slice's part of the result, so a
    // device may repack slices in parallel. 0: repack whole matrices only.
    uint32_t repack_row_group = 0;
    // The decode GEMV folds an input RMSNorm into its own pass over x (no staging of the whole
    // row first), so the table builder fuses the norm up to ChipConfig::fuse_streamed_norm_max_dim
    // rather than fuse_gemv_norm_max_dim.
    bool gemv_streams_norm = false;
};

}  // namespace akunu
