"""CUDA debug mode (API.md section 4.3): line info, bounds checks and a sync after each launch."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["DEBUG_OPTIONS", "cuda_debug", "get_cuda_debug", "set_cuda_debug"]

#: Compile options a CudaKernel adds in debug mode.
DEBUG_OPTIONS = ("-lineinfo", "-DCUNUMPY_BOUNDS_CHECK")

_TRUE = ("1", "true", "yes", "on")
_enabled = os.environ.get("CUNUMPY_CUDA_DEBUG", "").strip().lower() in _TRUE


def set_cuda_debug(enabled: bool) -> None:
    """Switch the process-wide CUDA debug mode.

    In debug mode :class:`cunumpy.kernels.CudaKernel` compiles with ``-lineinfo
    -DCUNUMPY_BOUNDS_CHECK`` and synchronises after each launch, so a CUDA error becomes a
    :class:`RuntimeError` naming the kernel; the CPU emulation runs checked. Switch it before
    kernels compile. ``CUNUMPY_CUDA_DEBUG=1`` turns it on at import.

    Parameters
    ----------
    enabled : bool
        The new setting.

    Raises
    ------
    TypeError
        ``enabled`` is not a bool.
    """
    global _enabled
    if not isinstance(enabled, (bool, int)):
        raise TypeError(f"set_cuda_debug(): 'enabled' must be a bool, not {type(enabled).__name__}")
    _enabled = bool(enabled)


def get_cuda_debug() -> bool:
    """Tell whether the process-wide CUDA debug mode is on.

    Returns
    -------
    bool
        The current setting.
    """
    return _enabled


@contextlib.contextmanager
def cuda_debug(enabled: bool = True) -> Iterator[None]:
    """Turn debug mode on (or off) for a ``with`` block; the previous setting comes back on exit.

    Parameters
    ----------
    enabled : bool, optional
        The setting inside the block (default True).

    Yields
    ------
    None
    """
    previous = _enabled
    set_cuda_debug(enabled)
    try:
        yield
    finally:
        set_cuda_debug(previous)
