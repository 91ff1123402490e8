// A persistent worker pool for the CPU backend. The calling thread takes part in every job, and
// idle workers spin briefly before sleeping, so back-to-back commands of a table replay cost a
// fraction of a microsecond to hand out while an idle engine burns no CPU.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace akunu::cpu {

class ThreadPool {
public:
    using Task = void (*)(const void *ctx, int64_t begin, int64_t end);

    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int size() const { return (int)workers_.size() + 1; }

    // Runs task(ctx, begin, end) over [0, n_units) in chunks handed out dynamically; returns when
    // every unit is done.
    void run(Task task, const void *ctx, int64_t n_units);

private:
    void worker_loop();
    void work_on_current_job();

    std::vector<std::thread> workers_;
    // The current job.
    Task task_ = nullptr;
    const void *ctx_ = nullptr;
    int64_t n_units_ = 0;
    int64_t chunk_ = 1;
    std::atomic<int64_t> next_unit_{0};
    std::atomic<int> busy_workers_{0};
    // Job hand-off: workers wait for `generation_` to change.
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
};

}  // namespace akunu::cpu
