// cunumpy_emu/prelude.h: CUDA built-ins for kernels compiled by the host C++ compiler (C++17)
// and run by the CPU emulator's C runtime (src/cunumpy/_core/emu/). Included first in every
// emulated translation unit; the ABI it follows is emu_abi.h (see that file for where it lives).
//
// What maps onto what:
//   threadIdx/blockIdx/blockDim/gridDim   fields of the worker bound to this OS thread
//   __shared__                            static thread_local: one copy per worker, and a
//                                         worker runs one block at a time with all its fibers
//   __syncthreads*, __syncwarp, __shfl*_sync, __ballot/any/all_sync, __activemask
//                                         collective calls into the runtime (fiber mode)
//   atomics                               real atomics (__atomic builtins, CAS loops for floats)
//   __trap(), assert, bounds checks       the runtime's trap: the launch fails with a RuntimeError
//   printf                                the host's printf
// Beside it in include/: <cuda_fp16.h>, <cooperative_groups.h>, complex numbers
// (<cupy/complex.cuh>, <thrust/complex.h>, <cuda/std/complex>, <cuComplex.h>).
// Not provided: textures/surfaces, inline PTX (the Python layer rewrites asm statements into
// traps), dynamic parallelism.
#ifndef CUNUMPY_EMU_PRELUDE_H
#define CUNUMPY_EMU_PRELUDE_H

#ifndef __cplusplus
#error "cunumpy_emu/prelude.h is compiled as C++17"
#endif

#if __has_include("emu_abi.h")
#include "emu_abi.h"
#else
#include "../../../_core/emu/emu_abi.h"
#endif

#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory> // before __noinline__ is defined: libstdc++ spells an attribute with that token
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

// CUDA sources carry `#pragma unroll`, unknown to the host compiler: GCC warns about it in
// the preprocessor, where no diagnostic pragma reaches, so compile with -Wno-unknown-pragmas.

#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
#define CUNUMPY_EMULATION 1

// ---------------------------------------------------------------------------------------------
// Function and variable qualifiers.
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
// Hidden so that the per-kernel entry stubs can inline the kernel into the block loop.
#define __global__ __attribute__((visibility("hidden")))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __shared__ static thread_local

// ---------------------------------------------------------------------------------------------
// The worker bound to this OS thread (cunumpy_emu_bind); every built-in reads through it.
__attribute__((visibility("hidden"))) inline thread_local cunumpy_emu_worker *cunumpy_emu_tls_worker = nullptr;

// The library's own entry points are never instrumented by the memory checks (checks.h): they
// run outside a launch's kernel code (binding a worker, or unbinding it with nullptr).
// With CUNUMPY_EMU_ANALYSIS (performance analysis) they are not traced either (checks.h).
#if defined(CUNUMPY_EMU_ANALYSIS) && defined(__clang__)
#define CUNUMPY_EMU_NOCOVERAGE __attribute__((no_sanitize("coverage")))
#elif defined(CUNUMPY_EMU_ANALYSIS)
#define CUNUMPY_EMU_NOCOVERAGE __attribute__((no_sanitize_coverage))
#else
#define CUNUMPY_EMU_NOCOVERAGE
#endif
#define CUNUMPY_EMU_NOINSTR __attribute__((no_sanitize("kernel-address", "address", "thread"))) CUNUMPY_EMU_NOCOVERAGE

extern "C" __attribute__((visibility("default"), used)) CUNUMPY_EMU_NOINSTR inline int cunumpy_emu_abi_version(void)
{
    return CUNUMPY_EMU_ABI_VERSION;
}

#if CUNUMPY_EMU_CHECKS == 3
// Launches instrumented for racecheck/initcheck run on one worker: their access hooks find it
// here, without a thread-local lookup per access.
__attribute__((visibility("hidden"))) inline cunumpy_emu_worker *cunumpy_emu_only_worker = nullptr;
#endif

extern "C" __attribute__((visibility("default"), used)) CUNUMPY_EMU_NOINSTR inline void
cunumpy_emu_bind(cunumpy_emu_worker *w)
{
    cunumpy_emu_tls_worker = w;
#if CUNUMPY_EMU_CHECKS == 3
    cunumpy_emu_only_worker = w;
#endif
}

#include "checks.h"

// ---------------------------------------------------------------------------------------------
// Vector types (CUDA's sizes and alignments) and their make_* functions.
#define CUNUMPY_EMU_VEC1(name, T, al)                                                                                  \
    struct __attribute__((aligned(al))) name {                                                                         \
        T x;                                                                                                           \
    };                                                                                                                 \
    static __inline__ name make_##name(T x) { return name{x}; }
#define CUNUMPY_EMU_VEC2(name, T, al)                                                                                  \
    struct __attribute__((aligned(al))) name {                                                                         \
        T x, y;                                                                                                        \
    };                                                                                                                 \
    static __inline__ name make_##name(T x, T y) { return name{x, y}; }
#define CUNUMPY_EMU_VEC3(name, T)                                                                                      \
    struct name {                                                                                                      \
        T x, y, z;                                                                                                     \
    };                                                                                                                 \
    static __inline__ name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define CUNUMPY_EMU_VEC4(name, T, al)                                                                                  \
    struct __attribute__((aligned(al))) name {                                                                         \
        T x, y, z, w;                                                                                                  \
    };                                                                                                                 \
    static __inline__ name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }

#define CUNUMPY_EMU_VECS(base, T, a1, a2, a4)                                                                          \
    CUNUMPY_EMU_VEC1(base##1, T, a1)                                                                                   \
    CUNUMPY_EMU_VEC2(base##2, T, a2)                                                                                   \
    CUNUMPY_EMU_VEC4(base##4, T, a4)

CUNUMPY_EMU_VECS(char, signed char, 1, 2, 4)
CUNUMPY_EMU_VECS(uchar, unsigned char, 1, 2, 4)
CUNUMPY_EMU_VECS(short, short, 2, 4, 8)
CUNUMPY_EMU_VECS(ushort, unsigned short, 2, 4, 8)
CUNUMPY_EMU_VECS(int, int, 4, 8, 16)
CUNUMPY_EMU_VECS(uint, unsigned int, 4, 8, 16)
CUNUMPY_EMU_VECS(long, long, 8, 16, 16)
CUNUMPY_EMU_VECS(ulong, unsigned long, 8, 16, 16)
CUNUMPY_EMU_VECS(longlong, long long, 8, 16, 16)
CUNUMPY_EMU_VECS(ulonglong, unsigned long long, 8, 16, 16)
CUNUMPY_EMU_VECS(float, float, 4, 8, 16)
CUNUMPY_EMU_VECS(double, double, 8, 16, 16)
CUNUMPY_EMU_VEC3(char3, signed char)
CUNUMPY_EMU_VEC3(uchar3, unsigned char)
CUNUMPY_EMU_VEC3(short3, short)
CUNUMPY_EMU_VEC3(ushort3, unsigned short)
CUNUMPY_EMU_VEC3(int3, int)
CUNUMPY_EMU_VEC3(long3, long)
CUNUMPY_EMU_VEC3(ulong3, unsigned long)
CUNUMPY_EMU_VEC3(longlong3, long long)
CUNUMPY_EMU_VEC3(ulonglong3, unsigned long long)
CUNUMPY_EMU_VEC3(float3, float)
CUNUMPY_EMU_VEC3(double3, double)

// uint3 is the ABI's dim3 struct, so threadIdx & co. are uint3 lvalues as in CUDA.
typedef cunumpy_emu_dim3 uint3;
static __inline__ uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---------------------------------------------------------------------------------------------
// Built-in variables.
// The built-ins read the worker's state, which is the runtime's memory, not the kernel's: under
// the memory checks those reads are made by inline assembly, which the instrumentation does not
// see (a check of each would only cost time; the compiler instruments what it inlines, whatever
// the inlined function's attributes say).
#define CUNUMPY_EMU_BUILTIN static __inline__ __attribute__((always_inline)) CUNUMPY_EMU_NOINSTR
namespace cunumpy_emu {
template <typename T> CUNUMPY_EMU_BUILTIN T runtime_load(const T *p)
{
#if CUNUMPY_EMU_CHECKS != 0 && (defined(__x86_64__) || defined(__aarch64__))
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "loads of 4 or 8 bytes");
    T v;
#if defined(__x86_64__)
    if (sizeof(T) == 8)
        __asm__("movq %1, %0" : "=r"(v) : "m"(*p));
    else
        __asm__("movl %1, %0" : "=r"(v) : "m"(*p));
#else
    if (sizeof(T) == 8)
        __asm__("ldr %x0, %1" : "=r"(v) : "m"(*p));
    else
        __asm__("ldr %w0, %1" : "=r"(v) : "m"(*p));
#endif
    return v;
#else
    return *p;
#endif
}
template <typename T> CUNUMPY_EMU_BUILTIN void runtime_store(T **p, T *v)
{
#if CUNUMPY_EMU_CHECKS != 0 && defined(__x86_64__)
    __asm__("movq %1, %0" : "=m"(*p) : "r"(v));
#elif CUNUMPY_EMU_CHECKS != 0 && defined(__aarch64__)
    __asm__("str %x1, %0" : "=m"(*p) : "r"(v));
#else
    *p = v;
#endif
}
CUNUMPY_EMU_BUILTIN cunumpy_emu_worker *worker(void) { return runtime_load(&::cunumpy_emu_tls_worker); }
CUNUMPY_EMU_BUILTIN const cunumpy_emu_api *api_of(cunumpy_emu_worker *w) { return runtime_load(&w->api); }
// A function of the runtime's api table, read as the rest of the runtime's memory.
#define CUNUMPY_EMU_API(w, name) (::cunumpy_emu::runtime_load(&::cunumpy_emu::api_of(w)->name))
CUNUMPY_EMU_BUILTIN uint3 load_dim3(const uint3 *d)
{
    return uint3{runtime_load(&d->x), runtime_load(&d->y), runtime_load(&d->z)};
}
CUNUMPY_EMU_BUILTIN uint3 thread_idx(void) { return load_dim3(&runtime_load(&worker()->current)->thread_idx); }
CUNUMPY_EMU_BUILTIN uint3 block_idx(void) { return load_dim3(&worker()->block_idx); }
CUNUMPY_EMU_BUILTIN uint3 block_dim(void) { return load_dim3(&worker()->block_dim); }
CUNUMPY_EMU_BUILTIN uint3 grid_dim(void) { return load_dim3(&worker()->grid_dim); }

// The built-ins of one CUDA thread, passed by the entry stubs to the copy of an entry kernel
// that the Python layer adds beside its definition (_emulation/_source.py, add_entry_copies):
// in that copy each built-in is a local object of the name the macros below use, which hides
// the function of that name at file scope, so the compiler sees the thread index as a loop
// variable instead of a load through the thread-local worker per CUDA thread. Everywhere else
// (device functions, the kernel when no copy could be made) the file-scope functions read the
// worker.
struct builtins {
    uint3 thread_idx, block_idx, block_dim, grid_dim;
};
struct builtin_value {
    uint3 v;
    constexpr uint3 operator()() const { return v; }
};
} // namespace cunumpy_emu
CUNUMPY_EMU_BUILTIN uint3 cunumpy_emu_threadIdx(void) { return ::cunumpy_emu::thread_idx(); }
CUNUMPY_EMU_BUILTIN uint3 cunumpy_emu_blockIdx(void) { return ::cunumpy_emu::block_idx(); }
CUNUMPY_EMU_BUILTIN uint3 cunumpy_emu_blockDim(void) { return ::cunumpy_emu::block_dim(); }
CUNUMPY_EMU_BUILTIN uint3 cunumpy_emu_gridDim(void) { return ::cunumpy_emu::grid_dim(); }
// Unqualified on purpose: name lookup finds the copy's locals first (see above).
#define threadIdx (cunumpy_emu_threadIdx())
#define blockIdx (cunumpy_emu_blockIdx())
#define blockDim (cunumpy_emu_blockDim())
#define gridDim (cunumpy_emu_gridDim())
static constexpr int warpSize = CUNUMPY_EMU_WARP_SIZE;

// extern __shared__ storage of the running block (the Python layer rewrites declarations of
// `extern __shared__ T name[]` into pointers to this).
CUNUMPY_EMU_BUILTIN void *cunumpy_emu_dynamic_shared(void)
{
    return cunumpy_emu::runtime_load(&cunumpy_emu::worker()->dynamic_shared);
}

// Static __shared__ variables declared in functions: the Python layer rewrites
// `__shared__ T name[N];` into a reference to a slot of the block's shared arena, placed by
// the runtime the first time the declaration runs (once per template instance), so that
// every block sees its own copy, memcheck knows the variable's bounds and name, and initcheck
// sees what a block has not written. (File-scope __shared__ stays a thread_local.)
namespace cunumpy_emu {
static __inline__ std::size_t shared_register(std::size_t size, std::size_t align, std::size_t itemsize,
                                              const char *name)
{
    cunumpy_emu_worker *w = ::cunumpy_emu::worker();
    return CUNUMPY_EMU_API(w, shared_register)(w, size, align, itemsize, name);
}
template <typename T> CUNUMPY_EMU_BUILTIN T &shared_at(std::size_t offset)
{
    return *reinterpret_cast<T *>(runtime_load(&worker()->static_shared) + offset);
}
} // namespace cunumpy_emu

// ---------------------------------------------------------------------------------------------
// Traps and assertions.
[[noreturn]] static __inline__ void cunumpy_emu_trap(const char *message)
{
    cunumpy_emu_worker *w = ::cunumpy_emu::worker();
    CUNUMPY_EMU_API(w, trap)(w, message);
    __builtin_unreachable();
}

[[noreturn]] static __inline__ void __trap(void) { cunumpy_emu_trap("__trap() called"); }
[[noreturn]] static __inline__ void __brkpt(void) { cunumpy_emu_trap("__brkpt() called"); }

// glibc's assert() calls __assert_fail; renaming the token sends every assert, including
// ones from a later re-inclusion of <assert.h>, to the runtime's trap instead of abort().
extern "C" [[noreturn]] __attribute__((visibility("hidden"))) inline void
cunumpy_emu_assert_fail(const char *expr, const char *file, unsigned int line, const char *) noexcept
{
    static thread_local char message[512]; // not on the stack the trap leaves (sanitizers)
    std::snprintf(message, sizeof message, "assertion `%s` failed at %s:%u", expr, file, line);
    cunumpy_emu_trap(message);
}
#define __assert_fail cunumpy_emu_assert_fail

// ---------------------------------------------------------------------------------------------
// Barriers and warp collectives.
namespace cunumpy_emu {
#if defined(__x86_64__)
// The fibers of a block are switched here, in the kernel's code, when the runtime's
// collective asks for it (emu_abi.h): the next fiber is resumed by an indirect jump, which the
// processor predicts per call site, instead of by returns through the runtime, which it
// predicts wrong whenever the fiber resumed waits at another call site (at the start and end
// of every block, and wherever the collectives of a kernel differ). The frame is the
// runtime's switch's: the callee-saved registers, then the address to resume at; below it
// the 128 bytes of the red zone are left alone. Every other register is clobbered, as by a
// call.
#define CUNUMPY_EMU_LIBRARY_SWITCH CUNUMPY_EMU_OP_SWITCH
CUNUMPY_EMU_BUILTIN void switch_fiber(void **save_sp, void *load_sp)
{
    __asm__ __volatile__("leaq -128(%%rsp), %%rsp\n\t"
                         "leaq 1f(%%rip), %%rax\n\t"
                         "pushq %%rax\n\t"
                         "pushq %%rbp\n\t"
                         "pushq %%rbx\n\t"
                         "pushq %%r12\n\t"
                         "pushq %%r13\n\t"
                         "pushq %%r14\n\t"
                         "pushq %%r15\n\t"
                         "movq %%rsp, (%0)\n\t"
                         "movq %1, %%rsp\n\t"
                         "popq %%r15\n\t"
                         "popq %%r14\n\t"
                         "popq %%r13\n\t"
                         "popq %%r12\n\t"
                         "popq %%rbx\n\t"
                         "popq %%rbp\n\t"
                         "popq %%rax\n\t"
                         "jmpq *%%rax\n"
                         "1:\n\t"
                         "leaq 128(%%rsp), %%rsp"
                         : "+D"(save_sp), "+S"(load_sp)
                         :
                         : "rax", "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1", "xmm2",
                           "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
                           "xmm14", "xmm15", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)");
}
#else
#define CUNUMPY_EMU_LIBRARY_SWITCH 0 // the runtime switches
#endif

// Every collective goes through the runtime's one entry; the result is the thread's.
CUNUMPY_EMU_BUILTIN std::uint64_t collective(cunumpy_emu_worker *w, int op, unsigned int mask, std::uint64_t value,
                                             int arg, int width)
{
    cunumpy_emu_thread *self = runtime_load(&w->current);
    const cunumpy_emu_wait wait = CUNUMPY_EMU_API(w, collective)(w, op | CUNUMPY_EMU_LIBRARY_SWITCH, mask, value,
                                                                 arg, width);
#if defined(__x86_64__)
    if (wait.save_sp != nullptr)
        switch_fiber(wait.save_sp, wait.load_sp);
#else
    (void)wait;
#endif
    return runtime_load(&self->result);
}
} // namespace cunumpy_emu

// The barriers pass their call's source line (a default argument is evaluated at the call):
// threads alive at two different __syncthreads() at once are barrier divergence.
static __inline__ void __syncthreads(int __cunumpy_line = __builtin_LINE())
{
    CUNUMPY_EMU_NOTE_BARRIER();
    (void)::cunumpy_emu::collective(::cunumpy_emu::worker(), CUNUMPY_EMU_OP_BARRIER, 0u, 0u, __cunumpy_line, 0);
}

static __inline__ int __syncthreads_count(int predicate, int __cunumpy_line = __builtin_LINE())
{
    CUNUMPY_EMU_NOTE_BARRIER();
    return (int)::cunumpy_emu::collective(::cunumpy_emu::worker(), CUNUMPY_EMU_OP_BARRIER, 0u, predicate != 0,
                                          __cunumpy_line, 0);
}

static __inline__ int __syncthreads_and(int predicate, int __cunumpy_line = __builtin_LINE())
{
    CUNUMPY_EMU_NOTE_BARRIER();
    cunumpy_emu_worker *w = ::cunumpy_emu::worker();
    const uint3 d = ::cunumpy_emu::load_dim3(&w->block_dim);
    const int n = (int)(d.x * d.y * d.z);
    return (int)::cunumpy_emu::collective(w, CUNUMPY_EMU_OP_BARRIER, 0u, predicate != 0, __cunumpy_line, 0) == n;
}

static __inline__ int __syncthreads_or(int predicate, int __cunumpy_line = __builtin_LINE())
{
    CUNUMPY_EMU_NOTE_BARRIER();
    return ::cunumpy_emu::collective(::cunumpy_emu::worker(), CUNUMPY_EMU_OP_BARRIER, 0u, predicate != 0,
                                     __cunumpy_line, 0) != 0;
}

static __inline__ void __syncwarp(unsigned int mask = 0xffffffffu)
{
    (void)::cunumpy_emu::collective(::cunumpy_emu::worker(), CUNUMPY_EMU_OP_SYNCWARP, mask, 0u, 0, 32);
}

static __inline__ unsigned int __ballot_sync(unsigned int mask, int predicate)
{
    return (unsigned int)::cunumpy_emu::collective(::cunumpy_emu::worker(), CUNUMPY_EMU_OP_BALLOT, mask,
                                                   predicate != 0, 0, 32);
}

static __inline__ int __any_sync(unsigned int mask, int predicate) { return __ballot_sync(mask, predicate) != 0u; }

static __inline__ int __all_sync(unsigned int mask, int predicate)
{
    return __ballot_sync(mask, predicate) == mask;
}

namespace cunumpy_emu {
// The runtime groups the lanes waiting in __activemask() by call site (the return address),
// so every call in the source must stay a call of its own. Identical calls ending two
// branches (`if (c) out[t] = __activemask(); else out[t] = __activemask();`) are merged into
// one by GCC's tail merging at -O2, which made the lanes of both branches one group. An empty
// asm carrying a number unique to the call site, right after the call, makes the tails differ.
template <int Site> static __inline__ __attribute__((always_inline)) unsigned int activemask_at(void)
{
    cunumpy_emu_worker *w = ::cunumpy_emu::worker();
    const unsigned int mask = CUNUMPY_EMU_API(w, activemask)(w);
    __asm__ __volatile__("" : : "i"(Site));
    return mask;
}
} // namespace cunumpy_emu
#define __activemask() (::cunumpy_emu::activemask_at<__COUNTER__>())

namespace cunumpy_emu {

template <typename T> static __inline__ T shfl(int kind, unsigned int mask, T value, int arg, int width)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles move values of at most 8 bytes");
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    bits = ::cunumpy_emu::collective(::cunumpy_emu::worker(), kind, mask, bits, arg, width);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}

} // namespace cunumpy_emu

template <typename T> static __inline__ T __shfl_sync(unsigned int mask, T var, int src_lane, int width = 32)
{
    return cunumpy_emu::shfl<T>(CUNUMPY_EMU_SHFL_IDX, mask, var, src_lane, width);
}

template <typename T> static __inline__ T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = 32)
{
    return cunumpy_emu::shfl<T>(CUNUMPY_EMU_SHFL_UP, mask, var, (int)delta, width);
}

template <typename T>
static __inline__ T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = 32)
{
    return cunumpy_emu::shfl<T>(CUNUMPY_EMU_SHFL_DOWN, mask, var, (int)delta, width);
}

template <typename T> static __inline__ T __shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = 32)
{
    return cunumpy_emu::shfl<T>(CUNUMPY_EMU_SHFL_XOR, mask, var, lane_mask, width);
}

// sm_80 warp reductions and match, built from shuffles over the mask's lanes (collective in
// the same way: every named lane runs the same loop).
namespace cunumpy_emu {
template <typename Op> static __inline__ unsigned int warp_fold(unsigned int mask, unsigned int v, Op op)
{
    unsigned int r = 0;
    bool first = true;
    for (unsigned int m = mask; m != 0u; m &= m - 1u) {
        const unsigned int x = __shfl_sync(mask, v, __builtin_ctz(m));
        r = first ? x : op(r, x);
        first = false;
    }
    return r;
}
template <typename T> static __inline__ unsigned int match_any(unsigned int mask, T v)
{
    unsigned int same = 0;
    for (unsigned int m = mask; m != 0u; m &= m - 1u) {
        const int lane = __builtin_ctz(m);
        if (__shfl_sync(mask, v, lane) == v)
            same |= 1u << lane;
    }
    return same;
}
} // namespace cunumpy_emu

static __inline__ unsigned int __reduce_add_sync(unsigned int mask, unsigned int v)
{
    return cunumpy_emu::warp_fold(mask, v, [](unsigned int a, unsigned int b) { return a + b; });
}
static __inline__ int __reduce_add_sync(unsigned int mask, int v) { return (int)__reduce_add_sync(mask, (unsigned int)v); }
static __inline__ unsigned int __reduce_min_sync(unsigned int mask, unsigned int v)
{
    return cunumpy_emu::warp_fold(mask, v, [](unsigned int a, unsigned int b) { return b < a ? b : a; });
}
static __inline__ int __reduce_min_sync(unsigned int mask, int v)
{
    return (int)cunumpy_emu::warp_fold(mask, (unsigned int)v, [](unsigned int a, unsigned int b) {
        return (int)b < (int)a ? b : a;
    });
}
static __inline__ unsigned int __reduce_max_sync(unsigned int mask, unsigned int v)
{
    return cunumpy_emu::warp_fold(mask, v, [](unsigned int a, unsigned int b) { return a < b ? b : a; });
}
static __inline__ int __reduce_max_sync(unsigned int mask, int v)
{
    return (int)cunumpy_emu::warp_fold(mask, (unsigned int)v, [](unsigned int a, unsigned int b) {
        return (int)a < (int)b ? b : a;
    });
}
static __inline__ unsigned int __reduce_and_sync(unsigned int mask, unsigned int v)
{
    return cunumpy_emu::warp_fold(mask, v, [](unsigned int a, unsigned int b) { return a & b; });
}
static __inline__ unsigned int __reduce_or_sync(unsigned int mask, unsigned int v)
{
    return cunumpy_emu::warp_fold(mask, v, [](unsigned int a, unsigned int b) { return a | b; });
}
static __inline__ unsigned int __reduce_xor_sync(unsigned int mask, unsigned int v)
{
    return cunumpy_emu::warp_fold(mask, v, [](unsigned int a, unsigned int b) { return a ^ b; });
}
template <typename T> static __inline__ unsigned int __match_any_sync(unsigned int mask, T v)
{
    return cunumpy_emu::match_any(mask, v);
}
template <typename T> static __inline__ unsigned int __match_all_sync(unsigned int mask, T v, int *pred)
{
    const unsigned int same = cunumpy_emu::match_any(mask, v);
    const int all = __all_sync(mask, same == mask);
    *pred = all;
    return all ? mask : 0u;
}

// ---------------------------------------------------------------------------------------------
// Memory fences, cached loads, clocks.
static __inline__ void __threadfence(void)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#if CUNUMPY_EMU_CHECKS == 3
    cunumpy_emu_worker *w = ::cunumpy_emu::worker();
    CUNUMPY_EMU_API(w, fence)(w); // racecheck: the block's earlier writes are published
#endif
}
static __inline__ void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static __inline__ void __threadfence_system(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

template <typename T> static __inline__ T __ldg(const T *p) { return *p; }
template <typename T> static __inline__ T __ldcg(const T *p) { return *p; }
template <typename T> static __inline__ T __ldca(const T *p) { return *p; }
template <typename T> static __inline__ T __ldcs(const T *p) { return *p; }
template <typename T> static __inline__ T __ldlu(const T *p) { return *p; }
template <typename T> static __inline__ T __ldcv(const T *p) { return *p; }
template <typename T> static __inline__ void __stwb(T *p, T v) { *p = v; }
template <typename T> static __inline__ void __stcg(T *p, T v) { *p = v; }
template <typename T> static __inline__ void __stcs(T *p, T v) { *p = v; }
template <typename T> static __inline__ void __stwt(T *p, T v) { *p = v; }

static __inline__ long long clock64(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
// Sleeping does not yield to other fibers: a thread spinning on another thread of its own
// block would never see it progress (documented as unsupported).
static __inline__ void __nanosleep(unsigned int) {}

// ---------------------------------------------------------------------------------------------
// Atomics: blocks run in parallel on several OS threads, so these are real atomics
// (relaxed, as on the GPU; __threadfence orders).
namespace cunumpy_emu {
template <typename T, typename F> static __inline__ T cas_loop(T *p, F update)
{
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic on 4 or 8 bytes");
    using U = typename std::conditional<sizeof(T) == 4, std::uint32_t, std::uint64_t>::type;
    U *up = reinterpret_cast<U *>(p);
    U old_bits = __atomic_load_n(up, __ATOMIC_RELAXED);
    for (;;) {
        T old;
        std::memcpy(&old, &old_bits, sizeof(T));
        const T next = update(old);
        U next_bits;
        std::memcpy(&next_bits, &next, sizeof(T));
        if (__atomic_compare_exchange_n(up, &old_bits, next_bits, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return old;
    }
}
} // namespace cunumpy_emu

#define CUNUMPY_EMU_INT_ATOMICS(T)                                                                                     \
    static __inline__ T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }                  \
    static __inline__ T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }                  \
    static __inline__ T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }                \
    static __inline__ T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }                  \
    static __inline__ T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }                    \
    static __inline__ T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }                  \
    static __inline__ T atomicMin(T *p, T v)                                                                           \
    {                                                                                                                  \
        return cunumpy_emu::cas_loop(p, [v](T o) { return v < o ? v : o; });                                           \
    }                                                                                                                  \
    static __inline__ T atomicMax(T *p, T v)                                                                           \
    {                                                                                                                  \
        return cunumpy_emu::cas_loop(p, [v](T o) { return o < v ? v : o; });                                           \
    }                                                                                                                  \
    static __inline__ T atomicCAS(T *p, T compare, T v)                                                                \
    {                                                                                                                  \
        __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);                        \
        return compare;                                                                                                \
    }

CUNUMPY_EMU_INT_ATOMICS(int)
CUNUMPY_EMU_INT_ATOMICS(unsigned int)
CUNUMPY_EMU_INT_ATOMICS(long long)
CUNUMPY_EMU_INT_ATOMICS(unsigned long long)

static __inline__ unsigned short atomicCAS(unsigned short *p, unsigned short compare, unsigned short v)
{
    __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare;
}

static __inline__ float atomicAdd(float *p, float v)
{
    return cunumpy_emu::cas_loop(p, [v](float o) { return o + v; });
}
static __inline__ double atomicAdd(double *p, double v)
{
    return cunumpy_emu::cas_loop(p, [v](double o) { return o + v; });
}
static __inline__ float atomicExch(float *p, float v)
{
    return cunumpy_emu::cas_loop(p, [v](float) { return v; });
}
static __inline__ unsigned int atomicInc(unsigned int *p, unsigned int limit)
{
    return cunumpy_emu::cas_loop(p, [limit](unsigned int o) { return o >= limit ? 0u : o + 1u; });
}
static __inline__ unsigned int atomicDec(unsigned int *p, unsigned int limit)
{
    return cunumpy_emu::cas_loop(p, [limit](unsigned int o) { return (o == 0u || o > limit) ? limit : o - 1u; });
}

// Scoped variants: every scope is the whole process here.
#define CUNUMPY_EMU_SCOPED(name)                                                                                       \
    template <typename... A> static __inline__ auto name##_block(A... a) { return name(a...); }                      \
    template <typename... A> static __inline__ auto name##_system(A... a) { return name(a...); }
CUNUMPY_EMU_SCOPED(atomicAdd)
CUNUMPY_EMU_SCOPED(atomicSub)
CUNUMPY_EMU_SCOPED(atomicExch)
CUNUMPY_EMU_SCOPED(atomicMin)
CUNUMPY_EMU_SCOPED(atomicMax)
CUNUMPY_EMU_SCOPED(atomicInc)
CUNUMPY_EMU_SCOPED(atomicDec)
CUNUMPY_EMU_SCOPED(atomicCAS)
CUNUMPY_EMU_SCOPED(atomicAnd)
CUNUMPY_EMU_SCOPED(atomicOr)
CUNUMPY_EMU_SCOPED(atomicXor)

// ---------------------------------------------------------------------------------------------
// Bit reinterpretation and integer intrinsics.
namespace cunumpy_emu {
template <typename To, typename From> static __inline__ To bit_cast(From v)
{
    static_assert(sizeof(To) == sizeof(From), "same size");
    To out;
    std::memcpy(&out, &v, sizeof(To));
    return out;
}
} // namespace cunumpy_emu

static __inline__ float __int_as_float(int v) { return cunumpy_emu::bit_cast<float>(v); }
static __inline__ int __float_as_int(float v) { return cunumpy_emu::bit_cast<int>(v); }
static __inline__ float __uint_as_float(unsigned int v) { return cunumpy_emu::bit_cast<float>(v); }
static __inline__ unsigned int __float_as_uint(float v) { return cunumpy_emu::bit_cast<unsigned int>(v); }
static __inline__ double __longlong_as_double(long long v) { return cunumpy_emu::bit_cast<double>(v); }
static __inline__ long long __double_as_longlong(double v) { return cunumpy_emu::bit_cast<long long>(v); }
static __inline__ int __double2hiint(double v) { return (int)(cunumpy_emu::bit_cast<unsigned long long>(v) >> 32); }
static __inline__ int __double2loint(double v) { return (int)(unsigned int)cunumpy_emu::bit_cast<unsigned long long>(v); }
static __inline__ double __hiloint2double(int hi, int lo)
{
    return cunumpy_emu::bit_cast<double>(((unsigned long long)(unsigned int)hi << 32) | (unsigned int)lo);
}

static __inline__ int __popc(unsigned int v) { return __builtin_popcount(v); }
static __inline__ int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
static __inline__ int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned int)v); }
static __inline__ int __clzll(long long v) { return v == 0 ? 64 : __builtin_clzll((unsigned long long)v); }
static __inline__ int __ffs(int v) { return __builtin_ffs(v); }
static __inline__ int __ffsll(long long v) { return __builtin_ffsll(v); }
static __inline__ unsigned int __brev(unsigned int v)
{
    v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
    v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
    v = ((v >> 4) & 0x0f0f0f0fu) | ((v & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(v);
}
static __inline__ unsigned long long __brevll(unsigned long long v)
{
    return ((unsigned long long)__brev((unsigned int)v) << 32) | __brev((unsigned int)(v >> 32));
}
static __inline__ unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s)
{
    const unsigned long long bytes = ((unsigned long long)y << 32) | x;
    unsigned int r = 0;
    for (int i = 0; i < 4; ++i)
        r |= (unsigned int)((bytes >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
    return r;
}
static __inline__ unsigned int __umulhi(unsigned int a, unsigned int b)
{
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}
static __inline__ int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static __inline__ unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static __inline__ long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static __inline__ int __mul24(int a, int b)
{
    const int a24 = (int)((unsigned int)a << 8) >> 8, b24 = (int)((unsigned int)b << 8) >> 8;
    return (int)((unsigned int)a24 * (unsigned int)b24);
}
static __inline__ unsigned int __umul24(unsigned int a, unsigned int b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static __inline__ unsigned int __sad(int x, int y, unsigned int z)
{
    return z + (unsigned int)(x > y ? (long long)x - y : (long long)y - x);
}
static __inline__ unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return z + (x > y ? x - y : y - x); }
static __inline__ int __hadd(int x, int y) { return (int)(((long long)x + y) >> 1); }
static __inline__ int __rhadd(int x, int y) { return (int)(((long long)x + y + 1) >> 1); }
static __inline__ unsigned int __uhadd(unsigned int x, unsigned int y) { return (unsigned int)(((unsigned long long)x + y) >> 1); }
static __inline__ unsigned int __urhadd(unsigned int x, unsigned int y)
{
    return (unsigned int)(((unsigned long long)x + y + 1) >> 1);
}
static __inline__ unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift)
{
    return (unsigned int)(((((unsigned long long)hi << 32) | lo) << (shift & 31u)) >> 32);
}
static __inline__ unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift)
{
    const unsigned int s = shift > 32u ? 32u : shift;
    return (unsigned int)(((((unsigned long long)hi << 32) | lo) << s) >> 32);
}
static __inline__ unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift)
{
    return (unsigned int)((((unsigned long long)hi << 32) | lo) >> (shift & 31u));
}
static __inline__ unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift)
{
    const unsigned int s = shift > 32u ? 32u : shift;
    return (unsigned int)((((unsigned long long)hi << 32) | lo) >> s);
}

// ---------------------------------------------------------------------------------------------
// Math: the C library's functions come from <cmath>; these are CUDA's additions. The
// fast-math and explicitly rounded variants use round-to-nearest host arithmetic.
template <typename A, typename B,
          typename = typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value>::type>
static __inline__ typename std::common_type<A, B>::type min(A a, B b)
{
    typedef typename std::common_type<A, B>::type C;
    return (C)b < (C)a ? (C)b : (C)a;
}
template <typename A, typename B,
          typename = typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value>::type>
static __inline__ typename std::common_type<A, B>::type max(A a, B b)
{
    typedef typename std::common_type<A, B>::type C;
    return (C)a < (C)b ? (C)b : (C)a;
}

// Same-type overloads as in CUDA: a non-template wins over std::min/std::max when a kernel
// says `using namespace std;`; the template above covers mixed types.
#define CUNUMPY_EMU_MINMAX(T)                                                                                          \
    static __inline__ T min(T a, T b) { return b < a ? b : a; }                                                       \
    static __inline__ T max(T a, T b) { return a < b ? b : a; }
CUNUMPY_EMU_MINMAX(int)
CUNUMPY_EMU_MINMAX(unsigned int)
CUNUMPY_EMU_MINMAX(long)
CUNUMPY_EMU_MINMAX(unsigned long)
CUNUMPY_EMU_MINMAX(long long)
CUNUMPY_EMU_MINMAX(unsigned long long)
CUNUMPY_EMU_MINMAX(float)
CUNUMPY_EMU_MINMAX(double)

static __inline__ double rsqrt(double x) { return 1.0 / std::sqrt(x); }
static __inline__ float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static __inline__ double rcbrt(double x) { return 1.0 / std::cbrt(x); }
static __inline__ float rcbrtf(float x) { return 1.0f / std::cbrt(x); }
static __inline__ double rhypot(double x, double y) { return 1.0 / std::hypot(x, y); }
static __inline__ float rhypotf(float x, float y) { return 1.0f / std::hypot(x, y); }
static __inline__ double norm3d(double a, double b, double c) { return std::sqrt(a * a + b * b + c * c); }
static __inline__ float norm3df(float a, float b, float c) { return std::sqrt(a * a + b * b + c * c); }
static __inline__ double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
static __inline__ float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
static __inline__ double norm4d(double a, double b, double c, double d) { return std::sqrt(a * a + b * b + c * c + d * d); }
static __inline__ float norm4df(float a, float b, float c, float d) { return std::sqrt(a * a + b * b + c * c + d * d); }
static __inline__ double normcdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752440); }
static __inline__ float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678f); }
#if !(defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 41)))
// C23 adds these to the C library (glibc 2.41); before that they are CUDA-only.
static __inline__ double sinpi(double x) { return std::sin(M_PI * x); }
static __inline__ float sinpif(float x) { return (float)std::sin(M_PI * (double)x); }
static __inline__ double cospi(double x) { return std::cos(M_PI * x); }
static __inline__ float cospif(float x) { return (float)std::cos(M_PI * (double)x); }
#endif
static __inline__ void sincospi(double x, double *s, double *c)
{
    *s = std::sin(M_PI * x);
    *c = std::cos(M_PI * x);
}
static __inline__ void sincospif(float x, float *s, float *c)
{
    *s = (float)std::sin(M_PI * (double)x);
    *c = (float)std::cos(M_PI * (double)x);
}
static __inline__ float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }
// glibc declares these names (without exporting them); define them with the same linkage.
#if defined(__GLIBC__)
#define CUNUMPY_EMU_LIBM_NAME extern "C" inline
#define CUNUMPY_EMU_LIBM_NOEXCEPT noexcept
#else
#define CUNUMPY_EMU_LIBM_NAME static __inline__
#define CUNUMPY_EMU_LIBM_NOEXCEPT
#endif
CUNUMPY_EMU_LIBM_NAME float __expf(float x) CUNUMPY_EMU_LIBM_NOEXCEPT { return ::expf(x); }
CUNUMPY_EMU_LIBM_NAME float __exp10f(float x) CUNUMPY_EMU_LIBM_NOEXCEPT { return ::powf(10.0f, x); }
CUNUMPY_EMU_LIBM_NAME float __logf(float x) CUNUMPY_EMU_LIBM_NOEXCEPT { return ::logf(x); }
CUNUMPY_EMU_LIBM_NAME float __log2f(float x) CUNUMPY_EMU_LIBM_NOEXCEPT { return ::log2f(x); }
CUNUMPY_EMU_LIBM_NAME float __log10f(float x) CUNUMPY_EMU_LIBM_NOEXCEPT { return ::log10f(x); }
CUNUMPY_EMU_LIBM_NAME float __sinf(float x) CUNUMPY_EMU_LIBM_NOEXCEPT { return ::sinf(x); }
CUNUMPY_EMU_LIBM_NAME float __cosf(float x) CUNUMPY_EMU_LIBM_NOEXCEPT { return ::cosf(x); }
CUNUMPY_EMU_LIBM_NAME float __tanf(float x) CUNUMPY_EMU_LIBM_NOEXCEPT { return ::tanf(x); }
CUNUMPY_EMU_LIBM_NAME float __powf(float x, float y) CUNUMPY_EMU_LIBM_NOEXCEPT { return ::powf(x, y); }
CUNUMPY_EMU_LIBM_NAME void __sincosf(float x, float *s, float *c) CUNUMPY_EMU_LIBM_NOEXCEPT
{
    *s = ::sinf(x);
    *c = ::cosf(x);
}
static __inline__ float __fdividef(float a, float b) { return a / b; }
static __inline__ double fdivide(double a, double b) { return a / b; }
static __inline__ float fdividef(float a, float b) { return a / b; }

#define CUNUMPY_EMU_ROUNDED(T, s)                                                                                      \
    static __inline__ T __##s##add_rn(T a, T b) { return a + b; }                                                     \
    static __inline__ T __##s##add_rz(T a, T b) { return a + b; }                                                     \
    static __inline__ T __##s##add_rd(T a, T b) { return a + b; }                                                     \
    static __inline__ T __##s##add_ru(T a, T b) { return a + b; }                                                     \
    static __inline__ T __##s##sub_rn(T a, T b) { return a - b; }                                                     \
    static __inline__ T __##s##mul_rn(T a, T b) { return a * b; }                                                     \
    static __inline__ T __##s##mul_rz(T a, T b) { return a * b; }                                                     \
    static __inline__ T __##s##mul_rd(T a, T b) { return a * b; }                                                     \
    static __inline__ T __##s##mul_ru(T a, T b) { return a * b; }                                                     \
    static __inline__ T __##s##div_rn(T a, T b) { return a / b; }                                                     \
    static __inline__ T __##s##sqrt_rn(T a) { return std::sqrt(a); }                                                  \
    static __inline__ T __##s##rcp_rn(T a) { return T(1) / a; }
CUNUMPY_EMU_ROUNDED(float, f)
CUNUMPY_EMU_ROUNDED(double, d)
static __inline__ float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
static __inline__ float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static __inline__ double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }

// Float to integer conversions saturate and map NaN to 0, as on the GPU.
namespace cunumpy_emu {
template <typename I, typename F> static __inline__ I to_int(F v)
{
    if (v != v)
        return 0;
    if (v <= (F)std::numeric_limits<I>::min())
        return std::numeric_limits<I>::min();
    if (v >= (F)std::numeric_limits<I>::max())
        return std::numeric_limits<I>::max();
    return (I)v;
}
} // namespace cunumpy_emu

#define CUNUMPY_EMU_TO_INT(name, I, F)                                                                                 \
    static __inline__ I name##_rn(F v) { return cunumpy_emu::to_int<I>(std::nearbyint(v)); }                          \
    static __inline__ I name##_rz(F v) { return cunumpy_emu::to_int<I>(std::trunc(v)); }                              \
    static __inline__ I name##_rd(F v) { return cunumpy_emu::to_int<I>(std::floor(v)); }                              \
    static __inline__ I name##_ru(F v) { return cunumpy_emu::to_int<I>(std::ceil(v)); }
CUNUMPY_EMU_TO_INT(__float2int, int, float)
CUNUMPY_EMU_TO_INT(__float2uint, unsigned int, float)
CUNUMPY_EMU_TO_INT(__float2ll, long long, float)
CUNUMPY_EMU_TO_INT(__float2ull, unsigned long long, float)
CUNUMPY_EMU_TO_INT(__double2int, int, double)
CUNUMPY_EMU_TO_INT(__double2uint, unsigned int, double)
CUNUMPY_EMU_TO_INT(__double2ll, long long, double)
CUNUMPY_EMU_TO_INT(__double2ull, unsigned long long, double)
static __inline__ float __double2float_rn(double v) { return (float)v; }
static __inline__ float __int2float_rn(int v) { return (float)v; }
static __inline__ float __uint2float_rn(unsigned int v) { return (float)v; }
static __inline__ float __ll2float_rn(long long v) { return (float)v; }
static __inline__ float __ull2float_rn(unsigned long long v) { return (float)v; }
static __inline__ double __int2double_rn(int v) { return (double)v; }
static __inline__ double __uint2double_rn(unsigned int v) { return (double)v; }
static __inline__ double __ll2double_rn(long long v) { return (double)v; }
static __inline__ double __ull2double_rn(unsigned long long v) { return (double)v; }

// ---------------------------------------------------------------------------------------------
// Entry stubs. CUNUMPY_EMU_EXPORT_KERNEL(k, kernel) defines cunumpy_emu_thread_k (one CUDA
// thread, fiber mode) and cunumpy_emu_block_k (every thread of the current block as a loop
// with the kernel inlined, loop mode). `kernel` may be a template instance, e.g. f<float, 2>.
namespace cunumpy_emu {

template <typename F> struct kernel_params;
template <typename... P> struct kernel_params<void (*)(P...)> {
    typedef std::tuple<typename std::decay<P>::type...> values;
};
template <typename... P> struct kernel_params<void (*)(P...) noexcept> {
    typedef std::tuple<typename std::decay<P>::type...> values;
};

// The parameter values are the runtime's memory: read without the checks' instrumentation (a
// separate function, never inlined, so the compiler keeps its attribute), so that nothing the
// runtime owns has to lie outside the redzones of the arguments.
template <typename T> __attribute__((noinline)) CUNUMPY_EMU_NOINSTR static T load_param(void *const *args, std::size_t i)
{
    return *static_cast<const T *>(args[i]);
}

// A fiber runs its thread in every block of the launch: the parameters are read once, each
// call gets its own copies; at the end of a block the thread waits for the next one.
CUNUMPY_EMU_BUILTIN void thread_exit(cunumpy_emu_worker *w)
{
    (void)collective(w, CUNUMPY_EMU_OP_EXIT, 0u, 0u, 0, 0);
}

template <auto K, std::size_t... I>
[[noreturn]] static __inline__ void run_thread_impl(void *const *args, std::index_sequence<I...>)
{
    typedef typename kernel_params<decltype(K)>::values values;
    (void)args;
    cunumpy_emu_worker *w = worker();
    const values params(load_param<typename std::tuple_element<I, values>::type>(args, I)...);
    (void)params;
    for (;;) {
        K(std::get<I>(params)...);
        thread_exit(w);
    }
}

// The thread record of a loop over a block's threads is the runtime's memory too (fault reports
// and device functions read it). Where each access is a call into the runtime (modes 2 and 3:
// outlined memcheck, racecheck, initcheck) it is written by inline assembly, saving two calls per
// CUDA thread; under inline memcheck (mode 1) a plain store's check costs less than what the
// assembly keeps the compiler from doing.
CUNUMPY_EMU_BUILTIN void record_store(unsigned int *p, unsigned int v)
{
#if CUNUMPY_EMU_CHECKS >= 2 && defined(__x86_64__)
    __asm__("movl %1, %0" : "=m"(*p) : "r"(v));
#elif CUNUMPY_EMU_CHECKS >= 2 && defined(__aarch64__)
    __asm__("str %w1, %0" : "=m"(*p) : "r"(v));
#else
    *p = v;
#endif
}
CUNUMPY_EMU_BUILTIN void record_clear(cunumpy_emu_thread *t)
{
#if CUNUMPY_EMU_CHECKS >= 2 && (defined(__x86_64__) || defined(__aarch64__))
    record_store(&t->thread_idx.x, 0);
    record_store(&t->thread_idx.y, 0);
    record_store(&t->thread_idx.z, 0);
    record_store(&t->linear, 0);
    unsigned int *result = reinterpret_cast<unsigned int *>(&t->result);
    record_store(result, 0);
    record_store(result + 1, 0);
#else
    *t = cunumpy_emu_thread{{0, 0, 0}, 0, 0};
#endif
}

template <auto K> static __inline__ void run_thread(void *const *args)
{
    typedef typename kernel_params<decltype(K)>::values values;
    run_thread_impl<K>(args, std::make_index_sequence<std::tuple_size<values>::value>{});
}

template <auto K, std::size_t... I>
static __inline__ void run_block_impl(cunumpy_emu_worker *w, void *const *args, std::index_sequence<I...>)
{
    typedef typename kernel_params<decltype(K)>::values values;
    (void)args;
    // The parameters are read once per block; each thread gets its own copies, as on the GPU.
    const values params(load_param<typename std::tuple_element<I, values>::type>(args, I)...);
    (void)params; // kernels without parameters
    cunumpy_emu_thread t;
    record_clear(&t);
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
    runtime_store(&w->current, &t); // reset below, before t goes out of scope
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif
    const uint3 dims = load_dim3(&w->block_dim);
    const unsigned int nx = dims.x, ny = dims.y, nz = dims.z;
    unsigned int linear = 0;
    for (unsigned int z = 0; z < nz; ++z) {
        record_store(&t.thread_idx.z, z);
        for (unsigned int y = 0; y < ny; ++y) {
            record_store(&t.thread_idx.y, y);
            for (unsigned int x = 0; x < nx; ++x) {
                record_store(&t.thread_idx.x, x);
                record_store(&t.linear, linear++);
#if CUNUMPY_EMU_CHECKS != 0
                // The thread is written before the kernel's code runs, not sunk past it: a
                // fault in that code then names the right thread (mostly: an instruction
                // that can trap but reads no memory may still move above this).
                __asm__ __volatile__("" : : "m"(t));
#endif
                K(std::get<I>(params)...);
            }
        }
    }
    runtime_store(&w->current, (cunumpy_emu_thread *)nullptr);
}

template <auto K> static __inline__ void run_block(cunumpy_emu_worker *w, void *const *args)
{
    typedef typename kernel_params<decltype(K)>::values values;
    run_block_impl<K>(w, args, std::make_index_sequence<std::tuple_size<values>::value>{});
}

// The same with the kernel's copy L (see struct builtins): K gives the parameter types, L
// takes the built-ins first, then K's parameters.
template <auto K, auto L, std::size_t... I>
static __inline__ void run_thread_copy_impl(void *const *args, std::index_sequence<I...>)
{
    typedef typename kernel_params<decltype(K)>::values values;
    (void)args;
    cunumpy_emu_worker *w = worker();
    const values params(load_param<typename std::tuple_element<I, values>::type>(args, I)...);
    (void)params;
    const uint3 thread_idx = load_dim3(&runtime_load(&w->current)->thread_idx); // the fiber's, in every block
    for (;;) {
        const builtins b = {thread_idx, load_dim3(&w->block_idx), load_dim3(&w->block_dim), load_dim3(&w->grid_dim)};
        L(b, std::get<I>(params)...);
        thread_exit(w);
    }
}

template <auto K, auto L> static __inline__ void run_thread_copy(void *const *args)
{
    typedef typename kernel_params<decltype(K)>::values values;
    run_thread_copy_impl<K, L>(args, std::make_index_sequence<std::tuple_size<values>::value>{});
}

template <auto K, auto L, std::size_t... I>
static __inline__ void run_block_copy_impl(cunumpy_emu_worker *w, void *const *args, std::index_sequence<I...>)
{
    typedef typename kernel_params<decltype(K)>::values values;
    (void)args;
    const values params(load_param<typename std::tuple_element<I, values>::type>(args, I)...);
    (void)params;
    cunumpy_emu_thread t;
    record_clear(&t);
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
    runtime_store(&w->current, &t); // for device functions reading the built-ins, and fault reports
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif
    builtins b = {{0, 0, 0}, load_dim3(&w->block_idx), load_dim3(&w->block_dim), load_dim3(&w->grid_dim)};
    const unsigned int nx = b.block_dim.x, ny = b.block_dim.y, nz = b.block_dim.z;
    unsigned int linear = 0;
    for (unsigned int z = 0; z < nz; ++z) {
        record_store(&t.thread_idx.z, z);
        for (unsigned int y = 0; y < ny; ++y) {
            record_store(&t.thread_idx.y, y);
            for (unsigned int x = 0; x < nx; ++x) {
                record_store(&t.thread_idx.x, x); // two stores per thread: y and z change in the outer loops only
                record_store(&t.linear, linear++);
#if CUNUMPY_EMU_CHECKS != 0
                __asm__ __volatile__("" : : "m"(t)); // see run_block_impl
#endif
                b.thread_idx = uint3{x, y, z};
                L(b, std::get<I>(params)...);
            }
        }
    }
    runtime_store(&w->current, (cunumpy_emu_thread *)nullptr);
}

template <auto K, auto L> static __inline__ void run_block_copy(cunumpy_emu_worker *w, void *const *args)
{
    typedef typename kernel_params<decltype(K)>::values values;
    run_block_copy_impl<K, L>(w, args, std::make_index_sequence<std::tuple_size<values>::value>{});
}

} // namespace cunumpy_emu

// The stubs' own names are reserved ones: a kernel may be called `w` or `args`.
#define CUNUMPY_EMU_EXPORT_KERNEL(k, ...)                                                                              \
    extern "C" __attribute__((visibility("default"))) void cunumpy_emu_thread_##k(void *const *cunumpy_emu_args_)      \
    {                                                                                                                  \
        cunumpy_emu::run_thread<&__VA_ARGS__>(cunumpy_emu_args_);                                                      \
    }                                                                                                                  \
    extern "C" __attribute__((visibility("default"))) void cunumpy_emu_block_##k(cunumpy_emu_worker *cunumpy_emu_w_,  \
                                                                                   void *const *cunumpy_emu_args_)     \
    {                                                                                                                  \
        cunumpy_emu::run_block<&__VA_ARGS__>(cunumpy_emu_w_, cunumpy_emu_args_);                                       \
    }

#endif // CUNUMPY_EMU_PRELUDE_H
