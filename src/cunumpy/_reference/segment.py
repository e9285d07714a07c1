"""Twin of _core/segment.c: segment sums, cell offsets and run boundaries."""

from typing import Any

import numpy as np

__all__ = [
    "SEGMENT_RUNS_CHUNK",
    "cell_offsets_into",
    "segment_check_keys",
    "segment_runs",
    "segment_sum_into",
]


def _key_check(keys, name):
    if keys.ndim != 1:
        raise ValueError(f"'{name}' must have 1 dimension(s), got {keys.ndim}")
    if keys.dtype.kind not in "iu":
        raise TypeError(f"'{name}' must be integers")


def _first_bad(keys, n):
    bad = np.flatnonzero(keys >= n)
    return int(bad[0]) if bad.size else -1


def segment_check_keys(keys, n_segments):
    _key_check(keys, "keys")
    if n_segments < 0:
        raise ValueError(f"'n_segments' must be >= 0, got {n_segments}")
    bad = _first_bad(keys, n_segments)
    if bad >= 0:
        raise ValueError(f"'keys' must be < n_segments = {n_segments}; keys[{bad}] is out of range")
    return None


def segment_sum_into(values, keys, out, check_first):
    _key_check(keys, "keys")
    if values.ndim != 2 or out.ndim != 2:
        raise ValueError("'values' and 'out' must have 2 dimensions")
    if keys.shape[0] != values.shape[0]:
        raise ValueError(f"'keys' must have {values.shape[0]} entries (one per row of values)")
    n_segments = out.shape[0]
    segment_check_keys(keys, n_segments)
    out[...] = 0
    live = np.flatnonzero(keys >= 0) if keys.dtype.kind == "i" else np.arange(keys.size)
    np.add.at(out, keys[live].astype(np.intp), values[live])
    return None


def cell_offsets_into(sorted_cells, n_cells, out):
    _key_check(sorted_cells, "sorted_cells")
    if n_cells < 0:
        raise ValueError(f"'n_cells' must be >= 0, got {n_cells}")
    if n_cells >= 2**63 - 1:
        raise ValueError(f"'n_cells' is too large, got {n_cells}")
    if out.size != n_cells + 1:
        raise ValueError(f"'out' must have {n_cells + 1} elements, got {out.size}")
    k = sorted_cells
    if k.size:
        if (k.dtype.kind == "i" and int(k.min()) < 0) or int(k.max()) >= n_cells:
            raise ValueError(f"'sorted_cells' must be in [0, n_cells = {n_cells})")
        if np.any(k[1:] < k[:-1]):
            raise ValueError("'sorted_cells' must be sorted (non-decreasing)")
    out[...] = np.searchsorted(k, np.arange(n_cells + 1), side="left")
    return None


SEGMENT_RUNS_CHUNK = 65536


def _runs_per_chunk(k) -> np.ndarray:
    n = k.size
    nch = max(-(-n // SEGMENT_RUNS_CHUNK), 1)
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = k[1:] != k[:-1]
    return (
        np.add.reduceat(new_run, np.arange(nch) * SEGMENT_RUNS_CHUNK).astype(np.int64) if n else np.zeros(1, np.int64)
    )


def segment_runs(sorted_keys, *outputs):
    """segment_runs(keys), (keys, chunk_runs), (keys, unique, starts, stops[, chunk_runs])."""
    if len(outputs) not in (0, 1, 3, 4):
        raise TypeError(f"segment_runs() takes 1, 2, 4 or 5 arguments ({1 + len(outputs)} given)")
    unique: Any = None
    starts: Any = None
    stops: Any = None
    chunk_runs: Any = None
    if len(outputs) == 1:
        (chunk_runs,) = outputs
    elif outputs:
        unique, starts, stops = outputs[:3]
        chunk_runs = outputs[3] if len(outputs) == 4 else None
    _key_check(sorted_keys, "sorted_keys")
    k = sorted_keys
    if k.size > 1 and np.any(k[1:] < k[:-1]):
        raise ValueError("'sorted_keys' must be sorted (non-decreasing)")
    per_chunk = _runs_per_chunk(k)
    if chunk_runs is not None:
        if np.shape(chunk_runs) != per_chunk.shape:
            raise ValueError(f"'chunk_runs' must have {per_chunk.size} entries")
        if unique is None:
            chunk_runs[...] = per_chunk
        elif not np.array_equal(chunk_runs, per_chunk):
            raise ValueError("'chunk_runs' must hold the run counts of a count call")
    if k.size == 0:
        return 0
    first = np.concatenate(([0], np.flatnonzero(k[1:] != k[:-1]) + 1))
    if unique is not None:
        unique[...] = k[first]
        starts[...] = first
        stops[...] = np.append(first[1:], k.size)
    return int(first.size)
