// The scalar fp16 / bf16 <-> f32 conversions of convert.h.
#include "backend/cpu/convert.h"

#include <cstring>

#include "core/half.h"

namespace akunu::cpu {

static inline float bits_to_f32(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Pure integer conversion: keeps NaN payloads (signalling NaNs stay signalling), like numpy.
float fp16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | mant << 13);  // inf / NaN
    if (exp != 0) return bits_to_f32(sign | (exp + 127 - 15) << 23 | mant << 13);
    if (mant == 0) return bits_to_f32(sign);
    // Subnormal half: shift the leading 1 up to the implicit-bit position.
    uint32_t e = 127 - 15 + 1;
    do {
        mant <<= 1;
        --e;
    } while ((mant & 0x400) == 0);
    return bits_to_f32(sign | e << 23 | (mant & 0x3ff) << 13);
}

uint16_t f32_to_fp16(float f) { return float_to_half_bits(f); }

float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

}  // namespace akunu::cpu
