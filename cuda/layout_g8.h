// The CUDA "g8" weight layout of Q4_0 / Q4_1 / Q8_0 / IQ4_NL (and the superblock formats, below), made at load (src/backend/cuda/g8_layout.cpp)
// and read by the GEMV, GEMM and embedding kernels.
//
// GGUF blocks are 18 / 20 / 34 bytes, so a block's quants sit at 2-byte alignment and a GPU
// reads them two bytes at a time. g8 regroups each 8 consecutive rows (a "group", zero-padded
// at the end of the matrix) into two regions:
//   scales  [K/32][8] x kScaleBytes   (d, and m for Q4_1, of block kb of row r at kb * 8 + r)
//   quants  [K/32][8] x kQuantBytes   (the block's qs bytes unchanged, at the same index)
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

template <uint32_t ScaleBytes, uint32_t QuantBytes>
struct G8Layout {
    static constexpr uint32_t kScaleBytes = ScaleBytes;  // per row and block
    static constexpr uint32_t kQuantBytes = QuantBytes;  // per row and block (multiple of 16)

    // Bytes of one group: 8 file rows of K / 32 blocks.
    AKUNU_HOST_DEVICE static constexpr size_t group_bytes(uint32_t K) {
        return (size_t)kG8Rows * (K / 32) * (kScaleBytes + kQuantBytes);
    }
    AKUNU_HOST_DEVICE static constexpr size_t scale_offset(uint32_t kb, uint32_t r) {
        return (size_t)(kb * kG8Rows + r) * kScaleBytes;
    }
    AKUNU_HOST_DEVICE static constexpr size_t quant_offset(uint32_t K, uint32_t kb, uint32_t r) {
        return (size_t)kG8Rows * (K / 32) * kScaleBytes + (size_t)(kb * kG8Rows + r) * kQuantBytes;
    }
};

using G8Q4_0 = G8Layout<2, 16>;  // d (f16), 16 bytes of nibbles
using G8Q4_1 = G8Layout<4, 16>;  // d, m (f16), 16 bytes of nibbles
using G8Q8_0 = G8Layout<2, 32>;  // d (f16), 32 int8

// Q4_K, Q5_K, Q6_K and IQ4_XS in blocks of 32 with their superblock factors multiplied out, as
// gguf-py multiplies them (f32 products of the f16 d and the sub-scales), so that the GEMVs treat
// them as Q4_1 / Q8_0 / IQ4_NL with f32 factors. These groups are longer than 8 file rows (Q4_K 6
// bits a weight instead of 4.5, Q5_K 10 instead of 5.5, Q6_K 10 instead of 6.56, IQ4_XS 5 instead
// of 4.25): kernels address groups by group_bytes, never by the file's row size.
using G8Q4_K = G8Layout<8, 16>;  // f32 d·sc, f32 -(dmin·m); 16 bytes of nibbles in Q4_0's order
using G8Q6_K = G8Layout<8, 32>;  // f32 d·sc of elements 0..15 and of 16..31; 32 int8 (q - 32)
using G8Q5_K = G8Layout<8, 32>;  // f32 d·sc, f32 -(dmin·m); 32 bytes of 5-bit quants (10 bits a weight)
using G8IQ4_XS = G8Layout<4, 16>;  // f32 d·(ls - 32); 16 bytes of nibbles (indices into kIQ4Values)
using G8IQ4_NL = G8Layout<2, 16>;  // d (f16), 16 bytes of nibbles: the file's block, as Q4_0's
// Q5_0 / Q5_1: a 5-bit quant a byte (the 32-bit qh spread out), factors as stored. Q5_0 then is
// Q8_0 exactly (int8 q - 16, f16 d: G8Q8_0); Q5_1 unsigned bytes with Q4_1's factors.
using G8Q5_1 = G8Layout<4, 32>;  // d, m (f16), 32 bytes of 5-bit quants

}  // namespace akunu::cuda
