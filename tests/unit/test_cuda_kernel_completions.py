"""CudaKernel completions (API.md 2.3 as amended): plain __global__ kernels compiled through
their name expression, prepare_args, source_dir as a Path, view_ndim None for non-views,
inference from NumPy arrays, and launch sizes checked before the arguments."""

import sys
from pathlib import Path

import numpy as np
import pytest

import cunumpy as xp

CudaKernel = xp.kernels.CudaKernel
SRC = """
#include <cunumpy/array_view.cuh>
extern "C" __global__ void k(double* x, Array2D<double> v, int n, float f) {}
"""


def cupy():
    return sys.modules["cupy"]


def test_view_ndim_is_none_for_non_views():
    k = CudaKernel(SRC, "k")
    assert [p.view_ndim for p in k.signature] == [None, 2, None, None]
    assert [p.view_ndim for p in xp.cuda.parse_cuda_signature(SRC, "k")] == [None, 2, None, None]


def test_source_dir_is_a_path(tmp_path):
    assert CudaKernel(SRC, "k").source_dir is None
    assert CudaKernel(SRC, "k", source_dir=str(tmp_path)).source_dir == tmp_path
    path = tmp_path / "k_cuda.cu"
    path.write_text(SRC)
    loaded = CudaKernel.from_file(path)
    assert isinstance(loaded.source_dir, Path) and loaded.source_dir == tmp_path.resolve()


def test_inference_from_numpy_arrays():
    k = CudaKernel(SRC, "k", block_size=(8, 4))
    assert k.launch_shape(args=(np.zeros((35, 19)), np.zeros((2, 2)), 3, 1.0)) == ((5, 5), (8, 4))
    with pytest.raises(ValueError, match="too few dimensions"):
        k.launch_shape(args=(np.zeros(5), np.zeros((35, 19)), 3, 1.0))
    one = CudaKernel(SRC, "k")
    assert one.launch_shape(args=(np.zeros(300), np.zeros((2, 2)), 3, 1.0)) == ((3,), (128,))

    class Args:
        def __init__(self, *values):
            self.values = values

        def __cuda_args__(self):
            return self.values

    assert one.launch_shape(args=(Args(np.zeros(129), np.zeros((1, 1))), 3, 1.0)) == ((2,), (128,))
    with pytest.raises(TypeError, match="infer"):
        one.launch_shape(args=(1.0,))


def test_negative_sizes_are_value_errors_before_the_argument_count():
    k = CudaKernel(SRC, "k")
    with pytest.raises(ValueError, match="n_threads"):
        k(np.zeros(2), n_threads=-1)
    with pytest.raises(ValueError, match="grid"):
        k(grid=(2, -1))
    with pytest.raises(TypeError, match="arguments"):
        k(np.zeros(2), n_threads=4)


def test_prepare_args(device_only):
    k = CudaKernel(SRC, "k")
    x, v = cupy().zeros(4), cupy().zeros((3, 5))[:, ::2]
    values = k.prepare_args(x, v, 3, 2)
    assert values[0] is x
    assert values[1]["shape"].tolist() == [3, 3] and values[1]["strides"].tolist() == [5, 2]
    assert values[1]["data"] == v.data.ptr
    assert type(values[2]) is np.int32 and values[2] == 3
    assert type(values[3]) is np.float32 and values[3] == 2.0

    class Args:
        def __cuda_args__(self):
            return (x, v)

    assert k.prepare_args(Args(), 1, 1.5)[0] is x
    with pytest.raises(TypeError, match="4 arguments"):
        k.prepare_args(x, v, 3)
    with pytest.raises(OverflowError):
        k.prepare_args(x, v, 2**40, 1.0)
    with pytest.raises(TypeError):
        k.prepare_args(np.zeros(4), v, 3, 1.0)
    unchecked = CudaKernel(SRC, "k", check_signature=False)
    assert unchecked.prepare_args(Args(), 3) == (x, v, 3)


def test_plain_global_kernel_compiles_by_name_expression(device_only, monkeypatch):
    built = []

    class Module:
        def __init__(self, code=None, options=(), name_expressions=None, **kw):
            built.append(name_expressions)

        def compile(self, log_stream=None):
            return None

        def get_function(self, name):
            return type("Function", (), {"name": name, "max_threads_per_block": 1024})()

    monkeypatch.setattr(cupy(), "RawModule", Module)
    monkeypatch.setenv("CUNUMPY_EMULATION", "0")  # the device path, on the fake CuPy too
    src = "__global__ void scale(double* x, double a, long long n) {}"
    cxx = CudaKernel(src, "scale")
    assert cxx.compile().name == "scale" and built == [["scale"]]
    plain = CudaKernel('extern "C" ' + src, "scale")
    plain.compile()
    assert built[-1] is None


def test_fake_cupy_array_reports_module_cupy(device_only):
    """User code and libraries test the array type by name, as with real CuPy."""
    import pickle

    a = cupy().arange(3.0)
    assert type(a).__module__ == "cupy" and type(a).__name__ == "ndarray"
    assert (pickle.loads(pickle.dumps(a)).get() == a.get()).all()
