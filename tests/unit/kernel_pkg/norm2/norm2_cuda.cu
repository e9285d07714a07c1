// CUDA port of norm2: one thread per row of a C-contiguous matrix.
#include <cunumpy/index.cuh>

extern "C" __global__ void norm2(const double* a, double* out, int n_rows, int n_cols)
{
    CUNUMPY_THREAD_1D(i, n_rows);
    double s = 0.0;
    for (int j = 0; j < n_cols; ++j) {
        const double v = a[(long long)i * n_cols + j];
        s += v * v;
    }
    out[i] = sqrt(s);
}
