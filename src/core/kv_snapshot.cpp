#include "core/kv_snapshot.h"

#include <algorithm>
#include <functional>

#include "core/errors.h"
#include "core/kv_cache_q8.h"

namespace akunu {

namespace {

// One run of bytes to copy: a head's rows in one plane of one layer's K or V buffer.
struct RowRun {
    const Buffer *buffer;
    size_t offset;
    size_t bytes;
};

// Calls `visit` for each run holding the first `length` positions, in a fixed order (layer, K then
// V, plane, head). A plane is [n_kv_heads][layer rows][row_bytes]: F16 has one, Q8_0 two (values,
// then scales; kv_cache_q8.h).
void for_each_run(const KVCache &kv, int length, const std::function<void(const RowRun &)> &visit) {
    const uint32_t heads = (uint32_t)kv.n_kv_heads, head_dim = (uint32_t)kv.head_dim;
    for (int l = 0; l < kv.n_layers; ++l) {
        const uint32_t layer_rows = (uint32_t)kv.layer_length[(size_t)l];
        const size_t rows = std::min<size_t>((size_t)length, layer_rows);
        struct Plane {
            size_t offset, row_bytes;
        };
        std::vector<Plane> planes;
        if (kv.dtype == KVCacheDType::Q8_0)
            planes = {{0, head_dim}, {kv_q8_scales_offset(heads, layer_rows, head_dim), head_dim / kKVQ8Block * 2}};
        else
            planes = {{0, (size_t)head_dim * 2}};
        for (const Buffer *buffer : {&kv.k_buffers[(size_t)l], &kv.v_buffers[(size_t)l]})
            for (const Plane &plane : planes)
                for (uint32_t h = 0; h < heads; ++h)
                    visit(RowRun{buffer, plane.offset + (size_t)h * layer_rows * plane.row_bytes, rows * plane.row_bytes});
    }
}

}  // namespace

size_t kv_snapshot_bytes(const KVCache &kv, int length) {
    size_t total = (size_t)length * sizeof(int32_t);
    for_each_run(kv, length, [&](const RowRun &run) { total += run.bytes; });
    return total;
}

KVSnapshot save_kv_rows(Device &device, const KVCache &kv) {
    KVSnapshot s;
    s.tokens = kv.tokens();
    s.rows.resize(kv_snapshot_bytes(kv, kv.length()) - s.tokens.size() * sizeof(int32_t));
    size_t at = 0;
    for_each_run(kv, kv.length(), [&](const RowRun &run) {
        device.read_buffer(s.rows.data() + at, *run.buffer, run.bytes, run.offset);
        at += run.bytes;
    });
    return s;
}

void restore_kv_rows(Device &device, KVCache &kv, const KVSnapshot &snapshot) {
    const int length = (int)snapshot.tokens.size();
    if (length > kv.max_length || kv_snapshot_bytes(kv, length) != snapshot.bytes())
        throw AkunuError("internal: a KV snapshot of " + std::to_string(length) + " positions does not fit this cache");
    size_t at = 0;
    for_each_run(kv, length, [&](const RowRun &run) {
        device.write_buffer(*run.buffer, snapshot.rows.data() + at, run.bytes, run.offset);
        at += run.bytes;
    });
    kv.reset();
    kv.append(snapshot.tokens);
}

}  // namespace akunu
