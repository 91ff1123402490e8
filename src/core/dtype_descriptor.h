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
};

}  // namespace akunu
