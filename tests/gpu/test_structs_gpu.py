"""Struct arguments on a real GPU: the layout probe and values read back by a kernel."""

import sys
from pathlib import Path

import numpy as np

import cunumpy as xp
from cunumpy.arguments import CudaStruct, CudaStructArguments

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

COMPLEX = """
#include <cupy/complex.cuh>
using thrust::complex;
"""


def test_verify_layout_probe_on_the_gpu(cp):
    import test_arguments_layout as tl

    for s in tl.every_test_struct():
        assert s.verify_layout()["sizeof"] == s.itemsize


def test_a_kernel_reads_every_field(cp):
    S = CudaStruct(
        "S",
        [("flag", "bool"), ("z", "complex<double>"), ("x", "const double*"), ("a", "Array2D<double>"), ("n", "int")],
    )
    src = (
        COMPLEX
        + "#include <cunumpy/array_view.cuh>\n"
        + S.declaration
        + r"""
extern "C" __global__ void read(S s, double* out)
{
    out[0] = s.flag ? 1.0 : 0.0;
    out[1] = s.z.real();
    out[2] = s.z.imag();
    out[3] = s.x[1];
    out[4] = s.a(1, 2);
    out[5] = s.n;
}
"""
    )
    k = xp.kernels.CudaKernel(src, "read", structs=[S])
    x = cp.asarray([1.0, 7.0])
    a = cp.arange(24.0).reshape(4, 6)[:, ::2]
    out = cp.zeros(6)

    class Args(CudaStructArguments):
        struct_name = "S"
        fields = tuple(zip(S.field_names, S._types))

        def __init__(self):
            self.flag, self.z, self.x, self.a, self.n = True, 2 - 3j, x, a, 5
            self.pack()

    for value in (S(flag=True, z=2 - 3j, x=x, a=a, n=5), Args()):
        out[:] = 0
        k(value, out, n_threads=1)
        np.testing.assert_array_equal(cp.asnumpy(out), [1.0, 2.0, -3.0, 7.0, 10.0, 5.0])
