"""The CPU emulation against the GPU: every shipped header and every example kernel runs on
the GPU and under ``emulate_cuda_kernel`` with the same arguments, and every array argument
must agree afterwards (issue 27 item 15; ``make test-gpu``).

Integer results, Philox uniforms and Morton keys must be bit-identical; floating-point
results that go through libm (Philox normals) or an FMA the GPU may contract compare with a
relative tolerance of 1e-12.

Example kernels are found under ``examples/``: a folder ``<name>/`` with ``<name>_cuda.cu``
and a test-argument module ``<name>_test_args.py`` (API.md section 13.3: ``make_args(backend,
seed)`` and optional ``N_THREADS``, ``GRID``, ``BLOCK``, ``RTOL``, ``ATOL``, ``SEED``).

``CUNUMPY_GPU_PARITY_DRY_RUN=1`` with ``CUNUMPY_FAKE_CUPY=1`` runs the same cases on the fake
CuPy (the "GPU" side emulated too), which checks the cases themselves on machines without a
GPU (tests/unit/test_gpu_runner.py does).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import cunumpy as xp
from cunumpy.kernel_testing import emulate_cuda_kernel, emulated_launches, fake_cupy_active
from cunumpy.kernels import CudaKernel

ROOT = Path(__file__).resolve().parents[2]
KERNELS = Path(__file__).resolve().parent / "kernels"
DRY_RUN = os.environ.get("CUNUMPY_GPU_PARITY_DRY_RUN", "") == "1"


def _cupy():
    import cupy

    return cupy


def _launch_context():
    """Real GPU: launches run on it. Dry run on the fake CuPy: they are emulated as well."""
    if fake_cupy_active():
        if not DRY_RUN:
            pytest.skip("the fake CuPy is active (set CUNUMPY_GPU_PARITY_DRY_RUN=1 for a dry run)")
        return emulated_launches()
    return contextlib.nullcontext()


def _arrays(args):
    return [(i, a) for i, a in enumerate(args) if isinstance(a, np.ndarray) or xp.is_gpu(a)]


def _compare(label, device_args, host_args, rtol, atol, exact):
    device = _arrays(device_args)
    host = _arrays(host_args)
    assert [i for i, _ in device] == [i for i, _ in host]
    for (i, d), (_, h) in zip(device, host):
        got = xp.to_numpy(d)
        if exact or got.dtype.kind in "biu":
            np.testing.assert_array_equal(got, h, err_msg=f"{label}: argument {i}")
        else:
            np.testing.assert_allclose(got, h, rtol=rtol, atol=atol, err_msg=f"{label}: argument {i}")


def _run_both(label, kernel, make, launch, *, rtol=1e-12, atol=0.0, exact=False):
    """``make(module)`` builds the arguments with ``numpy`` or ``cupy`` from the same host data."""
    cp = _cupy()
    with _launch_context():
        device_args = make(cp)
        kernel(*device_args, **launch)
        cp.cuda.runtime.deviceSynchronize()
    host_args = make(np)
    emulate_cuda_kernel(kernel, *host_args, **launch)
    _compare(label, device_args, host_args, rtol, atol, exact)
    return host_args


# --------------------------------------------------------------------------- the shipped headers


def _kernel(name, file="parity_cuda.cu", **kwargs):
    return CudaKernel.from_file(KERNELS / file, name, **kwargs)


def test_index_macros():
    n, ni, nj, nk = 1000, 7, 9, 5

    def make(m):
        return (
            n,
            m.zeros(n, dtype=np.int64),
            ni,
            nj,
            m.zeros(ni * nj, dtype=np.int64),
            nk,
            m.zeros(ni * nj * nk, dtype=np.int64),
            m.zeros(n, dtype=np.int64),
        )

    # 20 x 8 threads along x: the grid-stride loop takes several turns
    args = _run_both("index.cuh", _kernel("index_macros", block_size=(8, 4, 2)), make, {"grid": (20, 3, 3)}, exact=True)
    assert args[7].tolist() == [i + 1 for i in range(n)] and args[1][:160].tolist() == [3 * i for i in range(160)]


def test_array_views():
    host = np.random.default_rng(1).standard_normal((6, 10))
    c_host = np.random.default_rng(2).standard_normal((6, 5))

    def make(m):
        a = m.array(host)[:, ::2]  # a strided view: (6, 5), strides (80, 16)
        return a, m.array(c_host), m.zeros(30), 6, 5

    _run_both("array_view.cuh", _kernel("views", block_size=(8, 8)), make, {"grid": (1, 1)})


def test_atomics():
    n, bins, n1 = 5000, 13, 7
    host_bins = np.random.default_rng(3).integers(0, bins, n)

    def make(m):
        return (
            m.array(host_bins),
            n,
            m.zeros(bins),
            m.zeros(bins, dtype=np.int64),
            m.zeros(bins, dtype=np.uint64),
            m.zeros(bins * n1),
            n1,
        )

    _run_both("atomic.cuh", _kernel("atomics", block_size=256), make, {"n_threads": n}, exact=True)


def test_philox():
    n = 4096

    def make(m):
        return 12345, 7, n, m.zeros(n), m.zeros(n), m.zeros(2 * n)

    args = _run_both(
        "random.cuh", _kernel("philox", block_size=128), make, {"n_threads": n}, rtol=1e-12, atol=1e-12
    )  # normals near zero: libm differences are absolute there
    # the uniforms are specified bit for bit (xp.rng.philox_uniform); check them exactly too
    cp = _cupy()
    with _launch_context():
        device = make(cp)
        _kernel("philox", block_size=128)(*device, n_threads=n)
    np.testing.assert_array_equal(xp.to_numpy(device[3]), args[3])
    np.testing.assert_array_equal(xp.to_numpy(device[5]), args[5])


def test_morton():
    n = 3000
    xyz = np.random.default_rng(4).uniform(-1.0, 1.0, (n, 3))

    def make(m):
        empty = [m.zeros(n, dtype=np.uint64) for _ in range(3)]
        return (m.array(xyz), n, -1.0, 2.0**10 / 2.0, 10, *empty)

    _run_both("morton.cuh", _kernel("morton", block_size=128), make, {"n_threads": n}, exact=True)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("block", [32, 100, (8, 4), (7, 5, 3)], ids=str)
def test_reduce_and_scan(dtype, block):
    threads = int(np.prod(block))
    host = np.random.default_rng(threads).integers(0, 50, (4, threads)).astype(dtype)

    def make(m):
        return (
            m.array(host),
            threads,
            *(m.zeros(4, dtype) for _ in range(3)),
            m.zeros((4, threads), dtype),
            m.zeros((4, threads), dtype),
            m.zeros(1, dtype),
        )

    kernel = _kernel("block_ops", "headers_cuda.cu", template_args=(dtype,), block_size=block)
    _run_both("reduce.cuh/scan.cuh", kernel, make, {"grid": 4}, exact=True)


@pytest.mark.parametrize("mask", [0xFFFFFFFF, 0x80000001, 0x55555555])
def test_warp_functions(mask):
    host = np.random.default_rng(mask).integers(-1000, 1000, 32).astype(np.int64)

    def make(m):
        return m.array(host), mask, m.full(5 * 32, -12345, dtype=np.int64)

    _run_both(
        "reduce.cuh/scan.cuh warp", _kernel("warp_ops", "headers_cuda.cu", block_size=32), make, {"grid": 1}, exact=True
    )


# --------------------------------------------------------------------------- example kernels


def example_kernels() -> list:
    """``(name, .cu file, test-args file)`` for every kernel folder under examples/."""
    found = []
    for cu in sorted((ROOT / "examples").rglob("*_cuda.cu")):
        name = cu.name[: -len("_cuda.cu")]
        args = cu.with_name(f"{name}_test_args.py")
        found.append(pytest.param(name, cu, args, id=name))
    return found


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_parity_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


@pytest.mark.parametrize(
    ("name", "cu", "test_args"),
    example_kernels()
    or [pytest.param(None, None, None, marks=pytest.mark.skip(reason="no example CUDA kernel under examples/"))],
)
def test_example_kernel(name, cu, test_args):
    if not test_args.exists():
        pytest.fail(
            f"{cu.relative_to(ROOT)} has no {test_args.name}: add make_args(backend, seed) so that "
            "make test-gpu can compare it with the emulation"
        )
    settings = _load(test_args)
    kernel = CudaKernel.from_file(cu, name, include_dirs=[cu.parent])
    seed = getattr(settings, "SEED", 0)
    launch = {}
    for setting, keyword in (("N_THREADS", "n_threads"), ("GRID", "grid"), ("BLOCK", "block")):
        if hasattr(settings, setting):
            launch[keyword] = getattr(settings, setting)

    def make(m):
        with xp.use_backend("cupy" if m is not np else "numpy", strict=True):
            args = tuple(settings.make_args("cupy" if m is not np else "numpy", seed))
        resolved = dict(launch)
        if callable(resolved.get("n_threads")):
            resolved["n_threads"] = resolved["n_threads"](args)
        make.launch = resolved
        return args

    cp = _cupy()
    with _launch_context():
        device_args = make(cp)
        kernel(*device_args, **make.launch)
        cp.cuda.runtime.deviceSynchronize()
    host_args = make(np)
    emulate_cuda_kernel(kernel, *host_args, **make.launch)
    _compare(
        f"example {name}",
        device_args,
        host_args,
        getattr(settings, "RTOL", 1e-12),
        getattr(settings, "ATOL", 0.0),
        exact=False,
    )
