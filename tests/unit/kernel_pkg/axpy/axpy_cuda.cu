// CUDA port of axpy: the same name and parameter order as axpy_kernels.axpy.
#include <cunumpy/index.cuh>

extern "C" __global__ void axpy(double alpha, const double* x, double* y, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    y[i] += alpha * x[i];
}
