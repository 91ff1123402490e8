// The weight dtype table of dtypes.h: the float dtypes, Q8_0, Q4_0, Q4_1 and the group-scaled
// dtypes of kquant_kernels.h.
#include "backend/cpu/dtypes.h"

#include <cctype>

#include "backend/cpu/kquant_kernels.h"

namespace akunu::cpu {

bool cpu_supports_dtype(DType t) {
    switch (t) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q4_1: return true;
        default: return kquant_handles(t);
    }
}

bool dtype_from_name(const std::string &name, DType *out) {
    static const struct {
        const char *name;
        DType type;
    } kNames[] = {{"F32", DType::F32},   {"F16", DType::F16},   {"BF16", DType::BF16},
                  {"Q8_0", DType::Q8_0}, {"Q4_0", DType::Q4_0}, {"Q4_1", DType::Q4_1},
                  {"Q5_0", DType::Q5_0}, {"Q5_1", DType::Q5_1}, {"Q2_K", DType::Q2_K},
                  {"Q3_K", DType::Q3_K}, {"Q4_K", DType::Q4_K}, {"Q5_K", DType::Q5_K},
                  {"Q6_K", DType::Q6_K}, {"IQ4_NL", DType::IQ4_NL}, {"IQ4_XS", DType::IQ4_XS}};
    std::string upper = name;
    for (char &c : upper) c = (char)std::toupper((unsigned char)c);
    for (const auto &entry : kNames) {
        if (upper == entry.name) {
            *out = entry.type;
            return true;
        }
    }
    return false;
}

}  // namespace akunu::cpu
