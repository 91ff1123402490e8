// The weight dtypes the CPU row kernels run and their GGML names: what the testing bindings check
// a dtype against before calling a row kernel on raw bytes.
#pragma once
#include <string>

#include "core/dtype.h"

namespace akunu::cpu {

// True if gemm_rows/dequantize_row handle this weight dtype.
bool cpu_supports_dtype(DType t);

// Weight dtype by GGML name ("Q4_0", "f16", ...; case-insensitive), for the dtypes above.
bool dtype_from_name(const std::string &name, DType *out);

}  // namespace akunu::cpu
