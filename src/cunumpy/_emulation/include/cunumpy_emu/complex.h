// cunumpy_emu/complex.h: thrust::complex<T> for emulated kernels, behind <cupy/complex.cuh>,
// <thrust/complex.h> and <cuda/std/complex>.
//
// Built on std::complex<T> (same value layout: real part, then imaginary part) with the
// alignment of the CUDA type, 2 * sizeof(T): a complex<double> struct field then sits at the
// offset CudaStruct computes and the GPU uses. The arithmetic is the standard library's; the
// overloads here keep results thrust::complex and add thrust's mixed-type operands.
#ifndef CUNUMPY_EMU_COMPLEX_H
#define CUNUMPY_EMU_COMPLEX_H

#include <cmath>
#include <complex>
#include <type_traits>

namespace thrust {

template <typename T> struct alignas(2 * sizeof(T)) complex : public std::complex<T> {
    typedef T value_type;

    complex(const T &re = T(), const T &im = T()) : std::complex<T>(re, im) {}
    complex(const std::complex<T> &z) : std::complex<T>(z) {}
    template <typename U> complex(const complex<U> &z) : std::complex<T>(T(z.real()), T(z.imag())) {}
    template <typename U> complex(const std::complex<U> &z) : std::complex<T>(T(z.real()), T(z.imag())) {}

    complex &operator=(const T &re)
    {
        std::complex<T>::operator=(re);
        return *this;
    }
};

namespace cunumpy_emu_detail {
template <typename T, typename U> using common = typename std::common_type<T, U>::type;
template <typename T> using arithmetic = typename std::enable_if<std::is_arithmetic<T>::value, int>::type;
template <typename R, typename T> inline std::complex<R> widen(const std::complex<T> &z)
{
    return std::complex<R>(R(z.real()), R(z.imag()));
}
} // namespace cunumpy_emu_detail

// Every operator returns thrust::complex (so results keep thrust's overloads) and, as in
// thrust, operands of different types (complex<float> * double, complex<double> + 1) are
// promoted to their common type; std::complex has neither. These overloads match exactly,
// so they win over std::complex's templates, which would need a derived-to-base conversion.
#define CUNUMPY_EMU_COMPLEX_OPERATOR(op)                                                                               \
    template <typename T, typename U>                                                                                  \
    inline complex<cunumpy_emu_detail::common<T, U>> operator op(const complex<T> &a, const complex<U> &b)            \
    {                                                                                                                  \
        typedef cunumpy_emu_detail::common<T, U> R;                                                                  \
        return cunumpy_emu_detail::widen<R>(a) op cunumpy_emu_detail::widen<R>(b);                                   \
    }                                                                                                                  \
    template <typename T, typename U, cunumpy_emu_detail::arithmetic<U> = 0>                                          \
    inline complex<cunumpy_emu_detail::common<T, U>> operator op(const complex<T> &a, const U &b)                     \
    {                                                                                                                  \
        typedef cunumpy_emu_detail::common<T, U> R;                                                                  \
        return cunumpy_emu_detail::widen<R>(a) op R(b);                                                              \
    }                                                                                                                  \
    template <typename T, typename U, cunumpy_emu_detail::arithmetic<U> = 0>                                          \
    inline complex<cunumpy_emu_detail::common<T, U>> operator op(const U &a, const complex<T> &b)                     \
    {                                                                                                                  \
        typedef cunumpy_emu_detail::common<T, U> R;                                                                  \
        return R(a) op cunumpy_emu_detail::widen<R>(b);                                                              \
    }
CUNUMPY_EMU_COMPLEX_OPERATOR(+)
CUNUMPY_EMU_COMPLEX_OPERATOR(-)
CUNUMPY_EMU_COMPLEX_OPERATOR(*)
CUNUMPY_EMU_COMPLEX_OPERATOR(/)
#undef CUNUMPY_EMU_COMPLEX_OPERATOR

template <typename T> inline complex<T> operator-(const complex<T> &z) { return complex<T>(-z.real(), -z.imag()); }
template <typename T> inline complex<T> operator+(const complex<T> &z) { return z; }

template <typename T, typename U> inline bool operator==(const complex<T> &a, const complex<U> &b)
{
    return a.real() == b.real() && a.imag() == b.imag();
}
template <typename T, typename U, cunumpy_emu_detail::arithmetic<U> = 0>
inline bool operator==(const complex<T> &a, const U &b)
{
    return a.real() == b && a.imag() == 0;
}
template <typename T, typename U, cunumpy_emu_detail::arithmetic<U> = 0>
inline bool operator==(const U &a, const complex<T> &b)
{
    return b == a;
}
template <typename T, typename U> inline bool operator!=(const complex<T> &a, const complex<U> &b) { return !(a == b); }
template <typename T, typename U, cunumpy_emu_detail::arithmetic<U> = 0>
inline bool operator!=(const complex<T> &a, const U &b)
{
    return !(a == b);
}
template <typename T, typename U, cunumpy_emu_detail::arithmetic<U> = 0>
inline bool operator!=(const U &a, const complex<T> &b)
{
    return !(b == a);
}

// Functions of thrust (found unqualified by argument-dependent lookup, or as thrust::f): the
// standard library's, returning thrust::complex.
template <typename T> inline T abs(const complex<T> &z) { return std::abs(static_cast<const std::complex<T> &>(z)); }
template <typename T> inline T arg(const complex<T> &z) { return std::arg(static_cast<const std::complex<T> &>(z)); }
template <typename T> inline T norm(const complex<T> &z) { return std::norm(static_cast<const std::complex<T> &>(z)); }
template <typename T> inline T real(const complex<T> &z) { return z.real(); }
template <typename T> inline T imag(const complex<T> &z) { return z.imag(); }
template <typename T> inline complex<T> polar(const T &rho, const T &theta = T()) { return std::polar(rho, theta); }

#define CUNUMPY_EMU_COMPLEX_FUNCTION(f)                                                                                \
    template <typename T> inline complex<T> f(const complex<T> &z)                                                    \
    {                                                                                                                  \
        return std::f(static_cast<const std::complex<T> &>(z));                                                        \
    }
CUNUMPY_EMU_COMPLEX_FUNCTION(conj)
CUNUMPY_EMU_COMPLEX_FUNCTION(proj)
CUNUMPY_EMU_COMPLEX_FUNCTION(exp)
CUNUMPY_EMU_COMPLEX_FUNCTION(log)
CUNUMPY_EMU_COMPLEX_FUNCTION(log10)
CUNUMPY_EMU_COMPLEX_FUNCTION(sqrt)
CUNUMPY_EMU_COMPLEX_FUNCTION(sin)
CUNUMPY_EMU_COMPLEX_FUNCTION(cos)
CUNUMPY_EMU_COMPLEX_FUNCTION(tan)
CUNUMPY_EMU_COMPLEX_FUNCTION(sinh)
CUNUMPY_EMU_COMPLEX_FUNCTION(cosh)
CUNUMPY_EMU_COMPLEX_FUNCTION(tanh)
CUNUMPY_EMU_COMPLEX_FUNCTION(asin)
CUNUMPY_EMU_COMPLEX_FUNCTION(acos)
CUNUMPY_EMU_COMPLEX_FUNCTION(atan)
CUNUMPY_EMU_COMPLEX_FUNCTION(asinh)
CUNUMPY_EMU_COMPLEX_FUNCTION(acosh)
CUNUMPY_EMU_COMPLEX_FUNCTION(atanh)
#undef CUNUMPY_EMU_COMPLEX_FUNCTION

template <typename T, typename U> inline complex<cunumpy_emu_detail::common<T, U>> pow(const complex<T> &a, const complex<U> &b)
{
    typedef cunumpy_emu_detail::common<T, U> R;
    return std::pow(cunumpy_emu_detail::widen<R>(a), cunumpy_emu_detail::widen<R>(b));
}
template <typename T, typename U, cunumpy_emu_detail::arithmetic<U> = 0>
inline complex<cunumpy_emu_detail::common<T, U>> pow(const complex<T> &a, const U &b)
{
    typedef cunumpy_emu_detail::common<T, U> R;
    return std::pow(cunumpy_emu_detail::widen<R>(a), R(b));
}
template <typename T, typename U, cunumpy_emu_detail::arithmetic<U> = 0>
inline complex<cunumpy_emu_detail::common<T, U>> pow(const U &a, const complex<T> &b)
{
    typedef cunumpy_emu_detail::common<T, U> R;
    return std::pow(R(a), cunumpy_emu_detail::widen<R>(b));
}

} // namespace thrust

// Component-wise atomic addition, as CuPy's complex header provides it.
static __inline__ thrust::complex<float> atomicAdd(thrust::complex<float> *p, thrust::complex<float> v)
{
    float *parts = reinterpret_cast<float *>(p);
    const float re = atomicAdd(parts, v.real());
    return thrust::complex<float>(re, atomicAdd(parts + 1, v.imag()));
}
static __inline__ thrust::complex<double> atomicAdd(thrust::complex<double> *p, thrust::complex<double> v)
{
    double *parts = reinterpret_cast<double *>(p);
    const double re = atomicAdd(parts, v.real());
    return thrust::complex<double>(re, atomicAdd(parts + 1, v.imag()));
}

#endif
