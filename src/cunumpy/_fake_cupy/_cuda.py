"""Fake ``cupy.cuda``: one device (id 0), streams and events that are always done,
memory pointers that are host addresses, and memory-pool stubs."""

from __future__ import annotations

import ctypes
import itertools
import time
from typing import Any, ClassVar

import numpy as np

GIB = 1 << 30
TOTAL_MEMORY = 16 * GIB
DRIVER_VERSION = 13000
RUNTIME_VERSION = 13000

#: Device attributes of a compute-capability 9.0 GPU, keyed as ``Device.attributes`` is: the
#: ``runtime.cudaDevAttr<Key>`` constants of CuPy 14.2 without the prefix (CuPy has no
#: ``cudaDevAttrComputeCapabilityMajor``, so the capability is not among them; it is in
#: ``Device.compute_capability`` and ``getDeviceProperties()['major'/'minor']``).
DEVICE_ATTRIBUTES = {
    "MaxThreadsPerBlock": 1024,
    "MaxBlockDimX": 1024,
    "MaxBlockDimY": 1024,
    "MaxBlockDimZ": 64,
    "MaxGridDimX": 2147483647,
    "MaxGridDimY": 65535,
    "MaxGridDimZ": 65535,
    "MaxSharedMemoryPerBlock": 49152,
    "MaxSharedMemoryPerBlockOptin": 232448,
    "MaxSharedMemoryPerMultiprocessor": 233472,
    "TotalConstantMemory": 65536,
    "WarpSize": 32,
    "MaxRegistersPerBlock": 65536,
    "ClockRate": 1980000,
    "MultiProcessorCount": 132,
    "MaxThreadsPerMultiProcessor": 2048,
    "ConcurrentKernels": 1,
    "UnifiedAddressing": 1,
    "ManagedMemory": 1,
    "CooperativeLaunch": 1,
    "L2CacheSize": 52428800,
    "GlobalMemoryBusWidth": 5120,
    "MemoryClockRate": 2619000,
}


#: ``cudaDeviceAttr`` enum values of the attributes above (``runtime.cudaDevAttr<Name>``).
DEVICE_ATTRIBUTE_CODES = {
    "MaxThreadsPerBlock": 1,
    "MaxBlockDimX": 2,
    "MaxBlockDimY": 3,
    "MaxBlockDimZ": 4,
    "MaxGridDimX": 5,
    "MaxGridDimY": 6,
    "MaxGridDimZ": 7,
    "MaxSharedMemoryPerBlock": 8,
    "TotalConstantMemory": 9,
    "WarpSize": 10,
    "MaxRegistersPerBlock": 12,
    "ClockRate": 13,
    "MultiProcessorCount": 16,
    "ConcurrentKernels": 31,
    "MemoryClockRate": 36,
    "GlobalMemoryBusWidth": 37,
    "L2CacheSize": 38,
    "MaxThreadsPerMultiProcessor": 39,
    "UnifiedAddressing": 41,
    "MaxSharedMemoryPerMultiprocessor": 81,
    "ManagedMemory": 83,
    "CooperativeLaunch": 95,
    "MaxSharedMemoryPerBlockOptin": 97,
}


class CUDARuntimeError(RuntimeError):
    """Raised for CUDA runtime errors (e.g. an invalid device id)."""

    def __init__(self, status: int, name: str = "cudaErrorInvalidDevice", message: str = "invalid device ordinal"):
        self.status = status
        super().__init__(f"{name}: {message}")


class CUDADriverError(RuntimeError):
    """Raised for CUDA driver errors (never by the fake itself)."""


def _check_device(device_id: int) -> int:
    device_id = int(device_id)
    if device_id != 0:
        raise CUDARuntimeError(101)
    return device_id


# --------------------------------------------------------------------------- devices


class Device:
    """``cupy.cuda.Device``: the one fake device, id 0."""

    def __init__(self, device=None):
        if isinstance(device, Device):
            device = device.id
        self.id: int = 0 if device is None else int(device)

    def __repr__(self):
        return f"<CUDA Device {self.id}>"

    def __int__(self):
        return self.id

    def __index__(self):
        return self.id

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("fake cuda device", self.id))

    def __enter__(self):
        _check_device(self.id)
        return self

    def __exit__(self, *exc):
        return None

    def use(self):
        _check_device(self.id)

    def synchronize(self):
        _check_device(self.id)

    @property
    def compute_capability(self) -> str:
        return "90"

    @property
    def attributes(self) -> dict:
        return dict(DEVICE_ATTRIBUTES)

    @property
    def mem_info(self):
        return runtime_memGetInfo()

    @property
    def pci_bus_id(self) -> str:
        return "0000:00:00.0"


def runtime_memGetInfo():
    return TOTAL_MEMORY, TOTAL_MEMORY


# --------------------------------------------------------------------------- streams and events

_stream_ptrs = itertools.count(0x1000, 0x10)
_event_ptrs = itertools.count(0x9000, 0x10)
_current_streams: list = []


class Event:
    """``cupy.cuda.Event``: recording captures a host time; it is always complete."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        if interprocess and not disable_timing:
            raise ValueError("Timing must be disabled for interprocess events")
        # CuPy keeps the flags in the event handle only: no public attributes for them
        self._block = bool(block)
        self._disable_timing = bool(disable_timing)
        self._interprocess = bool(interprocess)
        self.ptr = next(_event_ptrs)
        self._time: Any = None

    def record(self, stream=None):
        self._time = time.perf_counter()

    def synchronize(self):
        return None

    @property
    def done(self) -> bool:
        return True

    def __repr__(self):
        return f"<fake cupy.cuda.Event at {self.ptr:#x}>"


def get_elapsed_time(start_event: Event, end_event: Event) -> float:
    """Milliseconds between two recorded events."""
    for event in (start_event, end_event):
        if event._disable_timing:
            raise CUDARuntimeError(400, "cudaErrorInvalidResourceHandle", "event has timing disabled")
        if event._time is None:
            raise CUDARuntimeError(600, "cudaErrorNotReady", "event has not been recorded")
    return (end_event._time - start_event._time) * 1e3


class _BaseStream:
    """Common part of ``Stream`` and ``ExternalStream`` (CuPy's ``stream._BaseStream``):
    work on it is finished as soon as it is issued."""

    def __init__(self, ptr, device_id):
        self.ptr = ptr
        self.device_id = device_id
        self._entered: list = []

    def __repr__(self):
        return f"<fake cupy.cuda.{type(self).__name__} {self.ptr:#x}>"

    def __eq__(self, other):
        return isinstance(other, _BaseStream) and other.ptr == self.ptr

    def __hash__(self):
        return hash(("fake cuda stream", self.ptr))

    def __enter__(self):
        self._entered.append(get_current_stream())
        _set_current(self)
        return self

    def __exit__(self, *exc):
        _set_current(self._entered.pop())

    def use(self):
        _set_current(self)
        return self

    def synchronize(self):
        return None

    @property
    def done(self) -> bool:
        return True

    def record(self, event=None):
        if event is None:
            event = Event()
        event.record(self)
        return event

    def wait_event(self, event):
        if not isinstance(event, Event):
            raise TypeError(f"wait_event() takes a cupy.cuda.Event, not {type(event).__name__}")

    def launch_host_func(self, callback, arg):
        callback(arg)

    def add_callback(self, callback, arg):
        callback(self, 0, arg)

    def is_capturing(self) -> bool:
        return False

    @property
    def is_non_blocking(self) -> bool:
        return self._non_blocking

    @property
    def priority(self) -> int:
        return self._priority


class Stream(_BaseStream):
    """``cupy.cuda.Stream``: work on it is finished as soon as it is issued."""

    null: Stream

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        super().__init__(0 if null else next(_stream_ptrs), 0)
        self._non_blocking = bool(non_blocking)
        self._ptds = bool(ptds)
        self._priority = 0 if priority is None else int(priority)

    @property
    def ptds(self) -> bool:
        return self._ptds


class ExternalStream(_BaseStream):
    """A stream made from a raw pointer (deprecated in CuPy 14; not a ``Stream`` subclass)."""

    def __init__(self, ptr, device_id=-1):
        super().__init__(int(ptr), 0 if device_id == -1 else int(device_id))
        self._non_blocking = False
        self._priority = 0


Stream.null = Stream(null=True)


def _set_current(stream):
    _current_streams[:] = [stream]


def get_current_stream(device_id=-1) -> Stream:
    return _current_streams[-1] if _current_streams else Stream.null


# --------------------------------------------------------------------------- memory


class Memory:
    """A host buffer standing in for one device allocation."""

    def __init__(self, host: np.ndarray):
        self._host = host
        self.ptr = host.ctypes.data if host.nbytes else 0
        self.size = int(host.nbytes)
        self.device_id = 0

    @property
    def device(self):
        return Device(0)


class MemoryPointer:
    """``cupy.cuda.MemoryPointer``: ``mem`` plus a byte offset; ``ptr`` is a host address."""

    def __init__(self, mem: Memory, offset: int):
        self.mem = mem
        self._offset = int(offset)  # CuPy's MemoryPointer has no public offset
        self.ptr = mem.ptr + self._offset if mem.ptr else 0
        self.device_id = 0

    @classmethod
    def _for_array(cls, array):
        host = array._a
        root = host
        while isinstance(root.base, np.ndarray):
            root = root.base
        mem = Memory(root) if root.flags.c_contiguous or root.flags.f_contiguous else Memory(host)
        address = host.ctypes.data if host.size else 0
        return cls(mem, address - mem.ptr if address and mem.ptr else 0)

    @property
    def device(self):
        return Device(0)

    def __int__(self):
        return self.ptr

    def __add__(self, offset):
        return MemoryPointer(self.mem, self._offset + int(offset))

    def __repr__(self):
        return f"<fake cupy.cuda.MemoryPointer {self.ptr:#x}>"

    def copy_from_host(self, mem, size):
        ctypes.memmove(self.ptr, _address(mem), int(size))

    def copy_to_host(self, mem, size):
        ctypes.memmove(_address(mem), self.ptr, int(size))

    def copy_from_device(self, src, size):
        ctypes.memmove(self.ptr, int(src.ptr), int(size))

    copy_from = copy_from_device

    def memset(self, value, size):
        ctypes.memset(self.ptr, int(value), int(size))


def _address(mem) -> int:
    if isinstance(mem, int):
        return mem
    if isinstance(mem, ctypes.c_void_p):
        return int(mem.value)  # type: ignore[arg-type]  # None (a null pointer) raises TypeError
    if isinstance(mem, np.ndarray):
        return mem.ctypes.data
    return ctypes.addressof(mem)


def host_view_of_interface(obj) -> np.ndarray:
    """A NumPy view of memory described by ``__cuda_array_interface__``.

    Under the fake CuPy every device pointer is a host address, so the memory can be
    read in place; the view keeps ``obj`` alive.
    """
    interface = obj.__cuda_array_interface__
    shape = tuple(int(n) for n in interface["shape"])
    dtype = np.dtype(interface["typestr"])
    ptr = int(interface["data"][0])
    strides = interface.get("strides")
    count = int(np.prod(shape)) if shape else 1
    if count == 0 or ptr == 0:
        return np.empty(shape, dtype=dtype)
    strides = tuple(int(s) for s in (strides or _c_strides(shape, dtype.itemsize)))
    extent = sum((n - 1) * abs(s) for n, s in zip(shape, strides)) + dtype.itemsize
    low = ptr + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    raw = (ctypes.c_char * extent).from_address(low)
    raw._owner = obj  # the view keeps the exporting object alive
    flat = np.frombuffer(raw, dtype=np.uint8)
    view = np.ndarray(shape, dtype, buffer=flat, offset=ptr - low, strides=strides)
    if interface["data"][1]:
        view.flags.writeable = False
    return view


def _c_strides(shape, itemsize):
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def alloc(size) -> MemoryPointer:
    """A fresh "device" allocation of ``size`` bytes."""
    return MemoryPointer(Memory(np.empty(int(size), dtype=np.uint8)), 0)


def host_array_at(memptr: MemoryPointer, shape, dtype, strides=None, order="C") -> np.ndarray:
    """A host array over the memory behind ``memptr`` (shares it)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if strides is None:
        strides = _contiguous_strides(shape, np.dtype(dtype).itemsize, order)

    class _Interface:
        __cuda_array_interface__: ClassVar[dict] = {
            "shape": shape,
            "typestr": np.dtype(dtype).str,
            "data": (memptr.ptr, False),
            "strides": strides,
            "version": 3,
        }

    owner = _Interface()
    owner.memptr = memptr  # keeps the allocation alive
    return host_view_of_interface(owner)


def _contiguous_strides(shape, itemsize, order="C"):
    dims = list(shape) if order == "F" else list(reversed(shape))
    strides = []
    step = itemsize
    for n in dims:
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(strides) if order == "F" else tuple(reversed(strides))


def alloc_pinned_memory(size):
    raise NotImplementedError(
        "the fake CuPy has no pinned memory: alloc_pinned_memory() is unavailable, "
        "use ordinary host memory (cunumpy staging falls back to it)"
    )


class MemoryPool:
    """Memory-pool stub: allocations are host buffers, the pool never holds any."""

    def __init__(self, allocator=None):
        self._limit = 0

    def malloc(self, size):
        return alloc(size)

    def free_all_blocks(self, stream=None):
        return None

    def free_all_free(self):
        return None

    def used_bytes(self) -> int:
        return 0

    def free_bytes(self) -> int:
        return 0

    def total_bytes(self) -> int:
        return 0

    def n_free_blocks(self) -> int:
        return 0

    def set_limit(self, size=None, fraction=None):
        if fraction is not None:
            size = int(TOTAL_MEMORY * fraction)
        self._limit = int(size or 0)

    def get_limit(self) -> int:
        return self._limit


class PinnedMemoryPool:
    """Pinned-memory-pool stub."""

    def __init__(self, allocator=None):
        pass

    def malloc(self, size):
        return alloc_pinned_memory(size)

    def free_all_blocks(self):
        return None

    def n_free_blocks(self) -> int:
        return 0


_memory_pool = MemoryPool()
_pinned_memory_pool = PinnedMemoryPool()


def get_default_memory_pool() -> MemoryPool:
    return _memory_pool


def get_default_pinned_memory_pool() -> PinnedMemoryPool:
    return _pinned_memory_pool


def set_allocator(allocator=None):
    return None


def set_pinned_memory_allocator(allocator=None):
    return None


def get_allocator():
    return _memory_pool.malloc


# --------------------------------------------------------------------------- runtime


def getDevice() -> int:
    return 0


def setDevice(device) -> None:
    _check_device(device)


def getDeviceCount() -> int:
    return 1


def deviceSynchronize() -> None:
    return None


def memGetInfo():
    return runtime_memGetInfo()


def driverGetVersion() -> int:
    return DRIVER_VERSION


def runtimeGetVersion() -> int:
    return RUNTIME_VERSION


def getDeviceProperties(device) -> dict:
    _check_device(device)
    a = DEVICE_ATTRIBUTES
    return {
        "name": b"cunumpy fake CUDA device",
        "totalGlobalMem": TOTAL_MEMORY,
        "sharedMemPerBlock": a["MaxSharedMemoryPerBlock"],
        "sharedMemPerBlockOptin": a["MaxSharedMemoryPerBlockOptin"],
        "sharedMemPerMultiprocessor": a["MaxSharedMemoryPerMultiprocessor"],
        "regsPerBlock": a["MaxRegistersPerBlock"],
        "warpSize": a["WarpSize"],
        "maxThreadsPerBlock": a["MaxThreadsPerBlock"],
        "maxThreadsDim": (a["MaxBlockDimX"], a["MaxBlockDimY"], a["MaxBlockDimZ"]),
        "maxGridSize": (a["MaxGridDimX"], a["MaxGridDimY"], a["MaxGridDimZ"]),
        "clockRate": a["ClockRate"],
        "totalConstMem": a["TotalConstantMemory"],
        "major": 9,
        "minor": 0,
        "multiProcessorCount": a["MultiProcessorCount"],
        "maxThreadsPerMultiProcessor": a["MaxThreadsPerMultiProcessor"],
        "concurrentKernels": 1,
        "unifiedAddressing": 1,
        "managedMemory": 1,
        "l2CacheSize": a["L2CacheSize"],
        "pciBusID": 0,
        "pciDeviceID": 0,
        "pciDomainID": 0,
    }


def deviceGetAttribute(attrib, device) -> int:
    """An attribute by ``cudaDevAttr`` code (or by name)."""
    _check_device(device)
    if isinstance(attrib, str):
        return DEVICE_ATTRIBUTES[attrib]
    for name, code in DEVICE_ATTRIBUTE_CODES.items():
        if code == int(attrib):
            return DEVICE_ATTRIBUTES[name]
    raise CUDARuntimeError(1, "cudaErrorInvalidValue", f"device attribute {attrib} is not known to the fake CuPy")


def streamSynchronize(stream) -> None:
    return None


def eventSynchronize(event) -> None:
    return None


def is_available() -> bool:
    return True


# --------------------------------------------------------------------------- nvtx


def RangePush(message, id_color=-1):
    """No-op: the fake has no profiler to annotate (and records nothing)."""


def RangePushC(message, color=0):
    """No-op."""


def RangePop():
    """No-op."""


_range_ids = itertools.count(1)


def RangeStart(message, color):
    """No-op; returns a range id as CuPy does."""
    return next(_range_ids)


def RangeEnd(range_id):
    """No-op."""


def Mark(message, id_color=-1):
    """No-op."""


def MarkC(message, color=0):
    """No-op."""
