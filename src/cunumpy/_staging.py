"""The checks and the device scope shared by the host staging of cunumpy.memory
(HostStaging, to_host_async) and the MPI staging of cunumpy.mpi (MPIStaging, mpi_buffer):
one module below both, so that neither reaches into the other's private helpers."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .cuda import _streams


def _cupy():
    return sys.modules["cupy"]


class _OnDevice:
    """Make CUDA device ``device_id`` current for a block and restore the caller's device."""

    def __init__(self, device_id: int):
        self._device_id = device_id
        self._device: Any = None

    def __enter__(self):
        self._device = _cupy().cuda.Device(self._device_id)
        self._device.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._device.__exit__(*exc)


def _producer_dependency(function: str, stream, event) -> None:
    if stream is not None and event is not None:
        raise ValueError(f"{function}: pass at most one of 'stream' and 'event'")
    if isinstance(stream, _streams.HostStream) or isinstance(event, _streams.HostEvent):
        raise TypeError(
            f"{function}: a device array needs a CUDA producer; a HostStream/HostEvent cannot order device work"
        )
    if stream is not None and not _streams.is_cuda_stream(stream):
        raise TypeError(f"{function}: 'stream' must be a CuPy stream or None, not {type(stream).__name__}")
    if event is not None and not _streams.is_cuda_event(event):
        raise TypeError(f"{function}: 'event' must be a CuPy event or None, not {type(event).__name__}")


def _check_host_dependency(function: str, stream, event) -> None:
    if stream is not None and event is not None:
        raise ValueError(f"{function}: pass at most one of 'stream' and 'event'")
    if stream is not None and not isinstance(stream, _streams.HostStream) and not _streams.is_cuda_stream(stream):
        raise TypeError(
            f"{function}: 'stream' must be a CuPy stream, a HostStream or None, not {type(stream).__name__}"
        )
    if event is not None and not isinstance(event, _streams.HostEvent) and not _streams.is_cuda_event(event):
        raise TypeError(f"{function}: 'event' must be a CuPy event, a HostEvent or None, not {type(event).__name__}")


def _shape_tuple(function: str, shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        return (int(shape),)
    try:
        items = tuple(shape)
    except TypeError:
        items = None
    if items is None or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) for n in items):
        raise TypeError(f"{function}: 'shape' must be an int or a tuple of ints, got {shape!r}")
    return tuple(int(n) for n in items)


def _staging_device(bound, device_id: int, function: str) -> int:
    """The device a staging (HostStaging, MPIStaging) is bound to once ``function`` used it with
    an array on ``device_id``: the first array's device; ValueError for an array on another."""
    if bound is None:
        return device_id
    if device_id != bound:
        raise ValueError(
            f"{function}: 'array' lives on device {device_id}, but this staging is bound to "
            f"device {bound}; use one staging per device"
        )
    return bound
