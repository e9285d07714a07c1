"""Small inputs (1 000 elements) against another build of cunumpy, in the same run.

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

# argv: calls, the folder of _host_cases.py, and "callgrind" to count instructions instead.
CHILD = r"""
import json, statistics, sys, time
import numpy as np
sys.path.insert(1, sys.argv[2])
from _host_cases import host_algorithm_cases
calls = int(sys.argv[1])
cases = host_algorithm_cases(1000, np.random.default_rng(11), n_cells=64, n_segments=64)
if len(sys.argv) > 3:  # under callgrind: dump the counters around each case
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


def run_child(pythonpath, calls):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", CHILD, str(calls), HERE], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def callgrind_child(pythonpath, calls, folder):
    """Instructions per call of every case, from one run under callgrind."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, "cg.out")
    run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          sys.executable, "-c", CHILD, str(calls), HERE, "callgrind"], env=env,
                         check=True, capture_output=True, text=True)
    case_names = json.loads(run.stdout.strip().splitlines()[-1])
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
    return {name: (t - nothing) / calls for name, t in totals.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="folder holding the other build's cunumpy")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--callgrind", action="store_true",
                        help="instructions per call under callgrind instead of wall time")
    args = parser.parse_args()
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
