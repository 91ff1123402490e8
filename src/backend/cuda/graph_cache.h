// Captured CUDA graphs of dispatch-table replays, keyed by what changes their shape: the table,
// the token count, the command range and the class of context length (LaunchArgs::context: another
// attention kernel or shape). The start position is not in the key: kernels read it from device
// memory (cuda/launch.h, PatchContext), so one graph serves every position on its side.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <map>
#include <tuple>

namespace akunu::cuda {

class GraphCache {
public:
    GraphCache() = default;
    GraphCache(const GraphCache &) = delete;
    GraphCache &operator=(const GraphCache &) = delete;
    ~GraphCache() { clear(); }

    struct Key {
        const void *table;  // DispatchTable::commands.data(): stable for a long-lived table
        size_t n_commands;
        int count, begin, end;
        int context;  // LaunchArgs::context
        bool operator<(const Key &o) const {
            return std::tie(table, n_commands, count, begin, end, context) <
                   std::tie(o.table, o.n_commands, o.count, o.begin, o.end, o.context);
        }
    };

    // The graph for `key`, capturing `enqueue` (which launches onto `stream`) on first use.
    cudaGraphExec_t get_or_capture(const Key &key, cudaStream_t stream, const std::function<void()> &enqueue);
    void clear();
    size_t size() const { return execs_.size(); }

private:
    std::map<Key, cudaGraphExec_t> execs_;
};

}  // namespace akunu::cuda
