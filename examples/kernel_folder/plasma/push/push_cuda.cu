// CUDA port of push_kernels.push: the same name and the same parameters, in order.
#include <cunumpy/index.cuh>

extern "C" __global__ void push(double* x, const double* v, double dt, double length, long long n)
{
    CUNUMPY_THREAD_1D(i, n);  // one thread per particle; threads past n return
    double xi = x[i] + v[i] * dt;
    if (xi >= length) xi -= length;
    if (xi < 0.0) xi += length;
    x[i] = xi;
}
