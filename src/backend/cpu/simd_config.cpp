// The SIMD level the CPU kernels were compiled for, from the engine's own compile flags (-march=native
// reaches the engine's sources, not the Python module's: simd_config.h's macros differ there).
#include "backend/cpu/simd_config.h"

namespace akunu::cpu {

const char *compiled_simd_level() {
#if defined(AKUNU_CPU_VNNI512)
    return "avx512vnni";
#elif defined(AKUNU_CPU_AVX2)
    return "avx2";
#else
    return "scalar";
#endif
}

}  // namespace akunu::cpu
