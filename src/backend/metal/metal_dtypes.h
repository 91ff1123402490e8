// The Metal backend's weight dtype table: for each dtype it runs, the GEMM/GEMV and embedding
// kernels of metal/. Plain C++ (no Metal API), so the Linux tests see the same table.
#pragma once
#include "core/dtype.h"
#include "core/dtype_descriptor.h"

namespace akunu::metal {

// The descriptor for weights of dtype t, or nullptr when the Metal kernels do not run it.
const DTypeDescriptor *metal_dtype_lookup(DType t);

}  // namespace akunu::metal
