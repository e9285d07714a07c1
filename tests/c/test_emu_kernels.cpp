// Kernels for tests/c/test_emu.c, compiled with g++ against the emulator prelude and linked
// with the runtime. Each is exported the way the Python layer's stubs export kernels.
// Bounds checks on for the whole file (array_view.cuh reads the macro when included).
#define CUNUMPY_BOUNDS_CHECK 1
#include "cunumpy_emu/prelude.h"

#include <cunumpy/array_view.cuh>
#include <cunumpy/atomic.cuh>
#include <cunumpy/index.cuh>
#include <cunumpy/morton.cuh>
#include <cunumpy/random.cuh>
#include <cunumpy/reduce.cuh>
#include <cunumpy/scan.cuh>

extern "C" __global__ void k_axpy(double a, const double *x, double *y, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    y[i] = a * x[i] + y[i];
}
CUNUMPY_EMU_EXPORT_KERNEL(axpy, k_axpy)

// Every built-in variable, one record of 12 unsigned per thread of the grid.
extern "C" __global__ void k_builtins(unsigned *out)
{
    const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned *r = out + 12 * (block * blockDim.x * blockDim.y * blockDim.z + t);
    const uint3 ti = threadIdx;
    const dim3 bd = blockDim;
    r[0] = ti.x, r[1] = ti.y, r[2] = ti.z;
    r[3] = blockIdx.x, r[4] = blockIdx.y, r[5] = blockIdx.z;
    r[6] = bd.x, r[7] = bd.y, r[8] = bd.z;
    r[9] = gridDim.x, r[10] = gridDim.y, r[11] = gridDim.z + (unsigned)warpSize * 0;
}
CUNUMPY_EMU_EXPORT_KERNEL(builtins, k_builtins)

// Reverses each block's slice through static shared memory.
extern "C" __global__ void k_reverse(const int *in, int *out)
{
    __shared__ int s[1024];
    const int n = (int)blockDim.x;
    const int base = (int)blockIdx.x * n;
    s[threadIdx.x] = in[base + (int)threadIdx.x];
    __syncthreads();
    out[base + (int)threadIdx.x] = s[n - 1 - (int)threadIdx.x];
}
CUNUMPY_EMU_EXPORT_KERNEL(reverse, k_reverse)

// Same through extern __shared__ (the Python layer rewrites the declaration to this).
extern "C" __global__ void k_reverse_dynamic(const int *in, int *out)
{
    int *s = (int *)cunumpy_emu_dynamic_shared();
    const int n = (int)blockDim.x;
    const int base = (int)blockIdx.x * n;
    s[threadIdx.x] = in[base + (int)threadIdx.x];
    __syncthreads();
    out[base + (int)threadIdx.x] = s[n - 1 - (int)threadIdx.x];
}
CUNUMPY_EMU_EXPORT_KERNEL(reverse_dynamic, k_reverse_dynamic)

// __syncthreads_count/_and/_or with predicate "t % 3 == 0" and "t >= 0".
extern "C" __global__ void k_sync_count(int *out)
{
    const int t = cunumpy_block_thread();
    const int c = __syncthreads_count(t % 3 == 0);
    const int a = __syncthreads_and(t >= 0);
    const int a2 = __syncthreads_and(t != 1);
    const int o = __syncthreads_or(t == 2);
    const int o2 = __syncthreads_or(0);
    out[5 * t + 0] = c, out[5 * t + 1] = a, out[5 * t + 2] = a2, out[5 * t + 3] = o, out[5 * t + 4] = o2;
}
CUNUMPY_EMU_EXPORT_KERNEL(sync_count, k_sync_count)

// Shuffles: kind 0..3 with arg and width; lanes outside `mask` store -1. Types vary by `type`.
extern "C" __global__ void k_shfl(int kind, unsigned mask, int arg, int width, int type, long long *out)
{
    const int t = cunumpy_block_thread();
    const int lane = t & 31;
    if (!(mask & (1u << lane))) {
        out[t] = -1;
        return;
    }
    long long r = 0;
#define CUNUMPY_TEST_SHFL(T)                                                                                           \
    {                                                                                                                  \
        const T v = (T)(1000 + t);                                                                                     \
        T x = kind == 0   ? __shfl_sync(mask, v, arg, width)                                                           \
              : kind == 1 ? __shfl_up_sync(mask, v, (unsigned)arg, width)                                              \
              : kind == 2 ? __shfl_down_sync(mask, v, (unsigned)arg, width)                                            \
                          : __shfl_xor_sync(mask, v, arg, width);                                                      \
        r = (long long)x;                                                                                              \
    }
    switch (type) {
    case 0: CUNUMPY_TEST_SHFL(int) break;
    case 1: CUNUMPY_TEST_SHFL(unsigned) break;
    case 2: CUNUMPY_TEST_SHFL(long long) break;
    case 3: CUNUMPY_TEST_SHFL(unsigned long long) break;
    case 4: CUNUMPY_TEST_SHFL(float) break;
    default: CUNUMPY_TEST_SHFL(double) break;
    }
    out[t] = r;
}
CUNUMPY_EMU_EXPORT_KERNEL(shfl, k_shfl)

// Votes with predicate "lane % 3 == 0" (and "1", "0") within `mask`; others store 0xdead.
extern "C" __global__ void k_vote(unsigned mask, unsigned *out)
{
    const int t = cunumpy_block_thread();
    const int lane = t & 31;
    out += 4 * blockIdx.x * cunumpy_block_threads(); // each block its own results (no race)
    if (!(mask & (1u << lane))) {
        out[4 * t] = out[4 * t + 1] = out[4 * t + 2] = out[4 * t + 3] = 0xdeadu;
        return;
    }
    out[4 * t + 0] = __ballot_sync(mask, lane % 3 == 0);
    out[4 * t + 1] = (unsigned)__any_sync(mask, lane == 100) + 2u * (unsigned)__any_sync(mask, lane % 3 == 0);
    out[4 * t + 2] = (unsigned)__all_sync(mask, 1) + 2u * (unsigned)__all_sync(mask, lane % 3 == 0);
    __syncwarp(mask);
    out[4 * t + 3] = 7u;
}
CUNUMPY_EMU_EXPORT_KERNEL(vote, k_vote)

// __activemask at two call sites: lanes below `split` take the first.
extern "C" __global__ void k_activemask(int split, unsigned *out)
{
    const int t = cunumpy_block_thread();
    if ((t & 31) < split)
        out[t] = __activemask();
    else
        out[t] = __activemask() | 0u;
}
CUNUMPY_EMU_EXPORT_KERNEL(activemask, k_activemask)

// reduce.cuh and scan.cuh over any block shape: per thread the block sum, min, max and the
// exclusive and inclusive scans of v = (t * 7) % 11 - 3; warp sum with a sparse mask.
extern "C" __global__ void k_reduce_scan(long long *out)
{
    const int t = cunumpy_block_thread();
    const int v = (t * 7) % 11 - 3;
    long long *r = out + 8 * (t + (int)blockIdx.x * cunumpy_block_threads()); // per block (no race)
    r[0] = cunumpy_block_sum(v);
    r[1] = cunumpy_block_min((long long)v);
    r[2] = (long long)cunumpy_block_max((double)v);
    r[3] = cunumpy_block_exclusive_sum(v);
    r[4] = (long long)cunumpy_block_inclusive_sum((float)v);
    r[5] = (long long)cunumpy_block_sum((unsigned long long)(t + 1));
    const unsigned sparse = 0x80000421u; // lanes 0, 5, 10, 31
    const unsigned present = cunumpy_detail::present_mask(t >> 5, cunumpy_block_threads());
    if ((sparse & present & (1u << (t & 31))) != 0u)
        r[6] = cunumpy_warp_sum((unsigned)v, sparse & present);
    else
        r[6] = -99;
    r[7] = cunumpy_warp_exclusive_sum(1, present);
}
CUNUMPY_EMU_EXPORT_KERNEL(reduce_scan, k_reduce_scan)

// Block sums of x into *out with one atomic per block (the benchmark kernel).
extern "C" __global__ void k_block_sum(const double *x, double *out, long long n)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    cunumpy_block_sum_to(out, i < n ? x[i] : 0.0);
}
CUNUMPY_EMU_EXPORT_KERNEL(block_sum, k_block_sum)

// Atomics from every thread of many blocks.
extern "C" __global__ void k_atomics(unsigned long long *total, int *imax, int *imin, unsigned *inc, double *dsum,
                                     long long *lsum, unsigned *cas_count)
{
    const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(total, (unsigned long long)g);
    atomicMax(imax, (int)(g % 100003));
    atomicMin(imin, (int)(-(g % 99991)));
    atomicInc(inc, 0xffffffffu);
    cunumpy_atomic_add(dsum, 1.0);
    cunumpy_atomic_add(lsum, (long long)-g);
    unsigned old = atomicAdd(cas_count, 0u), assumed; // an atomic read: others CAS it meanwhile
    do {
        assumed = old;
        old = atomicCAS(cas_count, assumed, assumed + 1u);
    } while (old != assumed);
}
CUNUMPY_EMU_EXPORT_KERNEL(atomics, k_atomics)

// Failures.
extern "C" __global__ void k_trap_at(int block, int thread)
{
    if ((int)blockIdx.x == block && (int)threadIdx.x == thread)
        __trap();
}
CUNUMPY_EMU_EXPORT_KERNEL(trap_at, k_trap_at)

extern "C" __global__ void k_assert(int v) { assert(v == 42); }
CUNUMPY_EMU_EXPORT_KERNEL(assert_fail, k_assert)

// Exited threads count as arrived at the first barrier; the live ones then wait at two
// different barriers at once, which is divergence.
extern "C" __global__ void k_barrier_divergence(int exiters)
{
    if ((int)threadIdx.x < exiters)
        return;
    __syncthreads();
    if (threadIdx.x & 1u)
        __syncthreads();
    else
        __syncthreads();
}
CUNUMPY_EMU_EXPORT_KERNEL(barrier_divergence, k_barrier_divergence)

// Half the block at a barrier, half in a warp shuffle that names the other half.
extern "C" __global__ void k_deadlock(void)
{
    if (threadIdx.x & 1u)
        __syncthreads();
    else
        (void)__shfl_sync(0xffffffffu, 1, 0);
}
CUNUMPY_EMU_EXPORT_KERNEL(deadlock, k_deadlock)

// Lanes 0-15 name the half warp, lanes 16-31 the whole warp.
extern "C" __global__ void k_mask_mismatch(void)
{
    const unsigned mask = threadIdx.x < 16 ? 0x0000ffffu : 0xffffffffu;
    (void)__shfl_sync(mask, 1, 0);
}
CUNUMPY_EMU_EXPORT_KERNEL(mask_mismatch, k_mask_mismatch)

// A full mask in a partial warp (lanes that do not exist).
extern "C" __global__ void k_mask_absent(void) { (void)__ballot_sync(0xffffffffu, 1); }
CUNUMPY_EMU_EXPORT_KERNEL(mask_absent, k_mask_absent)

// An early return before a warp shuffle that names the returned lane.
extern "C" __global__ void k_mask_exited(void)
{
    if (threadIdx.x == 3)
        return;
    (void)__shfl_down_sync(0xffffffffu, 1, 1);
}
CUNUMPY_EMU_EXPORT_KERNEL(mask_exited, k_mask_exited)

// Faulting on purpose: not instrumented (ASan, UBSan, TSan), so that the sanitizer builds reach the runtime's
// checked-execution handler instead of reporting the access itself.
#define CUNUMPY_TEST_UNCHECKED __attribute__((no_sanitize("address", "undefined", "thread")))
extern "C" __global__ CUNUMPY_TEST_UNCHECKED void k_null_deref(int *p, int thread)
{
    if ((int)threadIdx.x == thread)
        p[0] = 1;
}
CUNUMPY_EMU_EXPORT_KERNEL(null_deref, k_null_deref)

// Unbounded recursion in a fiber: runs into the guard page below the fiber's stack.
__device__ __noinline__ CUNUMPY_TEST_UNCHECKED int recurse(volatile int *p, int depth)
{
    volatile char pad[512];
    pad[0] = (char)depth;
    return depth > 0 ? recurse(p, depth + 1) + pad[0] : *p;
}
extern "C" __global__ void k_overflow(int *p)
{
    __syncthreads();
    p[threadIdx.x] = recurse(p, 1);
}
CUNUMPY_EMU_EXPORT_KERNEL(overflow, k_overflow)

// Shipped headers in loop mode: random.cuh and morton.cuh values, array_view.cuh indexing.
extern "C" __global__ void k_headers(double *u, unsigned long long *keys, Array2D<double> a, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    u[i] = cunumpy_uniform(1234ull, 5ull, (unsigned long long)i);
    keys[i] = cunumpy_morton_encode2((unsigned)i, (unsigned)(n - 1 - i));
    a(i, 1) = a(i, 0) * 2.0;
}
CUNUMPY_EMU_EXPORT_KERNEL(headers, k_headers)

// A bounds-checked view traps on an out-of-range index.
extern "C" __global__ void k_bounds(CArray1D<int> a)
{
    const int i = (int)threadIdx.x;
    a(i + 1) = i; // the last thread is out of range
}
CUNUMPY_EMU_EXPORT_KERNEL(bounds, k_bounds)

// One result per built-in intrinsic (thread 0 of a one-thread launch); test_emu.c has the
// expected values. Vector types are checked for CUDA's sizes and alignments at compile time.
static_assert(sizeof(float2) == 8 && alignof(float2) == 8, "float2");
static_assert(sizeof(float3) == 12 && alignof(float3) == 4, "float3");
static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4");
static_assert(sizeof(double2) == 16 && alignof(double2) == 16, "double2");
static_assert(sizeof(int4) == 16 && alignof(int4) == 16, "int4");
static_assert(sizeof(uint4) == 16 && sizeof(longlong2) == 16 && sizeof(uchar4) == 4, "vectors");
static_assert(sizeof(uint3) == 12 && sizeof(dim3) == 12, "uint3");

extern "C" __global__ void k_intrinsics(long long *o, double *d, unsigned *cells)
{
    int k = 0;
    o[k++] = __popc(0xf0f0u);                                        // 0
    o[k++] = __popcll(0xffffffffffull);                              // 1
    o[k++] = __clz(1);                                               // 2
    o[k++] = __clz(0);                                               // 3
    o[k++] = __clzll(1ll);                                           // 4
    o[k++] = __ffs(0x18);                                            // 5
    o[k++] = __ffsll(0);                                             // 6
    o[k++] = __brev(1u);                                             // 7
    o[k++] = (long long)(__brevll(1ull) >> 32);                      // 8
    o[k++] = __byte_perm(0x33221100u, 0x77665544u, 0x4321u);         // 9
    o[k++] = __umulhi(0x80000000u, 6u);                              // 10
    o[k++] = __mul24(0x01000003, 5);                                 // 11
    o[k++] = __float_as_int(1.0f);                                   // 12
    o[k++] = __double2hiint(1.0);                                    // 13
    o[k++] = __float2int_rn(2.5f);                                   // 14
    o[k++] = __float2int_rn(__int_as_float(0x7fc00000));             // 15 NaN -> 0
    o[k++] = __double2int_rz(1e300);                                 // 16 saturates
    o[k++] = __float2uint_rd(-3.5f);                                 // 17 saturates at 0
    o[k++] = __funnelshift_l(0x80000000u, 1u, 1u);                   // 18
    o[k++] = __funnelshift_rc(0u, 1u, 40u);                          // 19
    o[k++] = __sad(3, 10, 1u);                                       // 20
    o[k++] = __hadd(2147483647, 1);                                  // 21
    o[k++] = min(3, -4);                                             // 22
    o[k++] = max(3u, 7u);                                            // 23
    o[k++] = (long long)__umul64hi(1ull << 63, 4ull);                // 24
    o[k++] = __double_as_longlong(__longlong_as_double(12345ll));    // 25
    o[k++] = __hiloint2double(__double2hiint(2.0), __double2loint(2.0)) == 2.0; // 26
    o[k++] = __ldg(&o[0]);                                           // 27
    const long long t0 = clock64();
    o[k++] = clock64() >= t0;                                        // 28
    o[k++] = atomicExch(&cells[0], 9u);                              // 29 (cells[0] was 5)
    o[k++] = atomicAnd(&cells[1], 6u);                               // 30 (cells[1] was 3)
    o[k++] = atomicOr(&cells[2], 8u);                                // 31 (cells[2] was 1)
    o[k++] = atomicXor(&cells[3], 3u);                               // 32 (cells[3] was 1)
    o[k++] = atomicSub(&cells[4], 2u);                               // 33 (cells[4] was 10)
    o[k++] = atomicDec(&cells[5], 7u);                               // 34 (cells[5] was 0 -> 7)
    o[k++] = atomicCAS_block(&cells[6], 4u, 11u);                    // 35 (cells[6] was 4)
    o[k++] = atomicMax_system(&cells[7], 2u);                        // 36 (cells[7] was 1)
    const dim3 dflt;
    o[k++] = dflt.x + dflt.y + dflt.z;                               // 37
    o[k++] = make_int2(3, 4).y + make_float4(1, 2, 3, 4.5f).w * 2;   // 38
    __threadfence();
    k = 0;
    d[k++] = rsqrt(4.0);                                             // 0
    d[k++] = rsqrtf(16.0f);                                          // 1
    d[k++] = __saturatef(1.5f) + __saturatef(-2.0f);                 // 2
    d[k++] = __fdividef(1.0f, 4.0f);                                 // 3
    d[k++] = __expf(0.0f) + __logf(1.0f);                            // 4
    d[k++] = normcdf(0.0);                                           // 5
    d[k++] = __fma_rn(2.0, 3.0, 1.0);                                // 6
    d[k++] = rcbrt(8.0);                                             // 7
    d[k++] = norm3d(2.0, 3.0, 6.0);                                  // 8
    d[k++] = sinpi(0.5) + cospi(1.0);                                // 9
    d[k++] = __dadd_rn(0.5, 0.25) + __fmul_rn(2.0f, 2.0f);           // 10
    d[k++] = __ll2double_rn(1ll << 40) / 1099511627776.0;           // 11
}
CUNUMPY_EMU_EXPORT_KERNEL(intrinsics, k_intrinsics)

// Host code in a kernel that changes the rounding mode (not possible in CUDA device code):
// thread 0 of each block records the mode it starts with, then sets FE_UPWARD; in fiber mode
// every thread records the mode after a barrier. Two ints per thread.
#include <cfenv>
extern "C" __global__ void k_rounding(int *seen)
{
    const int t = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (threadIdx.x == 0) {
        seen[2 * t] = std::fegetround();
        std::fesetround(FE_UPWARD);
    }
}
CUNUMPY_EMU_EXPORT_KERNEL(rounding, k_rounding)

extern "C" __global__ void k_rounding_sync(int *seen)
{
    const int t = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (threadIdx.x == 0) {
        seen[2 * t] = std::fegetround();
        std::fesetround(FE_UPWARD);
    }
    __syncthreads();
    seen[2 * t + 1] = std::fegetround();
}
CUNUMPY_EMU_EXPORT_KERNEL(rounding_sync, k_rounding_sync)
