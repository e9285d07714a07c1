"""Morton (Z-order) keys: scales of a bounding box, keys of positions, encoding and decoding
of cells (API.md section 9.1)."""

from __future__ import annotations

import operator
import threading
from typing import Any, SupportsIndex

import numpy as np

from .. import _backend
from .._native import core
from .._reference import morton as _morton_ref
from ._common import (
    _FLOAT64,
    _UINT64,
    _as_host,
    _cupy,
    _device_empty,
    _ndarray,
    _side,
)

__all__ = ["MAX_MORTON_LEVELS", "morton_decode", "morton_encode", "morton_keys", "morton_scales"]

MAX_MORTON_LEVELS = {2: 32, 3: 21}


def _host_floats(values, name: str) -> np.ndarray:
    if _backend.is_cupy_array(values):
        values = _backend.to_numpy(values)
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"'{name}' must hold real numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64)


def _box_floats(bound):
    """A bound as a list of Python floats when that conversion is exact and needs no NumPy
    (a 1-D float64 ndarray, or a list or tuple of floats and of ints below 2**53), else None."""
    if type(bound) is _ndarray:
        return bound.tolist() if bound.dtype == _FLOAT64 and bound.ndim == 1 else None
    if type(bound) is tuple or type(bound) is list:
        items = tuple(bound)  # one snapshot: another thread may change a list between passes
        for x in items:
            if type(x) is not float and (type(x) is not int or not -(2**53) <= x <= 2**53):
                return None
        return [float(x) for x in items]
    return None


# Boxes given as float64 arrays, by the bytes of their bounds (exact: -0.0 and NaN payloads
# differ) and their levels: a simulation passes the same box at every step.
_BOXES: dict = {}
_BOXES_KEPT = 64
_MEMO_LOCK = threading.Lock()


def _plain_box(lower, upper, levels):
    """``(lower, scale)`` as tuples of Python floats when the bounds are plain (see
    :func:`_box_floats`) and pass every check of :func:`morton_scales`, else None (the
    general path then computes or refuses). Python float arithmetic is IEEE double
    arithmetic, so the scales are the bits morton_scales computes with NumPy."""
    if (
        type(lower) is _ndarray
        and type(upper) is _ndarray
        and type(levels) is int
        and lower.dtype == _FLOAT64
        and upper.dtype == _FLOAT64
        and lower.ndim == 1
        and upper.ndim == 1
    ):
        key = (lower.tobytes(), upper.tobytes(), levels)
        box = _BOXES.get(key)
        if box is None:
            box = _compute_box(lower.tolist(), upper.tolist(), levels)
            if box is not None:
                with _MEMO_LOCK:  # lookups need none: a dict read is atomic, values immutable
                    if len(_BOXES) >= _BOXES_KEPT:
                        _BOXES.clear()
                    _BOXES[key] = box
        return box
    return _compute_box(_box_floats(lower), _box_floats(upper), levels)


def _compute_box(lo, up, levels):
    """_plain_box from the bounds as lists of Python floats (None: not plain)."""
    if lo is None or up is None or len(lo) != len(up) or type(levels) is not int:
        return None
    top = MAX_MORTON_LEVELS.get(len(lo))
    if top is None or not 1 <= levels <= top:
        return None
    cells = float(2**levels)
    scale = []
    finite = 0.0
    for a, b in zip(lo, up):
        width = b - a
        if width == 0:
            return None
        s = cells / width
        # x - x is 0.0 for a finite x and NaN for an infinite or NaN one: one sum tests all.
        finite += (a - a) + (b - b) + (width - width) + (s - s)
        scale.append(s)
    if finite != 0.0:
        return None
    return tuple(lo), tuple(scale)


def morton_scales(lower: Any, upper: Any, levels: SupportsIndex) -> np.ndarray:
    """Return the scales that map the box [lower, upper] onto ``2**levels`` cells per axis.

    Pass them to the device header's ``cunumpy_morton_key2``/``cunumpy_morton_key3``
    (``<cunumpy/morton.cuh>``) to get the keys of :func:`morton_keys` bit for bit.

    Parameters
    ----------
    lower, upper : sequence of float
        The box corners, 2 or 3 values each; ``lower > upper`` on an axis reverses it.
    levels : int
        Bits per axis, in ``[1, MAX_MORTON_LEVELS[ndim]]`` (32 in 2-D, 21 in 3-D).

    Returns
    -------
    numpy.ndarray
        ``2**levels / (upper - lower)`` per axis, float64, always on the host.

    Raises
    ------
    ValueError
        ``lower`` and ``upper`` are not 1-D of equal length 2 or 3, a bound is not finite,
        an axis has ``upper == lower`` (or a width the scale overflows on), or ``levels`` is
        out of range.
    """
    box = _plain_box(lower, upper, levels)
    if box is not None:
        return np.array(box[1], dtype=_FLOAT64)
    lo = _host_floats(lower, "lower")
    up = _host_floats(upper, "upper")
    if lo.ndim != 1 or up.ndim != 1 or lo.shape != up.shape:
        raise ValueError(f"'lower' and 'upper' must be 1-D of equal length, got shapes {lo.shape} and {up.shape}")
    ndim = lo.shape[0]
    if ndim not in MAX_MORTON_LEVELS:
        raise ValueError(f"Morton keys need 2 or 3 dimensions, got {ndim}")
    if isinstance(levels, (bool, np.bool_)):
        raise ValueError("'levels' must be an integer, not bool")
    try:
        levels = operator.index(levels)
    except TypeError:
        raise ValueError(f"'levels' must be an integer, got {levels!r}") from None
    top = MAX_MORTON_LEVELS[ndim]
    if not 1 <= levels <= top:
        raise ValueError(f"'levels' must be in [1, {top}] for {ndim}-D keys, got {levels}")
    if not (np.isfinite(lo).all() and np.isfinite(up).all()):
        raise ValueError("'lower' and 'upper' must be finite")
    with np.errstate(over="ignore", divide="ignore"):
        width = up - lo
        if np.any(width == 0):
            raise ValueError(f"'upper' equals 'lower' on axis {int(np.flatnonzero(width == 0)[0])}")
        scale = float(2**levels) / width
    # An overflowing width would give scale 0 (every key 0), a tiny one an infinite scale.
    bad = ~(np.isfinite(width) & np.isfinite(scale))
    if np.any(bad):
        raise ValueError(
            f"the box [lower, upper] is too large or too small for {levels} levels on axis "
            f"{int(np.flatnonzero(bad)[0])} (width {float(width[bad][0])!r})"
        )
    return scale


def morton_keys(positions: Any, lower: Any, upper: Any, levels: SupportsIndex) -> Any:
    """Compute uint64 Morton (Z-order) keys of points in the box [lower, upper].

    Per axis the cell is ``floor((x - lower) * scale)`` clipped to ``[0, 2**levels - 1]``
    (``scale`` from :func:`morton_scales`); the key interleaves the cell bits, axis 0 in the
    lowest bit. Sorting particles by these keys puts neighbours in space near each other in
    memory.

    Parameters
    ----------
    positions : numpy.ndarray or cupy.ndarray
        Points of shape ``(n, 2)`` or ``(n, 3)``, real numbers, finite.
    lower, upper : sequence of float
        The box corners.
    levels : int
        Bits per axis (see :func:`morton_scales`).

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        ``n`` uint64 keys, on the side of ``positions``.

    Raises
    ------
    ValueError
        A wrong shape, a position that is not finite (the message names the row), or a bad
        box or level count.
    TypeError
        ``positions`` does not hold real numbers.

    Notes
    -----
    On a GPU the finiteness check reads one flag back: one synchronisation per call.
    """
    box = _plain_box(lower, upper, levels) if type(positions) is _ndarray else None
    if box is not None:
        side, pos, (lower, scale) = "numpy", positions, box
        ndim = len(scale)
    else:
        scale = morton_scales(lower, upper, levels)
        levels = operator.index(levels)
        lower = _host_floats(lower, "lower")
        ndim = scale.shape[0]
        side = _side(positions)
        if side == "cupy":
            return _morton_keys_cupy(positions, lower, scale, levels, ndim)
        pos = _as_host(positions, side, "positions")
        lower, scale = tuple(lower.tolist()), tuple(scale.tolist())
    if pos.ndim != 2 or pos.shape[1] not in (2, 3):
        raise ValueError(f"'positions' must have shape (n, 2) or (n, 3), got {tuple(pos.shape)}")
    if pos.shape[1] != ndim:
        raise ValueError(f"'positions' has {pos.shape[1]} columns but the box has {ndim} axes")
    if pos.dtype.kind not in "iuf":
        raise TypeError(f"'positions' must hold real numbers, got dtype {pos.dtype}")
    if pos.dtype != _FLOAT64 or not pos.flags.aligned:
        pos = pos.astype(np.float64)
    n = pos.shape[0]
    if side == "fake":
        result, out = _device_empty((n,), np.uint64)
    else:
        result = out = np.empty(n, dtype=_UINT64)
    core.morton_keys_into(pos, lower, scale, levels, out)
    return result


def _morton_keys_cupy(positions, lower, scale, levels, ndim):
    cp = _cupy()
    if positions.ndim != 2 or positions.shape[1] not in (2, 3):
        raise ValueError(f"'positions' must have shape (n, 2) or (n, 3), got {tuple(positions.shape)}")
    if positions.shape[1] != ndim:
        raise ValueError(f"'positions' has {positions.shape[1]} columns but the box has {ndim} axes")
    if positions.dtype.kind not in "iuf":
        raise TypeError(f"'positions' must hold real numbers, got dtype {positions.dtype}")
    pos = positions.astype(cp.float64, copy=False)
    if not bool(cp.isfinite(pos).all()):
        row = int(cp.argmin(cp.isfinite(pos).all(axis=1)))
        raise ValueError(f"'positions' must be finite; row {row} is not")
    return _morton_ref.keys_from_positions(pos, cp.asarray(lower), cp.asarray(scale), levels, xp=cp)


def morton_encode(*cells: Any) -> Any:
    """Interleave 2 or 3 integer cell arrays into uint64 Morton keys (axis 0 in the lowest bit).

    Parameters
    ----------
    *cells : array of int
        2 or 3 broadcastable arrays of non-negative cells below ``2**MAX_MORTON_LEVELS[ndim]``.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        uint64 keys of the broadcast shape.

    Raises
    ------
    ValueError
        Not 2 or 3 arrays, negative or too large cells, or shapes that do not broadcast.
    TypeError
        A cell array is not integer.

    Notes
    -----
    On a GPU the range checks read flags back: a synchronisation per call.
    """
    if len(cells) not in (2, 3):
        raise ValueError(f"morton_encode() takes 2 or 3 cell arrays, got {len(cells)}")
    ndim = len(cells)
    bits = MAX_MORTON_LEVELS[ndim]
    side = _side(*cells)
    if side == "cupy":
        cp = _cupy()
        arrays = [cp.asarray(c) for c in cells]
        for a, c in enumerate(arrays):
            _check_cells(c, a, bits, lambda x: bool(x))
        shape = (
            cp.broadcast_shapes(*(c.shape for c in arrays))
            if hasattr(cp, "broadcast_shapes")
            else np.broadcast_shapes(*(c.shape for c in arrays))
        )
        key = cp.zeros(shape, dtype=cp.uint64)
        for a, c in enumerate(arrays):
            key |= _morton_ref.spread(c.astype(cp.uint64), ndim, xp=cp) << cp.uint64(a)
        return key
    arrays = [_as_host(c, side, f"cells[{a}]") for a, c in enumerate(cells)]
    for a, c in enumerate(arrays):
        _check_cells(c, a, bits, bool)
    try:
        shape = np.broadcast_shapes(*(c.shape for c in arrays))
    except ValueError as exc:
        raise ValueError(f"the cell arrays do not broadcast: {exc}") from None
    n = int(np.prod(shape, dtype=np.int64))
    flat = []
    for c in arrays:
        if c.size == 1:
            flat.append(np.ascontiguousarray(c.reshape(1), dtype=np.uint64))
        else:
            flat.append(np.ascontiguousarray(np.broadcast_to(c, shape), dtype=np.uint64).reshape(n))
    if side == "fake":
        result, out = _device_empty(shape, np.uint64)
    else:
        result = out = np.empty(shape, dtype=np.uint64)
    if n:
        core.morton_encode_into(tuple(flat), out.reshape(n))
    return result


def _check_cells(c, axis, bits, to_bool):
    if c.dtype.kind not in "iu":
        raise TypeError(f"cell array {axis} must be integer, got dtype {c.dtype}")
    if c.size == 0:
        return
    if c.dtype.kind == "i" and to_bool((c < 0).any()):
        raise ValueError(f"cell array {axis} has negative cells")
    if c.dtype.itemsize * 8 > bits and to_bool((c >= 2**bits).any()):
        raise ValueError(f"cell array {axis} has cells >= 2**{bits}")


def morton_decode(keys: Any, ndim: SupportsIndex) -> tuple[Any, ...]:
    """Split Morton keys into their cells: the inverse of :func:`morton_encode`.

    Parameters
    ----------
    keys : array of int
        The keys.
    ndim : int
        2 or 3.

    Returns
    -------
    tuple of arrays
        ``ndim`` uint64 cell arrays of the shape of ``keys``.

    Raises
    ------
    TypeError
        ``ndim`` is not an integer, or ``keys`` is not integer.
    ValueError
        ``ndim`` is not 2 or 3, or a key has bits above the ``ndim`` interleaving.
    """
    if type(ndim) is not int:
        if isinstance(ndim, (bool, np.bool_)):
            raise TypeError("'ndim' must be an integer (2 or 3), not bool")
        try:
            ndim = operator.index(ndim)
        except TypeError:
            raise TypeError(f"'ndim' must be an integer (2 or 3), not {type(ndim).__name__}") from None
    if ndim not in (2, 3):
        raise ValueError(f"'ndim' must be 2 or 3, got {ndim!r}")
    if type(keys) is _ndarray:
        if keys.ndim == 1 and keys.dtype == _UINT64 and keys.flags.c_contiguous:
            return _morton_decode_plain(keys, ndim)
        side, k = "numpy", keys
    else:
        side = _side(keys)
        if side == "cupy":
            cp = _cupy()
            k = cp.asarray(keys)
            _check_decode_keys(k, ndim, bool)
            k = k.astype(cp.uint64)
            return tuple(_morton_ref.compact(k >> cp.uint64(a), ndim, xp=cp) for a in range(ndim))
        k = _as_host(keys, side, "keys")
    _check_decode_keys(k, ndim, bool)
    flat = np.ascontiguousarray(k, dtype=np.uint64).reshape(-1)
    results, outs = [], []
    for _ in range(ndim):
        if side == "fake":
            r, o = _device_empty(k.shape, np.uint64)
        else:
            r = o = np.empty(k.shape, dtype=np.uint64)
        results.append(r)
        outs.append(o.reshape(-1))
    core.morton_decode_into(flat, tuple(outs))
    return tuple(results)


_TOP_BIT = 2**63
_max = np.maximum.reduce  # k.max() without the Python wrapper of ndarray.max


def _morton_decode_plain(k: np.ndarray, ndim: int):
    """morton_decode of native C-contiguous 1-D uint64 NumPy keys: the checks of
    _check_decode_keys for such keys, the keys read in place and (n,) outputs, which is what
    the general path does with them."""
    n = k.shape[0]
    if ndim == 3 and n and _max(k) >= _TOP_BIT:
        raise ValueError("3-D keys have 63 bits; 'keys' has larger values")
    if ndim == 3:
        outs: tuple[np.ndarray, ...] = (np.empty(n, _UINT64), np.empty(n, _UINT64), np.empty(n, _UINT64))
    else:
        outs = (np.empty(n, _UINT64), np.empty(n, _UINT64))
    core.morton_decode_into(k, outs)
    return outs


def _check_decode_keys(k, ndim, to_bool):
    if k.dtype.kind not in "iu":
        raise TypeError(f"'keys' must be an integer array, got dtype {k.dtype}")
    if k.size == 0:
        return
    if k.dtype.kind == "i" and to_bool((k < 0).any()):
        raise ValueError("'keys' must be non-negative")
    if ndim == 3 and k.dtype.itemsize == 8 and k.dtype.kind == "u" and to_bool((k >= 2**63).any()):
        raise ValueError("3-D keys have 63 bits; 'keys' has larger values")
