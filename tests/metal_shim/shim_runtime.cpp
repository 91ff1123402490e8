// The shim's thread runtime: barriers, the running thread's context, and the dispatcher that
// runs a grid of threadgroups on OS threads (metal_shim.h says why real threads).
#include <memory>
#include <thread>

#include "metal_shim.h"

namespace shim {

void Barrier::wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++waiting_ == count_) {
        waiting_ = 0;
        ++generation_;
        cv_.notify_all();
        return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
}

namespace {
thread_local ThreadContext t_context;
}

ThreadContext &current() { return t_context; }

void dispatch(metal::uint3 groups, unsigned threads, const std::function<void(const ThreadArgs &)> &body) {
    if (threads == 0 || threads > 1024) throw std::invalid_argument("metal shim: threads per group must be 1..1024");
    const unsigned n_simd = (threads + SimdGroup::kWidth - 1) / SimdGroup::kWidth;
    Barrier group_barrier;
    group_barrier.reset((int)threads);
    // Barrier::wait from the group's threads, plus one more used between groups (the group's
    // static threadgroup arrays are reused by the next group).
    Barrier between_groups;
    between_groups.reset((int)threads);
    std::vector<std::unique_ptr<SimdGroup>> simd(n_simd);
    for (unsigned s = 0; s < n_simd; ++s) {
        simd[s] = std::make_unique<SimdGroup>();
        simd[s]->active_lanes = (int)std::min<unsigned>(SimdGroup::kWidth, threads - s * SimdGroup::kWidth);
        simd[s]->barrier.reset(simd[s]->active_lanes);
    }
    std::mutex error_mutex;
    auto worker = [&](unsigned t) {
        ThreadContext &c = current();
        c.group_barrier = &group_barrier;
        c.simd = simd[t / SimdGroup::kWidth].get();
        c.lane = t % SimdGroup::kWidth;
        ThreadArgs a;
        a.thread_position = metal::uint3(t, 0, 0);
        a.group_size = metal::uint3(threads, 1, 1);
        a.simd_lane = c.lane;
        a.simd_index = t / SimdGroup::kWidth;
        for (unsigned z = 0; z < groups.z; ++z)
            for (unsigned y = 0; y < groups.y; ++y)
                for (unsigned x = 0; x < groups.x; ++x) {
                    a.group = metal::uint3(x, y, z);
                    try {
                        body(a);
                    } catch (const std::exception &e) {
                        // A kernel that throws (a shim rule broken) would leave the others
                        // waiting at a barrier: report and stop the whole test binary.
                        std::lock_guard<std::mutex> lock(error_mutex);
                        std::fprintf(stderr, "metal shim: %s\n", e.what());
                        std::abort();
                    }
                    between_groups.wait();
                }
        c = ThreadContext{};
    };
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (std::thread &th : pool) th.join();
}

const KernelEntry *find_kernel(const std::string &name) {
    for (const KernelEntry &e : kernels())
        if (name == e.name) return &e;
    return nullptr;
}

}  // namespace shim
