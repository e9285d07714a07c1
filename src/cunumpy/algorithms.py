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

# One module per concern (cunumpy._algorithms); tests read _host, _side, _BOXES, _BOXES_KEPT and
# _compact_cupy here.
from ._algorithms._common import _host as _host, _side as _side
from ._algorithms.compact import _compact_cupy as _compact_cupy, compact_by_mask
from ._algorithms.morton import (
    _BOXES as _BOXES,
    _BOXES_KEPT as _BOXES_KEPT,
    MAX_MORTON_LEVELS,
    morton_decode,
    morton_encode,
    morton_keys,
    morton_scales,
)
from ._algorithms.segments import SegmentPlan, cell_offsets, segment_boundaries, segment_sum
from ._algorithms.sort import sort_by_key

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
