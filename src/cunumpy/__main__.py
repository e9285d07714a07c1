"""``python -m cunumpy [info] [--json]``: diagnostics to paste into a bug report.

Prints the cunumpy, Python and platform versions, the versions of the optional packages
(from their metadata, without importing them), whether the C extension or the pure-Python
fallback is in use, the CUDA toolkit and devices in sight, the active backend with the
reason CuPy is unavailable when it is, and the CPU emulation of CUDA kernels (the C++
compiler and its version or why none was found, whether launches on the fake CuPy emulate by
themselves, the cache directory and its size, the worker count). Bad arguments print the
usage and exit with code 2. Output into a pipe that closes early (``python -m cunumpy info
--json | head -1``) ends quietly with exit code 1, without a ``BrokenPipeError`` traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

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
    return parser


def _run(argv) -> int:
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
