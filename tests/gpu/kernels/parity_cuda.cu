// Kernels of tests/gpu/test_emulator_parity_gpu.py: every shipped header once, run on the GPU
// and under the CPU emulation with the same arguments (headers_cuda.cu adds reduce/scan/atomic).
#include <cunumpy/index.cuh>
#include <cunumpy/array_view.cuh>
#include <cunumpy/atomic.cuh>
#include <cunumpy/random.cuh>
#include <cunumpy/morton.cuh>

// index.cuh: the 1-D, 2-D and 3-D thread macros, the grid-stride loop and the global indices.
extern "C" __global__ void index_macros(long long n, long long* one, long long ni, long long nj, long long* two,
                                        long long nk, long long* three, long long* strided)
{
    const long long gx = CUNUMPY_GLOBAL_INDEX_X(), gy = CUNUMPY_GLOBAL_INDEX_Y(), gz = CUNUMPY_GLOBAL_INDEX_Z();
    if (gy == 0 && gz == 0) {  // one thread per x index walks the loop: each element once
        CUNUMPY_GRID_STRIDE_1D(s, n) { strided[s] += s + 1; }
    }
    if (gy == 0 && gz == 0 && gx < n)
        one[gx] = 3 * gx;
    if (gz == 0 && gx < ni && gy < nj)
        two[gx * nj + gy] = 100 * gx + gy;
    if (gx < ni && gy < nj && gz < nk)
        three[(gx * nj + gy) * nk + gz] = 10000 * gx + 100 * gy + gz;
}

// array_view.cuh: a strided 2-D view (a transposed slice on the host side) and a C-ordered one.
extern "C" __global__ void views(Array2D<double> a, CArray2D<double> c, double* out, long long n0, long long n1)
{
    CUNUMPY_THREAD_2D(i, j, n0, n1);
    out[i * n1 + j] = 2.0 * a(i, j) - c(i, j) + (double)a.size() + 0.5 * (double)a.shape[1];
}

// atomic.cuh: integer-valued doubles and 64-bit integers, so the order of the adds does not matter.
extern "C" __global__ void atomics(const long long* bins, long long n, double* dsum, long long* lsum,
                                   unsigned long long* usum, double* grid2, long long n1)
{
    CUNUMPY_THREAD_1D(i, n);
    cunumpy_atomic_add(&dsum[bins[i]], (double)(i % 7));
    cunumpy_atomic_add(&lsum[bins[i]], (long long)i - 50);
    cunumpy_atomic_add(&usum[bins[i]], (unsigned long long)i);
    cunumpy_atomic_add_2d(grid2, n1, bins[i], i % n1, 1.0);
}

// random.cuh: Philox uniforms (bit-exact by specification) and normals (libm may differ in the last bits).
extern "C" __global__ void philox(unsigned long long seed, unsigned long long stream, long long n, double* u,
                                  double* z, double* u2)
{
    CUNUMPY_THREAD_1D(i, n);
    u[i] = cunumpy_uniform(seed, stream, (unsigned long long)i);
    z[i] = cunumpy_normal(seed, stream, (unsigned long long)i);
    double a, b;
    cunumpy_uniform2(seed, stream + 1, (unsigned long long)i, &a, &b);
    u2[2 * i] = a;
    u2[2 * i + 1] = b;
}

// morton.cuh: 2-D and 3-D keys from coordinates, and encode/compact round trips.
extern "C" __global__ void morton(const double* xyz, long long n, double lower, double scale, int levels,
                                  unsigned long long* k2, unsigned long long* k3, unsigned long long* back)
{
    CUNUMPY_THREAD_1D(i, n);
    const double x = xyz[3 * i], y = xyz[3 * i + 1], z = xyz[3 * i + 2];
    k2[i] = cunumpy_morton_key2(x, y, lower, lower, scale, scale, levels);
    k3[i] = cunumpy_morton_key3(x, y, z, lower, lower, lower, scale, scale, scale, levels);
    back[i] = cunumpy_morton_compact3(cunumpy_morton_encode3(i, 2 * i, 3 * i) >> 1);
}
