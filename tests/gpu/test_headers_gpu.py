"""The shipped reduce.cuh, scan.cuh and atomic.cuh against NumPy on a real GPU."""

from pathlib import Path

import numpy as np
import pytest

from cunumpy.kernels import CudaKernel

HEADERS = Path(__file__).resolve().parent / "kernels" / "headers_cuda.cu"
TYPES = [np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64]
BLOCKS = [1, 31, 32, 100, 1024, (8, 4), (7, 5, 3), (16, 16, 4)]


@pytest.mark.parametrize("block", BLOCKS, ids=str)
@pytest.mark.parametrize("dtype", TYPES, ids=lambda t: np.dtype(t).name)
def test_block_reductions_and_scans(cp, dtype, block):
    threads = int(np.prod(block))
    n_blocks = 5
    rng = np.random.default_rng(threads)
    host = rng.integers(0, 50, size=(n_blocks, threads)).astype(dtype)
    x = cp.asarray(host)
    sums, mins, maxs = (cp.zeros(n_blocks, dtype) for _ in range(3))
    inc, exc = cp.zeros_like(x), cp.zeros_like(x)
    total = cp.zeros(1, dtype)
    k = CudaKernel.from_file(HEADERS, "block_ops", template_args=(dtype,), block_size=block)
    k(x, threads, sums, mins, maxs, inc, exc, total, grid=n_blocks)
    np.testing.assert_array_equal(cp.asnumpy(sums), host.sum(axis=1, dtype=dtype))
    np.testing.assert_array_equal(cp.asnumpy(mins), host.min(axis=1))
    np.testing.assert_array_equal(cp.asnumpy(maxs), host.max(axis=1))
    expected_inc = np.cumsum(host, axis=1, dtype=dtype)
    np.testing.assert_array_equal(cp.asnumpy(inc), expected_inc)
    np.testing.assert_array_equal(cp.asnumpy(exc), expected_inc - host)
    assert cp.asnumpy(total)[0] == host.sum(dtype=dtype)


@pytest.mark.parametrize("mask", [0xFFFFFFFF, 0x1, 0x80000001, 0x55555555, 0xF0F00F0F, 0x7FFFFFFF])
def test_warp_operations_with_sparse_masks(cp, mask):
    host = np.random.default_rng(mask).integers(-1000, 1000, size=32).astype(np.int64)
    out = cp.full(5 * 32, -12345, dtype=cp.int64)
    CudaKernel.from_file(HEADERS, "warp_ops")(cp.asarray(host), mask, out, grid=1, block=32)
    got = cp.asnumpy(out).reshape(32, 5)
    lanes = [lane for lane in range(32) if (mask >> lane) & 1]
    vals = host[lanes]
    for rank, lane in enumerate(lanes):
        assert got[lane].tolist() == [vals.sum(), vals.min(), vals.max(), vals[: rank + 1].sum(), vals[:rank].sum()]
    for lane in set(range(32)) - set(lanes):
        assert (got[lane] == -12345).all()


@pytest.mark.parametrize("dtype", TYPES, ids=lambda t: np.dtype(t).name)
def test_atomic_add(cp, dtype):
    bins = np.random.default_rng(1).integers(0, 7, size=5000)
    step = {np.int64: 2**61, np.uint64: 2**62}.get(dtype, 1)
    counts = cp.zeros(7, dtype)
    k = CudaKernel.from_file(HEADERS, "histogram", template_args=(dtype,))
    k(cp.asarray(bins), bins.size, counts, step)
    expected = np.bincount(bins, minlength=7).astype(np.uint64) * np.uint64(step)  # wraps modulo 2**64
    np.testing.assert_array_equal(cp.asnumpy(counts), expected.astype(dtype))


def test_atomic_add_2d_3d(cp):
    a2 = cp.zeros((3, 4))
    a3 = cp.zeros((1, 5, 6))
    CudaKernel.from_file(HEADERS, "grid_2d_3d")(a2, 3, 4, a3, 5, 6, 600, n_threads=600)
    i = np.arange(600)
    e2 = np.zeros((3, 4))
    np.add.at(e2, (i % 3, i % 4), 1)
    e3 = np.zeros((1, 5, 6))
    np.add.at(e3, (0, i % 5, i % 6), 1)
    np.testing.assert_array_equal(cp.asnumpy(a2), e2)
    np.testing.assert_array_equal(cp.asnumpy(a3), e3)
