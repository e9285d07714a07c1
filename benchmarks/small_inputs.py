"""Small inputs (1 000 elements): against another build of cunumpy, or against the bare C calls.

The thread pool must cost nothing below its cut-overs. This times every host algorithm on
1 000 elements with this checkout's cunumpy and with another build (``--old``: a folder that
holds a ``cunumpy`` package, e.g. made by ``pip install --target``), in child processes that
alternate round by round so that load changes hit both. Each round reports the median of
``--calls`` calls per case; the table shows the best round of each build and the ratio
(this build / old, below 1.10 is the target).

    .venv/bin/python benchmarks/small_inputs.py --old /tmp/prepool-site [--rounds 7] [--calls 400]
    .venv/bin/python benchmarks/small_inputs.py --old /tmp/prepool-site --callgrind

With ``--callgrind`` each build runs once under valgrind's callgrind instead, and the table
gives instructions per call (the counters are dumped around each case, and a case that does
nothing is subtracted): not wall time, but unaffected by the load of a shared machine.

With ``--bare`` (instead of ``--old``) each function runs next to the ``cunumpy._core`` call
it ends in, with that call's arguments prepared once (outputs allocated, bounds converted),
on one thread in the same child process: the difference is what the Python wrapper costs
(target: at most 5 us per call, and compact_by_mask with 4 payloads at most 20 us in all).

    .venv/bin/python benchmarks/small_inputs.py --bare [--rounds 7] [--calls 400] [--callgrind]

A build from before the pool: ``git archive <commit> | tar -x -C /tmp/src`` and in /tmp/src
``PATH=$PWD/.venv/bin:$PATH python -m pip install --no-build-isolation --no-deps --target
/tmp/prepool-site -Cbuild-dir=/tmp/prepool-build .`` (with this checkout's .venv on PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, statistics, sys, time
import numpy as np
import cunumpy as xp
A = xp.algorithms
calls = int(sys.argv[1])
bare = len(sys.argv) > 3 and sys.argv[3] == "bare"
m = 1000
rng = np.random.default_rng(11)
k30 = rng.integers(0, 2**30, m)
cells = np.sort(rng.integers(0, 64, m))
v3 = rng.random((m, 3))
seg = rng.integers(0, 64, m)
pos = rng.random((m, 3))
lower, upper = np.zeros(3), np.ones(3)
mkeys = A.morton_keys(pos, lower, upper, 21)
counter = np.arange(m, dtype=np.uint64)
mask = rng.random(m) < 0.7
payloads = [rng.random(m), rng.random((m, 3)), rng.integers(0, 9, m), rng.random(m)]
cases = {
    "sort_by_key": lambda: A.sort_by_key(k30),
    "segment_sum (n, 3)": lambda: A.segment_sum(v3, seg, 64),
    "cell_offsets": lambda: A.cell_offsets(cells, 64),
    "segment_boundaries": lambda: A.segment_boundaries(cells),
    "morton_keys": lambda: A.morton_keys(pos, lower, upper, 21),
    "morton_decode": lambda: A.morton_decode(mkeys, 3),
    "philox_uniform": lambda: xp.rng.philox_uniform(7, 3, counter),
}
if bare:
    # The C call each case ends in, with its arguments prepared (outputs allocated once).
    from cunumpy._native import core
    xp.threads.set_num_threads(1)
    order, sorted_keys = np.empty(m, np.int64), np.empty(m, k30.dtype)
    sums, offsets, chunk_runs = np.empty((64, 3)), np.empty(65, np.int64), np.empty(1, np.int64)
    runs = core.segment_runs(cells, chunk_runs)
    unique, starts, stops = np.empty(runs, cells.dtype), np.empty(runs, np.int64), np.empty(runs, np.int64)
    box = tuple(lower.tolist()), tuple(A.morton_scales(lower, upper, 21).tolist())
    keys_out, cells_out = np.empty(m, np.uint64), tuple(np.empty(m, np.uint64) for _ in range(3))
    seed, stream, uniforms = np.full(1, 7, np.uint64), np.full(1, 3, np.uint64), np.empty(m)
    cases = {
        **cases,
        "C: sort_by_key": lambda: core.radix_argsort(k30, order, sorted_keys),
        "C: segment_sum (n, 3)": lambda: core.segment_sum_into(v3, seg, sums, False),
        "C: cell_offsets": lambda: core.cell_offsets_into(cells, 64, offsets),
        "C: segment_boundaries": lambda: (core.segment_runs(cells, chunk_runs),
                                          core.segment_runs(cells, unique, starts, stops, chunk_runs)),
        "C: morton_keys": lambda: core.morton_keys_into(pos, *box, 21, keys_out),
        "C: morton_decode": lambda: core.morton_decode_into(mkeys, cells_out),
        "C: philox_uniform": lambda: core.philox_fill(0, seed, stream, counter, uniforms, None),
    }
if len(sys.argv) > 2 and sys.argv[2] == "callgrind":  # under callgrind: dump the counters around each case
    import os, subprocess
    def dump(tag):
        subprocess.run(["callgrind_control", "-d", tag, str(os.getpid())], check=True,
                       capture_output=True)
    arrays = iter([[p.copy() for p in payloads] for _ in range(calls)])
    cases["nothing"] = lambda: None
    cases["compact_by_mask (4 arrays)"] = lambda: A.compact_by_mask(mask, *next(arrays))
    if bare:
        c_arrays = iter([tuple(p.copy() for p in payloads) for _ in range(calls)])
        cases["C: compact_by_mask (4 arrays)"] = lambda: core.compact_in_place(mask, next(c_arrays))
    for index, (name, fn) in enumerate(cases.items()):
        if "compact" not in name:
            fn()
        dump("before")
        for _ in range(calls):
            fn()
        dump(f"case-{index}-")  # names with brackets do not survive callgrind_control
    print(json.dumps(list(cases)))
    sys.exit(0)
out = {}
for name, fn in cases.items():
    fn()
    ts = []
    for _ in range(calls):
        s = time.perf_counter(); fn(); ts.append(time.perf_counter() - s)
    out[name] = statistics.median(ts)
arrays = [[p.copy() for p in payloads] for _ in range(calls)]
ts = []
for arr in arrays:
    s = time.perf_counter(); A.compact_by_mask(mask, *arr); ts.append(time.perf_counter() - s)
out["compact_by_mask (4 arrays)"] = statistics.median(ts)
if bare:
    ts = []
    for arr in [tuple(p.copy() for p in payloads) for _ in range(calls)]:
        s = time.perf_counter(); core.compact_in_place(mask, arr); ts.append(time.perf_counter() - s)
    out["C: compact_by_mask (4 arrays)"] = statistics.median(ts)
print(json.dumps(out))
"""


def run_child(pythonpath, calls, bare=False):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", CHILD, str(calls), "time", "bare" if bare else ""],
                         env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def callgrind_child(pythonpath, calls, folder, bare=False):
    """Instructions per call of every case, from one run under callgrind."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, "cg.out")
    child = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            sys.executable, "-c", CHILD, str(calls), "callgrind",
                            "bare" if bare else ""],
                           env=env, check=True, capture_output=True, text=True)
    case_names = json.loads(child.stdout.strip().splitlines()[-1])  # the child's cases in order
    totals = {}
    for name in os.listdir(folder):
        text = open(os.path.join(folder, name)).read()
        tag = next((int(line.split("case-", 1)[1].split("-")[0]) for line in text.splitlines()
                    if line.startswith("desc: Trigger") and "case-" in line), None)
        total = next((int(line.split()[1]) for line in text.splitlines()
                      if line.startswith(("summary:", "totals:"))), None)
        if tag is not None and total is not None:
            totals[case_names[tag]] = total
    nothing = totals.pop("nothing")
    return {name: (totals[name] - nothing) / calls for name in case_names if name in totals}


def print_bare(figures, unit, scale, fmt):
    """One row per case: the wrapper, the bare C call, their difference and ratio."""
    print(f"{'case':<30} {'cunumpy':>10} {'C alone':>10} {'overhead':>10}  cunumpy/C")
    for name, ours in figures.items():
        if name.startswith("C: "):
            continue
        c = figures["C: " + name]
        print(f"{name:<30} {fmt(ours * scale):>10} {fmt(c * scale):>10} "
              f"{fmt((ours - c) * scale):>10}  {ours / c:6.2f}")
    print(f"({unit}; targets: overhead <= 5 us, compact_by_mask <= 20 us in all)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="folder holding the other build's cunumpy")
    parser.add_argument("--bare", action="store_true",
                        help="this build's functions against the bare C calls they end in")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--callgrind", action="store_true",
                        help="instructions per call under callgrind instead of wall time")
    args = parser.parse_args()
    if (args.old is None) == (not args.bare):
        parser.error("give one of --old SITE and --bare")
    if args.bare:
        if args.callgrind:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                figures = callgrind_child("", min(args.calls, 200), tmp, bare=True)
            print("1 000 elements, 1 thread; instructions per call under callgrind")
            print_bare(figures, "instructions per call", 1, lambda v: f"{v:,.0f}")
            return
        best = {}
        for _ in range(args.rounds):
            for name, t in run_child("", args.calls, bare=True).items():
                best[name] = min(t, best.get(name, float("inf")))
        print(f"1 000 elements, 1 thread; best of {args.rounds} rounds of the median of "
              f"{args.calls} calls")
        print_bare(best, "microseconds", 1e6, lambda v: f"{v:.1f}us")
        return
    if args.callgrind:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            new = callgrind_child("", min(args.calls, 200), os.path.join(tmp, "new"))
            old = callgrind_child(args.old, min(args.calls, 200), os.path.join(tmp, "old"))
        print(f"1 000 elements; instructions per call under callgrind; old = {args.old}")
        print(f"{'case':<30} {'this':>10} {'old':>10}  this/old")
        for name in new:
            print(f"{name:<30} {new[name]:10.0f} {old[name]:10.0f}  {new[name] / old[name]:6.3f}")
        print(f"worst ratio {max(new[n] / old[n] for n in new):.3f} (target <= 1.10)")
        return
    best = {"new": {}, "old": {}}
    for _ in range(args.rounds):
        for which, path in (("new", ""), ("old", args.old)):
            for name, t in run_child(path, args.calls).items():
                best[which][name] = min(t, best[which].get(name, float("inf")))
    print(f"1 000 elements; best of {args.rounds} rounds of the median of {args.calls} calls; "
          f"this build's default threads; old = {args.old}")
    print(f"{'case':<30} {'this':>9} {'old':>9}  this/old")
    worst = 0.0
    for name, t_new in best["new"].items():
        t_old = best["old"][name]
        worst = max(worst, t_new / t_old)
        print(f"{name:<30} {t_new * 1e6:7.1f}us {t_old * 1e6:7.1f}us  {t_new / t_old:6.3f}")
    print(f"worst ratio {worst:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
