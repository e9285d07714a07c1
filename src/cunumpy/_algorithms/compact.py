"""Compaction of arrays by a mask (API.md section 9)."""

from __future__ import annotations

from typing import Any, SupportsIndex

import numpy as np

from .._native import core
from ._common import (
    _as_host,
    _axis_of,
    _cupy,
    _index,
    _ndarray,
    _plain,
    _shares,
    _shares_memory,
    _side,
)

__all__ = ["compact_by_mask"]


def compact_by_mask(mask: Any, *arrays: Any, axis: SupportsIndex = 0) -> int:
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
        b.__array_interface__["data"][0],
        b.shape,
        b.strides,
        b.dtype.str,
    )


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
