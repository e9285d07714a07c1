// cunumpy/atomic.cuh: atomic additions for every type a kernel accumulates in.
//
//   T cunumpy_atomic_add(T* p, T v)   returns the old value; T in double, float, int,
//                                     unsigned int, long long, unsigned long long
//   cunumpy_atomic_add_2d(data, n1, i, j, v)          C-contiguous (n0, n1) array
//   cunumpy_atomic_add_3d(data, n1, n2, i, j, k, v)   C-contiguous (n0, n1, n2) array
//
// Signed 64-bit additions wrap modulo 2^64 (two's complement through the unsigned atomic).
// Double additions are emulated with compare-and-swap before sm_60. Use these instead of a
// plain += whenever several threads may hit the same cell.
#ifndef CUNUMPY_ATOMIC_CUH
#define CUNUMPY_ATOMIC_CUH

__device__ __forceinline__ double cunumpy_atomic_add(double *p, double v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 600
    unsigned long long *addr = (unsigned long long *)p;
    unsigned long long old = *addr, assumed;
    do {
        assumed = old;
        old = atomicCAS(addr, assumed, __double_as_longlong(v + __longlong_as_double((long long)assumed)));
    } while (assumed != old); // integer comparison: terminates also when the value is NaN
    return __longlong_as_double((long long)old);
#else
    return atomicAdd(p, v);
#endif
}

__device__ __forceinline__ float cunumpy_atomic_add(float *p, float v) { return atomicAdd(p, v); }

__device__ __forceinline__ int cunumpy_atomic_add(int *p, int v) { return atomicAdd(p, v); }

__device__ __forceinline__ unsigned int cunumpy_atomic_add(unsigned int *p, unsigned int v)
{
    return atomicAdd(p, v);
}

__device__ __forceinline__ unsigned long long cunumpy_atomic_add(unsigned long long *p, unsigned long long v)
{
    return atomicAdd(p, v);
}

__device__ __forceinline__ long long cunumpy_atomic_add(long long *p, long long v)
{
    return (long long)atomicAdd((unsigned long long *)p, (unsigned long long)v);
}

template <typename T>
__device__ __forceinline__ T cunumpy_atomic_add_2d(T *data, long long n1, long long i, long long j, T v)
{
    return cunumpy_atomic_add(data + i * n1 + j, v);
}

template <typename T>
__device__ __forceinline__ T cunumpy_atomic_add_3d(T *data, long long n1, long long n2, long long i, long long j,
                                                   long long k, T v)
{
    return cunumpy_atomic_add(data + (i * n1 + j) * n2 + k, v);
}

#endif // CUNUMPY_ATOMIC_CUH
