"""The pooled host algorithms as benchmark cases on n elements, for the benchmarks that time
them at sizes of their choosing: cutover.py (1 and 2 threads over sizes) and small_inputs.py
(1 000 elements, this build against another one).

small_inputs.py imports this module in child processes whose cunumpy is the other build, so
it calls only what builds since b392b00 have.
"""

from __future__ import annotations

import numpy as np

import cunumpy as xp

__all__ = ["host_algorithm_cases", "host_algorithm_inputs"]


def host_algorithm_inputs(n, rng, n_cells, n_segments):
    """The arrays of the cases on n elements: cell ids (sorted) in [0, n_cells), segment keys
    in [0, n_segments); the draws from rng are in a fixed order."""
    k30 = rng.integers(0, 2**30, n, dtype=np.int64)
    sorted_cells = np.sort(rng.integers(0, n_cells, n))
    v3 = rng.random((n, 3))
    seg_keys = rng.integers(0, n_segments, n)
    pos = rng.random((n, 3))
    lower, upper = np.zeros(3), np.ones(3)
    return {
        "k30": k30,
        "sorted_cells": sorted_cells,
        "v3": v3,
        "seg_keys": seg_keys,
        "pos": pos,
        "lower": lower,
        "upper": upper,
        "mkeys": xp.algorithms.morton_keys(pos, lower, upper, 21),
        "counter": np.arange(n, dtype=np.uint64),
        "mask": rng.random(n) < 0.7,
        "payloads": [rng.random(n), rng.random((n, 3)), rng.integers(0, 9, n), rng.random(n)],
        "n_cells": n_cells,
        "n_segments": n_segments,
    }


def host_algorithm_cases(n, rng, n_cells, n_segments, inputs=None):
    """name -> (fn, setup or None). fn() runs one case; with a setup, fn(setup()) does, as
    compact_by_mask works in place and needs fresh arrays for every call. ``inputs`` (from
    host_algorithm_inputs) replaces the draws from rng."""
    d = inputs if inputs is not None else host_algorithm_inputs(n, rng, n_cells, n_segments)
    algorithms = xp.algorithms
    k30, cells, v3, seg_keys = d["k30"], d["sorted_cells"], d["v3"], d["seg_keys"]
    pos, lower, upper, mkeys, counter = d["pos"], d["lower"], d["upper"], d["mkeys"], d["counter"]
    mask, payloads = d["mask"], d["payloads"]
    return {
        "sort_by_key (30-bit)": (lambda: algorithms.sort_by_key(k30), None),
        "segment_sum (n, 3)": (lambda: algorithms.segment_sum(v3, seg_keys, n_segments), None),
        "cell_offsets": (lambda: algorithms.cell_offsets(cells, n_cells), None),
        "segment_boundaries": (lambda: algorithms.segment_boundaries(cells), None),
        "morton_keys 3-D": (lambda: algorithms.morton_keys(pos, lower, upper, 21), None),
        "morton_decode 3-D": (lambda: algorithms.morton_decode(mkeys, 3), None),
        "philox_uniform": (lambda: xp.rng.philox_uniform(7, 3, counter), None),
        "compact_by_mask (4 arrays)": (
            lambda arrays: algorithms.compact_by_mask(mask, *arrays),
            lambda: [p.copy() for p in payloads],
        ),
    }
