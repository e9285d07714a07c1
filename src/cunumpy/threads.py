"""Threads of the host algorithms: one pool shared by ``cunumpy.algorithms`` and ``cunumpy.rng``.

The C core runs large inputs of the host algorithms (``sort_by_key``, ``compact_by_mask``,
``segment_sum`` and ``SegmentPlan.sum``, ``cell_offsets``, ``segment_boundaries``, the Morton
functions and the ``philox_*`` draws) on a pool of worker threads; inputs below a measured
size per algorithm (from 32 768 elements for the Philox and Morton functions to 262 144 for
compaction) stay on the calling thread. Large ``random_streams.random`` and ``.uniform``
draws from PCG64 and PCG64DXSM generators use it too, one jumped-ahead copy of the state per
chunk, giving NumPy's sequential values; ``normal`` (a varying number of raw draws per value)
stays serial, and counter-based ``philox_*`` numbers are the parallel way. Its size is
``CUNUMPY_NUM_THREADS`` when set (a whole number from 1 to 1024; anything else warns and
means one thread), otherwise the CPUs this process may use. Results never depend on the
number of threads: work is cut into fixed chunks and combined in a fixed order.

``threadpoolctl.threadpool_limits`` controls the pool too once :func:`register_threadpoolctl`
has run (it runs on import of this module when threadpoolctl is already imported); its
``user_api`` is ``"cunumpy"``, and a limit above 1024 gives the pool 1024 threads.

This is a module of its own rather than part of ``cunumpy.algorithms`` because the pool also
serves ``cunumpy.rng`` (and will serve the CPU emulator of kernels).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from . import _backend
from ._native import core as _core

__all__ = ["get_num_threads", "num_threads", "register_threadpoolctl", "set_num_threads"]

_lock = threading.Lock()

#: The largest pool size ``set_num_threads`` accepts (the C core's limit).
_MAX_THREADS = 1024


def get_num_threads() -> int:
    """Return the number of threads the host algorithms use.

    Returns
    -------
    int
        1 means the calling thread only.
    """
    return _core.get_num_threads()


def set_num_threads(n: int) -> None:
    """Set the number of threads of the host algorithms and random numbers.

    ``CUNUMPY_NUM_THREADS`` sets it at import (default: the CPUs the process may use). Waits
    for a parallel call running in another thread to finish; the workers of the new size
    start on the next call that needs them. Results are the same bits for any number.

    Parameters
    ----------
    n : int
        From 1 to 1024; with MPI, one rank per core usually wants 1.

    Raises
    ------
    TypeError
        ``n`` is not an int.
    ValueError
        ``n`` is out of range.
    """
    if not isinstance(n, int) or isinstance(n, bool):
        index = getattr(type(n), "__index__", None)
        if index is None or isinstance(n, bool):
            raise TypeError(f"'n' must be an int, not {type(n).__name__}")
        n = index(n)
        if not isinstance(n, int):
            raise TypeError("'n'.__index__() must return an int")
    with _lock:
        _core.set_num_threads(int(n))


@contextlib.contextmanager
def num_threads(n: int) -> Iterator[None]:
    """Use ``n`` threads inside a ``with`` block, the previous number after it.

    The setting is process-wide (there is one pool for the process), not per thread.

    Parameters
    ----------
    n : int
        From 1 to 1024.

    Yields
    ------
    None
    """
    previous = get_num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        set_num_threads(previous)


_registered_with = None  # the threadpoolctl module the controller is registered with


def register_threadpoolctl() -> bool:
    """Make ``threadpoolctl`` see the pool (``user_api="cunumpy"``).

    After it, ``threadpoolctl.threadpool_limits(1)`` limits cunumpy's threads too.

    Returns
    -------
    bool
        False when threadpoolctl is not installed.
    """
    global _registered_with
    try:
        import threadpoolctl
    except ImportError:
        return False
    with _lock:
        # A re-imported threadpoolctl (a fresh module after its sys.modules entry went) has
        # lost earlier registrations: register with the module there is now.
        if _registered_with is threadpoolctl:
            return True

        class CunumpyController(threadpoolctl.LibController):
            user_api = "cunumpy"
            internal_api = "cunumpy"
            filename_prefixes = ("_core",)
            check_symbols = ("cunumpy_pool_threads",)

            def get_num_threads(self):
                return get_num_threads()

            def set_num_threads(self, num_threads):
                # threadpoolctl gives one limit to every library and stops at the first that
                # raises: a limit beyond this pool's maximum is clamped, so the others get theirs.
                set_num_threads(min(max(1, int(num_threads)), _MAX_THREADS))

            def get_version(self):
                return _backend.installed_version()  # cunumpy.__version__, without importing the package

        threadpoolctl.register(CunumpyController)
        _registered_with = threadpoolctl
    return True


if "threadpoolctl" in sys.modules:
    register_threadpoolctl()
