// The CUDA "g8" weight layout of Q4_0 / Q4_1 / Q8_0, made at load (src/backend/cuda/g8_layout.cpp)
// and read by the GEMV, GEMM and embedding kernels.
//
// GGUF blocks are 18 / 20 / 34 bytes, so a block's quants sit at 2-byte alignment and a GPU
// reads them two bytes at a time. g8 regroups each 8 consecutive rows (a "group", zero-padded
// at the end of the matrix) into two regions:
//   scales  [K/32][8] x kScaleBytes   (d, and m for Q4_1, of block kb of row r at kb * 8 + r)
//   quants  [K/32][8] x kQuantBytes   (the block's qs bytes unchanged, at the same index)
// A group is exactly 8 file rows long (8 x (scale + quant) bytes per block), so group g starts
// where row 8g starts in the file and the table builder's row geometry stays the file's. Both
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

}  // namespace akunu::cuda
