// cunumpy/array_view.cuh: array views passed to kernels by value.
//
// ArrayView<T, N> (aliases Array1D<T> ... Array16D<T>): T* data, long long shape[N],
// long long strides[N] in elements; any layout (C, F, stepped slices). a(i, j, ...) returns a
// reference; size() is the element count. sizeof == 8 * (1 + 2N), 8-byte aligned, exactly the
// bytes CudaKernel packs for an ArrayND<T> parameter.
//
// CArrayView<T, N> (aliases CArray1D<T> ... CArray16D<T>): C-contiguous, data + shape only,
// sizeof == 8 * (1 + N); a(i, j) == data[i * shape[1] + j]; converts to ArrayView<T, N>.
//
// With -DCUNUMPY_BOUNDS_CHECK (on in debug mode) every index is checked against the shape; an
// out-of-bounds access prints the index and the shape, then traps.
#ifndef CUNUMPY_ARRAY_VIEW_CUH
#define CUNUMPY_ARRAY_VIEW_CUH

namespace cunumpy_detail {

template <int N>
__device__ __forceinline__ void check_index(const long long (&idx)[N], const long long *shape)
{
#ifdef CUNUMPY_BOUNDS_CHECK
    for (int d = 0; d < N; d++) {
        if (idx[d] < 0 || idx[d] >= shape[d]) {
#ifdef CUNUMPY_EMULATION
            // The CPU emulation puts the message in the exception (and names block and thread).
            static thread_local char message[160]; // not on the stack the trap leaves
            snprintf(message, sizeof message, "index %lld out of bounds for axis %d with size %lld (array view "
                     "bounds check)", idx[d], d, shape[d]);
            cunumpy_emu_trap(message);
#else
            printf("cunumpy: index %lld out of bounds for axis %d with size %lld (block %d,%d,%d thread "
                   "%d,%d,%d)\n",
                   idx[d], d, shape[d], (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x,
                   (int)threadIdx.y, (int)threadIdx.z);
            __trap();
#endif
        }
    }
#endif
}

} // namespace cunumpy_detail

template <typename T, int N> struct ArrayView {
    static_assert(N >= 1 && N <= 16, "array views have 1 to 16 dimensions");
    T *data;
    long long shape[N];
    long long strides[N];

    template <typename... I> __device__ __forceinline__ T &operator()(I... i) const
    {
        static_assert(sizeof...(I) == N, "an ArrayND view takes exactly N indices");
        const long long idx[N] = {(long long)i...};
        cunumpy_detail::check_index<N>(idx, shape);
        long long off = 0;
#pragma unroll
        for (int d = 0; d < N; d++)
            off += idx[d] * strides[d];
        return data[off];
    }

    __device__ __forceinline__ long long size() const
    {
        long long n = 1;
#pragma unroll
        for (int d = 0; d < N; d++)
            n *= shape[d];
        return n;
    }
};

template <typename T, int N> struct CArrayView {
    static_assert(N >= 1 && N <= 16, "array views have 1 to 16 dimensions");
    T *data;
    long long shape[N];

    template <typename... I> __device__ __forceinline__ T &operator()(I... i) const
    {
        static_assert(sizeof...(I) == N, "a CArrayND view takes exactly N indices");
        const long long idx[N] = {(long long)i...};
        cunumpy_detail::check_index<N>(idx, shape);
        long long off = 0;
#pragma unroll
        for (int d = 0; d < N; d++)
            off = off * shape[d] + idx[d];
        return data[off];
    }

    __device__ __forceinline__ long long size() const
    {
        long long n = 1;
#pragma unroll
        for (int d = 0; d < N; d++)
            n *= shape[d];
        return n;
    }

    __host__ __device__ operator ArrayView<T, N>() const
    {
        ArrayView<T, N> v;
        v.data = data;
        long long step = 1;
        for (int d = N - 1; d >= 0; d--) {
            v.shape[d] = shape[d];
            v.strides[d] = step;
            step *= shape[d];
        }
        return v;
    }
};

#define CUNUMPY_VIEW_ALIASES(N)                                                                    \
    template <typename T> using Array##N##D = ArrayView<T, N>;                                     \
    template <typename T> using CArray##N##D = CArrayView<T, N>;
CUNUMPY_VIEW_ALIASES(1)
CUNUMPY_VIEW_ALIASES(2)
CUNUMPY_VIEW_ALIASES(3)
CUNUMPY_VIEW_ALIASES(4)
CUNUMPY_VIEW_ALIASES(5)
CUNUMPY_VIEW_ALIASES(6)
CUNUMPY_VIEW_ALIASES(7)
CUNUMPY_VIEW_ALIASES(8)
CUNUMPY_VIEW_ALIASES(9)
CUNUMPY_VIEW_ALIASES(10)
CUNUMPY_VIEW_ALIASES(11)
CUNUMPY_VIEW_ALIASES(12)
CUNUMPY_VIEW_ALIASES(13)
CUNUMPY_VIEW_ALIASES(14)
CUNUMPY_VIEW_ALIASES(15)
CUNUMPY_VIEW_ALIASES(16)
#undef CUNUMPY_VIEW_ALIASES

static_assert(sizeof(ArrayView<double, 2>) == 8 * (1 + 2 * 2), "ArrayView layout");
static_assert(sizeof(CArrayView<float, 3>) == 8 * (1 + 3), "CArrayView layout");
static_assert(alignof(ArrayView<char, 1>) == 8, "ArrayView alignment");

#endif // CUNUMPY_ARRAY_VIEW_CUH
