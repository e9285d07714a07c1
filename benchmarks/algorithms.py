"""Host algorithms of cunumpy against the best plain-NumPy way of doing the same, same run.

Prints, per case, the best-of-repeats time of cunumpy on one thread and on all threads of
its pool, of the NumPy baseline, the ratios (baseline / cunumpy, higher is better) next to
the target, and the thread scaling (one-thread time / all-threads time). Then compaction
against a plain copy of the same arrays, the bandwidth segment_sum reaches next to a plain
copy, and small inputs (1 000 elements) on one and all threads.

    .venv/bin/python benchmarks/algorithms.py [--n 4000000] [--repeats 5] [--threads N]

Where the second thread starts to pay: benchmarks/cutover.py; small inputs against another
build (e.g. the one before the pool): benchmarks/small_inputs.py.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import cunumpy as xp
from cunumpy._reference import morton as morton_ref, philox as philox_ref

A = xp.algorithms


def best(fn, repeats, setup=None):
    """Best wall time of ``fn`` over ``repeats`` runs (``setup`` runs untimed before each)."""
    return best_pair(fn, None, repeats, setup)[0]


def best_pair(ours, baseline, repeats, setup=None, threads=None):
    """Best times of two functions measured alternately, so load changes hit both alike.

    With ``threads`` = (1, N): ``ours`` is timed on one thread and on N, baseline once:
    returns [ours on 1, baseline, ours on N]."""
    fns = [(ours, None), (baseline, None)]
    if threads is not None:
        fns = [(ours, threads[0]), (baseline, None), (ours, threads[1])]
    best_times = [float("inf")] * len(fns)
    for _ in range(repeats):
        for slot, (fn, count) in enumerate(fns):
            if fn is None:
                continue
            if count is not None:
                xp.threads.set_num_threads(count)
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
    parser.add_argument("--n", type=int, default=4_000_000, help="elements per case (default 4M)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads",
        type=int,
        default=xp.threads.get_num_threads(),
        help="the 'all threads' count (default: the pool's size)",
    )
    args = parser.parse_args()
    n, r, nt = args.n, args.repeats, args.threads
    rng = np.random.default_rng(2024)
    rows = []

    def case(name, ours, baseline, target, repeats=r, setup=None, scaling=None):
        t1, t_base, tn = best_pair(ours, baseline, repeats, setup, threads=(1, nt))
        rows.append((name, t1, t_base, t_base / t1, target))
        if scaling is not None:
            rows.append((name + " (scaling)", t1, tn, t1 / tn, scaling))
        goal = f"target {target}x" + (f", scaling {scaling}x" if scaling is not None else "")
        print(
            f"{name:<46} {t1 * 1e3:8.2f} {tn * 1e3:8.2f} {t_base * 1e3:8.2f} ms "
            f"{t_base / t1:6.2f}x {t_base / tn:6.2f}x {t1 / tn:6.2f}x  ({goal})",
            flush=True,
        )

    print(
        f"n = {n:,}; best of {r}; all threads = {nt}; ratio = NumPy time / cunumpy time; "
        f"scaling = 1-thread time / {nt}-thread time"
    )
    print(f"{'case':<46} {'1 thr':>8} {f'{nt} thr':>8} {'NumPy':>8}    {'ratio1':>7} {f'ratio{nt}':>7} {'scale':>7}")

    # sort_by_key ---------------------------------------------------------------------------
    k30 = rng.integers(0, 2**30, n, dtype=np.int64)
    case(
        "sort_by_key, 30-bit keys",
        lambda: A.sort_by_key(k30),
        lambda: (lambda o: (k30.take(o), o))(np.argsort(k30, kind="stable")),
        6,
        scaling=1.6,
    )
    k63 = rng.integers(0, 2**63 - 1, n, dtype=np.int64)
    p1, p2 = rng.random(n), rng.random(n)

    def numpy_sort_payloads():
        o = np.argsort(k63, kind="stable")
        return k63.take(o), o, p1.take(o), p2.take(o)

    case("sort_by_key, 63-bit keys + 2 payloads", lambda: A.sort_by_key(k63, p1, p2), numpy_sort_payloads, 2)
    case(
        "sort_by_key, 63-bit keys",
        lambda: A.sort_by_key(k63),
        lambda: (lambda o: (k63.take(o), o))(np.argsort(k63, kind="stable")),
        2,
        scaling=1.6,
    )

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

    case("segment_sum (n,) vs np.add.at", lambda: A.segment_sum(v1, keys, nseg), add_at_1, 1)
    case(
        "segment_sum (n,) vs np.bincount",
        lambda: A.segment_sum(v1, keys, nseg),
        lambda: np.bincount(keys, weights=v1, minlength=nseg),
        1,
    )
    case("segment_sum (n, 3) vs np.add.at", lambda: A.segment_sum(v3, keys, nseg), add_at_3, 3)
    case("segment_sum (n, 3) vs np.bincount per column", lambda: A.segment_sum(v3, keys, nseg), bincount_3, 1)

    # cell_offsets and segment_boundaries ---------------------------------------------------
    ncells = max(n // 16, 1)
    cells = np.sort(rng.integers(0, ncells, n))

    def numpy_boundaries():
        starts = np.flatnonzero(np.concatenate(([True], cells[1:] != cells[:-1])))
        return cells[starts], starts, np.append(starts[1:], n)

    case(
        "cell_offsets vs np.searchsorted",
        lambda: A.cell_offsets(cells, ncells),
        lambda: np.searchsorted(cells, np.arange(ncells + 1), side="left"),
        1,
    )
    case("segment_boundaries vs flatnonzero of changes", lambda: A.segment_boundaries(cells), numpy_boundaries, 1.5)

    # morton_keys ---------------------------------------------------------------------------
    pos = rng.random((n, 3))
    lower, upper = np.zeros(3), np.ones(3)
    scale = A.morton_scales(lower, upper, 21)
    case(
        "morton_keys 3-D, 21 levels",
        lambda: A.morton_keys(pos, lower, upper, 21),
        lambda: morton_ref.keys_from_positions(pos, lower, scale, 21),
        5,
        scaling=1.6,
    )

    # philox_uniform ------------------------------------------------------------------------
    counter = np.arange(n, dtype=np.uint64)
    case(
        "philox_uniform",
        lambda: xp.rng.philox_uniform(7, 3, counter),
        lambda: numpy_philox_uniform(np.uint64(7), np.uint64(3), counter),
        8,
        scaling=1.6,
    )

    # random_streams draws: one thread is NumPy's own draw; more split it over jumped copies
    gen_ours, gen_numpy = np.random.default_rng(5), np.random.default_rng(5)
    case(
        "random_streams.random (PCG64) vs Generator.random",
        lambda: xp.rng.random_streams.random(n, rng=gen_ours),
        lambda: gen_numpy.random(n),
        0.9,
    )

    # compact_by_mask -----------------------------------------------------------------------
    # The case: four float64 payloads of n values, 70% live; then a mixed set (an
    # (n, 3) float64 array of positions and an int64 array among them), which moves more bytes
    # per entry. NumPy's best way: the live positions once, then one take per array.
    mask = rng.random(n) < 0.7
    for label, payloads, target in (
        ("4 float64 payloads", [rng.random(n) for _ in range(4)], 2),
        ("mixed payloads", [rng.random(n), rng.random((n, 3)), rng.integers(0, 9, n), rng.random(n)], 1.5),
    ):

        def fresh(payloads=payloads):
            return [p.copy() for p in payloads]

        def numpy_compact(arrays):
            live = np.flatnonzero(mask)
            return [np.take(a, live, axis=0) for a in arrays]

        case(
            f"compact_by_mask, {label} vs nonzero + take",
            lambda arrays: A.compact_by_mask(mask, *arrays),
            numpy_compact,
            target,
            setup=fresh,
            scaling=1.6,
        )
        copies = [np.empty_like(p) for p in payloads]

        def plain_copy(arrays, copies=copies):
            for d, a in zip(copies, arrays):
                np.copyto(d, a)

        t1, t_copy, tn = best_pair(
            lambda arrays: A.compact_by_mask(mask, *arrays), plain_copy, r, fresh, threads=(1, nt)
        )
        rows.append((f"compact_by_mask, {label}, vs plain copy (1 thread)", t1, t_copy, t_copy / t1, 1 / 1.5))
        print(
            f"{f'compact_by_mask, {label}, vs a plain copy':<46} {t1 * 1e3:8.2f} {tn * 1e3:8.2f} "
            f"{t_copy * 1e3:8.2f} ms {t_copy / t1:6.2f}x {t_copy / tn:6.2f}x {t1 / tn:6.2f}x  "
            f"(target {1 / 1.5:.2f}x: within 1.5x of the copy)",
            flush=True,
        )

    # bandwidth -----------------------------------------------------------------------------
    small = 4096  # segments that stay in cache: the sum is limited by reading the inputs
    keys_bw = rng.integers(0, small, n)
    nbytes = v3.nbytes + keys_bw.nbytes
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    xp.threads.set_num_threads(1)
    t_sum = best(lambda: A.segment_sum(v3, keys_bw, small), r)
    t_copy = best(lambda: np.copyto(dst, src), r)
    bw_sum, bw_copy = nbytes / t_sum / 1e9, 2 * nbytes / t_copy / 1e9  # a copy reads and writes
    print(
        f"{'segment_sum (n, 3) bandwidth vs plain copy':<48} {bw_sum:9.2f} GB/s {bw_copy:7.2f} GB/s "
        f"{bw_sum / bw_copy:7.2f}x  (target 0.5x; the copy counts read + write)"
    )

    # small inputs: the pool must cost nothing below its cut-over ---------------------------
    m = 1000
    small_cases = {
        "sort_by_key": (lambda k=k30[:m]: A.sort_by_key(k)),
        "segment_sum (n, 3)": (lambda v=v3[:m], k=keys[:m] % 64: A.segment_sum(v, k, 64)),
        "cell_offsets": (lambda c=np.sort(keys[:m] % 64): A.cell_offsets(c, 64)),  # noqa: B008 - computed once, outside the timed call
        "segment_boundaries": (lambda c=np.sort(keys[:m] % 64): A.segment_boundaries(c)),  # noqa: B008 - computed once, outside the timed call
        "morton_keys": (lambda p=pos[:m]: A.morton_keys(p, lower, upper, 21)),
        "morton_decode": (lambda k=A.morton_keys(pos[:m], lower, upper, 21): A.morton_decode(k, 3)),  # noqa: B008 - computed once, outside the timed call
        "philox_uniform": (lambda c=counter[:m]: xp.rng.philox_uniform(7, 3, c)),
        "compact_by_mask": (lambda arrays, mk=mask[:m]: A.compact_by_mask(mk, *arrays)),
    }
    small_payloads = [p[:m].copy() for p in payloads]  # the mixed set
    for name, fn in small_cases.items():
        setup = (lambda: [p.copy() for p in small_payloads]) if name == "compact_by_mask" else None
        t1, _, tn = best_pair(fn, None, max(r, 200), setup, threads=(1, nt))
        print(
            f"{'small (1000): ' + name:<46} {t1 * 1e6:7.1f}us {tn * 1e6:7.1f}us  "
            f"{nt}-thread / 1-thread time {tn / t1:5.2f}",
            flush=True,
        )
    xp.threads.set_num_threads(nt)
    below = [row[0] for row in rows if row[3] < row[4]]
    print("all targets met" if not below else f"below target: {', '.join(below)}")


if __name__ == "__main__":
    main()
