// The CUDA "g8" weight layout of Q4_0 / Q4_1 / Q8_0 / IQ4_NL (and the superblock formats, below), made at load (src/backend/cuda/g8_layout.cpp)
// and read by the GEMV, GEMM and embedding kernels.
//
// GGUF blocks are 18 / 20 / 34 bytes, so a block's quants sit at 2-byte alignment and a GPU
// reads them two bytes at a time. g8 regroups each 8 consecutive rows (a "group", zero-padded
// at the end of the matrix) into two regions:
//   scales  [K/32][8] x kScaleBytes   (d, and m for Q4_1, of block kb of row r at kb * 8 + r)
//   quants  [K/32][8] x kQuantBytes   (the block's qs bytes, unchanged but for IQ4's nibble order, at the same index)
// For these four a group is exactly 8 file rows long (8 x (scale + quant) bytes per block), so
// group g starts where row 8g starts in the file; the table builder's row geometry stays the
// file's either way (kernels find groups by group_bytes). Both
// regions start 16-byte aligned (K % 32 == 0), so a lane loads a block's quants with one 16-byte
// load, and the 32 lanes of a warp read 512 contiguous bytes (4 blocks x 8 rows).
// Plain C++ with host/device qualifiers: included by the host repack and by the kernels.
#pragma once
#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define AKUNU_HOST_DEVICE __host__ __device__
#else
#define AKUNU_HOST_DEVICE
#endif

namespace akunu::cuda {

constexpr uint32_t kG8Rows = 8;

// The superblock formats add two regions after the quants (K % 256 == 0):
//   high    [K/32][8]  x kHighBytes    (the bits above a quant's low nibble: Q5_K 1, Q6_K 2)
//   super   [K/256][8] x kSuperBytes   (the superblock's f16 factors)
// 16-, 8- and 4-byte alignment of quants, high and super follow from K % 256 == 0.
template <uint32_t ScaleBytes, uint32_t QuantBytes, uint32_t HighBytes = 0, uint32_t SuperBytes = 0>
struct G8Layout {
    static constexpr uint32_t kScaleBytes = ScaleBytes;  // per row and block
    static constexpr uint32_t kQuantBytes = QuantBytes;  // per row and block (multiple of 16)
    static constexpr uint32_t kHighBytes = HighBytes;    // per row and block (0, 4 or 8)
    static constexpr uint32_t kSuperBytes = SuperBytes;  // per row and superblock of 256 (0 or 4)

    // Bytes of one group: 8 rows of K / 32 blocks (and K / 256 superblocks).
    AKUNU_HOST_DEVICE static constexpr size_t group_bytes(uint32_t K) {
        return (size_t)kG8Rows * ((K / 32) * (kScaleBytes + kQuantBytes + kHighBytes) + (K / 256) * kSuperBytes);
    }
    AKUNU_HOST_DEVICE static constexpr size_t scale_offset(uint32_t kb, uint32_t r) {
        return (size_t)(kb * kG8Rows + r) * kScaleBytes;
    }
    AKUNU_HOST_DEVICE static constexpr size_t quant_offset(uint32_t K, uint32_t kb, uint32_t r) {
        return (size_t)kG8Rows * (K / 32) * kScaleBytes + (size_t)(kb * kG8Rows + r) * kQuantBytes;
    }
    AKUNU_HOST_DEVICE static constexpr size_t high_offset(uint32_t K, uint32_t kb, uint32_t r) {
        return (size_t)kG8Rows * (K / 32) * (kScaleBytes + kQuantBytes) + (size_t)(kb * kG8Rows + r) * kHighBytes;
    }
    // Of the superblock holding block kb.
    AKUNU_HOST_DEVICE static constexpr size_t super_offset(uint32_t K, uint32_t kb, uint32_t r) {
        return (size_t)kG8Rows * (K / 32) * (kScaleBytes + kQuantBytes + kHighBytes) +
               (size_t)((kb / 8) * kG8Rows + r) * kSuperBytes;
    }
};

using G8Q4_0 = G8Layout<2, 16>;  // d (f16), 16 bytes of nibbles
using G8Q4_1 = G8Layout<4, 16>;  // d, m (f16), 16 bytes of nibbles
using G8Q8_0 = G8Layout<2, 32>;  // d (f16), 32 int8

// Q4_K, Q5_K and Q6_K in blocks of 32 at about the file's size (4.625, 5.625 and 6.625 bits a
// weight against 4.5, 5.5 and 6.56): a block's sub-scales as bytes, its quants' low nibbles in
// Q4_0's order (byte j: element j, element 16 + j in the high nibble), the bits above them in the
// high region, the superblock's f16 factors in the super region. Kernels form the f32 products
// d·sc and dmin·m as gguf-py forms them, so dequantization stays bit-exact. IQ4_XS keeps an f32
// factor d·(ls - 32) a block (5 bits a weight instead of 4.25). Kernels address groups by
// group_bytes, never by the file's row size.
//   Q4_K / Q5_K scales: sc, m (6-bit, a byte each); super: f16 d, dmin.
//   Q5_K high: byte b holds the 5th bits of elements 4i + b (bit i) and 16 + 4i + b (bit 4 + i), i = 0..3.
//   Q6_K scales: the two int8 sub-scales (elements 0..15, 16..31); super: f16 d, 0. Its 6-bit q is
//   stored as q ^ 32 (q - 32 in two's complement); high: word h, byte b holds the 2 bits above the
//   nibble of element 16h + 4i + b at bits 2i, 2i + 1.
using G8Q4_K = G8Layout<2, 16, 0, 4>;
using G8Q5_K = G8Layout<2, 16, 4, 4>;
using G8Q6_K = G8Layout<2, 16, 8, 4>;
// IQ4 nibbles (indices into kIQ4Values) in their own order: word w of the 16 bytes holds elements
// 4w .. 4w + 3 in nibbles 0..3 and 16 + 4w .. 16 + 4w + 3 in nibbles 4..7.
using G8IQ4_XS = G8Layout<4, 16>;  // f32 d·(ls - 32); 16 bytes of nibbles
using G8IQ4_NL = G8Layout<2, 16>;  // d (f16), 16 bytes of nibbles
// Q5_0 / Q5_1: a 5-bit quant a byte (the 32-bit qh spread out), factors as stored. Q5_0 then is
// Q8_0 exactly (int8 q - 16, f16 d: G8Q8_0); Q5_1 unsigned bytes with Q4_1's factors.
using G8Q5_1 = G8Layout<4, 32>;  // d, m (f16), 32 bytes of 5-bit quants

}  // namespace akunu::cuda
