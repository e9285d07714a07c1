"""Which host and device implementation kernels use (API.md section 2.8).

The selection is process-wide. Every change bumps ``epoch[0]``; a ``Kernel`` keeps its host
callable for the epoch it was resolved in, so a call only compares one integer instead of
re-resolving its implementation set.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = [
    "DEVICE_IMPLEMENTATIONS",
    "HOST_IMPLEMENTATIONS",
    "get_device_kernel_implementation",
    "get_host_kernel_implementation",
    "set_device_kernel_implementation",
    "set_host_kernel_implementation",
    "use_device_kernel_implementation",
    "use_host_kernel_implementation",
]

#: Host implementations in the order the automatic choice tries them ("python" is the last resort).
HOST_IMPLEMENTATIONS = ("pyccel", "numba", "numpy", "python")
#: Device implementations that can be requested explicitly.
DEVICE_IMPLEMENTATIONS = ("cuda",)

HOST_VARIABLE = "CUNUMPY_HOST_KERNEL_IMPLEMENTATION"
DEVICE_VARIABLE = "CUNUMPY_DEVICE_KERNEL_IMPLEMENTATION"


class _Selection:
    host: str | None = None
    device: str | None = None


selection = _Selection()
#: Bumped on every host selection change (a list so importers share the one cell).
epoch = [0]
#: Zero-argument callables run after every host selection change (Kernel plans go stale).
listeners: list = []


def _host_changed() -> None:
    epoch[0] += 1
    for listener in tuple(listeners):
        listener()


def _check_host(name, where: str) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or name not in HOST_IMPLEMENTATIONS:
        raise ValueError(
            f"{where}: unknown host kernel implementation {name!r}; expected one of "
            f"{', '.join(map(repr, HOST_IMPLEMENTATIONS))} or None"
        )
    return name


def _check_device(name, where: str) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or name not in DEVICE_IMPLEMENTATIONS:
        raise ValueError(f"{where}: unknown device kernel implementation {name!r}; expected 'cuda' or None")
    return name


def set_host_kernel_implementation(name: str | None) -> None:
    """Choose the host implementation that kernels with several use.

    Applies to :class:`HostImplementations` (kernel folders with ``_numba``, ``_numpy``
    files and a Pyccel-compiled module); a plain ``Kernel(host_fn)`` has one host
    implementation and ignores the choice. ``CUNUMPY_HOST_KERNEL_IMPLEMENTATION`` sets it at
    import.

    Parameters
    ----------
    name : {"pyccel", "numba", "numpy", "python"} or None
        The implementation; None restores the automatic choice (the first available of
        pyccel, numba, numpy, else python with a :class:`RuntimeWarning`).

    Raises
    ------
    ValueError
        ``name`` is not one of the implementations.
    """
    selection.host = _check_host(name, "set_host_kernel_implementation()")
    _host_changed()


def get_host_kernel_implementation() -> str | None:
    """Return the requested host implementation.

    Returns
    -------
    str or None
        The name set with :func:`set_host_kernel_implementation`, or None in automatic mode.
    """
    return selection.host


@contextlib.contextmanager
def use_host_kernel_implementation(name: str | None) -> Iterator[str | None]:
    """Choose the host implementation for a ``with`` block; the previous one comes back on exit.

    Parameters
    ----------
    name : {"pyccel", "numba", "numpy", "python"} or None
        The implementation, as for :func:`set_host_kernel_implementation`.

    Yields
    ------
    str or None
        The selected name.

    Raises
    ------
    ValueError
        ``name`` is not one of the implementations.
    """
    checked = _check_host(name, "use_host_kernel_implementation()")
    previous = selection.host
    selection.host = checked
    _host_changed()
    try:
        yield checked
    finally:
        selection.host = previous
        _host_changed()


def set_device_kernel_implementation(name: str | None) -> None:
    """Require CUDA for the device path of every kernel, or restore each kernel's policy.

    ``CUNUMPY_DEVICE_KERNEL_IMPLEMENTATION=cuda`` sets it at import.

    Parameters
    ----------
    name : {"cuda"} or None
        ``"cuda"``: a kernel without a CUDA port is a :class:`LookupError` on the device
        path (no host fallback). None: each kernel's ``missing_cuda`` policy applies.

    Raises
    ------
    ValueError
        ``name`` is neither ``"cuda"`` nor None.
    """
    selection.device = _check_device(name, "set_device_kernel_implementation()")


def get_device_kernel_implementation() -> str | None:
    """Return the requested device implementation.

    Returns
    -------
    str or None
        ``"cuda"``, or None in automatic mode.
    """
    return selection.device


@contextlib.contextmanager
def use_device_kernel_implementation(name: str | None) -> Iterator[str | None]:
    """Choose the device implementation for a ``with`` block; the previous one comes back on exit.

    Parameters
    ----------
    name : {"cuda"} or None
        As for :func:`set_device_kernel_implementation`.

    Yields
    ------
    str or None
        The selected name.

    Raises
    ------
    ValueError
        ``name`` is neither ``"cuda"`` nor None.
    """
    checked = _check_device(name, "use_device_kernel_implementation()")
    previous = selection.device
    selection.device = checked
    try:
        yield checked
    finally:
        selection.device = previous


def read_environment(environ=os.environ) -> None:
    """Apply the two environment variables; ValueError naming the variable for a bad value."""
    raw = environ.get(HOST_VARIABLE, "")
    value = raw.strip().lower()
    if value and value not in HOST_IMPLEMENTATIONS:
        raise ValueError(
            f"{HOST_VARIABLE}={raw!r} is not a host kernel implementation; expected one of "
            f"{', '.join(HOST_IMPLEMENTATIONS)} (or empty for the automatic choice)"
        )
    raw_device = environ.get(DEVICE_VARIABLE, "")
    device = raw_device.strip().lower()
    if device and device not in DEVICE_IMPLEMENTATIONS:
        raise ValueError(
            f"{DEVICE_VARIABLE}={raw_device!r} is not a device kernel implementation; expected "
            "'cuda' (or empty for each kernel's missing_cuda policy)"
        )
    selection.host = value or None
    selection.device = device or None
    epoch[0] += 1


read_environment()
