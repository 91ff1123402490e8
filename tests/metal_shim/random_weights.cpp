#include "random_weights.h"

#include <cstring>
#include <random>
#include <stdexcept>

namespace metal_check {

namespace {

// One GGUF layout (src/core/quant_blocks.h, kquant_blocks.h): block geometry and the byte offsets
// of its f16 scale / min fields. Float dtypes: one element per "block".
struct Layout {
    const char *dtype;
    size_t block_elements;
    size_t block_bytes;
    std::vector<size_t> f16_fields;
};

const std::vector<Layout> &layouts() {
    static const std::vector<Layout> table = {
        {"f32", 1, 4, {}},
        {"f16", 1, 2, {}},
        {"bf16", 1, 2, {}},
        {"q8_0", 32, 34, {0}},         // d
        {"q4_0", 32, 18, {0}},         // d
        {"q4_1", 32, 20, {0, 2}},      // d, m
        {"q5_0", 32, 22, {0}},         // d
        {"q5_1", 32, 24, {0, 2}},      // d, m
        {"iq4_nl", 32, 18, {0}},       // d
        {"q2_k", 256, 84, {80, 82}},   // d, dmin after scales[16], qs[64]
        {"q3_k", 256, 110, {108}},     // d after hmask[32], qs[64], scales[12]
        {"q4_k", 256, 144, {0, 2}},    // d, dmin
        {"q5_k", 256, 176, {0, 2}},    // d, dmin
        {"q6_k", 256, 210, {208}},     // d after ql[128], qh[64], scales[16]
        {"iq4_xs", 256, 136, {0}},     // d (scales_h at 2 is packed bits, not an f16)
    };
    return table;
}

const Layout &layout_of(const std::string &dtype) {
    for (const Layout &l : layouts())
        if (dtype == l.dtype) return l;
    throw std::invalid_argument("random_weight_rows: unknown dtype '" + dtype + "'");
}

uint16_t to_f16_bits(float f) {
    const _Float16 h = (_Float16)f;
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    return bits;
}

void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

}  // namespace

const std::vector<std::string> &weight_dtypes() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const Layout &l : layouts()) n.push_back(l.dtype);
        return n;
    }();
    return names;
}

size_t weight_block_elements(const std::string &dtype) { return layout_of(dtype).block_elements; }

size_t weight_row_bytes(const std::string &dtype, size_t cols) {
    const Layout &l = layout_of(dtype);
    if (cols % l.block_elements != 0)
        throw std::invalid_argument("random_weight_rows: " + std::to_string(cols) + " columns is not a whole number of " +
                                    dtype + " blocks");
    return cols / l.block_elements * l.block_bytes;
}

Bytes random_weight_rows(const std::string &dtype, size_t rows, size_t cols, uint32_t seed) {
    const Layout &l = layout_of(dtype);
    const size_t n_blocks = rows * (weight_row_bytes(dtype, cols) / l.block_bytes);
    std::mt19937 rng(seed);
    Bytes out(n_blocks * l.block_bytes);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    if (dtype == "f32") {
        for (size_t i = 0; i < n_blocks; ++i) {
            const float v = unit(rng);
            std::memcpy(&out[4 * i], &v, 4);
        }
        return out;
    }
    if (dtype == "f16" || dtype == "bf16") {
        for (size_t i = 0; i < n_blocks; ++i) {
            const float v = unit(rng);
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            put_u16(&out[2 * i], dtype == "f16" ? to_f16_bits(v) : (uint16_t)(bits >> 16));  // bf16: truncated
        }
        return out;
    }
    for (uint8_t &b : out) b = (uint8_t)(rng() >> 24);
    std::uniform_real_distribution<float> magnitude(0.01f, 0.1f);
    for (size_t b = 0; b < n_blocks; ++b)
        for (size_t offset : l.f16_fields) {
            const float v = (rng() & 1 ? -1.0f : 1.0f) * magnitude(rng);
            put_u16(&out[b * l.block_bytes + offset], to_f16_bits(v));
        }
    return out;
}

}  // namespace metal_check
