"""CPU emulation of <cuda_fp16.h>: __half and __half2 against NumPy float16 (conversions in
every rounding mode, arithmetic, math functions, comparisons, atomics, shuffles), through
the compiler's _Float16 and through the software conversions (-DCUNUMPY_EMU_SOFT_HALF).
Kernels take the float16 arrays' uint16 views (the signature parser has no __half)."""

import numpy as np
import pytest
from _emulation_support import requires_compiler

from cunumpy import kernel_testing as kt
from cunumpy.kernels import CudaKernel

pytestmark = requires_compiler
emulate = kt.emulate_cuda_kernel

SOURCE = r"""
#include <cuda_fp16.h>

#define H(p, i) __ushort_as_half((p)[i])
#define PUT(p, i, h) ((p)[i] = __half_as_ushort(h))

extern "C" __global__ void roundtrip(const unsigned short* in, float* f, unsigned short* back, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    f[i] = __half2float(H(in, i));
    PUT(back, i, __float2half(f[i]));
}

extern "C" __global__ void from_float(const float* x, unsigned short* out, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    PUT(out, 5 * i + 0, __float2half_rn(x[i]));
    PUT(out, 5 * i + 1, __float2half_rz(x[i]));
    PUT(out, 5 * i + 2, __float2half_rd(x[i]));
    PUT(out, 5 * i + 3, __float2half_ru(x[i]));
    PUT(out, 5 * i + 4, __double2half((double)x[i]));
}

extern "C" __global__ void arithmetic(const unsigned short* a, const unsigned short* b, const unsigned short* c,
                                      unsigned short* out, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const __half x = H(a, i), y = H(b, i), z = H(c, i);
    unsigned short* o = out + 12 * i;
    PUT(o, 0, __hadd(x, y));
    PUT(o, 1, __hsub(x, y));
    PUT(o, 2, __hmul(x, y));
    PUT(o, 3, __hdiv(x, y));
    PUT(o, 4, __hfma(x, y, z));
    half w = x;
    w += y;
    w *= z;
    PUT(o, 5, w);                 // (x + y) * z, rounded after each operation
    PUT(o, 6, -x * y + z / y);
    PUT(o, 7, __hmin(x, y));
    PUT(o, 8, __hmax(x, y));
    PUT(o, 9, __habs(__hneg(x)));
    PUT(o, 10, __hadd_sat(x, y));
    PUT(o, 11, __float2half((float)x * 0.5f + 1.0f));  // a float expression of a half
}

extern "C" __global__ void math(const unsigned short* a, unsigned short* out, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const __half x = H(a, i);
    unsigned short* o = out + 8 * i;
    PUT(o, 0, hsqrt(__habs(x)));
    PUT(o, 1, hexp(x));
    PUT(o, 2, hlog(__habs(x)));
    PUT(o, 3, hsin(x));
    PUT(o, 4, hcos(x));
    PUT(o, 5, hfloor(x));
    PUT(o, 6, hrint(x));
    PUT(o, 7, hexp2(x));
}

extern "C" __global__ void predicates(const unsigned short* a, const unsigned short* b, int* out, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const __half x = H(a, i), y = H(b, i);
    int* o = out + 8 * i;
    o[0] = __heq(x, y); o[1] = __hlt(x, y); o[2] = __hge(x, y); o[3] = x != y;
    o[4] = __hisnan(x); o[5] = __hisinf(x); o[6] = __half2int_rz(x); o[7] = __half2int_rn(x);
}

extern "C" __global__ void pairs(const unsigned int* a, const unsigned int* b, unsigned int* out, float* lows,
                                 long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const __half2 x = reinterpret_cast<const __half2*>(a)[i], y = reinterpret_cast<const __half2*>(b)[i];
    __half2* o = reinterpret_cast<__half2*>(out) + 3 * i;
    o[0] = __hadd2(x, y);
    o[1] = __hfma2(x, y, x);
    o[2] = __lowhigh2highlow(x * y);
    const float2 f = __half22float2(x);
    lows[i] = f.x + __high2float(x) - f.y;
}

extern "C" __global__ void half_total(const unsigned short* a, unsigned short* total, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(reinterpret_cast<__half*>(total), H(a, i));
}

extern "C" __global__ void half_shuffle(const unsigned short* a, unsigned short* out) {
    const __half v = H(a, threadIdx.x);
    PUT(out, threadIdx.x, __shfl_xor_sync(0xffffffffu, v, 1));
}
"""

MODES = [(), ("-DCUNUMPY_EMU_SOFT_HALF",)]
MODE_IDS = ["float16", "software"]


def kernel(name, options=()):
    return CudaKernel(SOURCE, name, options=options)


def bits(a):
    return np.ascontiguousarray(a, np.float16).view(np.uint16)


def halves(b):
    return np.asarray(b, np.uint16).view(np.float16)


def launch(name, options, *args, n):
    emulate(kernel(name, options), *args, n, n_threads=n, block=128)


def assert_same_halves(actual_bits, expected):
    np.testing.assert_array_equal(halves(actual_bits), np.asarray(expected, np.float16))


@pytest.mark.parametrize("options", MODES, ids=MODE_IDS)
def test_every_half_converts_to_float_and_back_exactly(options):
    all_bits = np.arange(65536, dtype=np.uint16)
    f = np.zeros(65536, np.float32)
    back = np.zeros(65536, np.uint16)
    launch("roundtrip", options, all_bits, f, back, n=65536)
    np.testing.assert_array_equal(f, halves(all_bits).astype(np.float32))
    finite = np.isfinite(f)
    np.testing.assert_array_equal(back[finite], all_bits[finite])
    assert np.isnan(halves(back[np.isnan(f)])).all()


@pytest.mark.parametrize("options", MODES, ids=MODE_IDS)
def test_float_to_half_in_every_rounding_mode(options):
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.standard_normal(2000).astype(np.float32) * np.float32(10.0) ** rng.integers(-8, 6, 2000),
            np.array(
                [
                    0.0,
                    -0.0,
                    65504.0,
                    65519.0,
                    65520.0,
                    -65520.0,
                    1e6,
                    -1e6,
                    2.0**-24,
                    2.0**-25,
                    3 * 2.0**-26,
                    2.0**-26,
                    1.0 + 2.0**-11,
                    1.0 + 3 * 2.0**-11,
                    np.inf,
                    -np.inf,
                ],
                np.float32,
            ),
        ]
    ).astype(np.float32)
    n = x.size
    out = np.zeros(5 * n, np.uint16)
    launch("from_float", options, x, out, n=n)
    got = halves(out).reshape(n, 5)
    with np.errstate(over="ignore"):
        rn = x.astype(np.float16)
    np.testing.assert_array_equal(got[:, 0], rn)
    np.testing.assert_array_equal(got[:, 4], rn)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(x64)
        rz, rd, ru = got[:, 1].astype(np.float64), got[:, 2].astype(np.float64), got[:, 3].astype(np.float64)
        # Directed roundings: on the right side of x and no farther than one half step away.
        assert (np.abs(rz) <= np.abs(x64))[finite].all()
        assert (rd <= x64)[finite].all() and (ru >= x64)[finite].all()
        for r in (rz, rd, ru):
            exact = r == x64
            neighbour = np.nextafter(
                got[:, 0], np.where(rn.astype(np.float64) > x64, -np.inf, np.inf).astype(np.float16)
            )
            ok = exact | (r == rn.astype(np.float64)) | (r == neighbour.astype(np.float64))
            assert ok[finite].all()
    assert got[:, 1][x == 1e6] == 65504 and got[:, 2][x == 1e6] == 65504 and got[:, 3][x == 1e6] == np.inf
    assert got[:, 2][x == -1e6] == -np.inf and got[:, 3][x == -1e6] == -65504


def _operands(n, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(n) * 8).astype(np.float16)
    b = (rng.standard_normal(n) * 4).astype(np.float16)
    b[b == 0] = np.float16(0.5)
    c = rng.standard_normal(n).astype(np.float16)
    return a, b, c


@pytest.mark.parametrize("options", MODES, ids=MODE_IDS)
def test_half_arithmetic_matches_numpy_float16(options):
    n = 1000
    a, b, c = _operands(n, 1)
    out = np.zeros(12 * n, np.uint16)
    launch("arithmetic", options, bits(a), bits(b), bits(c), out, n=n)
    got = halves(out).reshape(n, 12)
    np.testing.assert_array_equal(got[:, 0], a + b)
    np.testing.assert_array_equal(got[:, 1], a - b)
    np.testing.assert_array_equal(got[:, 2], a * b)
    np.testing.assert_array_equal(got[:, 3], a / b)
    np.testing.assert_array_equal(got[:, 4], (a.astype(np.float64) * b + c).astype(np.float16))
    np.testing.assert_array_equal(got[:, 5], (a + b) * c)
    np.testing.assert_array_equal(got[:, 6], -a * b + c / b)
    np.testing.assert_array_equal(got[:, 7], np.minimum(a, b))
    np.testing.assert_array_equal(got[:, 8], np.maximum(a, b))
    np.testing.assert_array_equal(got[:, 9], np.abs(a))
    np.testing.assert_array_equal(got[:, 10], np.clip(a + b, 0, 1))
    np.testing.assert_array_equal(
        got[:, 11], (a.astype(np.float32) * np.float32(0.5) + np.float32(1)).astype(np.float16)
    )


@pytest.mark.parametrize("options", MODES, ids=MODE_IDS)
def test_half_math_functions_round_the_float_result(options):
    n = 500
    a = np.linspace(-6, 6, n).astype(np.float16)
    out = np.zeros(8 * n, np.uint16)
    launch("math", options, bits(a), out, n=n)
    got = halves(out).reshape(n, 8)
    f = a.astype(np.float32)
    with np.errstate(divide="ignore"):
        expected = [
            np.sqrt(np.abs(f)),
            np.exp(f),
            np.log(np.abs(f)),
            np.sin(f),
            np.cos(f),
            np.floor(f),
            np.rint(f),
            np.exp2(f),
        ]
    for k, e in enumerate(expected):
        # Within one half ulp of NumPy's float32 function rounded to half (libm may differ in
        # the last float bit, which can move a half rounding).
        e16 = e.astype(np.float16)
        close = (got[:, k] == e16) | (
            np.abs(got[:, k].astype(np.float64) - e16) <= np.spacing(np.abs(e16)).astype(np.float64)
        )
        assert close.all(), k


def test_half_predicates_and_integer_conversions():
    a = np.array([1.5, -2.5, np.nan, np.inf, -np.inf, 0.0, 60000, -3.75], np.float16)
    b = np.array([1.5, 3.0, 1.0, 1.0, -np.inf, -0.0, 1.0, -3.0], np.float16)
    out = np.zeros((a.size, 8), np.int32)
    launch("predicates", (), bits(a), bits(b), out, n=a.size)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out[:, 0], a == b)
        np.testing.assert_array_equal(out[:, 1], a < b)
        np.testing.assert_array_equal(out[:, 2], a >= b)
        np.testing.assert_array_equal(out[:, 3], a != b)
    np.testing.assert_array_equal(out[:, 4], np.isnan(a))
    np.testing.assert_array_equal(out[:, 5], [0, 0, 0, 1, -1, 0, 0, 0])
    imax, imin = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    np.testing.assert_array_equal(out[:, 6], [1, -2, 0, imax, imin, 0, 60000, -3])
    np.testing.assert_array_equal(out[:, 7], [2, -2, 0, imax, imin, 0, 60000, -4])


def test_half2_lanes():
    n = 256
    a, b, _ = _operands(2 * n, 2)
    out = np.zeros(3 * n, np.uint32)
    lows = np.zeros(n, np.float32)
    launch("pairs", (), bits(a).view(np.uint32), bits(b).view(np.uint32), out, lows, n=n)
    got = out.view(np.float16).reshape(n, 3, 2)
    pa, pb = a.reshape(n, 2), b.reshape(n, 2)
    np.testing.assert_array_equal(got[:, 0], pa + pb)
    np.testing.assert_array_equal(got[:, 1], (pa.astype(np.float64) * pb + pa).astype(np.float16))
    np.testing.assert_array_equal(got[:, 2], (pa * pb)[:, ::-1])
    np.testing.assert_array_equal(lows, pa[:, 0].astype(np.float32))


def test_half_atomic_add_is_exact_for_small_integers():
    a = np.ones(1024, np.float16)
    total = np.zeros(1, np.uint16)
    emulate(kernel("half_total"), bits(a), total, a.size, n_threads=a.size, block=128)
    assert halves(total)[0] == 1024


def test_half_values_shuffle_between_lanes():
    a = np.arange(32).astype(np.float16)
    out = np.zeros(32, np.uint16)
    emulate(kernel("half_shuffle"), bits(a), out, grid=1, block=32)
    np.testing.assert_array_equal(halves(out), a.reshape(16, 2)[:, ::-1].ravel())


def test_half_parameters_are_refused_by_the_signature_parser():
    """__half is not a parameter type of the kernel layer: pass uint16 views, as above."""
    with pytest.raises(ValueError, match="__half"):
        CudaKernel('#include <cuda_fp16.h>\nextern "C" __global__ void k(__half* x) {}', "k")
