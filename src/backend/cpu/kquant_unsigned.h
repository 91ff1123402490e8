// The quants of a K-quant superblock (or a Q5_0 / Q5_1 / IQ4 block) as unsigned numbers in element order
// (u[e] for element e of the 256, or 32), and back: what the repacked layouts (r16_kquant_layout.cpp,
// r8_kquant_layout.cpp) store.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/kquant_blocks.h"

namespace akunu::cpu {

// Q5_0 / Q5_1 (32 elements): nibbles in Q4_0 order plus bit e of the u32 qh.
template <class Block> inline void q5_quants_of(const Block &w, uint8_t *u) {
    uint32_t qh;
    std::memcpy(&qh, w.qh, 4);
    for (int j = 0; j < 16; ++j) {
        u[j] = (uint8_t)((w.qs[j] & 15) | ((qh >> j) & 1) << 4);
        u[j + 16] = (uint8_t)((w.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
    }
}
template <class Block> inline void set_q5_quants(Block &w, const uint8_t *u) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        w.qs[j] = (uint8_t)((u[j] & 15) | (u[j + 16] & 15) << 4);
        qh |= (uint32_t)(u[j] >> 4) << j | (uint32_t)(u[j + 16] >> 4) << (j + 16);
    }
    std::memcpy(w.qh, &qh, 4);
}
// IQ4_NL / IQ4_XS: `groups` blocks of 32 nibbles (indices into kIQ4Values) in Q4_0's order (IQ4_NL: one;
// IQ4_XS: block j at qs + 16 j).
inline void iq4_nibbles_of(const uint8_t *qs, int groups, uint8_t *u) {
    for (int g = 0; g < groups; ++g)
        for (int j = 0; j < 16; ++j) {
            u[32 * g + j] = qs[16 * g + j] & 15;
            u[32 * g + j + 16] = qs[16 * g + j] >> 4;
        }
}
inline void set_iq4_nibbles(uint8_t *qs, int groups, const uint8_t *u) {
    for (int g = 0; g < groups; ++g)
        for (int j = 0; j < 16; ++j) qs[16 * g + j] = (uint8_t)((u[32 * g + j] & 15) | (u[32 * g + j + 16] & 15) << 4);
}
// Q4_K / Q5_K: element 64 c + 32 h + l is nibble h of qs[32 c + l]; Q5_K's 5th bit is bit (e / 32) of qh[e % 32].
template <class Block> inline void q4k_nibbles_of(const Block &w, uint8_t *u) {
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            u[64 * c + l] = w.qs[32 * c + l] & 15;
            u[64 * c + 32 + l] = w.qs[32 * c + l] >> 4;
        }
}
template <class Block> inline void set_q4k_nibbles(Block &w, const uint8_t *u) {
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) w.qs[32 * c + l] = (uint8_t)((u[64 * c + l] & 15) | (u[64 * c + 32 + l] & 15) << 4);
}
inline void q5k_quants_of(const BlockQ5_K &w, uint8_t *u) {
    q4k_nibbles_of(w, u);
    for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l) u[32 * j + l] |= (uint8_t)(((w.qh[l] >> j) & 1) << 4);
}
inline void set_q5k_quants(BlockQ5_K &w, const uint8_t *u) {
    set_q4k_nibbles(w, u);
    std::memset(w.qh, 0, sizeof w.qh);
    for (int e = 0; e < QK_K; ++e) w.qh[e % 32] |= (uint8_t)((u[e] >> 4) << (e / 32));
}
// Q6_K: element 128 h + r: low 4 bits nibble r / 64 of ql[64 h + r % 64], high 2 bits bits 2 (r / 32)
// of qh[32 h + r % 32].
inline void q6k_quants_of(const BlockQ6_K &w, uint8_t *u) {
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const int ql0 = w.ql[64 * h + l], ql1 = w.ql[64 * h + 32 + l], qh = w.qh[32 * h + l];
            uint8_t *o = u + 128 * h + l;
            o[0] = (uint8_t)((ql0 & 15) | (qh & 3) << 4);
            o[32] = (uint8_t)((ql1 & 15) | ((qh >> 2) & 3) << 4);
            o[64] = (uint8_t)((ql0 >> 4) | ((qh >> 4) & 3) << 4);
            o[96] = (uint8_t)((ql1 >> 4) | ((qh >> 6) & 3) << 4);
        }
}
inline void set_q6k_quants(BlockQ6_K &w, const uint8_t *u) {
    std::memset(w.ql, 0, sizeof w.ql);
    std::memset(w.qh, 0, sizeof w.qh);
    for (int e = 0; e < QK_K; ++e) {
        const int h = e / 128, r = e % 128;
        w.ql[64 * h + r % 64] |= (uint8_t)((u[e] & 15) << (4 * (r / 64)));
        w.qh[32 * h + r % 32] |= (uint8_t)((u[e] >> 4) << (2 * (r / 32)));
    }
}

}  // namespace akunu::cpu
