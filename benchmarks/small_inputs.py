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

# argv: calls, the folder of _host_cases.py, "time" or "callgrind", and "bare" for the C calls.
CHILD = r"""
import json, statistics, sys, time
import numpy as np
sys.path.insert(1, sys.argv[2])
from _host_cases import host_algorithm_cases, host_algorithm_inputs
calls, mode = int(sys.argv[1]), sys.argv[3]
bare = len(sys.argv) > 4 and sys.argv[4] == "bare"
m = 1000
d = host_algorithm_inputs(m, np.random.default_rng(11), n_cells=64, n_segments=64)
cases = host_algorithm_cases(m, None, 64, 64, inputs=d)
if bare:
    # The C call each case ends in, with its arguments prepared (outputs allocated once).
    import cunumpy as xp
    from cunumpy._native import core
    xp.threads.set_num_threads(1)
    k30, cells, v3, seg, pos, mkeys, counter = (d[k] for k in ("k30", "sorted_cells", "v3", "seg_keys", "pos", "mkeys", "counter"))
    order, sorted_keys = np.empty(m, np.int64), np.empty(m, k30.dtype)
    sums, offsets, chunk_runs = np.empty((64, 3)), np.empty(65, np.int64), np.empty(1, np.int64)
    runs = core.segment_runs(cells, chunk_runs)
    unique, starts, stops = np.empty(runs, cells.dtype), np.empty(runs, np.int64), np.empty(runs, np.int64)
    box = tuple(d["lower"].tolist()), tuple(xp.algorithms.morton_scales(d["lower"], d["upper"], 21).tolist())
    keys_out, cells_out = np.empty(m, np.uint64), tuple(np.empty(m, np.uint64) for _ in range(3))
    seed, stream, uniforms = np.full(1, 7, np.uint64), np.full(1, 3, np.uint64), np.empty(m)
    c_cases = {
        "sort_by_key (30-bit)": (lambda: core.radix_argsort(k30, order, sorted_keys), None),
        "segment_sum (n, 3)": (lambda: core.segment_sum_into(v3, seg, sums, False), None),
        "cell_offsets": (lambda: core.cell_offsets_into(cells, 64, offsets), None),
        "segment_boundaries": (lambda: (core.segment_runs(cells, chunk_runs),
                                        core.segment_runs(cells, unique, starts, stops, chunk_runs)), None),
        "morton_keys 3-D": (lambda: core.morton_keys_into(pos, *box, 21, keys_out), None),
        "morton_decode 3-D": (lambda: core.morton_decode_into(mkeys, cells_out), None),
        "philox_uniform": (lambda: core.philox_fill(0, seed, stream, counter, uniforms, None), None),
        "compact_by_mask (4 arrays)": (lambda arrays: core.compact_in_place(d["mask"], arrays),
                                       lambda: tuple(p.copy() for p in d["payloads"])),
    }
    cases = {**cases, **{"C: " + name: case for name, case in c_cases.items()}}
if mode == "callgrind":  # under callgrind: dump the counters around each case
    import os, subprocess
    def dump(tag):
        subprocess.run(["callgrind_control", "-d", tag, str(os.getpid())], check=True,
                       capture_output=True)
    cases = {"nothing": (lambda: None, None), **cases}
    for index, (fn, setup) in enumerate(cases.values()):
        if setup is None:
            fn()
        else:
            arrays = [setup() for _ in range(calls)]
        dump("before")
        if setup is None:
            for _ in range(calls):
                fn()
        else:
            for arg in arrays:
                fn(arg)
        dump(f"case-{index}-")  # names with brackets do not survive callgrind_control
    print(json.dumps(list(cases)))
    sys.exit(0)
out = {}
for name, (fn, setup) in cases.items():
    ts = []
    if setup is None:
        fn()
        for _ in range(calls):
            s = time.perf_counter(); fn(); ts.append(time.perf_counter() - s)
    else:
        for arg in [setup() for _ in range(calls)]:
            s = time.perf_counter(); fn(arg); ts.append(time.perf_counter() - s)
    out[name] = statistics.median(ts)
print(json.dumps(out))
"""
HERE = os.path.dirname(os.path.abspath(__file__))


def run_child(pythonpath, calls, bare=False):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(calls), HERE, "time", "bare" if bare else ""],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def callgrind_child(pythonpath, calls, folder, bare=False):
    """Instructions per call of every case, from one run under callgrind."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, "cg.out")
    child = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-c",
            CHILD,
            str(calls),
            HERE,
            "callgrind",
            "bare" if bare else "",
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    case_names = json.loads(child.stdout.strip().splitlines()[-1])  # the child's cases in order
    totals = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            text = f.read()
        tag = next(
            (
                int(line.split("case-", 1)[1].split("-")[0])
                for line in text.splitlines()
                if line.startswith("desc: Trigger") and "case-" in line
            ),
            None,
        )
        total = next(
            (int(line.split()[1]) for line in text.splitlines() if line.startswith(("summary:", "totals:"))), None
        )
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
        print(f"{name:<30} {fmt(ours * scale):>10} {fmt(c * scale):>10} {fmt((ours - c) * scale):>10}  {ours / c:6.2f}")
    print(f"({unit}; targets: overhead <= 5 us, compact_by_mask <= 20 us in all)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="folder holding the other build's cunumpy")
    parser.add_argument(
        "--bare", action="store_true", help="this build's functions against the bare C calls they end in"
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument(
        "--callgrind", action="store_true", help="instructions per call under callgrind instead of wall time"
    )
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
        print(f"1 000 elements, 1 thread; best of {args.rounds} rounds of the median of {args.calls} calls")
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
    print(
        f"1 000 elements; best of {args.rounds} rounds of the median of {args.calls} calls; "
        f"this build's default threads; old = {args.old}"
    )
    print(f"{'case':<30} {'this':>9} {'old':>9}  this/old")
    worst = 0.0
    for name, t_new in best["new"].items():
        t_old = best["old"][name]
        worst = max(worst, t_new / t_old)
        print(f"{name:<30} {t_new * 1e6:7.1f}us {t_old * 1e6:7.1f}us  {t_new / t_old:6.3f}")
    print(f"worst ratio {worst:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
