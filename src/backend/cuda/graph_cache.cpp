#include "backend/cuda/graph_cache.h"

#include <string>

#include "core/errors.h"

namespace akunu::cuda {

namespace {
void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) throw AkunuError(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(e));
}
}  // namespace

cudaGraphExec_t GraphCache::get_or_capture(const Key &key, cudaStream_t stream, const std::function<void()> &enqueue) {
    auto it = execs_.find(key);
    if (it != execs_.end()) return it->second;

    // Relaxed mode: launchers may call APIs such as cudaGetLastError while capturing.
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "stream capture begin");
    try {
        enqueue();
    } catch (...) {
        cudaGraph_t broken = nullptr;
        cudaStreamEndCapture(stream, &broken);  // leave the stream usable
        if (broken) cudaGraphDestroy(broken);
        cudaGetLastError();
        throw;
    }
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(stream, &graph), "stream capture end");
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(e, "graph instantiate");
    execs_.emplace(key, exec);
    return exec;
}

void GraphCache::clear() {
    for (auto &kv : execs_) cudaGraphExecDestroy(kv.second);
    execs_.clear();
}

}  // namespace akunu::cuda
