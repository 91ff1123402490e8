// Kernels with a deliberate bug, to show the shim's executors catch it (test_metal_shim.py):
// a threadgroup array read across threads without a barrier (a ThreadSanitizer report under the
// OS-thread executor), a barrier that half the group skips (a deadlock report under fibers), and
// a write one past the end of a buffer (an AddressSanitizer report from inside a fiber).
#include "metal_shim.h"
#include "metal_shim_keywords.h"

using namespace metal;

namespace {

void missing_barrier(device float *out, constant uint &n, uint3 group, uint3 thread_position, uint3 group_size,
                     uint simd_lane, uint simd_index) {
    threadgroup float shared[64];
    const uint t = thread_position.x;
    shared[t] = float(t);
    // (threadgroup_barrier(mem_flags::mem_threadgroup) belongs here)
    out[t] = shared[(t + 1) % group_size.x];
}

void barrier_in_branch(device float *out, constant uint &n, uint3 group, uint3 thread_position, uint3 group_size,
                       uint simd_lane, uint simd_index) {
    if (thread_position.x < group_size.x / 2) threadgroup_barrier(mem_flags::mem_threadgroup);
    out[thread_position.x] = 1.0f;
}

void write_past_the_end(device float *out, constant uint &n, uint3 group, uint3 thread_position, uint3 group_size,
                        uint simd_lane, uint simd_index) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[thread_position.x + 1] = 1.0f;  // thread n - 1 writes out[n]
}

template <auto Kernel> int run_buggy_kernel() {
    std::vector<float> out(64);
    void *buffers[1] = {out.data()};
    const uint n = 64;
    shim::dispatch(metal::uint3(2, 1, 1), 64,
                   [&](const shim::ThreadArgs &t) { shim::invoke<Kernel>(buffers, &n, t); });
    return 0;
}

}  // namespace

namespace metal_check {
int self_test_race() { return run_buggy_kernel<missing_barrier>(); }
int self_test_deadlock() { return run_buggy_kernel<barrier_in_branch>(); }
int self_test_overflow() { return run_buggy_kernel<write_past_the_end>(); }
}  // namespace metal_check
