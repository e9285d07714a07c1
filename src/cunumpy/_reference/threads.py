"""Twin of the pool controls of ``cunumpy._core`` (threads.c).

Without the C core every algorithm runs in Python on the calling thread, so the number is
only kept and reported; it is decided and validated exactly as in C."""

from __future__ import annotations

import os
import warnings

__all__ = [
    "_pool_fail_next_start",
    "_pool_ignore_cutover",
    "_pool_jobs",
    "_pool_workers",
    "get_num_threads",
    "set_num_threads",
]

MAX_THREADS = 1024
_wanted = 0


def _from_environment() -> int:
    text = os.environ.get("CUNUMPY_NUM_THREADS", "")
    if text == "":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    digits = text.strip(" \t")
    if digits.isascii() and digits.isdigit() and 1 <= int(digits) <= MAX_THREADS:
        return int(digits)
    warnings.warn(
        f"CUNUMPY_NUM_THREADS={text!r} is not a whole number from 1 to {MAX_THREADS}; using one thread",
        RuntimeWarning,
        stacklevel=3,
    )
    return 1


def get_num_threads() -> int:
    global _wanted
    if _wanted == 0:
        _wanted = _from_environment()
    return _wanted


def set_num_threads(n) -> None:
    global _wanted
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"'n' must be an int, not {type(n).__name__}")
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"'n' must be from 1 to {MAX_THREADS}, got {n!r}")
    get_num_threads()
    _wanted = n


def _pool_fail_next_start() -> None:
    """No workers are ever started here."""


def _pool_workers() -> int:
    return 0


def _pool_ignore_cutover(on) -> None:
    """Nothing runs on workers here, whatever the cut-overs."""
    bool(on)


def _pool_jobs() -> int:
    return 0
