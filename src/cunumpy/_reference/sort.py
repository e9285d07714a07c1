"""Twin of _core/sort.c: a stable argsort."""

import numpy as np

__all__ = ["radix_argsort"]


def radix_argsort(keys, order, sorted_keys):
    if keys.ndim != 1:
        raise ValueError(f"'keys' must have 1 dimension(s), got {keys.ndim}")
    if keys.dtype.kind not in "iub" or keys.dtype.itemsize not in (1, 2, 4, 8):
        raise TypeError("'keys' must be 8, 16, 32 or 64-bit integers or bool here")
    o = np.argsort(keys, kind="stable")
    order[...] = o
    sorted_keys[...] = keys[o]
    return None
