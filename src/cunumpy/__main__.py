"""``python -m cunumpy [info] [--json]``: diagnostics to paste into a bug report;
``python -m cunumpy emulation build PATH... [--jobs N] [--sanitize NAMES] [--json]``: build
the emulation libraries of the CUDA kernels found in PATH ahead of their first launch.

Prints the cunumpy, Python and platform versions, the versions of the optional packages
(from their metadata, without importing them), whether the C extension or the pure-Python
fallback is in use, the CUDA toolkit and devices in sight, the active backend with the
reason CuPy is unavailable when it is, and the CPU emulation of CUDA kernels (the C++
compiler and its version or why none was found, whether launches on the fake CuPy emulate by
themselves, the cache directory and its size, the worker count).

``emulation build`` builds, on all cores, the library of every kernel of the kernel folders and
``.cu`` files under each PATH (and of the ``.cu``/``.cuh`` files named), into the emulation
cache under the keys launches look up, printing one line per kernel (built, cached, failed,
skipped; seconds) and a total; exit code 1 when one failed (its compiler error goes to stderr).

Bad arguments print the
usage and exit with code 2. Output into a pipe that closes early (``python -m cunumpy info
--json | head -1``) ends quietly with exit code 1, without a ``BrokenPipeError`` traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cunumpy",
        description="Diagnostics of the cunumpy installation, for bug reports.",
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="info",
        choices=["info"],
        help="what to print (only 'info' for now; the default)",
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of text")
    parser.epilog = "Also: python -m cunumpy emulation build PATH... (see its --help)."
    return parser


def _emulation_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cunumpy emulation",
        description="The CPU emulation of CUDA kernels.",
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="build")
    build = sub.add_parser(
        "build",
        help="build the emulation libraries of the kernels found in PATH, in parallel",
        description=(
            "Build the emulation library of every CUDA kernel found in PATH (kernel folders and .cu files "
            "under a directory, or the .cu/.cuh files named) into the emulation cache, in parallel, so "
            "that their first launches find them there."
        ),
    )
    build.add_argument("paths", nargs="+", metavar="PATH", help="a directory, .cu or .cuh file")
    build.add_argument("--jobs", "-j", type=int, default=None, help="parallel builds (default: the CPU count)")
    build.add_argument(
        "--sanitize",
        default="",
        metavar="NAMES",
        help="build for launches with these checks (comma-separated: racecheck, initcheck, memcheck)",
    )
    build.add_argument("--json", action="store_true", help="print machine-readable JSON instead of text")
    return parser


def _emulation(argv) -> int:
    parser = _emulation_parser()
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    from ._emulation._build import emulation_compiler
    from ._emulation._prebuild import build_kernels, find_kernels

    try:
        found = find_kernels(args.paths)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    if emulation_compiler() is None:
        print("error: the CPU emulation needs a C++ compiler: none found (set CXX or install c++)", file=sys.stderr)
        return 1
    # one line per kernel is printed here: the notice of a slow build would repeat it
    logging.getLogger("cunumpy.emulation").setLevel(logging.ERROR)
    start = time.perf_counter()

    def line(result) -> None:
        if not args.json:
            print(f"{result.status:<8}{result.name}  {result.seconds:6.2f} s  {result.source}", flush=True)

    try:
        results = build_kernels(found, jobs=args.jobs, sanitize=args.sanitize, on_result=line, what="--sanitize")
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    total = time.perf_counter() - start
    counts = {status: sum(r.status == status for r in results) for status in ("built", "cached", "failed", "skipped")}
    failed = [r for r in results if r.status == "failed"]
    if args.json:
        print(
            json.dumps(
                {"kernels": [r.as_dict() for r in results], "seconds": round(total, 3), **counts},
                indent=2,
            )
        )
    else:
        tally = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        print(f"{len(results)} kernel(s): {tally or 'none found'} in {total:.2f} s")
    for r in failed:
        print(f"error: kernel '{r.name}' ({r.source}) failed to build:\n{r.error}", file=sys.stderr)
    if not results:
        print(f"error: no CUDA kernel found in {' '.join(args.paths)}", file=sys.stderr)
        return 1
    return 1 if failed else 0


def _run(argv) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "emulation":
        return _emulation(argv[1:])
    args = _parser().parse_args(argv)
    from ._info import collect, format_text

    info = collect()
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=False))
    else:
        print(format_text(info))
    return 0


def _quiet_broken_pipe() -> None:
    """The reader of stdout went away (``| head -1``): send what is still buffered, and the
    interpreter's final flush, to /dev/null instead of printing a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (a captured stream)
        pass


def main(argv=None) -> int:
    """Run the command line; returns the exit code (argparse exits with 2 on bad arguments,
    and 1 when stdout is a pipe whose reader closed it early)."""
    try:
        try:
            code = _run(argv)
        finally:
            sys.stdout.flush()  # a broken pipe shows here, not at the interpreter's exit
    except BrokenPipeError:
        _quiet_broken_pipe()
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
