"""Host staging, device mirrors and asynchronous host copies (API.md section 5).

* :class:`HostStaging` copies device arrays into a ring of page-locked host buffers in the
  background, so output can overlap later device work.
* :class:`HostCopy` is the handle of ``xp.to_host_async``: a non-blocking copy of a small
  device value to the host.
* :class:`DeviceMirror` keeps a device buffer for a host array owned by another library.

Copies made here are counted (``cunumpy.profiling.count_transfers``) with their byte sizes;
background copies are ``to_host`` events with ``blocking=False``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, SupportsIndex

import numpy as np
import numpy.typing as npt

from . import _backend, _transfers
from ._staging import _check_host_dependency, _OnDevice, _producer_dependency, _shape_tuple, _staging_device
from ._transfers import describe, record
from .cuda import _devices

__all__ = ["DeviceMirror", "HostCopy", "HostStaging", "StagedCopy"]


def _cupy():
    return sys.modules["cupy"]


def _device_id(array) -> int:
    return int(array.device.id)


# --------------------------------------------------------------------------- HostStaging


class StagedCopy:
    """Handle of one :meth:`HostStaging.copy`: ``ready()`` never waits, ``result()`` waits.

    Created by :meth:`HostStaging.copy`, not directly. Its result stays valid until the
    staging reuses the slot, ``buffers`` copies later; after that both methods raise
    :class:`RuntimeError`.

    Parameters
    ----------
    staging : HostStaging
        The staging that made the copy.
    sequence : int
        The copy's number in the staging.
    buffer : numpy.ndarray
        The host slot.
    done_event : cupy.cuda.Event or None
        The event recorded after the copy (None for host data: complete at once).
    device_id : int or None
        The device the copy runs on.
    """

    def __init__(
        self, staging: HostStaging, sequence: int, buffer: np.ndarray, done_event: Any, device_id: Any
    ) -> None:
        self._staging = staging
        self._sequence = sequence
        self._buffer = buffer
        self._done_event = done_event  # None for a host copy (complete at once)
        self._device_id = device_id

    def _check_fresh(self, method: str) -> None:
        if self._staging._is_stale(self._sequence):
            raise RuntimeError(
                f"StagedCopy.{method}(): the staging slot of this copy was reused by a later copy "
                f"({self._staging.buffers} buffer(s)); copy the result to keep it"
            )

    def ready(self) -> bool:
        """True when the host buffer holds the data; never waits."""
        self._check_fresh("ready")
        if self._done_event is None:
            return True
        with _OnDevice(self._device_id):
            return bool(self._done_event.done)

    def result(self) -> np.ndarray:
        """Wait for the copy and return the slot's host buffer (valid until the slot is reused)."""
        self._check_fresh("result")
        if self._done_event is not None:
            with _OnDevice(self._device_id):
                self._done_event.synchronize()
        return self._buffer

    def __repr__(self) -> str:
        if self._staging._is_stale(self._sequence):
            state = "stale"
        elif self._done_event is None:
            state = "ready"
        else:
            state = "in flight"
        return f"<StagedCopy #{self._sequence} of {self._staging!r}: {state}>"


class _Slot:
    """One host buffer of a staging ring, the copy in flight into it and its source."""

    __slots__ = ("buffer", "event", "snapshot")

    def __init__(self, buffer: np.ndarray):
        self.buffer = buffer
        self.event = None  # completion of the last device copy into the buffer
        self.snapshot = None  # device snapshot kept alive until that copy finished

    def wait(self) -> None:
        if self.event is not None:
            self.event.synchronize()
        self.event = None
        self.snapshot = None


class HostStaging:
    """A ring of host buffers for background copies of device arrays.

    ``c = staging.copy(a)`` snapshots ``a`` on the device and copies the snapshot into the
    next page-locked slot on the staging's own stream, returning at once; ``c.result()``
    waits and returns the host buffer, valid until the slot is reused ``buffers`` copies
    later. At most ``buffers`` copies are in flight: a copy waits only when its slot's
    previous copy has not finished. Shape, dtype and device are fixed per staging. On the
    NumPy backend copies are plain host copies.

    Parameters
    ----------
    shape : int or tuple of int
        The shape of every staged array.
    dtype : dtype
        The dtype of every staged array.
    buffers : int, optional
        The number of slots, at least 1 (default 2).

    Raises
    ------
    TypeError
        ``dtype`` holds Python objects, or ``buffers`` is not an int.
    ValueError
        ``shape`` has a negative extent, or ``buffers`` is below 1.
    """

    def __init__(self, shape: SupportsIndex | Iterable[SupportsIndex], dtype: npt.DTypeLike, buffers: int = 2) -> None:
        shape = _shape_tuple("HostStaging()", shape)
        if any(n < 0 for n in shape):
            raise ValueError(f"HostStaging(): 'shape' must not have negative extents, got {shape}")
        dtype = np.dtype(dtype)
        if dtype.hasobject:
            raise TypeError(f"HostStaging(): 'dtype' {dtype} holds Python objects and cannot be staged")
        if isinstance(buffers, bool) or not isinstance(buffers, (int, np.integer)):
            raise TypeError(f"HostStaging(): 'buffers' must be an int, not {type(buffers).__name__}")
        if buffers < 1:
            raise ValueError(f"HostStaging(): 'buffers' must be >= 1, got {buffers}")
        self._shape = shape
        self._dtype = dtype
        self._buffers = int(buffers)
        self._slots: Any = None  # list[_Slot] once allocated
        self._device_slots = False  # slots prepared for device copies (pinned where possible)
        self._device_id: Any = None  # int once the first copy chose the device
        self._stream: Any = None
        self._sequence = 0  # number of copies started so far

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of every staged array."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """Dtype of every staged array."""
        return self._dtype

    @property
    def buffers(self) -> int:
        """Number of host buffers (copies in flight)."""
        return self._buffers

    def __repr__(self) -> str:
        return f"HostStaging(shape={self._shape}, dtype={self._dtype}, buffers={self._buffers})"

    def _is_stale(self, sequence: int) -> bool:
        return self._sequence - sequence > self._buffers

    def _host_slots(self) -> list[_Slot]:
        if self._slots is None:
            self._slots = [_Slot(np.empty(self._shape, self._dtype)) for _ in range(self._buffers)]
        return self._slots

    def _prepare_device(self, device_id: int) -> None:
        self._device_id = _staging_device(self._device_id, device_id, "HostStaging.copy()")
        if not self._device_slots:
            if self._slots is not None:
                for slot in self._slots:
                    slot.wait()
            # Older handles keep their ordinary buffers; new copies go to page-locked ones.
            self._slots = [_Slot(_devices.pinned_empty(self._shape, self._dtype)[0]) for _ in range(self._buffers)]
            self._device_slots = True
        if self._stream is None:
            self._stream = _cupy().cuda.Stream(non_blocking=True)

    def copy(self, array: Any, *, stream: Any = None, event: Any = None) -> StagedCopy:
        """Start copying ``array`` (exactly the staging's shape and dtype) to the next slot.

        A device array is snapshotted after its producer (``stream``, or the current stream
        after waiting for ``event``; at most one of them) and copied in the background; the
        caller may overwrite the source at once. A host array is copied immediately.
        """
        is_device = _backend.is_cupy_array(array)
        if not is_device and not isinstance(array, np.ndarray):
            raise TypeError(f"HostStaging.copy(): 'array' must be an array, not {type(array).__name__}")
        if tuple(array.shape) != self._shape or array.dtype != self._dtype:
            raise ValueError(
                f"HostStaging.copy(): 'array' must have shape {self._shape} and dtype {self._dtype}, "
                f"got shape {tuple(array.shape)} and dtype {array.dtype}"
            )
        if is_device:
            _producer_dependency("HostStaging.copy()", stream, event)
            return self._copy_device(array, stream, event)
        _check_host_dependency("HostStaging.copy()", stream, event)
        slots = self._host_slots()
        slot = slots[self._sequence % self._buffers]
        slot.wait()
        np.copyto(slot.buffer, array)
        handle = StagedCopy(self, self._sequence, slot.buffer, None, None)
        self._sequence += 1
        return handle

    def _copy_device(self, array, stream, event) -> StagedCopy:
        cupy = _cupy()
        device_id = _device_id(array)
        with _OnDevice(device_id):
            self._prepare_device(device_id)
            slot = self._slots[self._sequence % self._buffers]
            slot.wait()
            producer = stream if stream is not None else cupy.cuda.get_current_stream()
            if event is not None:
                producer.wait_event(event)
            with producer:
                snapshot = cupy.array(array, order="C", copy=True)
                taken = cupy.cuda.Event(disable_timing=True)
                taken.record(producer)
            self._stream.wait_event(taken)
            snapshot.get(stream=self._stream, out=slot.buffer, blocking=False)
            done = cupy.cuda.Event(disable_timing=True)
            done.record(self._stream)
            slot.event, slot.snapshot = done, snapshot
        if _transfers.sinks:
            record("to_host", f"HostStaging.copy {describe(array)}", int(array.nbytes), blocking=False)
        handle = StagedCopy(self, self._sequence, slot.buffer, done, device_id)
        self._sequence += 1
        return handle

    def synchronize(self) -> None:
        """Wait for every copy in flight."""
        if self._slots is None:
            return
        if self._device_id is None:
            return
        with _OnDevice(self._device_id):
            for slot in self._slots:
                slot.wait()


# --------------------------------------------------------------------------- HostCopy

_copy_streams: dict[int, object] = {}


def _copy_stream(device_id: int):
    """The non-blocking stream of ``to_host_async`` on one device, created on first use."""
    stream = _copy_streams.get(device_id)
    if stream is None:
        stream = _copy_streams[device_id] = _cupy().cuda.Stream(non_blocking=True)
    return stream


class HostCopy:
    """Handle of :func:`cunumpy.to_host_async`: ``ready()`` never waits, ``result()`` waits.

    ``result()`` returns a NumPy value (a NumPy scalar for 0-d input, else an array).
    Created by :meth:`HostCopy.start`, not directly.

    Parameters
    ----------
    buffer : numpy.ndarray
        The host buffer the copy fills.
    done_event : cupy.cuda.Event, optional
        The event recorded after the copy (None: complete at once).
    device_id : int, optional
        The device the copy runs on.
    source : cupy.ndarray, optional
        The device data, kept alive until the copy finished.
    """

    def __init__(
        self, buffer: np.ndarray, done_event: Any = None, device_id: int | None = None, source: Any = None
    ) -> None:
        self._buffer = buffer
        self._done_event = done_event
        self._device_id: Any = device_id
        self._source = source  # keeps the device data alive until the copy finished

    @classmethod
    def start(cls, a: Any) -> HostCopy:
        """Start a non-blocking copy of ``a`` (a device scalar or small array) to the host.

        The copy runs on a separate stream after the work already queued on the current
        stream. Host data gives a handle that is ready at once.
        """
        if not _backend.is_cupy_array(a):
            if hasattr(a, "__cuda_array_interface__"):
                raise TypeError(f"to_host_async(): 'a' must be a CuPy array or host data, not {type(a).__name__}")
            return cls(np.array(a))
        cupy = _cupy()
        device_id = _device_id(a)
        with _OnDevice(device_id):
            producer = cupy.cuda.get_current_stream()
            queued = cupy.cuda.Event(disable_timing=True)
            queued.record(producer)
            copier = _copy_stream(device_id)
            copier.wait_event(queued)
            buffer, _ = _devices.pinned_empty(a.shape, a.dtype)
            with copier:
                source = a if a.flags.c_contiguous else cupy.ascontiguousarray(a)
                source.get(stream=copier, out=buffer, blocking=False)
                done = cupy.cuda.Event(disable_timing=True)
                done.record(copier)
        if _transfers.sinks:
            record("to_host", f"to_host_async {describe(a)}", int(a.nbytes), blocking=False)
        return cls(buffer, done, device_id, source)

    def ready(self) -> bool:
        """True when the value has arrived; never waits."""
        if self._done_event is None:
            return True
        with _OnDevice(self._device_id):
            if self._done_event.done:
                self._source = None
                return True
        return False

    def result(self) -> Any:
        """Wait for the copy and return the value (NumPy scalar for 0-d data, else an array)."""
        if self._done_event is not None:
            with _OnDevice(self._device_id):
                self._done_event.synchronize()
            self._source = None
        return self._buffer[()] if self._buffer.ndim == 0 else self._buffer

    def __repr__(self) -> str:
        where = "host" if self._device_id is None else f"device {self._device_id}"
        return f"<HostCopy {describe(self._buffer)} from {where}>"


# --------------------------------------------------------------------------- DeviceMirror


class DeviceMirror:
    """A device buffer mirroring a host array owned by another library.

    On the CuPy backend :attr:`device` is a device array of the host's shape and dtype,
    created on first access as a copy of the host; on NumPy it is the host array itself and
    both transfer methods are no-ops. Mutators return the mirror, so calls chain. After the
    owner reallocates the host array, call ``rebind(new_array)``.

    Parameters
    ----------
    host_array : numpy.ndarray
        The host array to mirror.

    Raises
    ------
    TypeError
        ``host_array`` is not a numpy.ndarray.
    """

    def __init__(self, host_array: np.ndarray):
        self._bind(host_array, "DeviceMirror()")
        self._device = None

    def _bind(self, host_array, function: str) -> None:
        if not isinstance(host_array, np.ndarray):
            raise TypeError(f"{function}: 'host_array' must be a numpy.ndarray, not {type(host_array).__name__}")
        self._host = host_array
        self._shape = tuple(host_array.shape)
        self._dtype = host_array.dtype

    @property
    def host(self) -> np.ndarray:
        """The mirrored host array."""
        return self._host

    @property
    def shape(self) -> tuple:
        """The shape of the mirrored array."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the mirrored array."""
        return self._dtype

    def _check_host(self, function: str) -> None:
        host = self._host
        if tuple(host.shape) != self._shape or host.dtype != self._dtype:
            raise ValueError(
                f"DeviceMirror.{function}: the host array changed from shape {self._shape} dtype {self._dtype} "
                f"to shape {tuple(host.shape)} dtype {host.dtype}; call rebind(host_array) after reallocating"
            )

    def _check_current_device(self, function: str) -> None:
        if self._device is None:
            return
        current = int(_cupy().cuda.runtime.getDevice())
        owner = _device_id(self._device)
        if current != owner:
            raise ValueError(
                f"DeviceMirror.{function}: the mirror lives on device {owner}, but device {current} is current; "
                f"make device {owner} current first"
            )

    @staticmethod
    def _on_device() -> bool:
        return _backend.get_backend() == "cupy"

    def _upload(self) -> None:
        cupy = _cupy()
        host = np.ascontiguousarray(self._host)
        if self._device is None:
            self._device = cupy.array(host, order="C")
        else:
            self._device.set(host)
        if _transfers.sinks:
            record("to_device", f"DeviceMirror.to_device {describe(host)}", int(host.nbytes))

    @property
    def device(self) -> Any:
        """The device buffer (allocated as a copy of the host on first access); the host on NumPy."""
        self._check_host("device")
        if not self._on_device():
            return self._host
        if self._device is None:
            self._upload()
        return self._device

    def to_device(self) -> DeviceMirror:
        """Copy the host array into the device buffer (allocating it on first use)."""
        self._check_host("to_device()")
        if self._on_device():
            self._check_current_device("to_device()")
            self._upload()
        return self

    def to_host(self, stream: Any = None, event: Any = None) -> DeviceMirror:
        """Copy the device buffer into the host array in place and wait until it is done.

        Pass the producer ``stream`` or ``event`` (at most one) when the data was written on
        another stream. A no-op before any device allocation and on NumPy.
        """
        if stream is not None and event is not None:
            raise ValueError("DeviceMirror.to_host(): pass at most one of 'stream' and 'event'")
        self._check_host("to_host()")
        if not self._on_device() or self._device is None:
            _check_host_dependency("DeviceMirror.to_host()", stream, event)
            return self
        _producer_dependency("DeviceMirror.to_host()", stream, event)
        self._check_current_device("to_host()")
        cupy = _cupy()
        copier = stream if stream is not None else cupy.cuda.get_current_stream()
        if event is not None:
            copier.wait_event(event)
        host = self._host
        if not host.flags.writeable:
            raise ValueError(
                "DeviceMirror.to_host(): the host array is read-only (flags.writeable is False); "
                "the device data cannot be copied into it"
            )
        if host.flags.c_contiguous:
            self._device.get(stream=copier, out=host, blocking=True)
        else:
            np.copyto(host, self._device.get(stream=copier, blocking=True))
        if _transfers.sinks:
            record("to_host", f"DeviceMirror.to_host {describe(host)}", int(host.nbytes))
        return self

    def zero(self) -> DeviceMirror:
        """Zero the device buffer (allocated without an upload if needed); on NumPy the host."""
        self._check_host("zero()")
        if not self._on_device():
            self._host[...] = 0
            return self
        if self._device is None:
            self._device = _cupy().zeros(self._shape, self._dtype)
        else:
            self._check_current_device("zero()")
            self._device.fill(0)
        return self

    def rebind(self, host_array: np.ndarray) -> DeviceMirror:
        """Follow the owner's reallocation; the device buffer stays if shape and dtype match."""
        old_shape, old_dtype = self._shape, self._dtype
        self._bind(host_array, "DeviceMirror.rebind()")
        if self._shape != old_shape or self._dtype != old_dtype:
            self._device = None
        return self

    def __repr__(self) -> str:
        if not self._on_device():
            where = "host (NumPy backend)"
        elif self._device is None:
            where = "device buffer not allocated"
        else:
            where = f"device {_device_id(self._device)}"
        return f"DeviceMirror(shape={self._shape}, dtype={self._dtype}, {where})"
