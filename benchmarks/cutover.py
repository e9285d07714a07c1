"""Where a second thread starts to pay: each parallel host algorithm on 1 and 2 threads over sizes.

The cut-overs are ignored for the measurement (``_pool_ignore_cutover``), so the 2-thread
column is what the pool gives at every size. Each size is timed as the median of
``--repeats`` rounds, the two thread counts alternating within a round so that load changes
hit both. Prints the 1-thread and 2-thread times and their ratio (above 1: two threads are
faster); the cut-over of an algorithm is the size from which the ratio stays above 1.

    .venv/bin/python benchmarks/cutover.py [--repeats 31] [--sizes 1000,3000,...] [--only sort]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import cunumpy as xp
from cunumpy._native import core

A = xp.algorithms
SIZES = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000)


def cases(n, rng):
    """name -> (fn, setup or None); setup() makes fresh arguments for one call."""
    k30 = rng.integers(0, 2**30, n, dtype=np.int64)
    sorted_cells = np.sort(rng.integers(0, max(n // 8, 1), n))
    v3 = rng.random((n, 3))
    seg_keys = rng.integers(0, max(n // 16, 1), n)
    pos = rng.random((n, 3))
    lower, upper = np.zeros(3), np.ones(3)
    mkeys = A.morton_keys(pos, lower, upper, 21)
    counter = np.arange(n, dtype=np.uint64)
    mask = rng.random(n) < 0.7
    payloads = [rng.random(n), rng.random((n, 3)), rng.integers(0, 9, n), rng.random(n)]
    return {
        "sort_by_key (30-bit)": (lambda: A.sort_by_key(k30), None),
        "segment_sum (n, 3)": (lambda: A.segment_sum(v3, seg_keys, max(n // 16, 1)), None),
        "cell_offsets": (lambda: A.cell_offsets(sorted_cells, max(n // 8, 1)), None),
        "segment_boundaries": (lambda: A.segment_boundaries(sorted_cells), None),
        "morton_keys 3-D": (lambda: A.morton_keys(pos, lower, upper, 21), None),
        "morton_decode 3-D": (lambda: A.morton_decode(mkeys, 3), None),
        "philox_uniform": (lambda: xp.rng.philox_uniform(7, 3, counter), None),
        "compact_by_mask (4 arrays)": (lambda arrays: A.compact_by_mask(mask, *arrays),
                                       lambda: [p.copy() for p in payloads]),
    }


def median_pair(fn, setup, repeats):
    times = {1: [], 2: []}
    for _ in range(repeats):
        for count in (1, 2):
            xp.threads.set_num_threads(count)
            arg = setup() if setup is not None else None
            start = time.perf_counter()
            fn(arg) if setup is not None else fn()
            times[count].append(time.perf_counter() - start)
    return statistics.median(times[1]), statistics.median(times[2])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(5)
    before = xp.threads.get_num_threads()
    core._pool_ignore_cutover(True)
    table = {}
    try:
        for n in sizes:
            for name, (fn, setup) in cases(n, rng).items():
                if args.only and args.only not in name:
                    continue
                # Repeats scale down with the size: small calls need many to be seen.
                reps = max(5, min(args.repeats * 10, int(args.repeats * 3e5 / n)))
                fn(setup()) if setup is not None else fn()
                table.setdefault(name, {})[n] = median_pair(fn, setup, reps)
    finally:
        core._pool_ignore_cutover(False)
        xp.threads.set_num_threads(before)
    print("median times, 1 thread / 2 threads (ms), and the ratio (> 1: two threads faster)")
    print(f"{'case':<28}" + "".join(f"{n:>22,}" for n in sizes))
    for name, row in table.items():
        cells = []
        for n in sizes:
            if n in row:
                t1, t2 = row[n]
                cells.append(f"{t1 * 1e3:7.3f}/{t2 * 1e3:7.3f} {t1 / t2:4.2f}")
            else:
                cells.append("")
        print(f"{name:<28}" + "".join(f"{c:>22}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
