"""Devices and memory (API.md section 4.1).

Everything is safe without CuPy: queries return neutral values, selections are no-ops.
CuPy is looked up only on the CuPy path, never imported when this module is imported.
"""

from __future__ import annotations

import sys
from typing import Literal

import numpy as np
from maybempi import local_rank

from .. import _backend

__all__ = [
    "DEFAULT_SHARED_MEMORY_PER_BLOCK",
    "bind_local_device",
    "device_count",
    "free_memory",
    "is_hip",
    "max_shared_memory_per_block",
    "memory_info",
    "pin_memory",
    "set_device",
    "set_device_for_rank",
]

#: Shared memory per block every CUDA device grants without opting in (48 KiB).
DEFAULT_SHARED_MEMORY_PER_BLOCK = 49152

_shared_memory_cache: dict[tuple[int, bool], int] = {}


def _cupy_if_available():
    """The imported CuPy module when it is functional, else None."""
    if not _backend.cupy_available():
        return None
    return sys.modules.get("cupy")


def _cupy_if_active():
    """CuPy when the CuPy backend is active, else None."""
    if _backend.get_backend() != "cupy":
        return None
    return sys.modules.get("cupy")


def _check_index(function: str, argument: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{function}: {argument!r} must be an int, not {type(value).__name__}")
    value = int(value)
    if value < 0:
        raise ValueError(f"{function}: {argument!r} must be >= 0, got {value}")
    return value


def device_count() -> int:
    """Count the visible CUDA devices, whatever the backend.

    Returns
    -------
    int
        The number of devices; 0 without a functional CuPy.
    """
    cupy = _cupy_if_available()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - any driver failure means no device
        return 0


def _check_device(function: str, argument: str, device) -> int:
    device = _check_index(function, argument, device)
    count = device_count()
    if device >= count:
        raise ValueError(f"{function}: {argument!r} must be a visible device id below {count}, got {device}")
    return device


def set_device(i: int) -> None:
    """Make CUDA device ``i`` current (CuPy backend); a no-op on NumPy.

    Parameters
    ----------
    i : int
        A visible device id.
    """
    i = _check_index("set_device()", "i", i)
    cupy = _cupy_if_active()
    if cupy is None:
        return
    _check_device("set_device()", "i", i)
    cupy.cuda.Device(i).use()


def current_device() -> int | None:
    """Id of the current CUDA device on the CuPy backend, else None."""
    cupy = _cupy_if_active()
    if cupy is None:
        return None
    return int(cupy.cuda.runtime.getDevice())


def memory_info() -> tuple[int, int] | None:
    """Report the free and total memory of the current device.

    Returns
    -------
    tuple of int or None
        ``(free, total)`` bytes as the CUDA runtime sees them (memory held in CuPy's pool
        counts as used); None on the NumPy backend.
    """
    cupy = _cupy_if_active()
    if cupy is None:
        return None
    free, total = cupy.cuda.runtime.memGetInfo()
    return int(free), int(total)


def free_memory() -> None:
    """Return the unused blocks of CuPy's device and pinned memory pools; live arrays stay.

    CuPy keeps freed blocks for reuse, so the device looks full in ``nvidia-smi``. A no-op
    on NumPy.
    """
    cupy = _cupy_if_active()
    if cupy is None:
        return
    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()


def pinned_empty(shape, dtype, order: Literal["C", "F"] = "C") -> tuple[np.ndarray, bool]:
    """A new host array in page-locked memory and True, or ordinary memory and False.

    Falls back to ordinary memory where pinned allocation is impossible: the fake CuPy
    (NotImplementedError) or a real CUDA allocation failure (a RuntimeError subclass).
    Needs CuPy to be imported.
    """
    cupy = sys.modules["cupy"]
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    try:
        memory = cupy.cuda.alloc_pinned_memory(max(nbytes, 1))
    except (NotImplementedError, MemoryError, RuntimeError):
        return np.empty(shape, dtype, order=order), False
    return np.ndarray(shape, dtype, buffer=memory, order=order), True


def pin_memory(host_array: np.ndarray) -> np.ndarray:
    """Return a page-locked copy of a host array, for fast asynchronous copies.

    Where pinned memory cannot be allocated (the fake CuPy) the copy lives in ordinary host
    memory.

    Parameters
    ----------
    host_array : numpy.ndarray
        The data to copy.

    Returns
    -------
    numpy.ndarray
        A page-locked array of the same shape, dtype and C/F order.

    Raises
    ------
    TypeError
        ``host_array`` is not a numpy.ndarray.
    ImportError
        CuPy is not functional.
    """
    if not isinstance(host_array, np.ndarray):
        raise TypeError(f"pin_memory(): 'host_array' must be a numpy.ndarray, not {type(host_array).__name__}")
    if _cupy_if_available() is None:
        raise ImportError(f"pin_memory() needs a functional CuPy: {_backend.cupy_unavailable_reason()}")
    flags = host_array.flags
    order: Literal["C", "F"] = "F" if flags.f_contiguous and not flags.c_contiguous else "C"
    pinned, _ = pinned_empty(host_array.shape, host_array.dtype, order)
    np.copyto(pinned, host_array)
    return pinned


def bind_local_device() -> int | None:
    """Select the GPU of this MPI rank and create its context.

    The device is ``local_rank() % device_count()``, the node-local rank read from the
    launcher's environment. Call it before ``from mpi4py import MPI``, so that a CUDA-aware
    MPI sees the right device.

    Returns
    -------
    int or None
        The device id; None on the NumPy backend or without devices.
    """
    cupy = _cupy_if_active()
    if cupy is None:
        return None
    count = device_count()
    if count < 1:
        return None
    device = local_rank() % count
    cupy.cuda.Device(device).use()
    cupy.empty((1,), dtype=np.uint8)  # the first allocation creates the context
    return device


def set_device_for_rank(rank: int, devices_per_node: int | None = None) -> int:
    """Select device ``rank % n`` with ``n = devices_per_node or device_count()``.

    Selects the device on the CuPy backend only.

    Parameters
    ----------
    rank : int
        The (node-local) rank.
    devices_per_node : int, optional
        The number of devices per node (default: the visible devices).

    Returns
    -------
    int
        The device id; 0 (selecting nothing) when ``n`` is 0.
    """
    rank = _check_index("set_device_for_rank()", "rank", rank)
    if devices_per_node is not None:
        devices_per_node = _check_index("set_device_for_rank()", "devices_per_node", devices_per_node)
    n = devices_per_node or device_count()
    if n == 0:
        return 0
    device = rank % n
    if _cupy_if_active() is not None:
        set_device(device)
    return device


def max_shared_memory_per_block(device: int | None = None, *, opt_in: bool = False) -> int:
    """Return the shared memory one block may use.

    Parameters
    ----------
    device : int, optional
        The device id (default: the current device).
    opt_in : bool, optional
        Include what a kernel can opt in to beyond the default limit.

    Returns
    -------
    int
        Bytes; :data:`DEFAULT_SHARED_MEMORY_PER_BLOCK` (48 KiB) without a functional CuPy.

    Raises
    ------
    TypeError
        ``opt_in`` is not a bool, or ``device`` is not an int.
    """
    if not isinstance(opt_in, bool):
        raise TypeError(f"max_shared_memory_per_block(): 'opt_in' must be a bool, not {type(opt_in).__name__}")
    if device is not None:
        device = _check_index("max_shared_memory_per_block()", "device", device)
    cupy = _cupy_if_available()
    if cupy is None:
        return DEFAULT_SHARED_MEMORY_PER_BLOCK
    if device is None:
        device = int(cupy.cuda.runtime.getDevice())
    else:
        _check_device("max_shared_memory_per_block()", "device", device)
    key = (device, opt_in)
    cached = _shared_memory_cache.get(key)
    if cached is None:
        attributes = cupy.cuda.Device(device).attributes
        limit = int(attributes.get("MaxSharedMemoryPerBlock", DEFAULT_SHARED_MEMORY_PER_BLOCK))
        if opt_in:
            limit = max(limit, int(attributes.get("MaxSharedMemoryPerBlockOptin", 0)))
        cached = _shared_memory_cache[key] = limit
    return cached


def is_hip() -> bool:
    """Tell whether CuPy is a ROCm/HIP build.

    Returns
    -------
    bool
        True for a HIP build; False without a functional CuPy.
    """
    cupy = _cupy_if_available()
    if cupy is None:
        return False
    return bool(getattr(cupy.cuda.runtime, "is_hip", False))
