"""``xp.scipy.linalg.solve_circulant``: SciPy's circulant solve on the arrays' backend.

CuPy has no ``cupyx.scipy.linalg.solve_circulant``; this FFT solve works on both backends
with SciPy's arguments, result dtypes and singular handling, and needs no SciPy.
"""

from __future__ import annotations

import operator
import sys

import numpy as np

from .. import _backend

__all__ = ["solve_circulant"]

_SINGULAR_MODES = ("raise", "lstsq")


def _is_host_array(value) -> bool:
    return isinstance(value, np.ndarray) and value.ndim > 0


def _array_module(c, b):
    """NumPy or CuPy: the backend of the array arguments (lists and scalars join it)."""
    c_device, b_device = _backend.is_cupy_array(c), _backend.is_cupy_array(b)
    if c_device or b_device:
        for name, value, device in (("c", c, c_device), ("b", b, b_device)):
            if not device and _is_host_array(value):
                other = "b" if name == "c" else "c"
                raise TypeError(
                    f"solve_circulant(): {name!r} is a host (NumPy) array but {other!r} is a "
                    "device (CuPy) array; both must live on the same backend"
                )
        return sys.modules["cupy"]
    if isinstance(c, np.ndarray) or isinstance(b, np.ndarray) or _backend.get_backend() == "numpy":
        return np
    return sys.modules["cupy"]


def _as_numeric(module, value, name):
    try:
        array = module.atleast_1d(module.asarray(value))
    except (TypeError, ValueError) as exc:  # CuPy refuses strings and objects with ValueError
        raise TypeError(f"solve_circulant(): {name!r} must be numeric ({exc})") from None
    if array.dtype.kind not in "biufc":
        raise TypeError(f"solve_circulant(): {name!r} must be numeric, got dtype {array.dtype}")
    return array


def _axis(value, name):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"solve_circulant(): {name!r} must be an int, not {type(value).__name__}") from None


def _axis_length(array, axis, name, axis_name):
    position = axis + array.ndim if axis < 0 else axis
    if not 0 <= position < array.ndim:
        raise ValueError(
            f"solve_circulant(): {axis_name}={axis} is out of bounds for {name!r} with {array.ndim} dimension(s)"
        )
    return array.shape[position]


def solve_circulant(c, b, singular="raise", tol=None, caxis=-1, baxis=0, outaxis=0):
    """Solve ``C x = b`` where ``C`` is the circulant matrix of ``c``, by FFTs.

    Same arguments and results as ``scipy.linalg.solve_circulant``, computed on the
    arrays' backend (both NumPy or both CuPy; lists join the array's side, two lists the
    active backend). The result is real unless ``c`` or ``b`` is complex; integers give
    float64, float32 stays float32. A near-singular ``C`` (some ``|fft(c)| <= tol``,
    default ``tol = max|fft(c)| * n * eps``) raises ``numpy.linalg.LinAlgError`` with
    ``singular="raise"`` (one synchronisation on CuPy), and gives the least-squares
    solution with ``singular="lstsq"`` (no synchronisation). Lengths that differ along
    ``caxis`` and ``baxis`` raise ValueError.
    """
    if not isinstance(singular, str) or singular not in _SINGULAR_MODES:
        raise ValueError(f"solve_circulant(): 'singular' must be 'raise' or 'lstsq', got {singular!r}")
    caxis, baxis, outaxis = _axis(caxis, "caxis"), _axis(baxis, "baxis"), _axis(outaxis, "outaxis")
    module = _array_module(c, b)
    c = _as_numeric(module, c, "c")
    b = _as_numeric(module, b, "b")
    n_c = _axis_length(c, caxis, "c", "caxis")
    n_b = _axis_length(b, baxis, "b", "baxis")
    if n_c != n_b:
        raise ValueError(
            f"solve_circulant(): incompatible lengths: 'c' has {n_c} entries along caxis={caxis} "
            f"(shape {tuple(c.shape)}) but 'b' has {n_b} along baxis={baxis} (shape {tuple(b.shape)})"
        )
    if b.size == 0:
        # The dtype a non-empty solve would have, from a tiny system of the same dtypes.
        dtype = solve_circulant(module.arange(3, dtype=c.dtype), module.ones(3, dtype=b.dtype), "lstsq").dtype
        return module.empty_like(b, dtype=dtype)

    fc = module.fft.fft(module.moveaxis(c, caxis, -1), axis=-1)
    abs_fc = module.abs(fc)
    if tol is None:
        # numpy.linalg.matrix_rank's tolerance, per system of a batch.
        tol = abs_fc.max(axis=-1, keepdims=True) * n_c * np.finfo(np.float64).eps
    elif (module is np and _backend.is_cupy_array(tol)) or (module is not np and _is_host_array(tol)):
        raise TypeError("solve_circulant(): 'tol' must live on the same backend as 'c' and 'b'")
    elif not (_backend.is_cupy_array(tol) or isinstance(tol, np.ndarray)):
        try:
            tol = float(tol)
        except (TypeError, ValueError):
            raise TypeError(
                f"solve_circulant(): 'tol' must be a real number or None, not {type(tol).__name__}"
            ) from None
    near_zero = abs_fc <= tol
    fb = module.fft.fft(module.moveaxis(b, baxis, -1), axis=-1)
    if singular == "raise":
        if bool(near_zero.any()):
            raise np.linalg.LinAlgError("solve_circulant(): near singular circulant matrix")
        q = fb / fc
    else:
        # Least squares: the near-zero modes of C contribute nothing to x.
        q = module.where(near_zero, 0, fb / module.where(near_zero, 1, fc))
    x = module.fft.ifft(q, axis=-1)
    if c.dtype.kind != "c" and b.dtype.kind != "c":
        x = x.real
    if outaxis != -1:
        x = module.moveaxis(x, -1, outaxis)
    return x
