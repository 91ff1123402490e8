#include "weights/mlx_quant.h"

#include <cmath>
#include <cstring>
#include <initializer_list>

#include "core/half.h"
#include "core/quant_blocks.h"

namespace akunu {

namespace {

float scalar_at(const uint8_t *base, DType t, size_t i) {
    uint16_t h;
    switch (t) {
        case DType::F16:
            std::memcpy(&h, base + 2 * i, 2);
            return half_bits_to_float(h);
        case DType::BF16:
            std::memcpy(&h, base + 2 * i, 2);
            return bf16_bits_to_float(h);
        default: {
            float f;
            std::memcpy(&f, base + 4 * i, 4);
            return f;
        }
    }
}

size_t n_groups(const MLXQuantMatrix &m) { return (size_t)m.rows * (m.cols / m.group_size); }

// Every scale and bias survives the trip to fp16 unchanged (always true for fp16 sources).
bool scales_exact_in_fp16(const MLXQuantMatrix &m) {
    if (m.scale_dtype == DType::F16) return true;
    for (const uint8_t *base : {m.scales, m.biases})
        for (size_t i = 0; i < n_groups(m); ++i) {
            float v = scalar_at(base, m.scale_dtype, i);
            if (half_bits_to_float(float_to_half_bits(v)) != v) return false;
        }
    return true;
}

uint16_t group_value_as_half(const uint8_t *base, const MLXQuantMatrix &m, size_t group) {
    if (m.scale_dtype == DType::F16) {
        uint16_t h;
        std::memcpy(&h, base + 2 * group, 2);
        return h;
    }
    return float_to_half_bits(scalar_at(base, m.scale_dtype, group));
}

ConvertedMatrix to_q4_1(const MLXQuantMatrix &m) {
    const uint32_t blocks_per_row = m.cols / QK4_1;
    const uint32_t groups_per_row = m.cols / m.group_size;
    ConvertedMatrix out;
    out.dtype = DType::Q4_1;
    out.bytes = AlignedBytes((size_t)m.rows * blocks_per_row * sizeof(BlockQ4_1));
    auto *blocks = reinterpret_cast<BlockQ4_1 *>(out.bytes.data());
    for (uint32_t r = 0; r < m.rows; ++r) {
        const uint8_t *row = m.packed + (size_t)r * m.row_stride();
        for (uint32_t b = 0; b < blocks_per_row; ++b) {
            BlockQ4_1 &blk = blocks[(size_t)r * blocks_per_row + b];
            const size_t group = (size_t)r * groups_per_row + (size_t)b * QK4_1 / m.group_size;
            blk.d = group_value_as_half(m.scales, m, group);
            blk.m = group_value_as_half(m.biases, m, group);
            // MLX: two elements per byte, the even one in the low nibble. Q4_1: byte j holds
            // element j (low) and element j + 16 (high) of the block.
            const uint8_t *src = row + (size_t)b * QK4_1 / 2;
            for (int j = 0; j < QK4_1 / 2; ++j) {
                const uint8_t lo = (uint8_t)((src[j / 2] >> (4 * (j & 1))) & 0xf);
                const uint8_t hi = (uint8_t)((src[(j + 16) / 2] >> (4 * (j & 1))) & 0xf);
                blk.qs[j] = (uint8_t)(lo | hi << 4);
            }
        }
    }
    return out;
}

ConvertedMatrix dequantize(const MLXQuantMatrix &m) {
    const size_t n = (size_t)m.rows * m.cols;
    bool fits_fp16 = true;
    ConvertedMatrix out;
    out.dtype = DType::F16;
    out.bytes = AlignedBytes(n * 2);
    auto *h = reinterpret_cast<uint16_t *>(out.bytes.data());
    for (uint32_t r = 0; r < m.rows && fits_fp16; ++r)
        for (uint32_t c = 0; c < m.cols; ++c) {
            const float v = mlx_dequantized_value(m, r, c);
            const uint16_t bits = float_to_half_bits(v);
            if ((bits & 0x7c00u) == 0x7c00u && std::isfinite(v)) {
                fits_fp16 = false;
                break;
            }
            h[(size_t)r * m.cols + c] = bits;
        }
    if (fits_fp16) return out;
    out.dtype = DType::F32;
    out.bytes = AlignedBytes(n * 4);
    auto *f = reinterpret_cast<float *>(out.bytes.data());
    for (uint32_t r = 0; r < m.rows; ++r)
        for (uint32_t c = 0; c < m.cols; ++c) f[(size_t)r * m.cols + c] = mlx_dequantized_value(m, r, c);
    return out;
}

}  // namespace

uint32_t mlx_quant_value(const MLXQuantMatrix &m, uint32_t row, uint32_t col) {
    const uint8_t *p = m.packed + (size_t)row * m.row_stride();
    const size_t bit = (size_t)col * m.bits;
    const size_t byte = bit >> 3;
    const unsigned shift = (unsigned)(bit & 7);
    uint32_t v = p[byte] >> shift;
    if (shift + m.bits > 8) v |= (uint32_t)p[byte + 1] << (8 - shift);  // straddles into the next byte
    return v & ((1u << m.bits) - 1u);
}

float mlx_dequantized_value(const MLXQuantMatrix &m, uint32_t row, uint32_t col) {
    const size_t group = (size_t)row * (m.cols / m.group_size) + col / m.group_size;
    const float scale = scalar_at(m.scales, m.scale_dtype, group);
    const float bias = scalar_at(m.biases, m.scale_dtype, group);
    return scale * (float)mlx_quant_value(m, row, col) + bias;
}

ConvertedMatrix convert_mlx_matrix(const MLXQuantMatrix &m) {
    if (m.bits == 4 && m.group_size % QK4_1 == 0 && m.cols % QK4_1 == 0 && scales_exact_in_fp16(m)) return to_q4_1(m);
    return dequantize(m);
}

}  // namespace akunu
