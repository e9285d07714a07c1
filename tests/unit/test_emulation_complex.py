"""CPU emulation of complex arithmetic: CuPy's complex<T> (<cupy/complex.cuh>),
thrust::complex, cuda::std::complex and <cuComplex.h>, checked against NumPy; complex
parameters (pointers, scalars, views, struct fields) and alignment."""

import numpy as np
import pytest
from _emulation_support import requires_compiler

from cunumpy import kernel_testing as kt
from cunumpy.arguments import CudaStruct
from cunumpy.kernels import CudaKernel

pytestmark = requires_compiler
emulate = kt.emulate_cuda_kernel

CUPY_SOURCE = r"""
#include <cupy/complex.cuh>
#include <cunumpy/array_view.cuh>

extern "C" __global__ void polynomial(complex<double> a, complex<double>* z, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const complex<double> v = z[i];
    z[i] = a * v * v + conj(v) + exp(v) / 2.0 - sqrt(v) * 3 + 1;
}

extern "C" __global__ void functions(const complex<double>* z, double* out, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[4 * i + 0] = abs(z[i]);
    out[4 * i + 1] = arg(z[i]);
    out[4 * i + 2] = norm(z[i]);
    out[4 * i + 3] = z[i].real() * z[i].imag();
}

extern "C" __global__ void single(complex<float>* z, complex<double>* wide, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    complex<float> v = z[i];
    z[i] = v * 2 + 1.5f;        // integer and float operands keep complex<float>
    wide[i] = v * 0.25 - v;     // a double operand promotes to complex<double>
}

extern "C" __global__ void strided(Array1D<complex<double>> z) {
    const long long i = threadIdx.x;
    if (i < z.shape[0]) z(i) = z(i) * complex<double>(0.0, 1.0);
}

extern "C" __global__ void total(const complex<double>* z, complex<double>* out, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, z[i]);
}
"""


def cupy_kernel(name, **kw):
    return CudaKernel(CUPY_SOURCE, name, **kw)


def sample(n, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n) + 1j * rng.standard_normal(n)


def test_complex_pointer_and_scalar_parameters_match_numpy():
    z = sample(300)
    a = 0.5 - 1.25j
    expected = a * z * z + np.conj(z) + np.exp(z) / 2 - np.sqrt(z) * 3 + 1
    emulate(cupy_kernel("polynomial"), a, z, z.size, n_threads=z.size, block=64)
    np.testing.assert_allclose(z, expected, rtol=1e-13, atol=1e-13)


def test_complex_functions_match_numpy():
    z = sample(100, seed=2)
    out = np.zeros((100, 4))
    emulate(cupy_kernel("functions"), z, out, z.size, n_threads=z.size, block=32)
    np.testing.assert_allclose(out[:, 0], np.abs(z), rtol=1e-15)
    np.testing.assert_allclose(out[:, 1], np.angle(z), rtol=1e-15)
    np.testing.assert_allclose(out[:, 2], np.abs(z) ** 2, rtol=1e-14)
    np.testing.assert_allclose(out[:, 3], z.real * z.imag, rtol=1e-15)


def test_complex_float_with_mixed_operands_promotes_like_thrust():
    z = sample(64, seed=3).astype(np.complex64)
    original = z.copy()
    wide = np.zeros(64, np.complex128)
    emulate(cupy_kernel("single"), z, wide, z.size, n_threads=64, block=64)
    np.testing.assert_allclose(z, original * 2 + 1.5, rtol=1e-6)
    np.testing.assert_allclose(wide, original.astype(np.complex128) * 0.25 - original, rtol=1e-7)


def test_complex_views_with_strides():
    z = sample(20, seed=4)
    original = z.copy()
    emulate(cupy_kernel("strided"), z[::2], grid=1, block=16)
    np.testing.assert_allclose(z[::2], original[::2] * 1j, rtol=1e-15)
    np.testing.assert_array_equal(z[1::2], original[1::2])


def test_complex_array_aligned_only_to_its_part_is_copied_and_written_back():
    backing = np.zeros(2 * 8 + 1)
    z = backing[1:].view(np.complex128)  # address 8 mod 16: NumPy accepts it, complex<double> does not
    assert z.__array_interface__["data"][0] % 16 == 8
    z[:] = sample(8, seed=5)
    original = z.copy()
    emulate(cupy_kernel("strided"), z, grid=1, block=8)
    np.testing.assert_allclose(z, original * 1j, rtol=1e-15)


def test_complex_atomic_add_sums_every_thread():
    z = (np.arange(256) + 1j * np.arange(256, 0, -1)).astype(np.complex128)
    out = np.zeros(1, np.complex128)
    emulate(cupy_kernel("total"), z, out, z.size, n_threads=z.size, block=64)
    assert out[0] == z.sum()


STRUCT = CudaStruct("Wave", [("flag", "bool"), ("k", "complex<double>"), ("n", "int"), ("out", "complex<double>*")])


def test_complex_struct_fields_have_the_cuda_layout():
    src = (
        "#include <cupy/complex.cuh>\n"
        + STRUCT.declaration
        + r"""
    extern "C" __global__ void wave(Wave w) {
        const int i = threadIdx.x;
        if (i < w.n && w.flag) w.out[i] = w.k * (double)i;
    }
    """
    )
    out = np.zeros(10, np.complex128)
    k = CudaKernel(src, "wave", structs=[STRUCT])
    emulate(k, {"flag": True, "k": 2 - 3j, "n": 10, "out": out}, grid=1, block=16)
    np.testing.assert_array_equal(out, (2 - 3j) * np.arange(10))


THRUST_SOURCE = r"""
#include <thrust/complex.h>
#include <cuda/std/complex>
extern "C" __global__ void tc(thrust::complex<double>* z, cuda::std::complex<float>* f, long long n) {
    const long long i = threadIdx.x;
    if (i >= n) return;
    z[i] = thrust::exp(z[i]) + thrust::complex<double>(1.0, -1.0);
    f[i] = cuda::std::conj(f[i]) * 2.0f;
}
"""


def test_thrust_and_cuda_std_complex():
    z = sample(16, seed=6)
    f = sample(16, seed=7).astype(np.complex64)
    ez, ef = np.exp(z) + (1 - 1j), np.conj(f) * 2
    emulate(CudaKernel(THRUST_SOURCE, "tc"), z, f, 16, grid=1, block=16)
    np.testing.assert_allclose(z, ez, rtol=1e-14)
    np.testing.assert_allclose(f, ef, rtol=1e-6)


CUCOMPLEX_SOURCE = r"""
#include <cuComplex.h>
extern "C" __global__ void cu_ops(const double* a_parts, const double* b_parts, double* out_parts, long long n) {
    const long long i = threadIdx.x + (long long)blockIdx.x * blockDim.x;
    if (i >= n) return;
    const cuDoubleComplex a = reinterpret_cast<const cuDoubleComplex*>(a_parts)[i];
    const cuDoubleComplex b = make_cuDoubleComplex(b_parts[2 * i], b_parts[2 * i + 1]);
    cuDoubleComplex* out = reinterpret_cast<cuDoubleComplex*>(out_parts) + 6 * i;
    out[0] = cuCadd(a, b);
    out[1] = cuCsub(a, b);
    out[2] = cuCmul(a, b);
    out[3] = cuCdiv(a, b);
    out[4] = make_cuDoubleComplex(cuCabs(a), cuCreal(cuConj(a)) + cuCimag(cuConj(a)));
    out[5] = cuCfma(a, b, a);
}
extern "C" __global__ void cu_ops_f(const float* a_parts, float* out_parts, long long n) {
    const long long i = threadIdx.x + (long long)blockIdx.x * blockDim.x;
    if (i >= n) return;
    const cuFloatComplex a = make_cuFloatComplex(a_parts[2 * i], a_parts[2 * i + 1]);
    const cuComplex two = make_cuComplex(2.0f, 0.5f);
    cuFloatComplex* out = reinterpret_cast<cuFloatComplex*>(out_parts) + 3 * i;
    out[0] = cuCmulf(a, two);
    out[1] = cuCdivf(a, two);
    out[2] = cuComplexDoubleToFloat(cuCmul(cuComplexFloatToDouble(a), cuComplexFloatToDouble(a)));
}
"""


def test_cucomplex_double_functions_match_numpy():
    n = 200
    a, b = sample(n, seed=8), sample(n, seed=9)
    out = np.zeros((n, 6), np.complex128)
    emulate(
        CudaKernel(CUCOMPLEX_SOURCE, "cu_ops"),
        a.view(np.float64),
        b.view(np.float64),
        out.reshape(-1).view(np.float64),
        n,
        n_threads=n,
        block=64,
    )
    np.testing.assert_allclose(out[:, 0], a + b, rtol=1e-15)
    np.testing.assert_allclose(out[:, 1], a - b, rtol=1e-15)
    np.testing.assert_allclose(out[:, 2], a * b, rtol=1e-14)
    np.testing.assert_allclose(out[:, 3], a / b, rtol=1e-14)
    np.testing.assert_allclose(out[:, 4].real, np.abs(a), rtol=1e-15)
    np.testing.assert_allclose(out[:, 4].imag, a.real - a.imag, rtol=1e-15)
    np.testing.assert_allclose(out[:, 5], a * b + a, rtol=1e-13, atol=1e-14)


def test_cucomplex_division_and_modulus_avoid_overflow():
    # Unscaled, |b|^2 overflows (first) or underflows to 0 (second), and so does |a|^2.
    a = np.array([1e300 + 1e300j, 3e-300 + 4e-300j])
    b = np.array([1e300 - 1e300j, 1e-300 + 1e-300j])
    out = np.zeros((2, 6), np.complex128)
    emulate(
        CudaKernel(CUCOMPLEX_SOURCE, "cu_ops"),
        a.view(np.float64),
        b.view(np.float64),
        out.reshape(-1).view(np.float64),
        2,
        grid=1,
        block=2,
    )
    np.testing.assert_allclose(out[:, 3], [1j, 3.5 + 0.5j], rtol=1e-14)
    np.testing.assert_allclose(out[:, 4].real, [np.hypot(1e300, 1e300), 5e-300], rtol=1e-14)


def test_cucomplex_float_functions_match_numpy():
    n = 50
    a = sample(n, seed=10).astype(np.complex64)
    out = np.zeros((n, 3), np.complex64)
    emulate(
        CudaKernel(CUCOMPLEX_SOURCE, "cu_ops_f"),
        a.view(np.float32),
        out.reshape(-1).view(np.float32),
        n,
        n_threads=n,
        block=64,
    )
    two = np.complex64(2 + 0.5j)
    np.testing.assert_allclose(out[:, 0], a * two, rtol=1e-6)
    np.testing.assert_allclose(out[:, 1], a / two, rtol=1e-6)
    np.testing.assert_allclose(out[:, 2], (a.astype(np.complex128) ** 2).astype(np.complex64), rtol=1e-6)


def test_cucomplex_parameter_types_are_refused_by_the_signature_parser():
    """cuDoubleComplex is not a parameter type the kernel layer knows (on the GPU too): pass
    the float64 view of a complex array and reinterpret it in the kernel, as above."""
    with pytest.raises(ValueError, match="cuDoubleComplex"):
        CudaKernel('#include <cuComplex.h>\nextern "C" __global__ void k(cuDoubleComplex* z) {}', "k")


def test_complex_launches_on_fake_cupy_arrays():
    import sys

    cupy = sys.modules.get("cupy")
    if cupy is None or not getattr(cupy, "__cunumpy_fake__", False):
        pytest.skip("device arrays need the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    z = sample(40, seed=11)
    a = 2 + 1j
    expected = a * z * z + np.conj(z) + np.exp(z) / 2 - np.sqrt(z) * 3 + 1
    zd = cupy.asarray(z)
    with kt.emulated_launches():
        cupy_kernel("polynomial")(a, zd, z.size, n_threads=z.size, block=32)
    np.testing.assert_allclose(kt.host_buffer(zd), expected, rtol=1e-13, atol=1e-13)
