// Kernels of tests/gpu/test_cuda_kernel_gpu.py: pointers, views, every scalar type, structs.
#include <cunumpy/index.cuh>
#include <cunumpy/array_view.cuh>
#ifdef __CUDACC_RTC__
#include <cupy/complex.cuh> // NVRTC through CuPy
using thrust::complex;
#else
#include <cuda/std/complex> // nvcc (the compile checks)
using cuda::std::complex;
#endif

extern "C" __global__ void scale(const double* __restrict__ x, double* y, double a, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    y[i] = a * x[i];
}

// v(i, j) = 10 i + j through any strides.
extern "C" __global__ void fill_view(Array2D<double> v)
{
    CUNUMPY_THREAD_2D(i, j, v.shape[0], v.shape[1]);
    v(i, j) = 10.0 * (double)i + (double)j;
}

extern "C" __global__ void fill_cview(CArray3D<float> c)
{
    CUNUMPY_GRID_STRIDE_1D(t, c.size())
    {
        const long long k = t % c.shape[2];
        const long long j = (t / c.shape[2]) % c.shape[1];
        const long long i = t / (c.shape[1] * c.shape[2]);
        c(i, j, k) = (float)t;
    }
}

// Writes every scalar argument into out[0..14] (complex as real and imaginary parts).
extern "C" __global__ void scalars(double* out, bool b, signed char i8, unsigned char u8, short i16,
                                   unsigned short u16, int i32, unsigned u32, long long i64,
                                   unsigned long long u64, float f32, double f64,
                                   complex<float> c64, complex<double> c128)
{
    if (threadIdx.x + blockIdx.x != 0)
        return;
    out[0] = b ? 1.0 : 0.0;
    out[1] = i8;
    out[2] = u8;
    out[3] = i16;
    out[4] = u16;
    out[5] = i32;
    out[6] = u32;
    out[7] = (double)i64;
    out[8] = (double)u64;
    out[9] = f32;
    out[10] = f64;
    out[11] = c64.real();
    out[12] = c64.imag();
    out[13] = c128.real();
    out[14] = c128.imag();
}

struct Particles {
    double* x;
    int n;
    double shift;
};

extern "C" __global__ void shift(Particles p)
{
    CUNUMPY_THREAD_1D(i, p.n);
    p.x[i] += p.shift;
}

template <typename T, int N> __global__ void add_one(ArrayView<T, N> v, long long total)
{
    CUNUMPY_GRID_STRIDE_1D(t, total)
    {
        // N-D index of t in C order
        long long rest = t, off = 0;
        for (int d = N - 1; d >= 0; d--) {
            off += (rest % v.shape[d]) * v.strides[d];
            rest /= v.shape[d];
        }
        v.data[off] += T(1);
    }
}

extern "C" __global__ void out_of_bounds(Array1D<double> v)
{
    v(v.shape[0]) = 1.0; // trips the bounds check in debug mode
}

extern "C" __global__ void make_nan(double* x, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    if (i == n - 1)
        x[i] = 0.0 / 0.0;
}

extern "C" __global__ void big_shared(double* out, int n)
{
    extern __shared__ double buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        buf[i] = i;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += buf[i];
        out[0] = s;
    }
}

extern "C" __global__ void empty29(double* p0, double* p1, double* p2, double* p3, double* p4, double* p5,
                                   double* p6, double* p7, double* p8, double* p9, double* p10, double* p11,
                                   double* p12, double* p13, double* p14, double* p15, double* p16,
                                   double* p17, double* p18, double* p19, Array2D<double> v,
                                   Array3D<float> w, int a, long long b, float c, double d, unsigned e,
                                   bool f, size_t g)
{
}

extern "C" __global__ void __launch_bounds__(64) bounded(double* x, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    x[i] = 1.0;
}
