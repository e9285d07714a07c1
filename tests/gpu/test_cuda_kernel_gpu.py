"""CudaKernel on a real GPU: compilation, the driver launch path, every parameter kind,
launch validation, shared memory above 48 KiB, streams, check_finite and debug mode."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cunumpy._native import core
from cunumpy.kernels import CudaKernel, CudaKernelVariants

BASICS = Path(__file__).resolve().parent / "kernels" / "basics_cuda.cu"


def kernel(name, **kw):
    return CudaKernel.from_file(BASICS, name, **kw)


def test_pointer_kernel_through_the_driver(cp):
    k = kernel("scale")
    x = cp.arange(1000, dtype=cp.float64)
    y = cp.zeros_like(x)
    k(x, y, 2.5, x.size)
    assert core.driver_available()
    assert k.is_compiled
    np.testing.assert_array_equal(cp.asnumpy(y), 2.5 * np.arange(1000))
    k(x[:10], y, np.float32(3.0), 10)  # NumPy scalar cast safely, size inferred from x[:10]
    np.testing.assert_array_equal(cp.asnumpy(y[:10]), 3.0 * np.arange(10))


@pytest.mark.parametrize("layout", ["c", "f", "stepped"])
def test_strided_views(cp, layout):
    a = {"c": cp.zeros((37, 21)), "f": cp.zeros((21, 37)).T, "stepped": cp.zeros((80, 70))[3:77:2, ::3]}[layout]
    k = kernel("fill_view", block_size=(16, 8))
    k(a)  # 2-D inference from shape[:2]
    i, j = np.indices(a.shape)
    np.testing.assert_array_equal(cp.asnumpy(a), 10.0 * i + j)


def test_contiguous_view(cp):
    c = cp.zeros((3, 4, 5), cp.float32)
    kernel("fill_cview")(c, n_threads=60)
    np.testing.assert_array_equal(cp.asnumpy(c).ravel(), np.arange(60, dtype=np.float32))


def test_every_scalar_type(cp):
    out = cp.zeros(15)
    values = (True, -5, 250, -300, 60000, -7, 4_000_000_000, -(2**40), 2**63 + 4096, 1.5, 2.25, 1 + 2j, 3 - 4j)
    kernel("scalars")(out, *values, n_threads=1)
    expected = [1, -5, 250, -300, 60000, -7, 4e9, -(2.0**40), float(2**63 + 4096), 1.5, 2.25, 1, 2, 3, -4]
    np.testing.assert_array_equal(cp.asnumpy(out), np.array(expected, dtype=np.float64))


def test_struct_by_value(cp):
    class Particles:
        name = "Particles"
        dtype = np.dtype([("x", "<u8"), ("n", "<i4"), ("shift", "<f8")], align=True)

    x = cp.arange(100, dtype=cp.float64)
    value = np.zeros((), Particles.dtype)
    value["x"], value["n"], value["shift"] = x.data.ptr, 100, 0.5
    k = kernel("shift", structs=[Particles()])
    k(value[()], n_threads=100)
    np.testing.assert_array_equal(cp.asnumpy(x), np.arange(100) + 0.5)


def test_template_with_views(cp):
    k = kernel("add_one", template_args=(np.float32, 3))
    assert k.expression == "add_one<float, 3>"
    a = cp.zeros((4, 5, 12), cp.float32)[:, :, ::2]
    k(a, a.size, n_threads=a.size)
    np.testing.assert_array_equal(cp.asnumpy(a), np.ones((4, 5, 6), np.float32))


def test_compile_recompile_and_attributes(cp):
    k = kernel("scale")
    raw = k.compile()
    assert raw.num_regs >= 0 and raw.max_threads_per_block > 0
    assert k.is_compiled
    assert k.recompile() is not None and k.is_compiled


def test_launch_validation_against_the_device(cp):
    x = cp.zeros(256)
    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())["name"]
    name = name.decode() if isinstance(name, bytes) else name
    k = kernel("bounded", block_size=128)
    with pytest.raises(ValueError, match=r"bounded.*device 0.*max_threads_per_block") as info:
        k(x, 256)
    assert name in str(info.value)
    with pytest.raises(ValueError, match=r"block\[2\]"):
        kernel("bounded", block_size=(1, 1, 128))(x, 256, n_threads=(1, 1, 128))
    with pytest.raises(ValueError, match=r"grid\[1\]"):
        kernel("bounded", block_size=64)(x, 256, grid=(1, 70000))
    with pytest.raises(ValueError, match="shared"):
        kernel("bounded", block_size=64)(x, 256, shared_mem=10**7)
    kernel("bounded", block_size=64)(x, 256)
    assert float(x.sum()) == 256


def test_dynamic_shared_memory_above_48k(cp):
    n = 10_000  # 80 000 bytes
    out = cp.zeros(1)
    kernel("big_shared")(out, n, grid=1, block=256, shared_mem=8 * n)
    assert float(out[0]) == n * (n - 1) / 2


def test_stream(cp):
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(4096)
    y = cp.zeros(4096)
    kernel("scale")(x, y, 3.0, x.size, stream=s)
    s.synchronize()
    assert float(y.sum()) == 3 * 4096


def test_check_finite_names_the_argument(cp):
    k = kernel("make_nan", check_finite=True)
    with pytest.raises(RuntimeError, match=r"make_nan.*argument 0.*float64"):
        k(cp.zeros(10), 10)


def test_variants_compile_all_in_threads(cp):
    v = CudaKernelVariants(lambda dt, n: kernel("add_one", template_args=(dt, n)))
    v.compile_all([(np.float32, 1), (np.float64, 2), (np.float64, 3)], jobs=2)
    assert all(v.get(*key).is_compiled for key in v)


def test_all_from_file_shares_one_module(cp):
    ks = CudaKernel.all_from_file(BASICS)
    assert "scale" in ks and "add_one" in ks and ks["add_one"].signature is None
    ks["scale"].compile()
    ks["fill_view"].compile()
    dev = cp.cuda.runtime.getDevice()
    assert ks["scale"]._compiled[dev].module is ks["fill_view"]._compiled[dev].module


def test_debug_mode_turns_a_bounds_violation_into_a_runtime_error():
    # A trap ends the CUDA context, so this runs in its own process.
    code = textwrap.dedent(
        f"""
        import cupy as cp
        from cunumpy.kernels import CudaKernel
        k = CudaKernel.from_file({str(BASICS)!r}, "out_of_bounds", debug=True)
        assert "-DCUNUMPY_BOUNDS_CHECK" in k.compile_options()
        try:
            k(cp.zeros(4), n_threads=1)
        except RuntimeError as exc:
            assert "out_of_bounds" in str(exc) and exc.__cause__ is not None, exc
            print("RAISED")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "RAISED" in result.stdout, result.stdout + result.stderr
