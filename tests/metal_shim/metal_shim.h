// The Metal shim: enough of the Metal Shading Language, as C++17, for the kernels in metal/ to
// compile with g++/clang++ and run on CPU threads (tests/metal_shim/README.md).
//
// How a dispatch runs: threadgroups run one after another, so a `threadgroup` array (a static
// local here) belongs to exactly the threads of the running group. Within a group, every GPU
// thread is its own thread of execution:
//  - in a ThreadSanitizer build, an OS thread: threadgroup_barrier is a barrier of OS threads and
//    a race a missing barrier leaves is a real race, which ThreadSanitizer reports;
//  - otherwise a fiber (ucontext) on the dispatching thread, switched at each barrier: the same
//    semantics at a small fraction of the cost (whole models run through it), and a barrier some
//    threads never reach is reported as a deadlock instead of hanging.
// The SIMD-group functions exchange values between the 32 threads of a SIMD group through a slot
// table between two SIMD-group barriers.
//
// What the kernels may use (the rest of MSL is not here, so a kernel that needs it fails to
// compile rather than running something else):
//  - address spaces `device`, `constant`, `thread`, and `threadgroup` *only* to declare arrays at
//    kernel scope (it becomes `static`); a helper that takes threadgroup memory is a template
//    over the pointer type;
//  - attributes [[buffer(n)]] and the thread-position ones of AKUNU_THREAD_ARGS (metal/common.h);
//  - scalar types incl. half (_Float16), vectors of 2/3/4 with .x .y .z .w, [], arithmetic,
//    conversion between element types; as_type;
//  - the math functions below (precise:: and fast:: are the same functions here);
//  - threadgroup_barrier, simdgroup_barrier, simd_sum/max/min/shuffle/shuffle_xor/shuffle_down/
//    shuffle_up/broadcast/broadcast_first/prefix_exclusive_sum/prefix_inclusive_sum/any/all
//    (called by every thread of the SIMD group together, as on the GPU);
//  - simdgroup_float8x8 / simdgroup_half8x8 with make_filled_simdgroup_matrix, simdgroup_load,
//    simdgroup_store (matrix_origin 0), simdgroup_multiply(_accumulate);
//  - atomic_int / atomic_uint (e.g. a `threadgroup atomic_uint` array) with atomic_store_explicit,
//    atomic_load_explicit and atomic_fetch_add_explicit, memory_order_relaxed (MSL's only order).
#pragma once

// Every standard header first: the address-space macros below would break them.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/types.h>  // glibc's uint / ushort typedefs, which ours must match

typedef unsigned char uchar;
typedef unsigned long ulong;

namespace metal {

typedef _Float16 half;

// --- vectors ---------------------------------------------------------------------------------
template <typename T, int N> struct vec;

#define AKUNU_SHIM_VEC_OPS(N)                                                                   \
    T &operator[](int i) { return (&x)[i]; }                                                    \
    const T &operator[](int i) const { return (&x)[i]; }                                        \
    friend vec operator+(vec a, const vec &b) { for (int i = 0; i < N; ++i) a[i] += b[i]; return a; } \
    friend vec operator-(vec a, const vec &b) { for (int i = 0; i < N; ++i) a[i] -= b[i]; return a; } \
    friend vec operator*(vec a, const vec &b) { for (int i = 0; i < N; ++i) a[i] *= b[i]; return a; } \
    friend vec operator/(vec a, const vec &b) { for (int i = 0; i < N; ++i) a[i] /= b[i]; return a; } \
    friend vec operator*(vec a, T s) { for (int i = 0; i < N; ++i) a[i] *= s; return a; }     \
    friend vec operator*(T s, vec a) { for (int i = 0; i < N; ++i) a[i] *= s; return a; }     \
    friend vec operator/(vec a, T s) { for (int i = 0; i < N; ++i) a[i] /= s; return a; }     \
    friend vec operator+(vec a, T s) { for (int i = 0; i < N; ++i) a[i] += s; return a; }     \
    friend vec operator-(vec a, T s) { for (int i = 0; i < N; ++i) a[i] -= s; return a; }     \
    friend vec operator-(vec a) { for (int i = 0; i < N; ++i) a[i] = -a[i]; return a; }      \
    vec &operator+=(const vec &b) { return *this = *this + b; }                                 \
    vec &operator-=(const vec &b) { return *this = *this - b; }                                 \
    vec &operator*=(const vec &b) { return *this = *this * b; }                                 \
    vec &operator*=(T s) { return *this = *this * s; }                                          \
    vec &operator/=(T s) { return *this = *this / s; }

template <typename T> struct vec<T, 2> {
    T x, y;
    vec() : x(), y() {}
    explicit vec(T s) : x(s), y(s) {}
    vec(T a, T b) : x(a), y(b) {}
    template <typename U> explicit vec(const vec<U, 2> &o) : x(T(o.x)), y(T(o.y)) {}
    AKUNU_SHIM_VEC_OPS(2)
};
template <typename T> struct vec<T, 3> {
    T x, y, z;
    vec() : x(), y(), z() {}
    explicit vec(T s) : x(s), y(s), z(s) {}
    vec(T a, T b, T c) : x(a), y(b), z(c) {}
    template <typename U> explicit vec(const vec<U, 3> &o) : x(T(o.x)), y(T(o.y)), z(T(o.z)) {}
    AKUNU_SHIM_VEC_OPS(3)
};
template <typename T> struct vec<T, 4> {
    T x, y, z, w;
    vec() : x(), y(), z(), w() {}
    explicit vec(T s) : x(s), y(s), z(s), w(s) {}
    vec(T a, T b, T c, T d) : x(a), y(b), z(c), w(d) {}
    template <typename U> explicit vec(const vec<U, 4> &o) : x(T(o.x)), y(T(o.y)), z(T(o.z)), w(T(o.w)) {}
    AKUNU_SHIM_VEC_OPS(4)
};
#undef AKUNU_SHIM_VEC_OPS

#define AKUNU_SHIM_VEC_TYPES(T, name) \
    typedef vec<T, 2> name##2;        \
    typedef vec<T, 3> name##3;        \
    typedef vec<T, 4> name##4;
AKUNU_SHIM_VEC_TYPES(float, float)
AKUNU_SHIM_VEC_TYPES(half, half)
AKUNU_SHIM_VEC_TYPES(int, int)
AKUNU_SHIM_VEC_TYPES(unsigned int, uint)
AKUNU_SHIM_VEC_TYPES(short, short)
AKUNU_SHIM_VEC_TYPES(unsigned short, ushort)
AKUNU_SHIM_VEC_TYPES(signed char, char)
AKUNU_SHIM_VEC_TYPES(unsigned char, uchar)
AKUNU_SHIM_VEC_TYPES(unsigned long, ulong)
#undef AKUNU_SHIM_VEC_TYPES

template <typename T, int N> T dot(const vec<T, N> &a, const vec<T, N> &b) {
    T s = T(0);
    for (int i = 0; i < N; ++i) s += a[i] * b[i];
    return s;
}

template <typename To, typename From> To as_type(const From &v) {
    static_assert(sizeof(To) == sizeof(From), "as_type needs types of one size");
    To out;
    std::memcpy(&out, &v, sizeof(To));
    return out;
}

// --- math -------------------------------------------------------------------------------------
// Float in, float out (half arguments are computed in float and rounded back, as Apple GPUs do
// for most of them).
#define AKUNU_SHIM_UNARY(name, expr)                              \
    inline float name(float x) { return expr; }                   \
    inline half name(half h) { float x = (float)h; return (half)(expr); }
AKUNU_SHIM_UNARY(exp, std::exp(x))
AKUNU_SHIM_UNARY(exp2, std::exp2(x))
AKUNU_SHIM_UNARY(log, std::log(x))
AKUNU_SHIM_UNARY(log2, std::log2(x))
AKUNU_SHIM_UNARY(tanh, std::tanh(x))
AKUNU_SHIM_UNARY(sqrt, std::sqrt(x))
AKUNU_SHIM_UNARY(rsqrt, 1.0f / std::sqrt(x))
AKUNU_SHIM_UNARY(fabs, std::fabs(x))
AKUNU_SHIM_UNARY(floor, std::floor(x))
AKUNU_SHIM_UNARY(ceil, std::ceil(x))
AKUNU_SHIM_UNARY(round, std::round(x))
AKUNU_SHIM_UNARY(rint, std::rint(x))
AKUNU_SHIM_UNARY(trunc, std::trunc(x))
AKUNU_SHIM_UNARY(sin, std::sin(x))
AKUNU_SHIM_UNARY(cos, std::cos(x))
AKUNU_SHIM_UNARY(erf, std::erf(x))
#undef AKUNU_SHIM_UNARY
inline float pow(float a, float b) { return std::pow(a, b); }
inline float powr(float a, float b) { return std::pow(a, b); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline float fmax(float a, float b) { return std::fmax(a, b); }
inline float fmin(float a, float b) { return std::fmin(a, b); }
inline float copysign(float a, float b) { return std::copysign(a, b); }
inline bool isnan(float x) { return std::isnan(x); }
inline bool isinf(float x) { return std::isinf(x); }
inline bool isfinite(float x) { return std::isfinite(x); }
template <typename T> T abs(T x) { return x < T(0) ? T(-x) : x; }
template <typename T> T max(T a, T b) { return a < b ? b : a; }
template <typename T> T min(T a, T b) { return b < a ? b : a; }
template <typename T> T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
template <typename T> T select(T a, T b, bool c) { return c ? b : a; }
inline uint popcount(uint x) { return (uint)__builtin_popcount(x); }
inline uint ctz(uint x) { return x ? (uint)__builtin_ctz(x) : 32u; }
inline uint clz(uint x) { return x ? (uint)__builtin_clz(x) : 32u; }
template <typename T, int N> vec<T, N> max(vec<T, N> a, const vec<T, N> &b) {
    for (int i = 0; i < N; ++i) a[i] = max(a[i], b[i]);
    return a;
}
template <typename T, int N> vec<T, N> min(vec<T, N> a, const vec<T, N> &b) {
    for (int i = 0; i < N; ++i) a[i] = min(a[i], b[i]);
    return a;
}
#define AKUNU_SHIM_VEC_UNARY(name)                                                              \
    template <typename T, int N> vec<T, N> name(vec<T, N> a) {                                  \
        for (int i = 0; i < N; ++i) a[i] = name(a[i]);                                          \
        return a;                                                                               \
    }
AKUNU_SHIM_VEC_UNARY(exp)
AKUNU_SHIM_VEC_UNARY(tanh)
AKUNU_SHIM_VEC_UNARY(fabs)
AKUNU_SHIM_VEC_UNARY(abs)
#undef AKUNU_SHIM_VEC_UNARY

namespace precise {
using metal::cos;
using metal::exp;
using metal::exp2;
using metal::log;
using metal::pow;
using metal::rsqrt;
using metal::sin;
using metal::sqrt;
using metal::tanh;
}  // namespace precise
namespace fast {
using metal::cos;
using metal::exp;
using metal::exp2;
using metal::log;
using metal::pow;
using metal::rsqrt;
using metal::sin;
using metal::sqrt;
using metal::tanh;
}  // namespace fast

// --- atomics (MSL's <metal_atomic>: relaxed order only, as in MSL 3.0) ---------------------------
enum memory_order { memory_order_relaxed };
template <typename T> struct atomic {
    using value_type = T;
    std::atomic<T> value;
};
typedef atomic<int> atomic_int;
typedef atomic<unsigned int> atomic_uint;
template <typename T>
void atomic_store_explicit(volatile atomic<T> *object, typename atomic<T>::value_type desired, memory_order) {
    object->value.store(desired, std::memory_order_relaxed);
}
template <typename T> T atomic_load_explicit(const volatile atomic<T> *object, memory_order) {
    return object->value.load(std::memory_order_relaxed);
}
// Returns the value before the add (integers wrap, as on the GPU).
template <typename T>
T atomic_fetch_add_explicit(volatile atomic<T> *object, typename atomic<T>::value_type operand, memory_order) {
    return object->value.fetch_add(operand, std::memory_order_relaxed);
}

// MSL's <metal_numeric>: only what the kernels use.
template <typename T> struct numeric_limits;
template <> struct numeric_limits<float> {
    static constexpr float infinity() { return __builtin_huge_valf(); }
    static constexpr float max() { return 3.402823466e+38f; }
    static constexpr float lowest() { return -3.402823466e+38f; }
};
#ifndef INFINITY
#define INFINITY __builtin_huge_valf()
#endif
#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38f
#endif

}  // namespace metal

// --- the thread runtime (shim_runtime.cpp) ------------------------------------------------------
namespace shim {

// A reusable barrier of `count` OS threads (generation counting, so a thread that races ahead
// into the next wait cannot be released by the previous one). Used by the OS-thread executor.
class Barrier {
public:
    void reset(int count) { count_ = count; waiting_ = 0; }
    void wait();

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    int count_ = 0, waiting_ = 0;
    uint64_t generation_ = 0;
};

// One SIMD group: its lanes exchange values through `slots` between two barriers.
struct SimdGroup {
    static constexpr int kWidth = 32;
    static constexpr int kSlotBytes = 32;
    Barrier barrier;  // OS-thread executor
    int active_lanes = kWidth;
    alignas(16) unsigned char slots[kWidth][kSlotBytes];
};

// What the running GPU thread is, set by the executor before it calls the kernel.
struct ThreadContext {
    Barrier *group_barrier = nullptr;  // OS-thread executor
    SimdGroup *simd = nullptr;
    unsigned lane = 0;
    unsigned index = 0;  // thread_position_in_threadgroup.x
};
ThreadContext &current();
// The running thread waits for every thread of its threadgroup / of its SIMD group.
void group_barrier();
void simd_barrier();

// The thread-position arguments a kernel receives (AKUNU_THREAD_ARGS, in this order).
struct ThreadArgs {
    metal::uint3 group;            // threadgroup_position_in_grid
    metal::uint3 thread_position;  // thread_position_in_threadgroup
    metal::uint3 group_size;       // threads_per_threadgroup
    unsigned simd_lane;            // thread_index_in_simdgroup
    unsigned simd_index;           // simdgroup_index_in_threadgroup
};

// Runs body(thread args) for every thread of every threadgroup of `groups`, `threads` threads
// (one dimension) per group. Groups run in order, x fastest; the threads of one group run at once.
void dispatch(metal::uint3 groups, unsigned threads, const std::function<void(const ThreadArgs &)> &body);

// Calls a kernel compiled from metal/ with its buffers (binding order), its parameter struct
// (bound after the buffers) and a thread's position. Kernels take buffer pointers, then
// `constant Params &`, then the five thread arguments.
template <typename... Args, size_t... I>
void call_kernel_impl(void (*fn)(Args...), void *const *buffers, const void *params, const ThreadArgs &t,
                      std::index_sequence<I...>) {
    constexpr size_t n_buffers = sizeof...(Args) - 6;
    using Tuple = std::tuple<Args...>;
    auto arg = [&](auto index) -> decltype(auto) {
        constexpr size_t i = decltype(index)::value;
        using A = std::tuple_element_t<i, Tuple>;
        if constexpr (i < n_buffers) {
            static_assert(std::is_pointer<A>::value, "kernel buffers are pointers");
            return static_cast<A>(buffers[i]);
        } else if constexpr (i == n_buffers) {
            static_assert(std::is_reference<A>::value, "the parameter struct comes after the buffers");
            return *static_cast<const std::remove_reference_t<A> *>(params);
        } else if constexpr (i == n_buffers + 1) {
            return t.group;
        } else if constexpr (i == n_buffers + 2) {
            return t.thread_position;
        } else if constexpr (i == n_buffers + 3) {
            return t.group_size;
        } else if constexpr (i == n_buffers + 4) {
            return t.simd_lane;
        } else {
            return t.simd_index;
        }
    };
    fn(static_cast<Args>(arg(std::integral_constant<size_t, I>{}))...);
}

template <typename... Args>
void call_kernel(void (*fn)(Args...), void *const *buffers, const void *params, const ThreadArgs &t) {
    static_assert(sizeof...(Args) >= 6, "a kernel takes its parameter struct and the five thread arguments");
    call_kernel_impl(fn, buffers, params, t, std::index_sequence_for<Args...>{});
}

// The registry's uniform entry point for one kernel.
template <auto Kernel>
void invoke(void *const *buffers, const void *params, const ThreadArgs &t) {
    call_kernel(Kernel, buffers, params, t);
}

// Buffer arguments a kernel declares (before its parameter struct).
template <typename... Args> constexpr unsigned buffer_arguments(void (*)(Args...)) { return sizeof...(Args) - 6; }

using KernelEntryFn = void (*)(void *const *buffers, const void *params, const ThreadArgs &t);
struct KernelEntry {
    const char *name;
    KernelEntryFn fn;
    unsigned buffer_slots;
};
// Every kernel in metal/, by its Metal function name (shim_kernels.cpp).
const std::vector<KernelEntry> &kernels();
const KernelEntry *find_kernel(const std::string &name);

}  // namespace shim

// --- MSL functions that need the runtime ---------------------------------------------------------
namespace metal {

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags((int)a | (int)b); }
inline void threadgroup_barrier(mem_flags) { shim::group_barrier(); }
inline void simdgroup_barrier(mem_flags) { shim::simd_barrier(); }

namespace detail {
// Publishes this lane's value, waits for the SIMD group, lets f read every lane's value, waits
// again (so no lane overwrites its slot while another still reads it).
template <typename T, typename F> auto simd_exchange(T value, F f) {
    static_assert(sizeof(T) <= shim::SimdGroup::kSlotBytes && std::is_trivially_copyable<T>::value,
                  "a SIMD-group value must fit a slot");
    shim::ThreadContext &c = shim::current();
    shim::SimdGroup &g = *c.simd;
    std::memcpy(g.slots[c.lane], &value, sizeof(T));
    shim::simd_barrier();
    auto lane_value = [&](unsigned lane) {
        T v;
        std::memcpy(&v, g.slots[lane], sizeof(T));
        return v;
    };
    auto result = f(lane_value, c.lane, (unsigned)g.active_lanes);
    shim::simd_barrier();
    return result;
}
}  // namespace detail

template <typename T> T simd_sum(T x) {
    return detail::simd_exchange(x, [](auto v, unsigned, unsigned n) {
        T s = v(0);
        for (unsigned i = 1; i < n; ++i) s = s + v(i);
        return s;
    });
}
template <typename T> T simd_max(T x) {
    return detail::simd_exchange(x, [](auto v, unsigned, unsigned n) {
        T s = v(0);
        for (unsigned i = 1; i < n; ++i) s = max(s, v(i));
        return s;
    });
}
template <typename T> T simd_min(T x) {
    return detail::simd_exchange(x, [](auto v, unsigned, unsigned n) {
        T s = v(0);
        for (unsigned i = 1; i < n; ++i) s = min(s, v(i));
        return s;
    });
}
template <typename T> T simd_prefix_exclusive_sum(T x) {
    return detail::simd_exchange(x, [](auto v, unsigned lane, unsigned) {
        T s = T(0);
        for (unsigned i = 0; i < lane; ++i) s = s + v(i);
        return s;
    });
}
template <typename T> T simd_prefix_inclusive_sum(T x) {
    return detail::simd_exchange(x, [](auto v, unsigned lane, unsigned) {
        T s = v(0);
        for (unsigned i = 1; i <= lane; ++i) s = s + v(i);
        return s;
    });
}
// Reading an inactive lane is undefined in MSL; the shim returns the caller's own value.
template <typename T> T simd_shuffle(T x, ushort lane) {
    return detail::simd_exchange(x, [lane, x](auto v, unsigned, unsigned n) { return lane < n ? v(lane) : x; });
}
template <typename T> T simd_shuffle_xor(T x, ushort mask) {
    return detail::simd_exchange(x, [mask, x](auto v, unsigned me, unsigned n) {
        const unsigned src = me ^ mask;
        return src < n ? v(src) : x;
    });
}
template <typename T> T simd_shuffle_down(T x, ushort delta) {
    return detail::simd_exchange(x, [delta, x](auto v, unsigned me, unsigned n) {
        return me + delta < n ? v(me + delta) : x;
    });
}
template <typename T> T simd_shuffle_up(T x, ushort delta) {
    return detail::simd_exchange(x, [delta, x](auto v, unsigned me, unsigned) { return me >= delta ? v(me - delta) : x; });
}
template <typename T> T simd_broadcast(T x, ushort lane) { return simd_shuffle(x, lane); }
template <typename T> T simd_broadcast_first(T x) {
    return detail::simd_exchange(x, [](auto v, unsigned, unsigned) { return v(0); });
}
inline bool simd_any(bool b) {
    return detail::simd_exchange(b, [](auto v, unsigned, unsigned n) {
        bool r = false;
        for (unsigned i = 0; i < n; ++i) r = r || v(i);
        return r;
    });
}
inline bool simd_all(bool b) {
    return detail::simd_exchange(b, [](auto v, unsigned, unsigned n) {
        bool r = true;
        for (unsigned i = 0; i < n; ++i) r = r && v(i);
        return r;
    });
}

// --- simdgroup matrices ----------------------------------------------------------------------------
// On the GPU each lane holds two of the 64 elements; here each lane holds them all (loads are
// collective and uniform, so every lane reads the same values) and a store writes lane i's share
// only, as the hardware does.
template <typename T, int Cols, int Rows> struct simdgroup_matrix {
    T e[Rows][Cols];
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;

template <typename T, int Cols, int Rows> simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(T value) {
    simdgroup_matrix<T, Cols, Rows> m;
    for (int r = 0; r < Rows; ++r)
        for (int c = 0; c < Cols; ++c) m.e[r][c] = value;
    return m;
}

template <typename T, int Cols, int Rows, typename S>
void simdgroup_load(simdgroup_matrix<T, Cols, Rows> &d, const S *src, ulong elements_per_row = Cols,
                    ulong2 matrix_origin = ulong2(0), bool transpose_matrix = false) {
    if (matrix_origin.x != 0 || matrix_origin.y != 0)
        throw std::logic_error("metal shim: simdgroup_load with a matrix_origin (offset the pointer instead)");
    for (int r = 0; r < Rows; ++r)
        for (int c = 0; c < Cols; ++c)
            d.e[r][c] = T(transpose_matrix ? src[(size_t)c * elements_per_row + r] : src[(size_t)r * elements_per_row + c]);
}

template <typename T, int Cols, int Rows, typename S>
void simdgroup_store(const simdgroup_matrix<T, Cols, Rows> &a, S *dst, ulong elements_per_row = Cols,
                     ulong2 matrix_origin = ulong2(0), bool transpose_matrix = false) {
    if (matrix_origin.x != 0 || matrix_origin.y != 0)
        throw std::logic_error("metal shim: simdgroup_store with a matrix_origin (offset the pointer instead)");
    const shim::ThreadContext &c = shim::current();
    const unsigned lanes = (unsigned)c.simd->active_lanes;
    for (int i = (int)c.lane; i < Rows * Cols; i += (int)lanes) {
        const int r = i / Cols, col = i % Cols;
        S &out = transpose_matrix ? dst[(size_t)col * elements_per_row + r] : dst[(size_t)r * elements_per_row + col];
        out = S(a.e[r][col]);
    }
}

// d = a . b + c (accumulated in float, rounded to d's element type).
template <typename T, typename A, typename B, typename C, int K>
void simdgroup_multiply_accumulate(simdgroup_matrix<T, 8, 8> &d, const simdgroup_matrix<A, K, 8> &a,
                                   const simdgroup_matrix<B, 8, K> &b, const simdgroup_matrix<C, 8, 8> &c) {
    simdgroup_matrix<T, 8, 8> out;
    for (int r = 0; r < 8; ++r)
        for (int col = 0; col < 8; ++col) {
            float s = (float)c.e[r][col];
            for (int k = 0; k < K; ++k) s += (float)a.e[r][k] * (float)b.e[k][col];
            out.e[r][col] = T(s);
        }
    d = out;
}
template <typename T, typename A, typename B, int K>
void simdgroup_multiply(simdgroup_matrix<T, 8, 8> &d, const simdgroup_matrix<A, K, 8> &a,
                        const simdgroup_matrix<B, 8, K> &b) {
    simdgroup_multiply_accumulate(d, a, b, make_filled_simdgroup_matrix<T, 8, 8>(T(0)));
}

}  // namespace metal
