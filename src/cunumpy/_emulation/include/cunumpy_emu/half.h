// cunumpy_emu/half.h: CUDA's half precision (<cuda_fp16.h>) for emulated kernels.
//
// __half holds the IEEE binary16 bits (2 bytes, aligned to 2, as on the GPU; __half2 is two
// of them aligned to 4). Conversions to half round to nearest even through the compiler's
// _Float16 where it has one (GCC 12 on x86-64), else in software; the directed roundings
// (_rz, _rd, _ru) are always done in software. Arithmetic converts the operands to float,
// operates and rounds once to half: for +, -, *, / and sqrt this is the correctly rounded
// half result (float carries more than twice half's precision, so the double rounding is
// harmless), as the GPU's half instructions give and as NumPy's float16 computes. The math
// functions (hexp, hsin, ...) round the float function's result.
// Define CUNUMPY_EMU_SOFT_HALF to use the software conversions everywhere (tests do).
#ifndef CUNUMPY_EMU_HALF_H
#define CUNUMPY_EMU_HALF_H

#include <cmath>
#include <cstdint>
#include <cstring>

#include "prelude.h" // cunumpy_emu::to_int

#if defined(__FLT16_MANT_DIG__) && !defined(CUNUMPY_EMU_SOFT_HALF)
#define CUNUMPY_EMU_HAVE_FLOAT16 1
#endif

namespace cunumpy_emu {
namespace half_detail {

enum rounding { to_nearest_even, toward_zero, downward, upward };

// Binary16 bits of v rounded in mode r. The magnitude is scaled so that its last half-
// precision digit has weight 1 (exact: a power-of-two scale), rounded to an integer there and
// scaled back; the integer is the significand, the scale the exponent.
static __inline__ std::uint16_t bits_of(double v, rounding r)
{
    const std::uint16_t sign = std::signbit(v) ? 0x8000u : 0u;
    if (std::isnan(v))
        return (std::uint16_t)(sign | 0x7e00u);
    const double a = std::fabs(v);
    if (std::isinf(a))
        return (std::uint16_t)(sign | 0x7c00u);
    int e = 0;
    std::frexp(a, &e); // a = m * 2^e with m in [0.5, 1), so the leading digit has weight 2^(e - 1)
    int digit = e - 1 - 10;
    if (digit < -24)
        digit = -24; // subnormal range: the digit weight stays 2^-24
    const double q = std::ldexp(a, -digit);
    double n;
    const bool negative = sign != 0;
    switch (r) {
    case toward_zero:
        n = std::trunc(q);
        break;
    case downward:
        n = negative ? std::ceil(q) : std::floor(q);
        break;
    case upward:
        n = negative ? std::floor(q) : std::ceil(q);
        break;
    default: {
        n = std::floor(q);
        const double rest = q - n;
        if (rest > 0.5 || (rest == 0.5 && std::fmod(n, 2.0) != 0.0))
            n += 1.0;
    }
    }
    const double value = std::ldexp(n, digit);
    if (value == 0.0)
        return sign;
    if (value > 65504.0) { // past the largest finite half: inf, or 65504 when rounding toward it
        const bool to_inf = r == to_nearest_even || (r == upward && !negative) || (r == downward && negative);
        return (std::uint16_t)(sign | (to_inf ? 0x7c00u : 0x7bffu));
    }
    if (digit == -24)
        return (std::uint16_t)(sign | (std::uint16_t)n); // subnormal (n == 1024 is the smallest normal)
    int e2 = 0;
    const double m = std::frexp(value, &e2);
    const unsigned biased = (unsigned)(e2 - 1 + 15);
    const unsigned fraction = (unsigned)std::ldexp(m, 11) - 1024u;
    return (std::uint16_t)(sign | (biased << 10) | fraction);
}

static __inline__ std::uint16_t bits_of_float(float v)
{
#ifdef CUNUMPY_EMU_HAVE_FLOAT16
    const _Float16 h = (_Float16)v;
    std::uint16_t b;
    std::memcpy(&b, &h, 2);
    return b;
#else
    return bits_of(v, to_nearest_even);
#endif
}

static __inline__ float float_of(std::uint16_t b)
{
#ifdef CUNUMPY_EMU_HAVE_FLOAT16
    _Float16 h;
    std::memcpy(&h, &b, 2);
    return (float)h;
#else
    const float sign = (b & 0x8000u) ? -1.0f : 1.0f;
    const unsigned exponent = (b >> 10) & 0x1fu, fraction = b & 0x3ffu;
    if (exponent == 0x1fu)
        return fraction ? std::nanf("") : sign * INFINITY;
    if (exponent == 0)
        return sign * std::ldexp((float)fraction, -24);
    return sign * std::ldexp((float)(fraction + 1024u), (int)exponent - 25);
#endif
}

} // namespace half_detail
} // namespace cunumpy_emu

struct __half_raw {
    unsigned short x;
};
struct __half2_raw {
    unsigned short x, y;
};

struct __attribute__((aligned(2))) __half {
    unsigned short __x;

    __half() = default;
    __half(const __half_raw &r) : __x(r.x) {}
    __half(float v) : __x(cunumpy_emu::half_detail::bits_of_float(v)) {}
    __half(double v) : __x(cunumpy_emu::half_detail::bits_of(v, cunumpy_emu::half_detail::to_nearest_even)) {}
    __half(int v) : __half((double)v) {}
    __half(unsigned int v) : __half((double)v) {}
    __half(short v) : __half((double)v) {}
    __half(unsigned short v) : __half((double)v) {}
    __half(long long v) : __half((double)v) {}
    __half(unsigned long long v) : __half((double)v) {}
    operator __half_raw() const { return __half_raw{__x}; }
    operator float() const { return cunumpy_emu::half_detail::float_of(__x); }

    __half &operator+=(const __half &o);
    __half &operator-=(const __half &o);
    __half &operator*=(const __half &o);
    __half &operator/=(const __half &o);
};

struct __attribute__((aligned(4))) __half2 {
    __half x, y;

    __half2() = default;
    __half2(const __half &a, const __half &b) : x(a), y(b) {}
    __half2(const __half2_raw &r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
    operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};

typedef __half half;
typedef __half2 half2;
typedef __half __nv_half;
typedef __half2 __nv_half2;

// ------------------------------------------------------------------ conversions and bits
static __inline__ __half cunumpy_emu_half_from_bits(unsigned short b) { return __half(__half_raw{b}); }
static __inline__ __half __float2half(float v) { return __half(v); }
static __inline__ __half __float2half_rn(float v) { return __half(v); }
#define CUNUMPY_EMU_DIRECTED(name, T, mode)                                                                            \
    static __inline__ __half name(T v)                                                                                 \
    {                                                                                                                  \
        return cunumpy_emu_half_from_bits(cunumpy_emu::half_detail::bits_of((double)v, cunumpy_emu::half_detail::mode)); \
    }
CUNUMPY_EMU_DIRECTED(__float2half_rz, float, toward_zero)
CUNUMPY_EMU_DIRECTED(__float2half_rd, float, downward)
CUNUMPY_EMU_DIRECTED(__float2half_ru, float, upward)
CUNUMPY_EMU_DIRECTED(__double2half, double, to_nearest_even)
CUNUMPY_EMU_DIRECTED(__int2half_rn, int, to_nearest_even)
CUNUMPY_EMU_DIRECTED(__int2half_rz, int, toward_zero)
CUNUMPY_EMU_DIRECTED(__uint2half_rn, unsigned int, to_nearest_even)
CUNUMPY_EMU_DIRECTED(__short2half_rn, short, to_nearest_even)
CUNUMPY_EMU_DIRECTED(__ushort2half_rn, unsigned short, to_nearest_even)
CUNUMPY_EMU_DIRECTED(__ll2half_rn, long long, to_nearest_even)
CUNUMPY_EMU_DIRECTED(__ull2half_rn, unsigned long long, to_nearest_even)
#undef CUNUMPY_EMU_DIRECTED

static __inline__ float __half2float(__half h) { return (float)h; }
static __inline__ float __low2float(__half2 h) { return (float)h.x; }
static __inline__ float __high2float(__half2 h) { return (float)h.y; }

// Half to integer through float with the prelude's float-to-integer conversion: NaN gives 0
// and out-of-range values saturate, as on the GPU.
#define CUNUMPY_EMU_HALF_TO_INT(name, I)                                                                              \
    static __inline__ I name##_rn(__half h) { return cunumpy_emu::to_int<I>(std::nearbyint((float)h)); }              \
    static __inline__ I name##_rz(__half h) { return cunumpy_emu::to_int<I>(std::trunc((float)h)); }                  \
    static __inline__ I name##_rd(__half h) { return cunumpy_emu::to_int<I>(std::floor((float)h)); }                  \
    static __inline__ I name##_ru(__half h) { return cunumpy_emu::to_int<I>(std::ceil((float)h)); }
CUNUMPY_EMU_HALF_TO_INT(__half2int, int)
CUNUMPY_EMU_HALF_TO_INT(__half2uint, unsigned int)
CUNUMPY_EMU_HALF_TO_INT(__half2short, short)
CUNUMPY_EMU_HALF_TO_INT(__half2ushort, unsigned short)
CUNUMPY_EMU_HALF_TO_INT(__half2ll, long long)
CUNUMPY_EMU_HALF_TO_INT(__half2ull, unsigned long long)
#undef CUNUMPY_EMU_HALF_TO_INT

static __inline__ unsigned short __half_as_ushort(__half h) { return h.__x; }
static __inline__ short __half_as_short(__half h) { return (short)h.__x; }
static __inline__ __half __ushort_as_half(unsigned short b) { return cunumpy_emu_half_from_bits(b); }
static __inline__ __half __short_as_half(short b) { return cunumpy_emu_half_from_bits((unsigned short)b); }

#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_NEG_ZERO_FP16 __ushort_as_half((unsigned short)0x8000U)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)

// ------------------------------------------------------------------ arithmetic
static __inline__ __half __hadd(__half a, __half b) { return __half((float)a + (float)b); }
static __inline__ __half __hsub(__half a, __half b) { return __half((float)a - (float)b); }
static __inline__ __half __hmul(__half a, __half b) { return __half((float)a * (float)b); }
static __inline__ __half __hdiv(__half a, __half b) { return __half((float)a / (float)b); }
// a * b is exact in double and the sum is rounded once there before the rounding to half.
static __inline__ __half __hfma(__half a, __half b, __half c)
{
    return __half((double)(float)a * (double)(float)b + (double)(float)c);
}
static __inline__ __half __hneg(__half a) { return cunumpy_emu_half_from_bits((unsigned short)(a.__x ^ 0x8000u)); }
static __inline__ __half __habs(__half a) { return cunumpy_emu_half_from_bits((unsigned short)(a.__x & 0x7fffu)); }
// _sat: the result clamped to [0, 1] (NaN becomes 0).
static __inline__ __half cunumpy_emu_half_saturate(float v) { return __half(v > 0.0f ? (v < 1.0f ? v : 1.0f) : 0.0f); }
static __inline__ __half __hadd_sat(__half a, __half b) { return cunumpy_emu_half_saturate((float)__hadd(a, b)); }
static __inline__ __half __hsub_sat(__half a, __half b) { return cunumpy_emu_half_saturate((float)__hsub(a, b)); }
static __inline__ __half __hmul_sat(__half a, __half b) { return cunumpy_emu_half_saturate((float)__hmul(a, b)); }
static __inline__ __half __hfma_sat(__half a, __half b, __half c)
{
    return cunumpy_emu_half_saturate((float)__hfma(a, b, c));
}
// __hmin/__hmax: the other operand when one is NaN (fmin/fmax semantics).
static __inline__ __half __hmin(__half a, __half b) { return __half(std::fmin((float)a, (float)b)); }
static __inline__ __half __hmax(__half a, __half b) { return __half(std::fmax((float)a, (float)b)); }

static __inline__ bool __heq(__half a, __half b) { return (float)a == (float)b; }
static __inline__ bool __hne(__half a, __half b) { return (float)a != (float)b; }
static __inline__ bool __hlt(__half a, __half b) { return (float)a < (float)b; }
static __inline__ bool __hle(__half a, __half b) { return (float)a <= (float)b; }
static __inline__ bool __hgt(__half a, __half b) { return (float)a > (float)b; }
static __inline__ bool __hge(__half a, __half b) { return (float)a >= (float)b; }
static __inline__ bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
static __inline__ int __hisinf(__half a)
{
    return (a.__x & 0x7fffu) == 0x7c00u ? ((a.__x & 0x8000u) ? -1 : 1) : 0;
}

#define CUNUMPY_EMU_HALF_MATH(name, expression)                                                                        \
    static __inline__ __half name(__half h)                                                                            \
    {                                                                                                                  \
        const float x = (float)h;                                                                                      \
        return __half((float)(expression));                                                                            \
    }
CUNUMPY_EMU_HALF_MATH(hsqrt, std::sqrt(x))
CUNUMPY_EMU_HALF_MATH(hrsqrt, 1.0 / std::sqrt((double)x))
CUNUMPY_EMU_HALF_MATH(hrcp, 1.0f / x)
CUNUMPY_EMU_HALF_MATH(hexp, std::exp(x))
CUNUMPY_EMU_HALF_MATH(hexp2, std::exp2(x))
CUNUMPY_EMU_HALF_MATH(hexp10, std::pow(10.0f, x))
CUNUMPY_EMU_HALF_MATH(hlog, std::log(x))
CUNUMPY_EMU_HALF_MATH(hlog2, std::log2(x))
CUNUMPY_EMU_HALF_MATH(hlog10, std::log10(x))
CUNUMPY_EMU_HALF_MATH(hsin, std::sin(x))
CUNUMPY_EMU_HALF_MATH(hcos, std::cos(x))
CUNUMPY_EMU_HALF_MATH(hfloor, std::floor(x))
CUNUMPY_EMU_HALF_MATH(hceil, std::ceil(x))
CUNUMPY_EMU_HALF_MATH(htrunc, std::trunc(x))
CUNUMPY_EMU_HALF_MATH(hrint, std::nearbyint(x))
#undef CUNUMPY_EMU_HALF_MATH

// Operators (CUDA defines them unless __CUDA_NO_HALF_OPERATORS__): half op half gives half;
// a half meeting a float or double converts to it (operator float).
static __inline__ __half operator+(const __half &a, const __half &b) { return __hadd(a, b); }
static __inline__ __half operator-(const __half &a, const __half &b) { return __hsub(a, b); }
static __inline__ __half operator*(const __half &a, const __half &b) { return __hmul(a, b); }
static __inline__ __half operator/(const __half &a, const __half &b) { return __hdiv(a, b); }
static __inline__ __half operator-(const __half &a) { return __hneg(a); }
static __inline__ __half operator+(const __half &a) { return a; }
static __inline__ bool operator==(const __half &a, const __half &b) { return __heq(a, b); }
static __inline__ bool operator!=(const __half &a, const __half &b) { return __hne(a, b); }
static __inline__ bool operator<(const __half &a, const __half &b) { return __hlt(a, b); }
static __inline__ bool operator<=(const __half &a, const __half &b) { return __hle(a, b); }
static __inline__ bool operator>(const __half &a, const __half &b) { return __hgt(a, b); }
static __inline__ bool operator>=(const __half &a, const __half &b) { return __hge(a, b); }
inline __half &__half::operator+=(const __half &o) { return *this = __hadd(*this, o); }
inline __half &__half::operator-=(const __half &o) { return *this = __hsub(*this, o); }
inline __half &__half::operator*=(const __half &o) { return *this = __hmul(*this, o); }
inline __half &__half::operator/=(const __half &o) { return *this = __hdiv(*this, o); }

// ------------------------------------------------------------------ __half2 (lane-wise)
static __inline__ __half2 make_half2(__half a, __half b) { return __half2(a, b); }
static __inline__ __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
static __inline__ __half2 __half2half2(__half a) { return __half2(a, a); }
static __inline__ __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
static __inline__ __half2 __float2half2_rn(float a) { return __half2(__half(a), __half(a)); }
static __inline__ float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
static __inline__ __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
static __inline__ __half __low2half(__half2 h) { return h.x; }
static __inline__ __half __high2half(__half2 h) { return h.y; }
static __inline__ __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
static __inline__ __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
static __inline__ __half2 __lowhigh2highlow(__half2 h) { return __half2(h.y, h.x); }
static __inline__ __half2 __hadd2(__half2 a, __half2 b) { return __half2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
static __inline__ __half2 __hsub2(__half2 a, __half2 b) { return __half2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
static __inline__ __half2 __hmul2(__half2 a, __half2 b) { return __half2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
static __inline__ __half2 __h2div(__half2 a, __half2 b) { return __half2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }
static __inline__ __half2 __hfma2(__half2 a, __half2 b, __half2 c)
{
    return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static __inline__ __half2 __hneg2(__half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
static __inline__ __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
static __inline__ __half2 operator+(const __half2 &a, const __half2 &b) { return __hadd2(a, b); }
static __inline__ __half2 operator-(const __half2 &a, const __half2 &b) { return __hsub2(a, b); }
static __inline__ __half2 operator*(const __half2 &a, const __half2 &b) { return __hmul2(a, b); }
static __inline__ __half2 operator/(const __half2 &a, const __half2 &b) { return __h2div(a, b); }

// ------------------------------------------------------------------ atomics
// A compare-and-swap loop on the 16-bit value (the GPU has a native instruction since sm_70).
static __inline__ __half atomicAdd(__half *p, __half v)
{
    unsigned short *bits = reinterpret_cast<unsigned short *>(p);
    unsigned short old = __atomic_load_n(bits, __ATOMIC_RELAXED);
    for (;;) {
        const unsigned short next = __hadd(cunumpy_emu_half_from_bits(old), v).__x;
        if (__atomic_compare_exchange_n(bits, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return cunumpy_emu_half_from_bits(old);
    }
}
static __inline__ __half2 atomicAdd(__half2 *p, __half2 v)
{
    const __half x = atomicAdd(&p->x, v.x);
    return __half2(x, atomicAdd(&p->y, v.y));
}

#endif
