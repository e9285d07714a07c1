"""Sorting arrays by integer keys, stably (API.md section 9)."""

from __future__ import annotations

from typing import Any, SupportsIndex

import numpy as np

from .._native import core
from ._common import (
    _INT64,
    _as_host,
    _axis_of,
    _cupy,
    _device_empty,
    _index,
    _ndarray,
    _plain,
    _require_1d,
    _side,
)

__all__ = ["sort_by_key"]


def sort_by_key(keys: Any, *arrays: Any, axis: SupportsIndex = 0) -> tuple[Any, ...]:
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
    if ax == 0 and h.flags.c_contiguous and out.flags.c_contiguous and not h.dtype.hasobject and out.dtype == h.dtype:
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
