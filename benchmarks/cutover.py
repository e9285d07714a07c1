"""Where a second thread starts to pay: each parallel host algorithm on 1 and 2 threads over sizes.

The cut-overs are ignored for the measurement (``_pool_ignore_cutover``), so the 2-thread
column is what the pool gives at every size. Each size is timed as the median of
``--repeats`` rounds (more for small sizes), the two thread counts alternating within a round
so that load changes hit both. Prints the median 1-thread and 2-thread times, the ratio of the
medians and the ratio of the best times (above 1: two threads are faster), and suggests each
cut-over: the smallest size from which the best-time ratio stays at or above 1.05. On a loaded
machine a waiting worker is often not scheduled for milliseconds, which the medians show and
the best times mostly do not.

    .venv/bin/python benchmarks/cutover.py [--repeats 31] [--sizes 1000,3000,...] [--only sort]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _host_cases import host_algorithm_cases  # beside this script, so on its path

import cunumpy as xp
from cunumpy._native import core

SIZES = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000)


def cases(n, rng):
    """name -> (fn, setup or None); setup() makes fresh arguments for one call."""
    cases = host_algorithm_cases(n, rng, n_cells=max(n // 8, 1), n_segments=max(n // 16, 1))
    # its cut-over is rng._PARALLEL_DRAWS, in Python; main() sets it to 0 for the measurement
    draws = np.random.default_rng(5)
    cases["random_streams.random"] = (lambda: xp.rng.random_streams.random(n, rng=draws), None)
    return cases


def time_pair(fn, setup, repeats):
    times = {1: [], 2: []}
    for _ in range(repeats):
        for count in (1, 2):
            xp.threads.set_num_threads(count)
            arg = setup() if setup is not None else None
            start = time.perf_counter()
            fn(arg) if setup is not None else fn()
            times[count].append(time.perf_counter() - start)
    return (statistics.median(times[1]), statistics.median(times[2]), min(times[1]), min(times[2]))


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
    parallel_draws, xp.rng._PARALLEL_DRAWS = xp.rng._PARALLEL_DRAWS, 0
    table = {}
    try:
        for n in sizes:
            for name, (fn, setup) in cases(n, rng).items():
                if args.only and args.only not in name:
                    continue
                # Repeats scale down with the size: small calls need many to be seen.
                reps = max(5, min(args.repeats * 10, int(args.repeats * 3e5 / n)))
                fn(setup()) if setup is not None else fn()
                table.setdefault(name, {})[n] = time_pair(fn, setup, reps)
    finally:
        core._pool_ignore_cutover(False)
        xp.rng._PARALLEL_DRAWS = parallel_draws
        xp.threads.set_num_threads(before)
    print(
        "median times, 1 thread / 2 threads (ms); ratio of the medians; ratio of the best times "
        "(> 1: two threads faster)"
    )
    print(f"{'case':<28}" + "".join(f"{n:>27,}" for n in sizes) + "   suggested cut-over")
    for name, row in table.items():
        cells = []
        for n in sizes:
            if n in row:
                t1, t2, b1, b2 = row[n]
                cells.append(f"{t1 * 1e3:7.3f}/{t2 * 1e3:7.3f} {t1 / t2:4.2f} {b1 / b2:4.2f}")
            else:
                cells.append("")
        measured = [n for n in sizes if n in row]
        paying = [n for i, n in enumerate(measured) if all(row[m][2] / row[m][3] >= 1.05 for m in measured[i:])]
        suggestion = f"{paying[0]:,}" if paying else "none measured"
        print(f"{name:<28}" + "".join(f"{c:>27}" for c in cells) + f"   {suggestion}", flush=True)


if __name__ == "__main__":
    main()
