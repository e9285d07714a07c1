// CUDA port of scale_rows: one thread per (row, column); any strides.
#include <cunumpy/array_view.cuh>
#include <cunumpy/index.cuh>

extern "C" __global__ void scale_rows(Array2D<double> a, const double* factors)
{
    CUNUMPY_THREAD_2D(i, j, a.shape[0], a.shape[1]);
    a(i, j) *= factors[i];
}
