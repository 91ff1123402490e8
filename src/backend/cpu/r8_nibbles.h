// Pieces of the r8 layout (repacked_layout.h) shared by its Q4_0 / Q4_1 / Q8_0 code (r8_layout.cpp)
// and its K-quants (r8_kquant_layout.cpp): where a row's nibbles go in a group-block's chunks.
#pragma once
#include <cstdint>
#include <cstring>

#include "backend/cpu/quant_helpers.h"
#include "backend/cpu/simd_config.h"
#include "core/quant_blocks.h"

namespace akunu::cpu {

constexpr int kR8Rows = 8;

// Activation qs position -> element (inverse of act_q16_pos).
struct ActElemTable {
    int elem[QK_ACT];
    constexpr ActElemTable() : elem{} {
        for (int e = 0; e < QK_ACT; ++e) elem[act_q16_pos(e)] = e;
    }
};
constexpr ActElemTable kActElem{};

// Where the weight of group row l that multiplies activation qs[p] lives in the nibble area.
inline void r8_nibble_pos(int l, int p, int *byte, int *shift) {
    const int j = p >> 1, h = p & 1, c = j >> 2, k = j & 3;
    *byte = 32 * c + 2 * (2 * l + h) + (k >> 1);
    *shift = 4 * (k & 1);
}

// A row's share of a group-block is 4 bytes in each of the 4 chunks (bytes 4l..4l+3 of chunk c:
// words 2l and 2l + 1), i.e. its 32 nibbles permuted into 16 bytes: nibble t of those 16 bytes
// (byte t / 2, high half if t is odd) is the weight of element kR8Perm.elem[t].
struct R8NibblePerm {
    uint8_t elem[QK_ACT];
    constexpr R8NibblePerm() : elem{} {
        for (int t = 0; t < QK_ACT; ++t) {
            const int c = t / 8, h = (t / 4) & 1, k = t & 3;  // chunk, half of the pair, nibble in word
            elem[t] = (uint8_t)ActElemTable().elem[2 * (4 * c + k) + h];
        }
    }
};
constexpr R8NibblePerm kR8Perm{};

// kR8Perm as shuffle controls: byte t takes element elem[t] from the low (elements 0..15) or the
// high (16..31) half of the unpacked nibbles.
struct R8PermIdx {
    uint8_t idx[QK_ACT], from_hi[QK_ACT];
    constexpr R8PermIdx() : idx{}, from_hi{} {
        for (int t = 0; t < QK_ACT; ++t) {
            idx[t] = (uint8_t)(R8NibblePerm().elem[t] & 15);
            from_hi[t] = R8NibblePerm().elem[t] >= 16 ? 0xff : 0x00;
        }
    }
};
constexpr R8PermIdx kR8PermIdx{};

// A row's 32 nibbles (GGUF Q4_0 order: byte j holds element j low, element 16 + j high) as its 16
// bytes of a group-block in kR8Perm order, each XOR `flip`; bytes 4c .. 4c + 3 go to chunk c.
inline void r8_pack_nibbles(const uint8_t *qs, uint8_t flip, uint8_t *out) {
#if defined(AKUNU_CPU_AVX2)
    // Nibbles in element order (lane 0: elements 0..15, lane 1: 16..31), gathered into kR8Perm
    // order by a per-lane shuffle of each half, then packed two per byte.
    const __m256i n = unpack_nibbles(qs);
    const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kR8PermIdx.idx));
    const __m256i from_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kR8PermIdx.from_hi));
    const __m256i gathered = _mm256_blendv_epi8(_mm256_shuffle_epi8(_mm256_permute2x128_si256(n, n, 0x00), idx),
                                                _mm256_shuffle_epi8(_mm256_permute2x128_si256(n, n, 0x11), idx), from_hi);
    const __m256i pairs = _mm256_maddubs_epi16(gathered, _mm256_set1_epi16(0x1001));  // lo + 16 * hi
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(pairs, pairs), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out), _mm_xor_si128(_mm256_castsi256_si128(packed), _mm_set1_epi8((char)flip)));
#else
    uint8_t n[QK_ACT];
    for (int j = 0; j < 16; ++j) {
        n[j] = qs[j] & 0xf;
        n[j + 16] = qs[j] >> 4;
    }
    for (int o = 0; o < 16; ++o) out[o] = (uint8_t)((n[kR8Perm.elem[2 * o]] | n[kR8Perm.elem[2 * o + 1]] << 4) ^ flip);
#endif
}

}  // namespace akunu::cpu
