// cunumpy/reduce.cuh: warp and block reductions.
//
//   T cunumpy_warp_sum/min/max(T v, unsigned mask = 0xffffffff)
//   T cunumpy_block_sum/min/max(T v)       every thread of the block receives the result
//   void cunumpy_block_sum_to(T* out, T v) one atomic add of the block's sum (zero *out first)
//   int cunumpy_block_thread()             linear thread index in the block, x fastest
//   int cunumpy_block_threads()            threads in the block
// T in int, unsigned, long long, unsigned long long, float, double.
//
// Rules: every thread of the block calls a block function (no early return before it; a thread
// with nothing to contribute passes the identity: 0, or the type's max/min). Any 1-3D block of
// up to 1024 threads works, partial warps included; the functions may be called repeatedly.
// Each type uses 32 static shared values. Warp functions take any nonzero mask, sparse ones
// too; every lane named in the mask must call with the same mask.
#ifndef CUNUMPY_REDUCE_CUH
#define CUNUMPY_REDUCE_CUH

#define CUNUMPY_FULL_MASK 0xffffffffu

namespace cunumpy_detail {

struct op_sum {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b) { return a + b; }
    template <typename T> static __device__ __forceinline__ T identity() { return T(0); }
};

template <typename T> struct limits;
template <> struct limits<int> {
    static __device__ __forceinline__ int lowest() { return -2147483647 - 1; }
    static __device__ __forceinline__ int highest() { return 2147483647; }
};
template <> struct limits<unsigned> {
    static __device__ __forceinline__ unsigned lowest() { return 0u; }
    static __device__ __forceinline__ unsigned highest() { return 0xffffffffu; }
};
template <> struct limits<long long> {
    static __device__ __forceinline__ long long lowest() { return -9223372036854775807LL - 1; }
    static __device__ __forceinline__ long long highest() { return 9223372036854775807LL; }
};
template <> struct limits<unsigned long long> {
    static __device__ __forceinline__ unsigned long long lowest() { return 0ull; }
    static __device__ __forceinline__ unsigned long long highest() { return 0xffffffffffffffffull; }
};
template <> struct limits<float> {
    static __device__ __forceinline__ float lowest() { return -__int_as_float(0x7f800000); }
    static __device__ __forceinline__ float highest() { return __int_as_float(0x7f800000); }
};
template <> struct limits<double> {
    static __device__ __forceinline__ double lowest() { return -__longlong_as_double(0x7ff0000000000000LL); }
    static __device__ __forceinline__ double highest() { return __longlong_as_double(0x7ff0000000000000LL); }
};

struct op_min {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b) { return b < a ? b : a; }
    template <typename T> static __device__ __forceinline__ T identity() { return limits<T>::highest(); }
};

struct op_max {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b) { return a < b ? b : a; }
    template <typename T> static __device__ __forceinline__ T identity() { return limits<T>::lowest(); }
};

__device__ __forceinline__ int lane_id() { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31; }

template <typename Op, typename T> __device__ __forceinline__ T warp_reduce(T v, unsigned mask)
{
    if (mask == CUNUMPY_FULL_MASK) {
        // Butterfly: every lane combines the same pairs, so all lanes get the same bits.
#pragma unroll
        for (int d = 16; d > 0; d >>= 1)
            v = Op::apply(v, __shfl_xor_sync(mask, v, d));
        return v;
    }
    // Sparse or partial mask: gather the named lanes in increasing lane order.
    T r = Op::template identity<T>();
    for (unsigned m = mask; m != 0u; m &= m - 1u) {
        const int src = __ffs((int)m) - 1;
        r = Op::apply(r, __shfl_sync(mask, v, src));
    }
    return r;
}

// Mask of the lanes present in warp `warp` of a block of `n` threads.
__device__ __forceinline__ unsigned present_mask(int warp, int n)
{
    const int left = n - warp * 32;
    return left >= 32 ? CUNUMPY_FULL_MASK : ((1u << left) - 1u);
}

template <typename Op, typename T> __device__ __forceinline__ T block_reduce(T v)
{
    __shared__ T partial[32];
    const int n = (int)(blockDim.x * blockDim.y * blockDim.z);
    const int t = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
    const int warp = t >> 5, lane = t & 31;
    const int n_warps = (n + 31) >> 5;
    const T w = warp_reduce<Op>(v, present_mask(warp, n));
    if (lane == 0)
        partial[warp] = w;
    __syncthreads();
    if (warp == 0) {
        T x = lane < n_warps ? partial[lane] : Op::template identity<T>();
        x = warp_reduce<Op>(x, present_mask(0, n));
        if (lane == 0)
            partial[0] = x; // every lane of warp 0 has read partial[] before the shuffles
    }
    __syncthreads();
    const T r = partial[0];
    __syncthreads(); // the next call may overwrite partial[]
    return r;
}

} // namespace cunumpy_detail

__device__ __forceinline__ int cunumpy_block_thread()
{
    return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

__device__ __forceinline__ int cunumpy_block_threads() { return (int)(blockDim.x * blockDim.y * blockDim.z); }

template <typename T> __device__ __forceinline__ T cunumpy_warp_sum(T v, unsigned mask = CUNUMPY_FULL_MASK)
{
    return cunumpy_detail::warp_reduce<cunumpy_detail::op_sum>(v, mask);
}

template <typename T> __device__ __forceinline__ T cunumpy_warp_min(T v, unsigned mask = CUNUMPY_FULL_MASK)
{
    return cunumpy_detail::warp_reduce<cunumpy_detail::op_min>(v, mask);
}

template <typename T> __device__ __forceinline__ T cunumpy_warp_max(T v, unsigned mask = CUNUMPY_FULL_MASK)
{
    return cunumpy_detail::warp_reduce<cunumpy_detail::op_max>(v, mask);
}

template <typename T> __device__ __forceinline__ T cunumpy_block_sum(T v)
{
    return cunumpy_detail::block_reduce<cunumpy_detail::op_sum>(v);
}

template <typename T> __device__ __forceinline__ T cunumpy_block_min(T v)
{
    return cunumpy_detail::block_reduce<cunumpy_detail::op_min>(v);
}

template <typename T> __device__ __forceinline__ T cunumpy_block_max(T v)
{
    return cunumpy_detail::block_reduce<cunumpy_detail::op_max>(v);
}

// Needs cunumpy_atomic_add for T (atomic.cuh, included here).
#include "atomic.cuh"

template <typename T> __device__ __forceinline__ void cunumpy_block_sum_to(T *out, T v)
{
    const T s = cunumpy_block_sum(v);
    if (cunumpy_block_thread() == 0)
        cunumpy_atomic_add(out, s);
}

#endif // CUNUMPY_REDUCE_CUH
