// Scalar fp16/bf16 <-> f32 conversions for host-side code (loading, metadata, tests) and the
// reference block math (kv_cache_q8.h). Hot loops use the backend's vectorized conversions instead.
#pragma once
#include <cstdint>
#include <cstring>

namespace akunu {

inline float half_bits_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: renormalize
            int e = -1;
            do { mant <<= 1; ++e; } while ((mant & 0x400) == 0);
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | mant << 13;  // inf / nan
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Round-to-nearest-even; NaN keeps its top payload bits (forced non-zero), like numpy.
inline uint16_t float_to_half_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u) return sign | 0x7c00;
        uint16_t nan = (uint16_t)(0x7c00 | ((ax >> 13) & 0x3ff));
        if (nan == 0x7c00) nan++;
        return sign | nan;
    }
    if (ax >= 0x477ff000u) return sign | 0x7c00;  // >= 65520 rounds to inf
    if (ax >= 0x38800000u) {                     // normal half (>= 2^-14)
        const uint32_t rounded = ax + 0xfff + ((ax >> 13) & 1);
        return sign | (uint16_t)((rounded - ((127u - 15u) << 23)) >> 13);
    }
    if (ax <= 0x33000000u) return sign;  // <= 2^-25 rounds (ties-to-even) to zero
    // Subnormal half: value * 2^24 rounded to an integer, ties to even.
    const uint32_t mant = (ax & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - (ax >> 23);  // 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return sign | (uint16_t)q;
}

inline float bf16_bits_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

}  // namespace akunu
