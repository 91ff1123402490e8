#include "backend/cuda/g8_layout.h"

#include <cstring>

#include "backend/cpu/convert.h"
#include "core/errors.h"
#include "core/kquant_blocks.h"
#include "core/quant_blocks.h"
#include "cuda/layout_g8.h"

namespace akunu::cuda {

namespace {

// The loop every g8 repack shares: for each row r of each 8-row group and each 32-element block
// kb, fill(row, kb, out) writes the block's bytes into the regions of out (row: the row's file
// bytes, src_row_bytes long). Padding rows of the last group stay zero (factors 0).
struct BlockOut {
    uint8_t *scales, *quants;
    uint8_t *high, *super;  // the superblock layouts' regions, else null
};
template <class Layout, class Fill>
void repack_groups(const uint8_t *src, uint8_t *dst, size_t rows, size_t cols, size_t src_row_bytes, Fill fill) {
    const uint32_t K = (uint32_t)cols, nb = K / 32;
    const size_t group_bytes = Layout::group_bytes(K), groups = (rows + kG8Rows - 1) / kG8Rows;
    for (size_t g = 0; g < groups; ++g) {
        uint8_t *grp = dst + g * group_bytes;
        if ((g + 1) * kG8Rows > rows) std::memset(grp, 0, group_bytes);
        for (uint32_t r = 0; r < kG8Rows && g * kG8Rows + r < rows; ++r) {
            const uint8_t *row = src + (g * kG8Rows + r) * src_row_bytes;
            for (uint32_t kb = 0; kb < nb; ++kb)
                fill(row, kb,
                     BlockOut{grp + Layout::scale_offset(kb, r), grp + Layout::quant_offset(K, kb, r),
                              Layout::kHighBytes ? grp + Layout::high_offset(K, kb, r) : nullptr,
                              Layout::kSuperBytes ? grp + Layout::super_offset(K, kb, r) : nullptr});
        }
    }
}

// The quant bytes of a g8 block as stored in the file.
template <class Layout>
void copy_quants(const uint8_t *qs, uint8_t *out) {
    std::memcpy(out, qs, Layout::kQuantBytes);
}

// Block -> (scale bytes, quant bytes) of the g8 layout. The scale bytes are the block's leading
// f16 fields (d, or d and m), copied unchanged; the quant bytes its qs, through `quants` (unchanged
// but for IQ4_NL's nibble order).
template <class Block, class Layout, void (*quants)(const uint8_t *, uint8_t *) = copy_quants<Layout>>
void repack_blocks(const uint8_t *src, uint8_t *dst, size_t rows, size_t cols) {
    static_assert(sizeof(Block) == Layout::kScaleBytes + Layout::kQuantBytes, "block = scales + quants");
    repack_groups<Layout>(src, dst, rows, cols, cols / 32 * sizeof(Block),
                          [](const uint8_t *row, uint32_t kb, const BlockOut &out) {
                              const uint8_t *blk = row + (size_t)kb * sizeof(Block);
                              std::memcpy(out.scales, blk, Layout::kScaleBytes);
                              quants(blk + Layout::kScaleBytes, out.quants);
                          });
}

// f16 bits -> f32, exact: the CPU backend's conversion.
using akunu::cpu::fp16_to_f32;

// The superblock formats: block j of a superblock becomes a g8 block (layout_g8.h) of its
// sub-scale bytes and low nibbles (Q4_0's order: byte i holds elements i and 16 + i), the bits
// above them (Q5_K, Q6_K) and the superblock's f16 factors, each copied as stored, so the kernels
// reproduce gguf-py's values bit for bit. IQ4_XS's block takes its f32 factor d (ls - 32), and
// its nibbles (as IQ4_NL's) are reordered for the table lookup (iq4_nibbles_g8_order).

// Element l (0..31) of Q4_K / Q5_K block j: nibble j % 2 of qs[32 (j / 2) + l].
template <class Super> uint8_t kquant_nibble(const Super &b, int j, int l) {
    return (uint8_t)((b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15);
}
template <class Super> void nibbles_q4_0_order(const Super &b, int j, uint8_t *quants) {
    for (int i = 0; i < 16; ++i) quants[i] = (uint8_t)(kquant_nibble(b, j, i) | kquant_nibble(b, j, 16 + i) << 4);
}
template <class Super> void scale_min_bytes(const Super &b, int j, const BlockOut &out) {
    int sc, m;
    kquant_scale_min(b.scales, j, &sc, &m);
    out.scales[0] = (uint8_t)sc;
    out.scales[1] = (uint8_t)m;
    std::memcpy(out.super, &b.d, 2);
    std::memcpy(out.super + 2, &b.dmin, 2);
}

struct Q4KBlocks {
    using Super = BlockQ4_K;
    using Layout = G8Q4_K;
    static void block(const BlockQ4_K &b, int j, const BlockOut &out) {
        scale_min_bytes(b, j, out);
        nibbles_q4_0_order(b, j, out.quants);
    }
};
struct Q5KBlocks {
    using Super = BlockQ5_K;
    using Layout = G8Q5_K;
    // 5th bit of element l: bit j of qh[l]. High byte c: elements 4i + c at bit i, 16 + 4i + c at 4 + i.
    static void block(const BlockQ5_K &b, int j, const BlockOut &out) {
        scale_min_bytes(b, j, out);
        nibbles_q4_0_order(b, j, out.quants);
        for (int c = 0; c < 4; ++c) {
            uint8_t v = 0;
            for (int i = 0; i < 4; ++i)
                v |= (uint8_t)(((b.qh[4 * i + c] >> j) & 1) << i | ((b.qh[16 + 4 * i + c] >> j) & 1) << (4 + i));
            out.high[c] = v;
        }
    }
};
struct Q6KBlocks {
    using Super = BlockQ6_K;
    using Layout = G8Q6_K;
    // q of element l of block j (0..63), as gguf-py's layout reads it.
    static int q6(const BlockQ6_K &b, int j, int l) {
        const int e = 32 * j + l, h = e / 128, r = e % 128;
        const int lo = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
        const int hi = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        return lo | hi << 4;
    }
    // Stored: q ^ 32; nibbles in Q4_0's order; high word h, byte c: the top 2 bits of element
    // 16h + 4i + c at bits 2i, 2i + 1.
    static void block(const BlockQ6_K &b, int j, const BlockOut &out) {
        int v[32];
        for (int l = 0; l < 32; ++l) v[l] = q6(b, j, l) ^ 32;
        for (int i = 0; i < 16; ++i) out.quants[i] = (uint8_t)((v[i] & 15) | (v[16 + i] & 15) << 4);
        for (int h = 0; h < 2; ++h)
            for (int c = 0; c < 4; ++c) {
                uint8_t t = 0;
                for (int i = 0; i < 4; ++i) t |= (uint8_t)((v[16 * h + 4 * i + c] >> 4) << (2 * i));
                out.high[4 * h + c] = t;
            }
        out.scales[0] = (uint8_t)b.scales[2 * j];
        out.scales[1] = (uint8_t)b.scales[2 * j + 1];
        std::memcpy(out.super, &b.d, 2);  // the other two bytes stay zero
    }
};
// IQ4 nibbles (16 bytes in Q4_0's order: byte i holds elements i and 16 + i) in the g8 IQ4 order:
// word w holds elements 4w .. 4w + 3 in its nibbles 0..3 and 16 + 4w .. 16 + 4w + 3 in nibbles 4..7,
// so the table lookup of a word's low half is already the four values dp2a takes next to each
// other (cuda/formats_g8.cuh, iq4_values8).
void iq4_nibbles_g8_order(const uint8_t *qs, uint8_t *out) {
    const auto element = [&](int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; };
    for (int w = 0; w < 4; ++w)
        for (int half = 0; half < 2; ++half)
            for (int b = 0; b < 2; ++b) {
                const int e = 16 * half + 4 * w + 2 * b;
                out[4 * w + 2 * half + b] = (uint8_t)(element(e) | element(e + 1) << 4);
            }
}

struct IQ4XSBlocks {
    using Super = BlockIQ4_XS;
    using Layout = G8IQ4_XS;
    // Block j: factor d (ls_j - 32) (an f32 product, as gguf-py's), its nibbles in the g8 IQ4 order.
    static void block(const BlockIQ4_XS &b, int j, const BlockOut &out) {
        const int ls = ((b.scales_l[j / 2] >> (4 * (j % 2))) & 15) | ((b.scales_h >> (2 * j)) & 3) << 4;
        const float factor = fp16_to_f32(b.d) * (float)(ls - 32);
        std::memcpy(out.scales, &factor, 4);
        iq4_nibbles_g8_order(b.qs + 16 * j, out.quants);
    }
};

// Q5_0 / Q5_1: the 5th bits spread into one byte a quant (Q5_0: int8 q - 16, so Q8_0's block;
// Q5_1: unsigned), the f16 factors as stored.
template <class Block, int kOffset>
void q5_block(const Block &b, uint8_t *scales, uint8_t *quants) {
    std::memcpy(scales, &b, sizeof(Block) - 20);  // d (Q5_0), d and m (Q5_1): the fields before qh
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int j = 0; j < 16; ++j) {
        quants[j] = (uint8_t)(int8_t)(((b.qs[j] & 15) | ((qh >> j) & 1) << 4) - kOffset);
        quants[j + 16] = (uint8_t)(int8_t)(((b.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - kOffset);
    }
}

template <class Block, class Layout, int kOffset>
void repack_q5(const uint8_t *src, uint8_t *dst, size_t rows, size_t cols) {
    static_assert(sizeof(Block) - 20 == Layout::kScaleBytes && Layout::kQuantBytes == 32, "factors as stored, a byte a quant");
    repack_groups<Layout>(src, dst, rows, cols, cols / 32 * sizeof(Block),
                          [](const uint8_t *row, uint32_t kb, const BlockOut &out) {
                              Block b;
                              std::memcpy(&b, row + (size_t)kb * sizeof(Block), sizeof(Block));
                              q5_block<Block, kOffset>(b, out.scales, out.quants);
                          });
}

template <class F>
void repack_superblocks(const uint8_t *src, uint8_t *dst, size_t rows, size_t cols) {
    using Super = typename F::Super;
    if (cols % QK_K != 0) throw UnsupportedError("superblock-quantized weight rows must be a multiple of 256 elements");
    repack_groups<typename F::Layout>(src, dst, rows, cols, cols / QK_K * sizeof(Super),
                                      [](const uint8_t *row, uint32_t kb, const BlockOut &out) {
                                          Super sb;
                                          std::memcpy(&sb, row + (size_t)(kb / 8) * sizeof(sb), sizeof(sb));
                                          F::block(sb, (int)(kb % 8), out);
                                      });
}

}  // namespace

size_t g8_bytes(DType t, size_t rows, size_t cols) {
    const size_t groups = (rows + kG8Rows - 1) / kG8Rows;
    switch (t) {
        case DType::Q4_0: return groups * G8Q4_0::group_bytes((uint32_t)cols);
        case DType::Q4_1: return groups * G8Q4_1::group_bytes((uint32_t)cols);
        case DType::Q8_0: return groups * G8Q8_0::group_bytes((uint32_t)cols);
        case DType::Q4_K: return groups * G8Q4_K::group_bytes((uint32_t)cols);
        case DType::Q6_K: return groups * G8Q6_K::group_bytes((uint32_t)cols);
        case DType::Q5_K: return groups * G8Q5_K::group_bytes((uint32_t)cols);
        case DType::IQ4_XS: return groups * G8IQ4_XS::group_bytes((uint32_t)cols);
        case DType::IQ4_NL: return groups * G8IQ4_NL::group_bytes((uint32_t)cols);
        case DType::Q5_0: return groups * G8Q8_0::group_bytes((uint32_t)cols);
        case DType::Q5_1: return groups * G8Q5_1::group_bytes((uint32_t)cols);
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
        case DType::Q4_K: return repack_superblocks<Q4KBlocks>(s, d, rows, cols);
        case DType::Q6_K: return repack_superblocks<Q6KBlocks>(s, d, rows, cols);
        case DType::Q5_K: return repack_superblocks<Q5KBlocks>(s, d, rows, cols);
        case DType::IQ4_XS: return repack_superblocks<IQ4XSBlocks>(s, d, rows, cols);
        case DType::IQ4_NL: return repack_blocks<BlockIQ4_NL, G8IQ4_NL, iq4_nibbles_g8_order>(s, d, rows, cols);
        case DType::Q5_0: return repack_q5<BlockQ5_0, G8Q8_0, 16>(s, d, rows, cols);
        case DType::Q5_1: return repack_q5<BlockQ5_1, G8Q5_1, 0>(s, d, rows, cols);
        default: throw AkunuError("internal: no g8 layout for this dtype");
    }
}

}  // namespace akunu::cuda
