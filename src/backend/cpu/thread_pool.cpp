#include "backend/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define AKUNU_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define AKUNU_CPU_RELAX() asm volatile("yield")
#else
#define AKUNU_CPU_RELAX() ((void)0)
#endif

namespace akunu::cpu {

namespace {
// About a millisecond of spinning before a worker goes to sleep: longer than any gap between two
// commands of a replay, far shorter than a user's pause between calls.
constexpr int kSpinIterations = 30000;

// Spin politely: every few dozen pauses give the core away, so that when more threads want to
// run than there are cores (another process, an oversubscribed CI box) the thread we are waiting
// for gets scheduled instead of us burning its time slice.
inline void spin_pause(int iteration) {
    if ((iteration & 63) == 63)
        std::this_thread::yield();
    else
        AKUNU_CPU_RELAX();
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    // Workers start from generation 0 whenever they get scheduled: reading generation_ at thread
    // start would miss a job (or the stop signal) published before the thread first ran.
    for (int i = 1; i < std::max(1, n_threads); ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (std::thread &t : workers_) t.join();
}

void ThreadPool::work_on_current_job() {
    for (;;) {
        int64_t begin = next_unit_.fetch_add(chunk_, std::memory_order_relaxed);
        if (begin >= n_units_) return;
        task_(ctx_, begin, std::min(n_units_, begin + chunk_));
    }
}

void ThreadPool::run(Task task, const void *ctx, int64_t n_units) {
    if (n_units <= 0) return;
    if (workers_.empty() || n_units == 1) {
        task(ctx, 0, n_units);
        return;
    }
    task_ = task;
    ctx_ = ctx;
    n_units_ = n_units;
    // Several chunks per thread so a slow thread does not hold everyone up.
    chunk_ = std::max<int64_t>(1, n_units / (4 * size()));
    next_unit_.store(0, std::memory_order_relaxed);
    busy_workers_.store((int)workers_.size(), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        // Taking the lock orders this wake-up after any sleeper's check of generation_.
        { std::lock_guard<std::mutex> lock(mutex_); }
        wake_.notify_all();
    }
    work_on_current_job();
    for (int i = 0; busy_workers_.load(std::memory_order_acquire) > 0; ++i) spin_pause(i);
}

void ThreadPool::worker_loop() {
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) spin_pause(spins++);
        if (generation_.load(std::memory_order_acquire) == seen) {
            // Announce the sleep before the final check so run() cannot miss us (see run()).
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen || stop_.load(); });
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        work_on_current_job();
        busy_workers_.fetch_sub(1, std::memory_order_release);
    }
}

}  // namespace akunu::cpu
