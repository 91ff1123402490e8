// The shim's executors (metal_shim.h says which runs when and why): OS threads under
// ThreadSanitizer, fibers otherwise. Both run the threadgroups of a dispatch one after another.
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "metal_shim.h"

#if defined(__SANITIZE_THREAD__)
#define AKUNU_SHIM_OS_THREADS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AKUNU_SHIM_OS_THREADS 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define AKUNU_SHIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AKUNU_SHIM_ASAN 1
#endif
#endif
#if defined(AKUNU_SHIM_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

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

[[noreturn]] void fail(const std::string &what) {
    std::fprintf(stderr, "metal shim: %s\n", what.c_str());
    std::abort();
}

std::vector<std::unique_ptr<SimdGroup>> make_simd_groups(unsigned threads) {
    const unsigned n = (threads + SimdGroup::kWidth - 1) / SimdGroup::kWidth;
    std::vector<std::unique_ptr<SimdGroup>> groups(n);
    for (unsigned s = 0; s < n; ++s) {
        groups[s] = std::make_unique<SimdGroup>();
        groups[s]->active_lanes = (int)std::min<unsigned>(SimdGroup::kWidth, threads - s * SimdGroup::kWidth);
        groups[s]->barrier.reset(groups[s]->active_lanes);
    }
    return groups;
}

ThreadArgs thread_args(unsigned t, unsigned threads) {
    ThreadArgs a;
    a.thread_position = metal::uint3(t, 0, 0);
    a.group_size = metal::uint3(threads, 1, 1);
    a.simd_lane = t % SimdGroup::kWidth;
    a.simd_index = t / SimdGroup::kWidth;
    return a;
}

template <typename F> void for_each_group(metal::uint3 groups, F f) {
    for (unsigned z = 0; z < groups.z; ++z)
        for (unsigned y = 0; y < groups.y; ++y)
            for (unsigned x = 0; x < groups.x; ++x) f(metal::uint3(x, y, z));
}

}  // namespace

#if defined(AKUNU_SHIM_OS_THREADS)

// --- OS threads ----------------------------------------------------------------------------------
namespace {
thread_local ThreadContext t_context;
}

ThreadContext &current() { return t_context; }
void group_barrier() { t_context.group_barrier->wait(); }
void simd_barrier() { t_context.simd->barrier.wait(); }

void dispatch(metal::uint3 groups, unsigned threads, const std::function<void(const ThreadArgs &)> &body) {
    if (threads == 0 || threads > 1024) fail("threads per group must be 1..1024");
    Barrier group_barrier_of_run;
    group_barrier_of_run.reset((int)threads);
    // Between groups: the next group reuses the static threadgroup arrays.
    Barrier between_groups;
    between_groups.reset((int)threads);
    std::vector<std::unique_ptr<SimdGroup>> simd = make_simd_groups(threads);
    auto worker = [&](unsigned t) {
        ThreadContext &c = current();
        c.group_barrier = &group_barrier_of_run;
        c.simd = simd[t / SimdGroup::kWidth].get();
        c.lane = t % SimdGroup::kWidth;
        c.index = t;
        ThreadArgs a = thread_args(t, threads);
        for_each_group(groups, [&](metal::uint3 g) {
            a.group = g;
            try {
                body(a);
            } catch (const std::exception &e) {
                fail(e.what());  // the others would wait at a barrier forever
            }
            between_groups.wait();
        });
        c = ThreadContext{};
    };
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (std::thread &th : pool) th.join();
}

#else

// --- fibers --------------------------------------------------------------------------------------
// Each GPU thread of the dispatch is a fiber that runs the kernel for every group in turn; the
// scheduler (the dispatching thread) resumes runnable fibers and releases barriers. A fiber
// starts once per dispatch (setcontext onto its own stack); switches are the compiler's
// __builtin_setjmp / __builtin_longjmp, which unlike swapcontext make no system call (the signal
// mask stays as it is) and unlike longjmp are not intercepted by AddressSanitizer (which asks the
// kernel for the signal stack on every longjmp): a whole model through the shim costs seconds.
namespace {

enum class FiberState { Runnable, AtGroupBarrier, AtSimdBarrier, GroupDone, Done };

struct Fiber {
    ucontext_t start;  // the entry, used once
    void *resume[5];   // where it waits (a __builtin_setjmp buffer)
    bool started = false;
    FiberState state = FiberState::Runnable;
    ThreadContext thread;
    ThreadArgs args;
};

constexpr size_t kFiberStackBytes = 256 * 1024;

// One dispatch, reachable from the fiber entry point (makecontext passes only ints).
struct FiberRun {
    void *scheduler[5];
    std::vector<Fiber> fibers;
    metal::uint3 groups;
    const std::function<void(const ThreadArgs &)> *body = nullptr;
};

thread_local FiberRun *t_run = nullptr;
thread_local Fiber *t_fiber = nullptr;
ThreadContext t_no_fiber;

// AddressSanitizer keeps shadow state per stack: tell it of every switch between the scheduler's
// stack and a fiber's (no-ops in other builds).
struct StackSwitch {
#if defined(AKUNU_SHIM_ASAN)
    void *fake_stack = nullptr;
    const void *bottom = nullptr;
    size_t size = 0;
    void start(const void *to_bottom, size_t to_size) { __sanitizer_start_switch_fiber(&fake_stack, to_bottom, to_size); }
    void start_final(const void *to_bottom, size_t to_size) { __sanitizer_start_switch_fiber(nullptr, to_bottom, to_size); }
    void finish() { __sanitizer_finish_switch_fiber(fake_stack, &bottom, &size); }
#else
    const void *bottom = nullptr;
    size_t size = 0;
    void start(const void *, size_t) {}
    void start_final(const void *, size_t) {}
    void finish() {}
#endif
};
thread_local StackSwitch t_scheduler_switch;  // scheduler -> fiber
thread_local StackSwitch t_fiber_switch;      // fiber -> scheduler; `bottom` learns the scheduler's stack

// Fiber stacks, kept for the next dispatch.
std::vector<std::unique_ptr<char[]>> &stack_pool() {
    static thread_local std::vector<std::unique_ptr<char[]>> pool;
    return pool;
}

// __builtin_longjmp may not share a function with the __builtin_setjmp of its buffer. Not declared
// [[noreturn]], and not instrumented: AddressSanitizer would unpoison the whole stack before every
// jump (asking the kernel for the signal stack each time), which the fiber annotations make moot.
__attribute__((noinline, no_sanitize_address)) void jump_to(void **buffer) { __builtin_longjmp(buffer, 1); }

// The running fiber waits in `state` until the scheduler resumes it. (The switching functions are
// not instrumented, for the reason jump_to is not.)
__attribute__((no_sanitize_address)) void switch_to_scheduler(FiberState state) {
    if (!t_fiber) fail("a barrier outside a kernel");
    Fiber *self = t_fiber;
    self->state = state;
    t_fiber_switch.start(t_fiber_switch.bottom, t_fiber_switch.size);
    if (__builtin_setjmp(self->resume) == 0) jump_to(t_run->scheduler);
    t_fiber_switch.finish();
}

void fiber_entry(int index) {
    t_fiber_switch.finish();  // arrived from the scheduler: learns its stack
    Fiber &f = t_run->fibers[(size_t)index];
    for_each_group(t_run->groups, [&](metal::uint3 g) {
        f.args.group = g;
        try {
            (*t_run->body)(f.args);
        } catch (const std::exception &e) {
            fail(e.what());
        }
        // The next group reuses the static threadgroup arrays: wait for the whole group.
        switch_to_scheduler(FiberState::GroupDone);
    });
    f.state = FiberState::Done;
    t_fiber_switch.start_final(t_fiber_switch.bottom, t_fiber_switch.size);
    jump_to(t_run->scheduler);  // this stack is not returned to
}

// Resumes one fiber until it waits or ends. (A function of its own: _setjmp returns twice, and
// no caller variable should live across it.)
__attribute__((noinline, no_sanitize_address)) void resume_fiber(FiberRun &run, Fiber &f) {
    t_fiber = &f;
    char *stack = static_cast<char *>(f.start.uc_stack.ss_sp);
    t_scheduler_switch.start(stack, kFiberStackBytes);
    if (__builtin_setjmp(run.scheduler) == 0) {
        if (!f.started) {
            f.started = true;
            setcontext(&f.start);
        }
        jump_to(f.resume);
    }
    t_scheduler_switch.finish();
    t_fiber = nullptr;
}

__attribute__((noinline)) void prepare_fiber(Fiber &f, char *stack, int index) {
    getcontext(&f.start);
    f.start.uc_stack.ss_sp = stack;
    f.start.uc_stack.ss_size = kFiberStackBytes;
    f.start.uc_link = nullptr;  // fiber_entry leaves by jump_to
    makecontext(&f.start, (void (*)())fiber_entry, 1, index);
}

// Releases the barriers every participant has reached; false when none could be.
bool release_barriers(FiberRun &run, std::vector<std::unique_ptr<SimdGroup>> &simd) {
    const unsigned threads = (unsigned)run.fibers.size();
    unsigned at_group = 0, group_done = 0;
    for (const Fiber &f : run.fibers) {
        at_group += f.state == FiberState::AtGroupBarrier;
        group_done += f.state == FiberState::GroupDone;
    }
    if (group_done == threads || at_group == threads) {  // the next group, or past the barrier
        for (Fiber &f : run.fibers) f.state = FiberState::Runnable;
        return true;
    }
    if (at_group > 0 && at_group + group_done == threads)
        fail("deadlock: threadgroup_barrier reached by some threads of a group while others had returned");
    bool released = false;
    for (size_t s = 0; s < simd.size(); ++s) {
        const unsigned first = (unsigned)s * SimdGroup::kWidth, lanes = (unsigned)simd[s]->active_lanes;
        unsigned waiting = 0, finished = 0;
        for (unsigned l = 0; l < lanes; ++l) {
            waiting += run.fibers[first + l].state == FiberState::AtSimdBarrier;
            finished += run.fibers[first + l].state == FiberState::GroupDone;
        }
        if (waiting == 0 || waiting + finished < lanes) continue;
        if (finished > 0) fail("deadlock: a SIMD-group function called by some lanes while others had returned");
        for (unsigned l = 0; l < lanes; ++l) run.fibers[first + l].state = FiberState::Runnable;
        released = true;
    }
    return released;
}

}  // namespace

ThreadContext &current() { return t_fiber ? t_fiber->thread : t_no_fiber; }
void group_barrier() { switch_to_scheduler(FiberState::AtGroupBarrier); }
void simd_barrier() { switch_to_scheduler(FiberState::AtSimdBarrier); }

void dispatch(metal::uint3 groups, unsigned threads, const std::function<void(const ThreadArgs &)> &body) {
    if (threads == 0 || threads > 1024) fail("threads per group must be 1..1024");
    if (t_run) fail("a dispatch inside a kernel");
    if (groups.x == 0 || groups.y == 0 || groups.z == 0) return;
    while (stack_pool().size() < threads) stack_pool().emplace_back(new char[kFiberStackBytes]);
    std::vector<std::unique_ptr<SimdGroup>> simd = make_simd_groups(threads);
    FiberRun run;
    run.body = &body;
    run.groups = groups;
    run.fibers.resize(threads);
    for (unsigned t = 0; t < threads; ++t) {
        Fiber &f = run.fibers[t];
        f.args = thread_args(t, threads);
        f.thread.simd = simd[t / SimdGroup::kWidth].get();
        f.thread.lane = t % SimdGroup::kWidth;
        f.thread.index = t;
        prepare_fiber(f, stack_pool()[t].get(), (int)t);
    }
    t_run = &run;
    for (;;) {
        bool progressed = false;
        unsigned done = 0;
        for (Fiber &f : run.fibers) {
            if (f.state == FiberState::Runnable) {
                resume_fiber(run, f);
                progressed = true;
            }
            done += f.state == FiberState::Done;
        }
        if (done == threads) break;
        if (done > 0) fail("internal: fibers of one dispatch finished at different groups");
        if (!release_barriers(run, simd) && !progressed)
            fail("deadlock: threads wait at barriers that the others of their group never reach");
    }
    t_run = nullptr;
}

#endif

const KernelEntry *find_kernel(const std::string &name) {
    for (const KernelEntry &e : kernels())
        if (name == e.name) return &e;
    return nullptr;
}

}  // namespace shim
