// <cuComplex.h> under CPU emulation: CUDA's C complex API on the vector types float2 and
// double2 of the prelude (x = real part, y = imaginary part), with the same functions.
// Division and the modulus scale their operands first, as CUDA's do, so that they neither
// overflow nor underflow for large or tiny parts.
#pragma once
#include <cmath>

typedef float2 cuFloatComplex;
typedef double2 cuDoubleComplex;
typedef cuFloatComplex cuComplex;

namespace cunumpy_emu {
template <typename C, typename T> static __inline__ C complex_divide(C a, C b)
{
    const T scale = T(1) / (std::fabs(b.x) + std::fabs(b.y));
    const T ar = a.x * scale, ai = a.y * scale, br = b.x * scale, bi = b.y * scale;
    const T inverse = T(1) / (br * br + bi * bi);
    C q;
    q.x = (ar * br + ai * bi) * inverse;
    q.y = (ai * br - ar * bi) * inverse;
    return q;
}

template <typename T> static __inline__ T complex_modulus(T re, T im)
{
    re = std::fabs(re);
    im = std::fabs(im);
    const T big = re > im ? re : im, small = re > im ? im : re;
    if (big == T(0) || big > std::numeric_limits<T>::max())
        return big + small; // 0, or inf (also with a NaN part: CUDA gives inf there too)
    const T ratio = small / big;
    return big * std::sqrt(T(1) + ratio * ratio);
}
} // namespace cunumpy_emu

#define CUNUMPY_EMU_CUCOMPLEX(C, T, s)                                                                                 \
    static __inline__ T cuCreal##s(C z) { return z.x; }                                                               \
    static __inline__ T cuCimag##s(C z) { return z.y; }                                                               \
    static __inline__ C cuConj##s(C z)                                                                                 \
    {                                                                                                                  \
        z.y = -z.y;                                                                                                    \
        return z;                                                                                                      \
    }                                                                                                                  \
    static __inline__ C cuCadd##s(C a, C b)                                                                            \
    {                                                                                                                  \
        a.x += b.x;                                                                                                    \
        a.y += b.y;                                                                                                    \
        return a;                                                                                                      \
    }                                                                                                                  \
    static __inline__ C cuCsub##s(C a, C b)                                                                            \
    {                                                                                                                  \
        a.x -= b.x;                                                                                                    \
        a.y -= b.y;                                                                                                    \
        return a;                                                                                                      \
    }                                                                                                                  \
    static __inline__ C cuCmul##s(C a, C b)                                                                            \
    {                                                                                                                  \
        C p;                                                                                                           \
        p.x = a.x * b.x - a.y * b.y;                                                                                   \
        p.y = a.x * b.y + a.y * b.x;                                                                                   \
        return p;                                                                                                      \
    }                                                                                                                  \
    static __inline__ C cuCdiv##s(C a, C b) { return cunumpy_emu::complex_divide<C, T>(a, b); }                       \
    static __inline__ T cuCabs##s(C z) { return cunumpy_emu::complex_modulus<T>(z.x, z.y); }                          \
    /* a * b + c */                                                                                                    \
    static __inline__ C cuCfma##s(C a, C b, C c)                                                                       \
    {                                                                                                                  \
        C r;                                                                                                           \
        r.x = a.x * b.x + c.x - a.y * b.y;                                                                             \
        r.y = a.x * b.y + c.y + a.y * b.x;                                                                             \
        return r;                                                                                                      \
    }
CUNUMPY_EMU_CUCOMPLEX(cuFloatComplex, float, f)
CUNUMPY_EMU_CUCOMPLEX(cuDoubleComplex, double, )
#undef CUNUMPY_EMU_CUCOMPLEX

static __inline__ cuFloatComplex make_cuFloatComplex(float re, float im) { return make_float2(re, im); }
static __inline__ cuDoubleComplex make_cuDoubleComplex(double re, double im) { return make_double2(re, im); }
static __inline__ cuComplex make_cuComplex(float re, float im) { return make_float2(re, im); }
static __inline__ cuDoubleComplex cuComplexFloatToDouble(cuFloatComplex z) { return make_double2(z.x, z.y); }
static __inline__ cuFloatComplex cuComplexDoubleToFloat(cuDoubleComplex z)
{
    return make_float2((float)z.x, (float)z.y);
}
