"""Twin of _core/sort.c: a stable argsort."""

import numpy as np

__all__ = ["radix_argsort", "take_rows"]


def radix_argsort(keys, order, sorted_keys):
    if keys.ndim != 1:
        raise ValueError(f"'keys' must have 1 dimension(s), got {keys.ndim}")
    if keys.dtype.kind not in "iub" or keys.dtype.itemsize not in (1, 2, 4, 8):
        raise TypeError("'keys' must be 8, 16, 32 or 64-bit integers or bool here")
    o = np.argsort(keys, kind="stable")
    order[...] = o
    sorted_keys[...] = keys[o]
    return None


def take_rows(src, order, dst):
    if src.dtype.hasobject or dst.dtype.hasobject:
        raise TypeError("'src' and 'dst' must not hold Python objects (rows move as raw bytes)")
    if src.ndim < 1 or dst.shape != src.shape:
        raise ValueError("'dst' must have the shape of 'src'")
    n = src.shape[0]
    if order.shape != (n,) or order.dtype != np.int64:
        raise ValueError(f"'order' must have {n} elements")
    out_of_range = np.flatnonzero((order < 0) | (order >= n))
    if out_of_range.size:
        raise ValueError(f"'order' must hold indices in [0, {n}); order[{out_of_range[0]}] is not")
    dst[...] = src[order]
    return None
