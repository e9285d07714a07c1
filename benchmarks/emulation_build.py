"""Building a suite of kernels from an empty emulation cache: ``--jobs 1`` against ``--jobs N``.

Each round runs ``python -m cunumpy emulation build PATHS --jobs J --json`` in a new process
with a new, empty ``CUNUMPY_EMULATION_CACHE`` (so every kernel is compiled, and the compiler
is identified again), alternating the job counts, and prints the wall times, their ratio and
the load average before and after. Usage::

    python benchmarks/emulation_build.py [--rounds 2] [--jobs 2] [PATH ...]

Default paths: the kernel folders of tests/unit/kernel_pkg and examples/kernel_folder and the
.cu files of tests/gpu/kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATHS = ["tests/unit/kernel_pkg", "examples/kernel_folder", "tests/gpu/kernels"]


def _build(paths: list[str], jobs: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="cunumpy-build-bench-") as cache:
        env = dict(os.environ, CUNUMPY_EMULATION_CACHE=cache)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "cunumpy", "emulation", "build", *paths, "--jobs", str(jobs), "--json"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
        )
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the build failed (exit code {done.returncode}):\n{done.stderr}")
    return seconds, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=DEFAULT_PATHS)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2, help="the parallel run's job count (against 1)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    times: dict[int, list[float]] = {1: [], args.jobs: []}
    report: dict = {}
    for _ in range(args.rounds):
        for jobs in (1, args.jobs):
            seconds, report = _build(args.paths, jobs)
            times[jobs].append(seconds)
    load_after = os.getloadavg()
    names = [k["name"] for k in report["kernels"]]
    print(f"{len(names)} kernels ({report['built']} built, {report['skipped']} skipped): {', '.join(names)}")
    print(f"cpu_count {os.cpu_count()}; load average before {load_before}, after {load_after}")
    for jobs, values in times.items():
        print(
            f"--jobs {jobs}: "
            + ", ".join(f"{v:.2f} s" for v in values)
            + f" (median {statistics.median(values):.2f} s)"
        )
    ratio = statistics.median(times[1]) / statistics.median(times[args.jobs])
    print(f"--jobs 1 / --jobs {args.jobs}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
