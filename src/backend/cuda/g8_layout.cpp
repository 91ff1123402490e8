#include "backend/cuda/g8_layout.h"

#include <cstring>

#include "core/errors.h"
#include "core/quant_blocks.h"
#include "cuda/layout_g8.h"

namespace akunu::cuda {

namespace {

// Block -> (scale bytes, quant bytes) of the g8 layout. The scale bytes are the block's leading
// f16 fields (d, or d and m), the quant bytes its qs: both copied unchanged.
template <class Block, class Layout>
void repack_blocks(const uint8_t *src, uint8_t *dst, size_t rows, size_t cols) {
    static_assert(sizeof(Block) == Layout::kScaleBytes + Layout::kQuantBytes, "block = scales + quants");
    const uint32_t K = (uint32_t)cols, nb = K / 32;
    const size_t row_bytes = (size_t)nb * sizeof(Block), group_bytes = Layout::group_bytes(K);
    const size_t groups = (rows + kG8Rows - 1) / kG8Rows;
    for (size_t g = 0; g < groups; ++g) {
        uint8_t *grp = dst + g * group_bytes;
        if ((g + 1) * kG8Rows > rows) std::memset(grp, 0, group_bytes);  // padding rows: d = 0
        for (uint32_t r = 0; r < kG8Rows && g * kG8Rows + r < rows; ++r) {
            const uint8_t *row = src + (g * kG8Rows + r) * row_bytes;
            for (uint32_t kb = 0; kb < nb; ++kb) {
                const uint8_t *blk = row + (size_t)kb * sizeof(Block);
                std::memcpy(grp + Layout::scale_offset(kb, r), blk, Layout::kScaleBytes);
                std::memcpy(grp + Layout::quant_offset(K, kb, r), blk + Layout::kScaleBytes, Layout::kQuantBytes);
            }
        }
    }
}

}  // namespace

size_t g8_bytes(DType t, size_t rows, size_t cols) {
    const size_t groups = (rows + kG8Rows - 1) / kG8Rows;
    switch (t) {
        case DType::Q4_0: return groups * G8Q4_0::group_bytes((uint32_t)cols);
        case DType::Q4_1: return groups * G8Q4_1::group_bytes((uint32_t)cols);
        case DType::Q8_0: return groups * G8Q8_0::group_bytes((uint32_t)cols);
        default: throw AkunuError("internal: no g8 layout for this dtype");
    }
}

void g8_repack(DType t, const void *src, void *dst, size_t rows, size_t cols) {
    if (cols % 32 != 0) throw UnsupportedError("quantized weight rows must be a multiple of 32 elements");
    const auto *s = static_cast<const uint8_t *>(src);
    auto *d = static_cast<uint8_t *>(dst);
    switch (t) {
        case DType::Q4_0: return repack_blocks<BlockQ4_0, G8Q4_0>(s, d, rows, cols);
        case DType::Q4_1: return repack_blocks<BlockQ4_1, G8Q4_1>(s, d, rows, cols);
        case DType::Q8_0: return repack_blocks<BlockQ8_0, G8Q8_0>(s, d, rows, cols);
        default: throw AkunuError("internal: no g8 layout for this dtype");
    }
}

}  // namespace akunu::cuda
