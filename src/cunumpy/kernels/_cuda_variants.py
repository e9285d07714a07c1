"""CudaKernelVariants (API.md section 2.4): kernels made on demand per key, and the compilation
of many kernels on threads that KernelCatalog.compile_all shares."""

from __future__ import annotations

import concurrent.futures
import contextvars
import os
import sys
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from . import _cuda_launch
from ._cuda_kernel import CudaKernel

__all__ = ["CudaKernelVariants"]


def _compile_each(items, jobs: int) -> dict:
    """Compile every kernel of ``items`` ((key, kernel) pairs) on ``jobs`` threads, on the
    caller's device; returns {key: exception} of the ones that failed. A device that cannot
    be entered in a worker thread is that kernel's error: never a silent compile on device 0,
    where worker threads start."""
    errors: dict = {}
    if jobs == 1 or len(items) <= 1:
        for key, kernel in items:
            try:
                kernel.compile()
            except Exception as exc:  # noqa: BLE001 - each kernel's error is collected and reported per kernel
                errors[key] = exc
        return errors
    cupy: Any = sys.modules.get("cupy")
    dev = _cuda_launch._current_device(cupy) if cupy is not None else None

    def work(kernel):
        if dev is None:
            return kernel.compile()
        with cupy.cuda.Device(dev):
            return kernel.compile()

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        # Each compile runs in a copy of the caller's context: an emulated_launches() block
        # (a context variable) applies in the workers too.
        futures = [(key, pool.submit(contextvars.copy_context().run, work, kernel)) for key, kernel in items]
        for key, future in futures:
            error = future.exception()
            if error is not None:
                errors[key] = error
    return errors


def _compile_jobs(jobs) -> int:
    """The thread count of a compile_all(jobs=...): an int >= 1, None for the CPU count."""
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int)):
        raise TypeError(f"compile_all(): 'jobs' must be an int or None, not {jobs!r}")
    if jobs is None:
        jobs = os.cpu_count() or 1
    if jobs < 1:
        raise ValueError(f"compile_all(): 'jobs' must be >= 1, got {jobs}")
    return jobs


class CudaKernelVariants:
    """Kernels created on demand by ``factory(*key)`` and cached per key.

    For kernels specialised per dtype, dimension or option: ``variants.get(np.float32, 3)``
    creates the kernel once.

    Parameters
    ----------
    factory : callable
        ``factory(*key)`` returns a :class:`CudaKernel`.

    Raises
    ------
    TypeError
        ``factory`` is not callable.
    """

    def __init__(self, factory: Callable[..., CudaKernel]) -> None:
        if not callable(factory):
            raise TypeError("CudaKernelVariants: 'factory' must be callable")
        self._factory = factory
        self._kernels: dict = {}

    def get(self, *key: Hashable) -> CudaKernel:
        """Return the kernel for ``key``, creating it with the factory on first use.

        Parameters
        ----------
        *key : object
            The key, hashable.

        Returns
        -------
        CudaKernel
            The cached kernel.

        Raises
        ------
        TypeError
            The factory did not return a CudaKernel.
        """
        try:
            return self._kernels[key]
        except KeyError:
            pass
        kernel = self._factory(*key)
        if not isinstance(kernel, CudaKernel):
            raise TypeError(
                f"CudaKernelVariants: the factory returned {type(kernel).__name__} for key {key}, not a CudaKernel"
            )
        self._kernels[key] = kernel
        return kernel

    def keys(self) -> list[tuple]:
        """Return the keys of the kernels created so far, in creation order.

        Returns
        -------
        list of tuple
            The keys.
        """
        return list(self._kernels)

    def __iter__(self):
        return iter(list(self._kernels))

    def __len__(self):
        return len(self._kernels)

    def compile_all(self, keys: Iterable[Any] = (), *, jobs: int | None = 1) -> None:
        """Create the listed variants, then compile every existing one (``jobs`` threads)."""
        jobs = _compile_jobs(jobs)
        for key in keys:
            self.get(*(key if isinstance(key, tuple) else (key,)))
        items = list(self._kernels.items())
        errors = _compile_each(items, jobs)
        for key, _ in items:
            if key in errors:
                raise errors[key]
