"""Twin of ``_core.extents_disjoint``: the bounds test that lets the host wrappers skip
their exact overlap checks."""

from __future__ import annotations

import numpy as np

__all__ = ["extents_disjoint"]


def extents_disjoint(arrays) -> bool:
    """True when every item is exactly a numpy.ndarray holding at least one byte and no two
    can share memory by NumPy's bounds test (``np.may_share_memory``); else False."""
    if not isinstance(arrays, tuple):
        raise TypeError(f"extents_disjoint() takes a tuple of arrays, not {type(arrays).__name__}")
    for i, a in enumerate(arrays):
        if type(a) is not np.ndarray or a.size == 0 or a.itemsize == 0:
            return False
        for b in arrays[:i]:
            if np.may_share_memory(a, b):
                return False
    return True
