// A host copy of a KV cache's filled rows and their tokens: what the prompt cache
// (inference/prompt_cache.h) keeps of a conversation between sessions. Copied through the
// Device's read_buffer / write_buffer, so it works for every backend.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/kv_cache.h"

namespace akunu {

struct KVSnapshot {
    std::vector<int32_t> tokens;  // the token at each saved position
    int prefilled = 0;            // positions [0, prefilled) were written by prefill passes
    std::vector<uint8_t> rows;    // every layer's K and V rows, in save_kv_rows' order

    size_t bytes() const { return rows.size() + tokens.size() * sizeof(int32_t); }
};

// Bytes save_kv_rows would copy for the cache's first `length` positions.
size_t kv_snapshot_bytes(const KVCache &kv, int length);
// Copies the rows of positions [0, kv.length()) to the host: per layer, min(length, ring) rows of
// each head (a sliding-window ring whole, since its positions wrap).
KVSnapshot save_kv_rows(Device &device, const KVCache &kv);
// Writes a snapshot of this cache's layout back; the cache then holds its tokens.
void restore_kv_rows(Device &device, KVCache &kv, const KVSnapshot &snapshot);

}  // namespace akunu
