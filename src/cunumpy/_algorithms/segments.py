"""Segment sums, cell offsets and run boundaries of sorted keys (API.md section 9)."""

from __future__ import annotations

from typing import Any, SupportsIndex

import numpy as np

from .. import _backend
from .._native import core
from ._common import (
    _FLOAT16,
    _FLOAT64,
    _INT64,
    _as_host,
    _c_keys,
    _cupy,
    _device_empty,
    _host,
    _index,
    _native,
    _ndarray,
    _ptr_overlap,
    _require_1d,
    _require_integer_keys,
    _shares_memory,
    _side,
)

__all__ = ["SegmentPlan", "cell_offsets", "segment_boundaries", "segment_sum"]

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
        from .._reference.segment import segment_sum_into as twin

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

    def __init__(self, keys: Any, n_segments: SupportsIndex) -> None:
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
    def keys(self) -> Any:
        """The plan's own copy of the keys: read-only on the host, since :meth:`sum` trusts
        them (on a GPU the plan sums with its own scatter index, never with this array)."""
        return self._keys

    def __repr__(self) -> str:
        return f"SegmentPlan(n_keys={self._keys.shape[0]}, n_segments={self._n_segments}, backend={'cupy' if self._side != 'numpy' else 'numpy'})"

    def sum(self, values: Any, *, out: Any = None) -> Any:
        """``out[k] = sum(values[keys == k])`` over the first axis; ``out`` is overwritten."""
        return _segment_sum(values, self._keys, self._n_segments, out, plan=self)


_SUM_PLAIN_DTYPES = (_FLOAT64, np.dtype(np.float32))


def _segment_sum(values, keys, n_segments, out, plan=None):
    # Every argument exactly NumPy (and a host plan): what the dispatch below would find.
    plain = (
        type(values) is _ndarray
        and type(keys) is _ndarray
        and (out is None or type(out) is _ndarray)
        and (plan is None or plan._side == "numpy")
    )
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
                    raise ValueError(
                        f"the SegmentPlan belongs to device {plan._device}, but device {current} is current"
                    )
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
        raise ValueError(
            f"'values' must have one row per key: {k.shape[0]} rows expected along axis 0, got {v.shape[0]}"
        )
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
    if (
        ndim > 2
        or ndim == 0
        or keys.ndim != 1
        or dt not in _SUM_PLAIN_DTYPES
        or not values.flags.aligned
        or kdt.kind not in "iu"
        or not kdt.isnative
        or keys.shape[0] != values.shape[0]
    ):
        return None
    shape = (n_segments, values.shape[1]) if ndim == 2 else (n_segments,)
    if out is None:
        out = np.empty(shape, dt)
        check_keys = False
    else:
        flags = out.flags
        if (
            out.shape != shape
            or out.dtype != dt
            or not (flags.c_contiguous and flags.writeable and flags.aligned)
            or not core.extents_disjoint((out, values, keys))
        ):
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
        raise ValueError(
            f"'values' must have one row per key: {keys.shape[0]} rows expected along axis 0, got {values.shape[0]}"
        )
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


def segment_sum(values: Any, keys: Any, n_segments: SupportsIndex, *, out: Any = None) -> Any:
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


def cell_offsets(sorted_cells: Any, n_cells: SupportsIndex) -> Any:
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


def segment_boundaries(sorted_keys: Any) -> tuple[Any, Any, Any]:
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
