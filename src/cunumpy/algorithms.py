"""Particle-code algorithms on either backend (API.md section 9): Morton keys, sort by key,
segment sums, cell offsets, run boundaries and compaction.

Host arrays are handled by the C core (``cunumpy._core``) with the GIL released; outputs are
allocated here with NumPy and filled there. Arrays of a real CuPy are handled with CuPy;
arrays of the fake CuPy (a host stand-in) run the same C code on their host buffers. Every
argument is checked before anything is written. Masked arrays (``numpy.ma``) are refused
with a TypeError (their masks would be ignored); narrow integer and bool keys are read in
place, never widened.
"""

from __future__ import annotations

import operator
import sys
import threading

import numpy as np

from . import _backend
from ._native import core
from ._reference import (
    morton as _morton_ref,
    philox as _philox_ref,  # noqa: F401  (re-used by cunumpy.rng)
)

__all__ = [
    "MAX_MORTON_LEVELS",
    "SegmentPlan",
    "cell_offsets",
    "compact_by_mask",
    "morton_decode",
    "morton_encode",
    "morton_keys",
    "morton_scales",
    "segment_boundaries",
    "segment_sum",
    "sort_by_key",
]

MAX_MORTON_LEVELS = {2: 32, 3: 21}

# --------------------------------------------------------------------------- backends


def _cupy():
    return sys.modules["cupy"]


def _fake_active() -> bool:
    return _backend.fake_cupy_active()


def _host(a) -> np.ndarray:
    """The NumPy array behind a fake CuPy array (not a copy: writes change the device array)."""
    from ._fake_cupy import host_buffer  # the same function as kernel_testing.host_buffer

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


# --------------------------------------------------------------------------- Morton keys


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
    if (type(lower) is _ndarray and type(upper) is _ndarray and type(levels) is int
            and lower.dtype == _FLOAT64 and upper.dtype == _FLOAT64 and lower.ndim == 1 and upper.ndim == 1):
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


def morton_scales(lower, upper, levels) -> np.ndarray:
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
        raise ValueError(
            f"'lower' and 'upper' must be 1-D of equal length, got shapes {lo.shape} and {up.shape}"
        )
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


def morton_keys(positions, lower, upper, levels):
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


def morton_encode(*cells):
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
        shape = cp.broadcast_shapes(*(c.shape for c in arrays)) if hasattr(cp, "broadcast_shapes") else np.broadcast_shapes(*(c.shape for c in arrays))
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


def morton_decode(keys, ndim):
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


# --------------------------------------------------------------------------- sort by key


def _axis_of(a, axis: int, index: int, n: int, per: str = "key") -> int:
    ndim = a.ndim
    ax = axis + ndim if axis < 0 else axis
    if not 0 <= ax < ndim:
        raise ValueError(f"array {index} (shape {tuple(a.shape)}) has no axis {axis}")
    if a.shape[ax] != n:
        raise ValueError(
            f"array {index} has {a.shape[ax]} entries along axis {axis}, expected {n} (one per {per})"
        )
    return ax


def sort_by_key(keys, *arrays, axis=0):
    """Sort arrays by 1-D integer keys, stably.

    Parameters
    ----------
    keys : numpy.ndarray or cupy.ndarray
        1-D keys.
    *arrays : numpy.ndarray or cupy.ndarray
        Arrays with one entry per key along ``axis``, reordered like the keys.
    axis : int, optional
        The axis of ``arrays`` that runs along the keys (default 0); ``-1`` takes each
        array's last axis (component-major ``(ncomp, n)`` arrays next to ``(n,)`` ones).

    Returns
    -------
    tuple
        ``(keys[order], order, *sorted_arrays)``: new arrays, ``order`` int64.

    Raises
    ------
    ValueError
        ``keys`` is not 1-D or an array's length along ``axis`` differs.
    TypeError
        Host and device arrays are mixed.

    On a GPU this function does not synchronise: it queues work and returns.
    """
    axis = _index(axis, "axis")
    if type(keys) is _ndarray and _plain(arrays):
        side, k, hosts = "numpy", keys, arrays
        _require_1d(k, "keys")
        n = k.shape[0]
    else:
        side = _side(keys, *arrays)
        if side == "cupy":
            return _sort_by_key_cupy(keys, arrays, axis)
        k = _as_host(keys, side, "keys")
        _require_1d(k, "keys")
        n = k.shape[0]
        hosts = tuple([_as_host(a, side, f"arrays[{i}]") for i, a in enumerate(arrays)])
    axes = [_axis_of(h, axis, i, n) for i, h in enumerate(hosts)]
    if side == "fake":
        out_keys, ok = _device_empty((n,), k.dtype)
        out_order, oo = _device_empty((n,), np.int64)
    else:
        out_keys = ok = np.empty(n, dtype=k.dtype)
        out_order = oo = np.empty(n, dtype=_INT64)
    _argsort_into(k, oo, ok)
    if not hosts:
        return (out_keys, out_order)
    sorted_arrays = []
    for h, ax in zip(hosts, axes):
        if side == "fake":
            r, o = _device_empty(h.shape, h.dtype)
        else:
            r = o = np.empty(h.shape, h.dtype)
        _take_into(h, oo, ax, o)
        sorted_arrays.append(r)
    return (out_keys, out_order, *sorted_arrays)


def _take_into(h: np.ndarray, order: np.ndarray, ax: int, out: np.ndarray) -> None:
    # Rows of a C-contiguous array along its first axis move in C on the pool (the order is
    # our own, so every index is valid); anything else goes through np.take.
    if (ax == 0 and h.flags.c_contiguous and out.flags.c_contiguous and not h.dtype.hasobject
            and out.dtype == h.dtype):
        core.take_rows(h, order, out)
    else:
        np.take(h, order, axis=ax, out=out)


def _argsort_into(k: np.ndarray, order: np.ndarray, sorted_keys: np.ndarray) -> None:
    kind, size = k.dtype.kind, k.dtype.itemsize
    if kind in "iub" and size in (1, 2, 4, 8):
        # Read in place, narrow keys too (no widened copy); a byte-swapped or misaligned
        # array is copied once in its own width.
        if not (k.dtype.isnative and k.flags.aligned):
            k = k.astype(k.dtype.newbyteorder("="))
            tmp = np.empty(k.shape[0], dtype=k.dtype)
            core.radix_argsort(k, order, tmp)
            sorted_keys[...] = tmp
        else:
            core.radix_argsort(k, order, sorted_keys)
    else:
        order[...] = np.argsort(k, kind="stable")
        np.take(k, order, out=sorted_keys)


def _sort_by_key_cupy(keys, arrays, axis):
    cp = _cupy()
    _require_1d(keys, "keys")
    n = keys.shape[0]
    axes = [_axis_of(a, axis, i, n) for i, a in enumerate(arrays)]
    try:
        order = cp.argsort(keys, kind="stable")
    except TypeError:  # a CuPy without `kind`: its argsort is a stable sort anyway
        order = cp.argsort(keys)
    order = order.astype(cp.int64, copy=False)
    return (keys[order], order, *(cp.take(a, order, axis=ax) for a, ax in zip(arrays, axes)))


# --------------------------------------------------------------------------- segment sums

_DEVICE_SUM_DTYPES = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.complex64, np.complex128))


def _result_dtype(values) -> np.dtype:
    dt = np.dtype(values.dtype)
    if dt.kind in "fc":
        # A byte-swapped input (">f8" on a little-endian host) sums into the native type.
        return dt if dt.isnative else dt.newbyteorder("=")
    if dt.kind in "iub":
        return np.dtype(np.float64)
    raise TypeError(f"'values' must have a numeric dtype, got {dt}")


def _check_n_segments(n_segments) -> int:
    if type(n_segments) is int and 0 <= n_segments < 2**63:
        return n_segments
    n_segments = _index(n_segments, "n_segments")
    if n_segments < 0:
        raise ValueError(f"'n_segments' must be >= 0, got {n_segments}")
    if n_segments >= 2**63:
        raise ValueError(f"'n_segments' must be < 2**63, got {n_segments}")
    return n_segments


def _check_out(out, values, keys, shape, dtype, side):
    if out is None:
        return
    if side == "cupy" or side == "fake":
        if not _backend.is_cupy_array(out):
            raise TypeError(f"'out' must be a device array like 'values', not {type(out).__name__}")
    elif not isinstance(out, np.ndarray):
        raise TypeError(f"'out' must be a numpy.ndarray, not {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"'out' must have shape {tuple(shape)}, got {tuple(out.shape)}")
    if np.dtype(out.dtype) != dtype:
        raise ValueError(f"'out' must have dtype {dtype}, got {out.dtype}")
    if not out.flags.c_contiguous:
        raise ValueError("'out' must be C-contiguous")
    if side == "cupy":
        cp = _cupy()
        if out.device.id != values.device.id:
            raise ValueError(f"'out' is on device {out.device.id}, 'values' on device {values.device.id}")
        alias = cp.shares_memory(out, values) if hasattr(cp, "shares_memory") else _ptr_overlap(out, values)
        alias = alias or (keys is not None and _ptr_overlap(out, keys))
    else:
        ho = _host(out) if side == "fake" else out
        if not ho.flags.writeable:
            raise ValueError("'out' must be writable")
        if not ho.flags.aligned:
            raise ValueError("'out' must be aligned")
        hv = _host(values) if side == "fake" else values
        hk = None if keys is None else _host(keys) if side == "fake" else keys
        if core.extents_disjoint((ho, hv) if hk is None else (ho, hv, hk)):
            return  # no two can overlap (a bounds test): the exact tests below would agree
        alias = isinstance(hv, np.ndarray) and _shares_memory(ho, hv, "'out' and 'values'")
        if hk is not None:
            alias = alias or (isinstance(hk, np.ndarray) and _shares_memory(ho, hk, "'out' and 'keys'"))
    if alias:
        raise ValueError("'out' must not share memory with 'values' or the keys")


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


def _sum_host(values: np.ndarray, keys: np.ndarray, out: np.ndarray, n_segments: int, check_first: bool):
    """Sum rows of host ``values`` into host ``out`` (C-contiguous, result dtype, overwritten)."""
    n, ndim = values.shape[0], values.ndim
    # Elements per row (np.prod costs microseconds; 1-D and 2-D values need none).
    m = 1 if ndim == 1 else values.shape[1] if ndim == 2 else int(np.prod(values.shape[1:], dtype=np.int64))
    rdt = out.dtype
    if rdt == _FLOAT16:
        acc = np.empty((n_segments, m), dtype=np.float32)
        _sum_host(values.reshape(n, m).astype(np.float32), keys, acc, n_segments, check_first)
        out.reshape(n_segments, m)[...] = acc
        return
    if rdt.kind not in "fc" or rdt.itemsize not in (4, 8, 16) or (rdt.itemsize > 8 and rdt == np.longdouble):
        # long double and friends: the twin (np.add.at)
        from ._reference.segment import segment_sum_into as twin

        twin(values.reshape(n, m).astype(rdt), _c_keys(keys), out.reshape(n_segments, m), check_first)
        return
    v = values if ndim == 2 else values.reshape(n, m)
    if v.dtype != rdt or not v.dtype.isnative or not v.flags.aligned:
        v = v.astype(rdt)
    o = out if out.ndim == 2 else out.reshape(n_segments, m)
    if rdt.kind == "c":
        if m and v.strides[1] != v.itemsize:
            v = np.ascontiguousarray(v)
        ft = np.float64 if rdt == np.complex128 else np.float32
        v = v.view(ft) if m else np.empty((n, 0), dtype=ft)
        o = o.view(ft) if m else np.empty((n_segments, 0), dtype=ft)
    core.segment_sum_into(v, _c_keys(keys), o, check_first)


class SegmentPlan:
    """Validated, copied segment keys for repeated :meth:`sum` calls.

    Build it once when the keys change (after a sort), then ``plan.sum(values, out=out)``
    per step without checks or synchronisation. Negative keys are dropped. A plan on a GPU
    is bound to the device current at creation.

    Parameters
    ----------
    keys : numpy.ndarray or cupy.ndarray
        1-D integer keys, each below ``n_segments``.
    n_segments : int
        The number of segments (cells).

    Raises
    ------
    ValueError
        ``keys`` is not 1-D, a key is ``>= n_segments``, or ``n_segments`` is negative.
    TypeError
        ``keys`` is not integer.

    Notes
    -----
    On a GPU the constructor checks the key range on the device and reads the answer back:
    one synchronisation, at construction only.
    """

    __slots__ = ("_device", "_keys", "_n_segments", "_scatter", "_side")

    def __init__(self, keys, n_segments):
        n_segments = _check_n_segments(n_segments)
        side = "numpy" if type(keys) is _ndarray else _side(keys)
        self._side = side
        self._device = None
        self._scatter = None
        if side == "cupy":
            cp = _cupy()
            _require_1d(keys, "keys")
            _require_integer_keys(keys, "keys")
            if keys.size and bool((keys >= n_segments).any()):
                bad = int(cp.argmax(keys >= n_segments))
                raise ValueError(f"'keys' must be < n_segments = {n_segments}; keys[{bad}] is out of range")
            self._device = cp.cuda.runtime.getDevice()
            self._keys = keys.copy()
            # Negative keys go to a spare row that is never read: no scalar reads in sum().
            k64 = keys.astype(cp.int64)
            self._scatter = cp.where(k64 < 0, n_segments, k64)
        else:
            k = _as_host(keys, side, "keys")
            _require_1d(k, "keys")
            _require_integer_keys(k, "keys")
            ck = _c_keys(k)
            core.segment_check_keys(ck, n_segments)
            if side == "fake":
                self._device = _cupy().cuda.runtime.getDevice()
                self._keys = keys.copy()
                # sum() trusts the validated keys: they cannot be written afterwards.
                _host(self._keys).flags.writeable = False
            else:
                self._keys = np.array(ck, copy=True)
                self._keys.flags.writeable = False
        self._n_segments = n_segments

    @property
    def n_segments(self) -> int:
        """The number of segments (read-only)."""
        return self._n_segments

    @property
    def keys(self):
        """The plan's own copy of the keys: read-only on the host, since :meth:`sum` trusts
        them (on a GPU the plan sums with its own scatter index, never with this array)."""
        return self._keys

    def __repr__(self) -> str:
        return f"SegmentPlan(n_keys={self._keys.shape[0]}, n_segments={self._n_segments}, backend={'cupy' if self._side != 'numpy' else 'numpy'})"

    def sum(self, values, *, out=None):
        """``out[k] = sum(values[keys == k])`` over the first axis; ``out`` is overwritten."""
        return _segment_sum(values, self._keys, self._n_segments, out, plan=self)


_SUM_PLAIN_DTYPES = (_FLOAT64, np.dtype(np.float32))


def _segment_sum(values, keys, n_segments, out, plan=None):
    # Every argument exactly NumPy (and a host plan): what the dispatch below would find.
    plain = (type(values) is _ndarray and type(keys) is _ndarray and (out is None or type(out) is _ndarray)
             and (plan is None or plan._side == "numpy"))
    if plain:
        result = _segment_sum_plain(values, keys, n_segments, out, plan is None)
        if result is not None:
            return result
        side = "numpy"
    else:
        side = _side(values, keys, out)
        if plan is not None:
            plan_side = "numpy" if plan._side == "numpy" else "device"
            if (side == "numpy") != (plan_side == "numpy"):
                raise TypeError(
                    f"arrays live on different backends: the plan is on {'numpy' if plan_side == 'numpy' else 'cupy'}"
                )
            if plan._device is not None:
                current = _cupy().cuda.runtime.getDevice()
                if current != plan._device:
                    raise ValueError(f"the SegmentPlan belongs to device {plan._device}, but device {current} is current")
        if side == "cupy":
            return _segment_sum_cupy(values, keys, n_segments, out, plan)
    v = values if plain else _as_host(values, side, "values")
    if v.ndim < 1:
        raise ValueError("'values' must have at least 1 dimension (one row per key)")
    rdt = _result_dtype(v)
    if plan is None:
        k = keys if plain else _as_host(keys, side, "keys")
        _require_1d(k, "keys")
        _require_integer_keys(k, "keys")
    else:
        k = _host(keys) if side == "fake" else keys
    if v.shape[0] != k.shape[0]:
        raise ValueError(f"'values' must have one row per key: {k.shape[0]} rows expected along axis 0, got {v.shape[0]}")
    if plan is not None and side == "fake" and np.dtype(v.dtype) not in _DEVICE_SUM_DTYPES:
        raise TypeError(f"'values' dtype {v.dtype} is not supported on the device (float16/32/64, complex64/128)")
    shape = (n_segments, *v.shape[1:])
    _check_out(out, values, None if plan is not None else keys, shape, rdt, side)
    if out is None:
        if side == "fake":
            result, o = _device_empty(shape, rdt)
        else:
            result = o = np.empty(shape, dtype=rdt)
        check_first = False
    else:
        result = out
        o = _host(out) if side == "fake" else out
        check_first = plan is None
    _sum_host(v, k, o, n_segments, check_first)
    return result


def _segment_sum_plain(values: np.ndarray, keys: np.ndarray, n_segments: int, out, check_keys: bool):
    """The common call: aligned native float64 or float32 values of 1 or 2 dimensions, native
    1-D integer keys with one per row, and no ``out`` or an ``out`` that passes every check of
    _check_out (exactly a NumPy array, disjoint from values and keys by the bounds test). The
    C call of the general path, without its conversions; None for anything else (the general
    path then computes or refuses). ``check_keys``: the keys come from no plan, so with an
    ``out`` they are checked before it is written, as the general path does."""
    ndim, dt, kdt = values.ndim, values.dtype, keys.dtype
    if (ndim > 2 or ndim == 0 or keys.ndim != 1 or dt not in _SUM_PLAIN_DTYPES or not values.flags.aligned
            or kdt.kind not in "iu" or not kdt.isnative or keys.shape[0] != values.shape[0]):
        return None
    shape = (n_segments, values.shape[1]) if ndim == 2 else (n_segments,)
    if out is None:
        out = np.empty(shape, dt)
        check_keys = False
    else:
        flags = out.flags
        if (out.shape != shape or out.dtype != dt or not (flags.c_contiguous and flags.writeable and flags.aligned)
                or not core.extents_disjoint((out, values, keys))):
            return None
    if ndim == 2:
        core.segment_sum_into(values, keys, out, check_keys)
    else:
        core.segment_sum_into(values.reshape(values.shape[0], 1), keys, out.reshape(n_segments, 1), check_keys)
    return out


def _segment_sum_cupy(values, keys, n_segments, out, plan):
    cp = _cupy()
    import cupyx

    if values.ndim < 1:
        raise ValueError("'values' must have at least 1 dimension (one row per key)")
    rdt = _result_dtype(values)
    if plan is not None and np.dtype(values.dtype) not in _DEVICE_SUM_DTYPES:
        raise TypeError(f"'values' dtype {values.dtype} is not supported on CUDA (float16/32/64, complex64/128)")
    if plan is None:
        _require_1d(keys, "keys")
        _require_integer_keys(keys, "keys")
    if values.shape[0] != keys.shape[0]:
        raise ValueError(f"'values' must have one row per key: {keys.shape[0]} rows expected along axis 0, got {values.shape[0]}")
    shape = (n_segments, *values.shape[1:])
    _check_out(out, values, None if plan is not None else keys, shape, rdt, "cupy")
    if plan is None:
        if keys.size and bool((keys >= n_segments).any()):
            bad = int(cp.argmax(keys >= n_segments))
            raise ValueError(f"'keys' must be < n_segments = {n_segments}; keys[{bad}] is out of range")
        k64 = keys.astype(cp.int64)
        scatter = cp.where(k64 < 0, n_segments, k64)
    else:
        scatter = plan._scatter
    n = values.shape[0]
    m = int(np.prod(values.shape[1:], dtype=np.int64))
    acc_dt = cp.float32 if rdt == np.float16 else rdt
    v = cp.ascontiguousarray(values.reshape(n, m).astype(acc_dt, copy=False))
    if np.dtype(acc_dt).kind == "c":
        ft = cp.float64 if acc_dt == np.complex128 else cp.float32
        v = v.view(ft)
        acc = cp.zeros((n_segments + 1, 2 * m), dtype=ft)
    else:
        acc = cp.zeros((n_segments + 1, m), dtype=acc_dt)
    if n and m:
        cupyx.scatter_add(acc, scatter, v)
    summed = acc[:n_segments]
    if np.dtype(acc_dt).kind == "c":
        summed = cp.ascontiguousarray(summed).view(acc_dt)
    summed = summed.reshape(shape)
    if out is None:
        return summed.astype(rdt, copy=False) if rdt != acc_dt else cp.ascontiguousarray(summed)
    out[...] = summed
    return out


def segment_sum(values, keys, n_segments, *, out=None):
    """Sum values per segment: ``out[k] = sum(values[keys == k])`` over the first axis.

    Negative keys are dropped. For repeated sums with the same keys, use
    :class:`SegmentPlan`.

    Parameters
    ----------
    values : numpy.ndarray or cupy.ndarray
        Shape ``(n, ...)``: one row per key.
    keys : numpy.ndarray or cupy.ndarray
        ``n`` integer keys below ``n_segments``.
    n_segments : int
        The number of segments.
    out : numpy.ndarray or cupy.ndarray, optional
        Overwritten and returned: exact shape and dtype, C-contiguous, aligned, writable, not
        sharing memory with the inputs.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        Shape ``(n_segments, *values.shape[1:])``; floating and complex dtypes are kept
        (float16 is accumulated in float32), integer and bool values give float64.

    Raises
    ------
    ValueError
        A key is out of range, the lengths differ, ``n_segments`` is negative, or ``out``
        does not fit.
    TypeError
        Non-integer keys, unsupported values, or host and device arrays mixed.

    Notes
    -----
    Every check runs before anything is written. On a GPU the key-range check reads one flag
    back: one synchronisation per call (none with :meth:`SegmentPlan.sum`).
    """
    n_segments = _check_n_segments(n_segments)
    return _segment_sum(values, keys, n_segments, out)


# --------------------------------------------------------------------------- offsets and runs


def cell_offsets(sorted_cells, n_cells):
    """Return where each cell's run starts in sorted cell ids (CSR-style offsets).

    Cell ``k`` holds the entries ``[off[k], off[k + 1])`` of ``sorted_cells``.

    Parameters
    ----------
    sorted_cells : numpy.ndarray or cupy.ndarray
        1-D non-decreasing integer cell ids in ``[0, n_cells)``.
    n_cells : int
        The number of cells.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        ``n_cells + 1`` int64 offsets.

    Raises
    ------
    ValueError
        ``n_cells`` is negative, or the ids are out of range or not sorted.
    TypeError
        The ids are not integer.

    Notes
    -----
    On a GPU the range and order checks read flags back: a synchronisation per call.
    """
    n_cells = _index(n_cells, "n_cells")
    if n_cells < 0:
        raise ValueError(f"'n_cells' must be >= 0, got {n_cells}")
    if type(sorted_cells) is _ndarray:
        side, k = "numpy", sorted_cells
    else:
        side = _side(sorted_cells)
        if side == "cupy":
            return _cell_offsets_cupy(sorted_cells, n_cells)
        k = _as_host(sorted_cells, side, "sorted_cells")
    _require_1d(k, "sorted_cells")
    _require_integer_keys(k, "sorted_cells")
    if side == "fake":
        result, out = _device_empty((n_cells + 1,), np.int64)
    else:
        result = out = np.empty(n_cells + 1, dtype=_INT64)
    core.cell_offsets_into(k if k.dtype.isnative else _c_keys(k), n_cells, out)
    return result


def _cell_offsets_cupy(k, n_cells):
    cp = _cupy()
    _require_1d(k, "sorted_cells")
    _require_integer_keys(k, "sorted_cells")
    if k.size:
        if bool(k[0] < 0) or bool(k[-1] >= n_cells):
            raise ValueError(f"'sorted_cells' must be in [0, n_cells = {n_cells})")
        if k.size > 1 and bool((k[1:] < k[:-1]).any()):
            raise ValueError("'sorted_cells' must be sorted (non-decreasing)")
    return cp.searchsorted(k, cp.arange(n_cells + 1, dtype=k.dtype), side="left").astype(cp.int64)


def segment_boundaries(sorted_keys):
    """Find the runs of equal keys in sorted integer keys.

    Sparse, negative and uint64 keys are accepted.

    Parameters
    ----------
    sorted_keys : numpy.ndarray or cupy.ndarray
        1-D non-decreasing integer keys.

    Returns
    -------
    tuple of three arrays
        ``(unique_keys, starts, stops)``: the key of each run and its half-open range
        (int64).

    Raises
    ------
    TypeError
        Non-integer keys.
    ValueError
        Keys that are not 1-D or not sorted.

    Notes
    -----
    On a GPU the result's length depends on the data, and the order check reads a flag back:
    a synchronisation per call.
    """
    if type(sorted_keys) is _ndarray:
        side, k = "numpy", sorted_keys
    else:
        side = _side(sorted_keys)
        if side == "cupy":
            return _segment_boundaries_cupy(sorted_keys)
        k = _as_host(sorted_keys, side, "sorted_keys")
    _require_1d(k, "sorted_keys")
    _require_integer_keys(k, "sorted_keys")
    ck = k if k.dtype.isnative else _native(k)
    # The count keeps the runs of each fixed chunk of rows, so the fill (each chunk from its
    # own first run, in parallel) need not count again.
    chunk_runs = np.empty(max(-(-ck.shape[0] // _RUNS_CHUNK), 1), _INT64)
    runs = core.segment_runs(ck, chunk_runs)
    if side == "fake":
        unique, u = _device_empty((runs,), k.dtype)
        starts, s = _device_empty((runs,), np.int64)
        stops, e = _device_empty((runs,), np.int64)
    else:
        unique = u = np.empty(runs, k.dtype)
        starts = s = np.empty(runs, _INT64)
        stops = e = np.empty(runs, _INT64)
    if ck.dtype == u.dtype:
        core.segment_runs(ck, u, s, e, chunk_runs)
    else:
        tmp = np.empty(runs, dtype=ck.dtype)
        core.segment_runs(ck, tmp, s, e, chunk_runs)
        u[...] = tmp
    return unique, starts, stops


_RUNS_CHUNK = core.SEGMENT_RUNS_CHUNK


def _segment_boundaries_cupy(k):
    cp = _cupy()
    _require_1d(k, "sorted_keys")
    _require_integer_keys(k, "sorted_keys")
    n = k.shape[0]
    if n == 0:
        return k[:0].copy(), cp.zeros(0, cp.int64), cp.zeros(0, cp.int64)
    if n > 1 and bool((k[1:] < k[:-1]).any()):
        raise ValueError("'sorted_keys' must be sorted (non-decreasing)")
    starts = cp.concatenate((cp.zeros(1, cp.int64), cp.flatnonzero(k[1:] != k[:-1]).astype(cp.int64) + 1))
    stops = cp.concatenate((starts[1:], cp.full(1, n, cp.int64)))
    return k[starts], starts, stops


# --------------------------------------------------------------------------- compaction


def compact_by_mask(mask, *arrays, axis=0) -> int:
    """Move the entries where ``mask`` is true to the front of every array, in place.

    The kept entries keep their order; what follows them is unspecified. Typical use: drop
    the particles that left the box, ``n = compact_by_mask(alive, pos, vel)``, then work on
    ``pos[:n]``.

    Parameters
    ----------
    mask : numpy.ndarray or cupy.ndarray
        1-D boolean mask, one entry per element along ``axis``.
    *arrays : numpy.ndarray or cupy.ndarray
        Writable arrays compacted in place, each passed once (arrays sharing memory are
        refused).
    axis : int, optional
        The axis of ``arrays`` that runs along the mask (default 0); ``-1`` takes each
        array's last axis (component-major ``(ncomp, N)`` next to ``(N,)``).

    Returns
    -------
    int
        The number of kept entries, a Python int on the host.

    Raises
    ------
    TypeError
        ``mask`` is not a 1-D boolean array, an array holds Python objects, or host and
        device arrays are mixed.
    ValueError
        An array's length along ``axis`` differs from the mask's, an array is read-only, or
        arrays share memory.

    Notes
    -----
    On a GPU the count is read back to the host: every call synchronises once (the one
    ``sync`` event the profiler shows). Keep it out of inner loops, or compact every few
    steps.
    """
    axis = _index(axis, "axis")
    if type(mask) is _ndarray and _plain(arrays):
        return _compact_plain(mask, arrays, axis)
    side = _side(mask, *arrays)
    if side == "cupy":
        return _compact_cupy(mask, arrays, axis)
    m = _as_host(mask, side, "mask")
    n = _check_mask(m)
    views = []
    for i, a in enumerate(arrays):
        if side == "numpy" and not isinstance(a, np.ndarray):
            raise TypeError(f"array {i} must be an array (compacted in place), not {type(a).__name__}")
        h = _as_host(a, side, f"arrays[{i}]")
        views.append(_compact_view(h, i, _axis_of(h, axis, i, n, "mask entry")))
    return _compact_views(m, views)


def _check_mask(m) -> int:
    """The length of a 1-D boolean mask (TypeError for any other)."""
    if m.dtype != np.bool_ or m.ndim != 1:
        raise TypeError(f"'mask' must be a 1-D boolean array, got dtype {m.dtype} and shape {tuple(m.shape)}")
    return m.shape[0]


def _compact_view(h: np.ndarray, i: int, ax: int) -> np.ndarray:
    """Host array ``i`` with the mask's axis ``ax`` first, after refusing what compaction
    cannot move: a read-only array, or one holding Python objects."""
    if not h.flags.writeable:
        raise ValueError(f"array {i} is read-only")
    if h.dtype.hasobject:
        raise TypeError(
            f"array {i} has dtype {h.dtype}, which holds Python objects; compact_by_mask "
            "moves raw bytes and does not move object references"
        )
    # np.moveaxis(h, ax, 0), without its argument normalisation.
    return h if ax == 0 else h.transpose((ax, *range(ax), *range(ax + 1, h.ndim)))


def _compact_plain(m: np.ndarray, arrays: tuple, axis: int) -> int:
    """compact_by_mask for a mask and arrays that are all exactly numpy.ndarray: the checks,
    their order and their messages are those of the general path, without its conversions."""
    n = _check_mask(m)
    views = []
    for i, a in enumerate(arrays):
        ndim = a.ndim
        ax = axis + ndim if axis < 0 else axis
        if not 0 <= ax < ndim or a.shape[ax] != n:
            _axis_of(a, axis, i, n, "mask entry")  # raises the general path's ValueError
        views.append(_compact_view(a, i, ax))
    return _compact_views(m, views)


def _compact_views(m: np.ndarray, views: list) -> int:
    """Compact host views (the mask's axis first) after removing repeated views and refusing
    overlapping ones."""
    if core.extents_disjoint((m, *views)):
        # No two arrays (nor an array and the mask) can overlap, so none is a repeat: what the
        # checks below would conclude, after their exact and per pair costlier tests.
        return core.compact_in_place(m, tuple(views))
    # The same array passed twice is compacted once (a second pass would move moved data).
    unique, seen, index = [], set(), []
    for i, v in enumerate(views):
        key = (v.__array_interface__["data"][0], v.shape, v.strides, v.dtype.str)
        if key not in seen:
            seen.add(key)
            unique.append(v)
            index.append(i)
    # Other overlapping views (a and a[::-1], a and a.view(int64)) would move the same bytes
    # twice, and an array over the mask's bytes would change the mask while it is read.
    for a, va in enumerate(unique):
        if va.size and not _same_view(va, m) and _shares_memory(va, m, f"array {index[a]} and 'mask'"):
            raise ValueError(f"array {index[a]} shares memory with 'mask'")
        for b in range(a):
            if va.size and unique[b].size and _shares_memory(va, unique[b], f"arrays {index[b]} and {index[a]}"):
                raise ValueError(f"arrays {index[b]} and {index[a]} share memory (pass each array once)")
    return core.compact_in_place(m, tuple(unique))


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str) == (
        b.__array_interface__["data"][0], b.shape, b.strides, b.dtype.str)


def _compact_cupy(mask, arrays, axis):
    cp = _cupy()
    n = _check_mask(mask)
    axes = [_axis_of(a, axis, i, n, "mask entry") for i, a in enumerate(arrays)]
    # As on the host: the same view once, other overlapping views refused.
    todo: list = []
    seen: set = set()
    for i, (a, ax) in enumerate(zip(arrays, axes)):
        key = (a.data.ptr, a.shape, a.strides, a.dtype.str, ax)
        if key in seen:
            continue
        seen.add(key)
        if key[:4] != (mask.data.ptr, mask.shape, mask.strides, mask.dtype.str) and _shares(cp, a, mask):
            raise ValueError(f"array {i} shares memory with 'mask'")
        for j, b, _ in todo:
            if _shares(cp, a, b):
                raise ValueError(f"arrays {j} and {i} share memory (pass each array once)")
        todo.append((i, a, ax))
    live = cp.flatnonzero(mask)
    count = int(live.size)  # the one synchronisation
    for _, a, ax in todo:
        index = [slice(None)] * a.ndim
        index[ax] = slice(0, count)
        a[tuple(index)] = cp.take(a, live, axis=ax)
    return count
