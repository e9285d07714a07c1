"""Host algorithms of cunumpy against the best plain-NumPy way of doing the same, same run.

Prints, per case, the best-of-repeats time of cunumpy and of the NumPy baseline and their
ratio (baseline / cunumpy, higher is better) next to the target of issue 5. The last line
gives the bandwidth segment_sum reaches next to a plain copy of the same bytes.

    .venv/bin/python benchmarks/algorithms.py [--n 1000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import cunumpy as xp
from cunumpy._reference import morton as morton_ref
from cunumpy._reference import philox as philox_ref

A = xp.algorithms


def best(fn, repeats, setup=None):
    """Best wall time of ``fn`` over ``repeats`` runs (``setup`` runs untimed before each)."""
    return best_pair(fn, None, repeats, setup)[0]


def best_pair(ours, baseline, repeats, setup=None):
    """Best times of two functions measured alternately, so load changes hit both alike."""
    best_times = [float("inf"), float("inf")]
    for _ in range(repeats):
        for slot, fn in enumerate((ours, baseline)):
            if fn is None:
                continue
            arg = setup() if setup is not None else None
            start = time.perf_counter()
            fn(arg) if setup is not None else fn()
            best_times[slot] = min(best_times[slot], time.perf_counter() - start)
    return best_times


def numpy_philox_uniform(seed, stream, counter):
    """The vectorised uint64 NumPy Philox uniform (what one writes without cunumpy)."""
    x0, x1, _, _ = philox_ref._words(seed, stream, counter)
    return philox_ref._u53(x0, x1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="elements per case (default 1M)")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    n, r = args.n, args.repeats
    rng = np.random.default_rng(2024)
    rows = []

    def case(name, ours, baseline, target, repeats=r, setup=None):
        t_ours, t_base = best_pair(ours, baseline, repeats, setup)
        rows.append((name, t_ours, t_base, t_base / t_ours, target))
        print(f"{name:<48} {t_ours * 1e3:9.2f} ms {t_base * 1e3:9.2f} ms {t_base / t_ours:7.2f}x  (target {target}x)",
              flush=True)

    print(f"n = {n:,}; best of {r}; ratio = NumPy time / cunumpy time")
    print(f"{'case':<48} {'cunumpy':>12} {'NumPy':>12} {'ratio':>8}")

    # sort_by_key ---------------------------------------------------------------------------
    k30 = rng.integers(0, 2**30, n, dtype=np.int64)
    case("sort_by_key, 30-bit keys", lambda: A.sort_by_key(k30),
         lambda: (lambda o: (k30.take(o), o))(np.argsort(k30, kind="stable")), 6, repeats=5)
    k63 = rng.integers(0, 2**63 - 1, n, dtype=np.int64)
    p1, p2 = rng.random(n), rng.random(n)

    def numpy_sort_payloads():
        o = np.argsort(k63, kind="stable")
        return k63.take(o), o, p1.take(o), p2.take(o)

    case("sort_by_key, 63-bit keys + 2 payloads", lambda: A.sort_by_key(k63, p1, p2), numpy_sort_payloads, 2, repeats=5)

    # segment_sum ---------------------------------------------------------------------------
    nseg = max(n // 16, 1)
    keys = rng.integers(0, nseg, n)
    v1 = rng.random(n)
    v3 = rng.random((n, 3))

    def add_at_1():
        out = np.zeros(nseg)
        np.add.at(out, keys, v1)
        return out

    def add_at_3():
        out = np.zeros((nseg, 3))
        np.add.at(out, keys, v3)
        return out

    def bincount_3():
        return np.stack([np.bincount(keys, weights=v3[:, j], minlength=nseg) for j in range(3)], axis=1)

    case("segment_sum (n,) vs np.add.at", lambda: A.segment_sum(v1, keys, nseg), add_at_1, 3)
    case("segment_sum (n,) vs np.bincount", lambda: A.segment_sum(v1, keys, nseg),
         lambda: np.bincount(keys, weights=v1, minlength=nseg), 1)
    case("segment_sum (n, 3) vs np.add.at", lambda: A.segment_sum(v3, keys, nseg), add_at_3, 3, repeats=3)
    case("segment_sum (n, 3) vs np.bincount per column", lambda: A.segment_sum(v3, keys, nseg), bincount_3, 1)

    # morton_keys ---------------------------------------------------------------------------
    pos = rng.random((n, 3))
    lower, upper = np.zeros(3), np.ones(3)
    scale = A.morton_scales(lower, upper, 21)
    case("morton_keys 3-D, 21 levels", lambda: A.morton_keys(pos, lower, upper, 21),
         lambda: morton_ref.keys_from_positions(pos, lower, scale, 21), 5, repeats=3)

    # philox_uniform ------------------------------------------------------------------------
    counter = np.arange(n, dtype=np.uint64)
    case("philox_uniform", lambda: xp.rng.philox_uniform(7, 3, counter),
         lambda: numpy_philox_uniform(np.uint64(7), np.uint64(3), counter), 8, repeats=3)

    # compact_by_mask -----------------------------------------------------------------------
    mask = rng.random(n) < 0.7
    payloads = [rng.random(n), rng.random((n, 3)), rng.integers(0, 9, n), rng.random(n)]

    def fresh():
        return [p.copy() for p in payloads]

    def numpy_compact(arrays):
        count = int(np.count_nonzero(mask))
        for a in arrays:
            a[:count] = a[mask]
        return count

    case("compact_by_mask, 4 payloads vs boolean indexing", lambda arrays: A.compact_by_mask(mask, *arrays),
         numpy_compact, 2, setup=fresh)

    # bandwidth -----------------------------------------------------------------------------
    small = 4096  # segments that stay in cache: the sum is limited by reading the inputs
    keys_bw = rng.integers(0, small, n)
    nbytes = v3.nbytes + keys_bw.nbytes
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    t_sum = best(lambda: A.segment_sum(v3, keys_bw, small), r)
    t_copy = best(lambda: np.copyto(dst, src), r)
    bw_sum, bw_copy = nbytes / t_sum / 1e9, 2 * nbytes / t_copy / 1e9  # a copy reads and writes
    print(f"{'segment_sum (n, 3) bandwidth vs plain copy':<48} {bw_sum:9.2f} GB/s {bw_copy:7.2f} GB/s "
          f"{bw_sum / bw_copy:7.2f}x  (target 0.5x; the copy counts read + write)")
    below = [row[0] for row in rows if row[3] < row[4]]
    print("all targets met" if not below else f"below target: {', '.join(below)}")


if __name__ == "__main__":
    main()
