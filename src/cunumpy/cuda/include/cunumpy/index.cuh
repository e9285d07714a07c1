// cunumpy/index.cuh: global thread indices and the guards every elementwise kernel writes.
//
//   CUNUMPY_THREAD_1D(i, n)              long long i; returns when i >= n
//   CUNUMPY_THREAD_2D(i, j, ni, nj)      x -> i, y -> j
//   CUNUMPY_THREAD_3D(i, j, k, ni, nj, nk)
//   CUNUMPY_GRID_STRIDE_1D(i, n) { ... } grid-stride loop over [0, n)
//   CUNUMPY_GLOBAL_INDEX_X() / _Y() / _Z()  global index as long long
//
// The THREAD macros return early: never put them before a block collective
// (__syncthreads, cunumpy_block_sum, ...), where the returned threads would be missing.
#ifndef CUNUMPY_INDEX_CUH
#define CUNUMPY_INDEX_CUH

// 64-bit arithmetic: blockIdx.x * blockDim.x overflows 32 bits beyond 2^32 threads.
#define CUNUMPY_GLOBAL_INDEX_X() ((long long)blockIdx.x * (long long)blockDim.x + (long long)threadIdx.x)
#define CUNUMPY_GLOBAL_INDEX_Y() ((long long)blockIdx.y * (long long)blockDim.y + (long long)threadIdx.y)
#define CUNUMPY_GLOBAL_INDEX_Z() ((long long)blockIdx.z * (long long)blockDim.z + (long long)threadIdx.z)

#define CUNUMPY_THREAD_1D(i, n)                                                                    \
    const long long i = CUNUMPY_GLOBAL_INDEX_X();                                                  \
    if (i >= (long long)(n))                                                                       \
    return

#define CUNUMPY_THREAD_2D(i, j, ni, nj)                                                            \
    const long long i = CUNUMPY_GLOBAL_INDEX_X();                                                  \
    const long long j = CUNUMPY_GLOBAL_INDEX_Y();                                                  \
    if (i >= (long long)(ni) || j >= (long long)(nj))                                              \
    return

#define CUNUMPY_THREAD_3D(i, j, k, ni, nj, nk)                                                     \
    const long long i = CUNUMPY_GLOBAL_INDEX_X();                                                  \
    const long long j = CUNUMPY_GLOBAL_INDEX_Y();                                                  \
    const long long k = CUNUMPY_GLOBAL_INDEX_Z();                                                  \
    if (i >= (long long)(ni) || j >= (long long)(nj) || k >= (long long)(nk))                      \
    return

#define CUNUMPY_GRID_STRIDE_1D(i, n)                                                               \
    for (long long i = CUNUMPY_GLOBAL_INDEX_X(); i < (long long)(n);                               \
         i += (long long)blockDim.x * (long long)gridDim.x)

#endif // CUNUMPY_INDEX_CUH
