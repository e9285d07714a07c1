"""What every algorithm of cunumpy.algorithms shares: the backend of the arguments (NumPy, the
fake CuPy or a real CuPy), their host arrays, and the checks of integers, keys, axes and
overlapping arrays."""

from __future__ import annotations

import operator
import sys

import numpy as np

from .. import _backend


def _cupy():
    return sys.modules["cupy"]


def _fake_active() -> bool:
    return _backend.fake_cupy_active()


def _host(a) -> np.ndarray:
    """The NumPy array behind a fake CuPy array (not a copy: writes change the device array)."""
    from .._fake_cupy import host_buffer  # the same function as kernel_testing.host_buffer

    return host_buffer(a)


def _side(*arrays) -> str:
    """'numpy', 'fake' or 'cupy' for arguments that all live on one backend (else TypeError)."""
    present = [a for a in arrays if a is not None]
    _backend.assert_same_backend(*present)
    if not any(_backend.is_cupy_array(a) for a in present):
        return "numpy"
    return "fake" if _fake_active() else "cupy"


def _as_host(a, side: str, name: str) -> np.ndarray:
    """The NumPy array to compute on: the array itself, the fake's buffer, or array-likes."""
    if side == "fake":
        return _host(a)
    if isinstance(a, np.ma.MaskedArray):
        # The C core reads the data buffer only; a silently ignored mask gives wrong results.
        raise TypeError(
            f"'{name}' is a masked array (numpy.ma); masks are not supported: pass "
            f"'{name}.filled(...)' or '{name}.compressed()'"
        )
    if isinstance(a, np.ndarray):
        return a
    try:
        return np.asarray(a)
    except TypeError as exc:
        raise TypeError(f"'{name}' must be an array, not {type(a).__name__}") from exc


# Exact-type tests of the fast paths: an argument whose type is exactly numpy.ndarray lives on
# the host, is no masked array and needs no conversion, so the backend dispatch (_side,
# _as_host) can be skipped for it. Subclasses, array-likes and device arrays take the general
# path, which gives the same results and errors.
_ndarray = np.ndarray
_INT64 = np.dtype(np.int64)
_UINT64 = np.dtype(np.uint64)
_FLOAT64 = np.dtype(np.float64)
_FLOAT16 = np.dtype(np.float16)


def _plain(arrays) -> bool:
    """True if every item is exactly a numpy.ndarray (True for none)."""
    for a in arrays:  # noqa: SIM110 - a plain loop: all() over a generator costs more on small inputs
        if type(a) is not _ndarray:
            return False
    return True


def _device_empty(shape, dtype):
    """A new fake device array and its host buffer."""
    out = _cupy().empty(shape, dtype=dtype)
    return out, _host(out)


def _index(value, name: str) -> int:
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"'{name}' must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"'{name}' must be an integer, not {type(value).__name__}") from None


def _require_integer_keys(keys, name: str):
    if keys.dtype.kind not in "iu":
        raise TypeError(f"'{name}' must be an integer array, got dtype {keys.dtype}")


def _require_1d(a, name: str):
    if a.ndim != 1:
        raise ValueError(f"'{name}' must be 1-D, got shape {tuple(a.shape)}")


def _native(a: np.ndarray) -> np.ndarray:
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def _c_keys(keys: np.ndarray) -> np.ndarray:
    """Keys the C segment functions read in place (any 8 to 64-bit integer); only byte-swapped
    keys are copied, in their own width (never widened: 2**31 int8 keys stay 2 GiB)."""
    return _native(keys)


# Work bound of the exact overlap test: NumPy's exact shares_memory doubles its time with every
# dimension of a crafted strided view (seconds at 24 dimensions, minutes at 30; NumPy allows
# 64). Ordinary views need a handful of steps; what is not decided within the bound is refused.
_OVERLAP_MAX_WORK = 100_000
_TooHardError = getattr(np, "exceptions", np).TooHardError


def _shares_memory(a: np.ndarray, b: np.ndarray, what: str) -> bool:
    """Do two host arrays share memory? Exact, with bounded work; ValueError naming `what`
    when the answer cannot be found quickly."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=_OVERLAP_MAX_WORK))  # type: ignore[arg-type]  # numpy stubs allow only -1 and 0; the bound is documented
    except _TooHardError:
        raise ValueError(
            f"cannot tell quickly whether {what} share memory (strided views with many "
            "dimensions); pass a copy (numpy.ascontiguousarray)"
        ) from None


def _aligned(a: np.ndarray) -> np.ndarray:
    return a if a.flags.aligned else a.copy()


def _axis_of(a, axis: int, index: int, n: int, per: str = "key") -> int:
    ndim = a.ndim
    ax = axis + ndim if axis < 0 else axis
    if not 0 <= ax < ndim:
        raise ValueError(f"array {index} (shape {tuple(a.shape)}) has no axis {axis}")
    if a.shape[ax] != n:
        raise ValueError(f"array {index} has {a.shape[ax]} entries along axis {axis}, expected {n} (one per {per})")
    return ax


def _shares(cp, a, b) -> bool:
    """Do two device arrays share memory (exactly where CuPy can tell)?"""
    if a.size == 0 or b.size == 0:
        return False
    if hasattr(cp, "shares_memory"):
        return bool(cp.shares_memory(a, b))
    return _ptr_overlap(a, b)


def _ptr_overlap(a, b) -> bool:
    a0, b0 = a.data.ptr, b.data.ptr
    return a0 < b0 + max(b.nbytes, 1) and b0 < a0 + max(a.nbytes, 1)
