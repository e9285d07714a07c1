"""PETSc vectors over device arrays (API.md section 12).

``petsc_vec(array)`` wraps the memory of a NumPy or CuPy array as a ``petsc4py.PETSc.Vec``
without copying: a host vector over the NumPy buffer, a CUDA/HIP vector over the CuPy
memory through DLPack. The
array and the vector share memory, so call ``xp.synchronize()`` between CuPy and PETSc
work on it. petsc4py is imported on the first call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _backend

__all__ = ["petsc_vec"]

# Attribute of the Vec that holds the wrapped array (PETSc objects keep Python attributes).
_ARRAY_ATTRIBUTE = "__cunumpy_array__"


def _import_petsc():
    try:
        from petsc4py import PETSc
    except ImportError as exc:
        raise ImportError(
            f"petsc_vec() needs petsc4py, which could not be imported ({type(exc).__name__}: {exc})"
        ) from exc
    return PETSc


def _has_gpu_support(PETSc) -> tuple[bool, str]:
    """(whether PETSc has CUDA or HIP vectors, which)."""
    for package in ("cuda", "hip"):
        try:
            if PETSc.Sys.hasExternalPackage(package):
                return True, package
        except Exception:  # noqa: BLE001 - a PETSc build that cannot answer has no such package
            continue
    return False, ""


def petsc_vec(array: Any, comm: Any = None) -> Any:
    """Return a ``PETSc.Vec`` sharing an array's memory (zero copy; DLPack for CuPy arrays).

    Writes through the vector show in the array and back. NumPy arrays give a host (seq/mpi)
    vector, CuPy arrays a CUDA or HIP vector. The vector keeps a reference to the array; a
    multi-dimensional array is seen flattened. Call :func:`cunumpy.synchronize` between CuPy
    and PETSc work on shared memory.

    Parameters
    ----------
    array : numpy.ndarray or cupy.ndarray
        C-contiguous, writable, of dtype ``PETSc.ScalarType``; with several ranks, this
        rank's part of the vector.
    comm : petsc4py.PETSc.Comm, optional
        The communicator (default ``PETSc.COMM_WORLD``).

    Returns
    -------
    petsc4py.PETSc.Vec
        The vector.

    Raises
    ------
    ImportError
        petsc4py is not installed.
    TypeError
        ``array`` is not a NumPy or CuPy array, or its dtype is not ``PETSc.ScalarType``.
    ValueError
        ``array`` is not C-contiguous or is read-only.
    RuntimeError
        A CuPy array and a PETSc built without CUDA/HIP support (never a silent host copy).
    """
    device = _backend.is_cupy_array(array)
    if not device and not isinstance(array, np.ndarray):
        raise TypeError(f"petsc_vec(): 'array' must be a NumPy or CuPy array, not {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError(
            "petsc_vec(): 'array' must be C-contiguous to be shared with PETSc "
            "(make a contiguous copy first, e.g. xp.ascontiguousarray(array))"
        )
    if not device and not array.flags.writeable:
        # PETSc would write into it (a read-only mapping would crash the process).
        raise ValueError(
            "petsc_vec(): 'array' is read-only; PETSc vectors write to their memory (pass a writable copy)"
        )
    PETSc = _import_petsc()
    scalar = np.dtype(PETSc.ScalarType)
    if array.dtype != scalar:
        raise TypeError(
            f"petsc_vec(): 'array' has dtype {array.dtype} but this PETSc's scalar type is {scalar}; "
            f"convert it first, e.g. array.astype({scalar.name!r})"
        )
    if device:
        supported, _ = _has_gpu_support(PETSc)
        if not supported:
            raise RuntimeError(
                "petsc_vec(): 'array' is a CuPy array but this PETSc was built without CUDA or HIP "
                "support; refusing to copy it to the host silently (use xp.to_numpy(array) "
                "explicitly, or a GPU-enabled PETSc)"
            )
    flat = array.reshape(-1)  # a view: C-contiguous arrays flatten without a copy
    if comm is None:
        comm = PETSc.COMM_WORLD
    if device:
        vec = PETSc.Vec().createWithDLPack(flat, comm=comm)
    else:
        # The NumPy buffer is used in place (dtype and layout are checked above). Not
        # createWithDLPack: petsc4py 3.18 (Debian 12) segfaults on NumPy arrays there.
        vec = PETSc.Vec().createWithArray(flat, comm=comm)
    vec.setAttr(_ARRAY_ATTRIBUTE, array)
    return vec
