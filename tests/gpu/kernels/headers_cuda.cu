// Kernels of tests/gpu/test_headers_gpu.py: reduce.cuh, scan.cuh and atomic.cuh against NumPy.
#include <cunumpy/index.cuh>
#include <cunumpy/atomic.cuh>
#include <cunumpy/reduce.cuh>
#include <cunumpy/scan.cuh>

// One block per row of `x` (n_blocks, per_block): sums, minima, maxima and both scans.
template <typename T>
__global__ void block_ops(const T* x, long long per_block, T* sums, T* mins, T* maxs, T* inc, T* exc, T* total)
{
    const int t = cunumpy_block_thread();
    const long long row = blockIdx.x;
    const bool active = t < per_block;
    const T v = active ? x[row * per_block + t] : T(0);
    const T s = cunumpy_block_sum(v);
    const T lo = cunumpy_block_min(active ? v : cunumpy_detail::limits<T>::highest());
    const T hi = cunumpy_block_max(active ? v : cunumpy_detail::limits<T>::lowest());
    const T a = cunumpy_block_inclusive_sum(v);
    const T b = cunumpy_block_exclusive_sum(v);
    cunumpy_block_sum_to(total, v);
    if (active) {
        inc[row * per_block + t] = a;
        exc[row * per_block + t] = b;
    }
    if (t == 0) {
        sums[row] = s;
        mins[row] = lo;
        maxs[row] = hi;
    }
}

template __global__ void block_ops<int>(const int*, long long, int*, int*, int*, int*, int*, int*);
template __global__ void block_ops<unsigned>(const unsigned*, long long, unsigned*, unsigned*, unsigned*,
                                             unsigned*, unsigned*, unsigned*);
template __global__ void block_ops<long long>(const long long*, long long, long long*, long long*, long long*,
                                              long long*, long long*, long long*);
template __global__ void block_ops<unsigned long long>(const unsigned long long*, long long,
                                                       unsigned long long*, unsigned long long*,
                                                       unsigned long long*, unsigned long long*,
                                                       unsigned long long*, unsigned long long*);
template __global__ void block_ops<float>(const float*, long long, float*, float*, float*, float*, float*,
                                          float*);
template __global__ void block_ops<double>(const double*, long long, double*, double*, double*, double*,
                                           double*, double*);

// Warp operations over the lanes of `mask` (one warp): out[lane] = (sum, min, max, inc, exc).
extern "C" __global__ void warp_ops(const long long* x, unsigned mask, long long* out)
{
    const int lane = threadIdx.x & 31;
    if (!((mask >> lane) & 1u))
        return;
    const long long v = x[lane];
    out[5 * lane + 0] = cunumpy_warp_sum(v, mask);
    out[5 * lane + 1] = cunumpy_warp_min(v, mask);
    out[5 * lane + 2] = cunumpy_warp_max(v, mask);
    out[5 * lane + 3] = cunumpy_warp_inclusive_sum(v, mask);
    out[5 * lane + 4] = cunumpy_warp_exclusive_sum(v, mask);
}

template <typename T> __global__ void histogram(const long long* bins, long long n, T* counts, T step)
{
    CUNUMPY_THREAD_1D(i, n);
    cunumpy_atomic_add(&counts[bins[i]], step);
}

template __global__ void histogram<int>(const long long*, long long, int*, int);
template __global__ void histogram<unsigned>(const long long*, long long, unsigned*, unsigned);
template __global__ void histogram<long long>(const long long*, long long, long long*, long long);
template __global__ void histogram<unsigned long long>(const long long*, long long, unsigned long long*,
                                                       unsigned long long);
template __global__ void histogram<float>(const long long*, long long, float*, float);
template __global__ void histogram<double>(const long long*, long long, double*, double);

extern "C" __global__ void grid_2d_3d(double* a2, long long n0, long long n1, double* a3, long long m1,
                                      long long m2, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    cunumpy_atomic_add_2d(a2, n1, i % n0, i % n1, 1.0);
    cunumpy_atomic_add_3d(a3, m1, m2, 0, i % m1, i % m2, 1.0);
}
