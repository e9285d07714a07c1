"""Run a command while N CPU-bound processes compete with it: a busy machine, on purpose.

Usage: python tools/load.py N -- COMMAND [ARG...]

Starts N processes that spin on the CPU (each a plain arithmetic loop, at normal priority),
runs COMMAND, stops the competitors and exits with COMMAND's exit status. `make test
UNIT_LOAD=2` (as .ci/run runs it) uses it to run the NumPy-backend unit suite on a machine
kept busy, which is how a test's wall-clock bound that a busy machine could fail is found
before a user's loaded CI runner or laptop finds it.

``python tools/load.py N`` without a command keeps N competitors running until interrupted.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time


def _spin(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it (SIGTERM)
    x = 0
    while os.getppid() == parent:  # a parent killed outright leaves no competitor behind
        for i in range(100_000):
            x = (x * 31 + i) % 1_000_003


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _usage(message: str) -> int:
    print(f"tools/load.py: {message}\nusage: python tools/load.py N [-- COMMAND [ARG...]]", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    if not argv:
        return _usage("N, the number of competing processes, is missing")
    if argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        count = int(argv[0])
    except ValueError:
        return _usage(f"N must be a whole number of processes, got {argv[0]!r}")
    if count < 0:
        return _usage(f"N must be 0 or more, got {count}")
    command = argv[1:]
    if command and command[0] == "--":
        command = command[1:]
    signal.signal(signal.SIGTERM, _terminated)
    competitors = [multiprocessing.Process(target=_spin, args=(os.getpid(),), daemon=True) for _ in range(count)]
    for p in competitors:
        p.start()
    started = time.monotonic()
    print(f"load: {count} CPU-bound competitor(s) running (pids {[p.pid for p in competitors]})", flush=True)
    try:
        if not command:
            while True:
                time.sleep(3600)
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
    finally:
        for p in competitors:
            p.terminate()
        for p in competitors:
            p.join(10)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(
            f"load: competitors stopped after {time.monotonic() - started:.0f} s (1-minute load average {load:.1f})",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
