"""Run the parts of `make test` one after another, every one of them even when one fails.

Usage: python tools/run_parts.py [--make MAKE] PART [PART...]

Each PART is a make target, run as ``MAKE PART``. A line is printed when a part starts (with
the clock time, so a long part is never silent about what it is doing); at the end one line per
part says its name, passed or failed (with the exit status) and the minutes it took, and the
exit status is 1 when any part failed (0 when all passed). Ctrl-C stops the part that runs and
skips the rest, which the summary lists as not run.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def main(argv: list[str]) -> int:
    make = ["make"]
    if argv[:1] == ["--make"]:
        if len(argv) < 2:
            print("tools/run_parts.py: --make needs a command", file=sys.stderr)
            return 2
        make, argv = shlex.split(argv[1]), argv[2:]
    if not argv:
        print("usage: python tools/run_parts.py [--make MAKE] PART [PART...]", file=sys.stderr)
        return 2
    results: list[tuple[str, str, float]] = []
    begun = time.monotonic()
    interrupted = False
    for number, part in enumerate(argv, 1):
        if interrupted:
            results.append((part, "not run (interrupted)", 0.0))
            continue
        print(f"test: == [{number}/{len(argv)}] {part} started at {time.strftime('%H:%M:%S')}", flush=True)
        start = time.monotonic()
        try:
            status = subprocess.call([*make, "--no-print-directory", part])
        except KeyboardInterrupt:
            status, interrupted = 130, True
        took = time.monotonic() - start
        outcome = "passed" if status == 0 else f"FAILED (exit status {status})"
        if interrupted:
            outcome = "interrupted"
        print(f"test: == {part} {outcome} in {_minutes(took)}", flush=True)
        results.append((part, outcome, took))
    width = max(len(part) for part, _, _ in results)
    print(f"test: summary ({_minutes(time.monotonic() - begun)} in all)")
    for part, outcome, took in results:
        print(f"test:   {part:<{width}}  {outcome:<26} {_minutes(took):>9}")
    failed = [part for part, outcome, _ in results if outcome != "passed"]
    print("test: every part passed" if not failed else f"test: {len(failed)} part(s) did not pass: {' '.join(failed)}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
