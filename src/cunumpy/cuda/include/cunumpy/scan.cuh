// cunumpy/scan.cuh: warp and block prefix sums (includes reduce.cuh).
//
//   T cunumpy_warp_inclusive_sum(T v, unsigned mask = 0xffffffff)
//   T cunumpy_warp_exclusive_sum(T v, unsigned mask = 0xffffffff)
//   T cunumpy_block_inclusive_sum(T v)
//   T cunumpy_block_exclusive_sum(T v)
// Order: increasing lane id among the lanes of the mask (warp), linear thread index with x
// fastest (block). Exclusive sums start at 0. Same types and participation rules as
// reduce.cuh. Block-local: a global compaction needs a second pass over the block totals.
#ifndef CUNUMPY_SCAN_CUH
#define CUNUMPY_SCAN_CUH

#include "reduce.cuh"

namespace cunumpy_detail {

// (inclusive, exclusive) prefix sums over the lanes of `mask`, in increasing lane order.
template <typename T> __device__ __forceinline__ void warp_scan(T v, unsigned mask, int lane, T &inc, T &exc)
{
    if (mask == CUNUMPY_FULL_MASK) {
        T x = v;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const T y = __shfl_up_sync(mask, x, d);
            if (lane >= d)
                x += y;
        }
        inc = x;
        const T before = __shfl_up_sync(mask, x, 1);
        exc = lane == 0 ? T(0) : before;
        return;
    }
    T a = T(0), b = T(0);
    for (unsigned m = mask; m != 0u; m &= m - 1u) {
        const int src = __ffs((int)m) - 1;
        const T y = __shfl_sync(mask, v, src);
        if (src < lane)
            b += y;
        if (src <= lane)
            a += y;
    }
    inc = a;
    exc = b;
}

template <typename T> __device__ __forceinline__ T block_scan(T v, bool inclusive)
{
    __shared__ T totals[32];
    const int n = (int)(blockDim.x * blockDim.y * blockDim.z);
    const int t = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
    const int warp = t >> 5, lane = t & 31;
    const int n_warps = (n + 31) >> 5;
    const unsigned mask = present_mask(warp, n);
    T inc, exc;
    warp_scan(v, mask, lane, inc, exc);
    const int last_lane = (31 - __clz((int)mask));
    if (lane == last_lane)
        totals[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        const T w = lane < n_warps ? totals[lane] : T(0);
        T winc, wexc;
        warp_scan(w, present_mask(0, n), lane, winc, wexc);
        if (lane < n_warps)
            totals[lane] = wexc; // each lane rewrites only the value it has read
    }
    __syncthreads();
    const T r = (inclusive ? inc : exc) + totals[warp];
    __syncthreads(); // the next call may overwrite totals[]
    return r;
}

} // namespace cunumpy_detail

template <typename T>
__device__ __forceinline__ T cunumpy_warp_inclusive_sum(T v, unsigned mask = CUNUMPY_FULL_MASK)
{
    T inc, exc;
    cunumpy_detail::warp_scan(v, mask, (int)(cunumpy_block_thread() & 31), inc, exc);
    return inc;
}

template <typename T>
__device__ __forceinline__ T cunumpy_warp_exclusive_sum(T v, unsigned mask = CUNUMPY_FULL_MASK)
{
    T inc, exc;
    cunumpy_detail::warp_scan(v, mask, (int)(cunumpy_block_thread() & 31), inc, exc);
    return exc;
}

template <typename T> __device__ __forceinline__ T cunumpy_block_inclusive_sum(T v)
{
    return cunumpy_detail::block_scan(v, true);
}

template <typename T> __device__ __forceinline__ T cunumpy_block_exclusive_sum(T v)
{
    return cunumpy_detail::block_scan(v, false);
}

#endif // CUNUMPY_SCAN_CUH
