"""xp.petsc.petsc_vec (API.md section 12).

The tests that need petsc4py skip with a reason where it is not installed; `make test-petsc`
builds PETSc and petsc4py from PyPI into the project's environment and runs this file. The
argument errors that come before petsc4py is needed, and the ImportError without it, are
tested everywhere.
"""

import gc
import sys

import numpy as np
import pytest

import cunumpy as xp

try:
    from petsc4py import PETSc
except ImportError:  # the tests that need it skip
    PETSc = None

needs_petsc4py = pytest.mark.skipif(
    PETSc is None, reason="petsc4py is not installed (make test-petsc builds PETSc and petsc4py and runs this file)"
)
SCALAR = np.dtype(PETSc.ScalarType) if PETSc is not None else np.dtype(np.float64)


def test_all():
    assert xp.petsc.__all__ == ["petsc_vec"]


def test_import_cunumpy_does_not_import_petsc4py():
    from cunumpy.kernel_testing import run_in_fake_cupy_subprocess

    run_in_fake_cupy_subprocess("import sys, cunumpy as xp\nxp.petsc.petsc_vec\nassert 'petsc4py' not in sys.modules\n")


def test_without_petsc4py_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "petsc4py", None)
    with pytest.raises(ImportError, match="petsc4py"):
        xp.petsc.petsc_vec(np.zeros(3, dtype=SCALAR))


@pytest.mark.parametrize("value", [[1.0, 2.0], 3.0, None, "array", memoryview(b"abcd")])
def test_not_an_array_is_a_type_error(value):
    with pytest.raises(TypeError, match="'array' must be a NumPy or CuPy array"):
        xp.petsc.petsc_vec(value)


def test_non_contiguous_is_a_value_error(on_backend):
    a = xp.zeros((4, 6), dtype=SCALAR)
    for view in (a[:, ::2], a.T, a[::2]):
        with pytest.raises(ValueError, match="C-contiguous"):
            xp.petsc.petsc_vec(view)


def test_read_only_is_a_value_error():
    a = np.zeros(4, dtype=SCALAR)
    a.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        xp.petsc.petsc_vec(a)
    with pytest.raises(ValueError, match="read-only"):
        xp.petsc.petsc_vec(np.frombuffer(bytes(8 * SCALAR.itemsize), dtype=SCALAR))


# --------------------------------------------------------------------------- with petsc4py


@needs_petsc4py
def test_wrong_dtype_is_a_type_error():
    other = np.float32 if np.float32 != SCALAR else np.float64
    with pytest.raises(TypeError, match="scalar type"):
        xp.petsc.petsc_vec(np.zeros(3, dtype=other))
    with pytest.raises(TypeError, match="scalar type"):
        xp.petsc.petsc_vec(np.zeros(3, dtype=np.int32))


@needs_petsc4py
def test_host_vector_shares_memory_both_ways():
    a = np.arange(5, dtype=SCALAR)
    vec = xp.petsc.petsc_vec(a)
    assert isinstance(vec, PETSc.Vec) and vec.getSize() == 5
    assert vec.getType() in ("seq", "mpi", "standard")
    # write through the vector, read through the array
    vec.setValue(2, 42.0)
    vec.assemble()
    assert a[2] == 42.0
    vec.scale(2.0)
    np.testing.assert_array_equal(a, np.array([0.0, 2.0, 84.0, 6.0, 8.0], dtype=SCALAR))
    # write through the array, read through the vector
    a[0] = -7.0
    assert vec.getValue(0) == -7.0
    assert vec.norm(PETSc.NormType.NORM_INFINITY) == 84.0
    with vec.localForm() as local:
        assert local.getArray().__array_interface__["data"][0] == a.__array_interface__["data"][0]


@needs_petsc4py
def test_multidimensional_arrays_are_seen_flattened():
    a = np.arange(12, dtype=SCALAR).reshape(3, 4)
    vec = xp.petsc.petsc_vec(a)
    assert vec.getSize() == 12
    vec.setValue(5, 100.0)
    vec.assemble()
    assert a[1, 1] == 100.0
    np.testing.assert_array_equal(vec.getArray(readonly=True), a.reshape(-1))


@needs_petsc4py
def test_vector_keeps_the_array_alive():
    a = np.arange(1000, dtype=SCALAR)
    vec = xp.petsc.petsc_vec(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(vec.getArray(readonly=True), np.arange(1000, dtype=SCALAR))
    vec.set(3.0)
    assert vec.sum() == 3000.0


@needs_petsc4py
def test_communicator_is_used():
    a = np.ones(4, dtype=SCALAR)
    vec = xp.petsc.petsc_vec(a, comm=PETSc.COMM_SELF)
    assert vec.getComm().getSize() == 1 and vec.getLocalSize() == 4
    assert xp.petsc.petsc_vec(a).getComm().getSize() == PETSc.COMM_WORLD.getSize()


@needs_petsc4py
def test_vector_works_in_a_solve():
    """A small PETSc KSP solve on a vector that wraps the right-hand side and the solution."""
    n = 6
    A = PETSc.Mat().createAIJ([n, n], nnz=3, comm=PETSc.COMM_SELF)
    for i in range(n):
        A.setValue(i, i, 4.0)
        if i > 0:
            A.setValue(i, i - 1, -1.0)
        if i < n - 1:
            A.setValue(i, i + 1, -1.0)
    A.assemble()
    b = np.arange(1.0, n + 1.0).astype(SCALAR)
    x = np.zeros(n, dtype=SCALAR)
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setOperators(A)
    ksp.setTolerances(rtol=1e-12)
    ksp.solve(xp.petsc.petsc_vec(b, comm=PETSc.COMM_SELF), xp.petsc.petsc_vec(x, comm=PETSc.COMM_SELF))
    dense = 4.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    np.testing.assert_allclose(x, np.linalg.solve(dense, b), rtol=1e-10)


@needs_petsc4py
def test_device_array_without_gpu_petsc_is_a_runtime_error(device_only):
    has_gpu = any(PETSc.Sys.hasExternalPackage(p) for p in ("cuda", "hip"))
    if has_gpu:
        pytest.skip("this PETSc has GPU support")
    with pytest.raises(RuntimeError, match="without CUDA or HIP"):
        xp.petsc.petsc_vec(xp.zeros(3, dtype=SCALAR))


@needs_petsc4py
def test_device_array_with_wrong_dtype_is_a_type_error(device_only):
    with pytest.raises(TypeError, match="scalar type"):
        xp.petsc.petsc_vec(xp.zeros(3, dtype=np.int32))
