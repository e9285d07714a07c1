"""Twin of _core/compact.c: in-place compaction along the first axis."""

import numpy as np

__all__ = ["compact_in_place"]


def compact_in_place(mask, arrays):
    if mask.ndim != 1:
        raise ValueError(f"'mask' must have 1 dimension(s), got {mask.ndim}")
    if mask.dtype != np.bool_:
        raise TypeError("'mask' must be a boolean array")
    n = mask.shape[0]
    for i, a in enumerate(arrays):
        if a.ndim < 1 or a.shape[0] != n:
            raise ValueError(f"array {i} must have {n} entries along the compaction axis")
        if a.dtype.hasobject:
            # As the C entry point: object references are never moved as raw bytes.
            raise TypeError(f"array {i} holds Python objects; compaction cannot move object references")
    live = np.flatnonzero(mask)
    for a in arrays:
        a[: live.size] = a[live]
    return int(live.size)
