"""CudaKernel's launch side: launch sizes, the arrays inside arguments (for the inference of
the size and the checks after a launch), the devices (their limits, the current one, the
stream's) and what a launch through CuPy's own functions or the driver needs."""

from __future__ import annotations

import contextlib
import math
import sys

import numpy as np

from ..cuda._source import CudaParameter
from ._cuda_parse import _view_record

# ------------------------------------------------------------------ shapes


def _check_dims(value, what, *, positive=False) -> tuple:
    """1 to 3 ints as a tuple; ``positive`` for block shapes, else non-negative (sizes)."""
    kind = "a positive int or a tuple of 1 to 3 positive ints" if positive else "an int or a tuple of 1 to 3 ints"
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be {kind}, not {value!r}")
    if isinstance(value, (int, np.integer)):
        dims: tuple[int, ...] = (int(value),)
    elif isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            raise ValueError(f"{what} must have 1 to 3 dimensions, got {len(value)}")
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value):
            raise TypeError(f"{what} entries must be ints, got {value!r}")
        dims = tuple(int(v) for v in value)
    else:
        raise TypeError(f"{what} must be {kind}, not {value!r}")
    if positive and any(v <= 0 for v in dims):
        raise ValueError(f"{what} entries must be positive, got {dims}")
    if any(v < 0 for v in dims):
        raise ValueError(f"{what} must not be negative, got {dims}")
    return dims


def _check_block(block, what="block_size") -> tuple:
    dims = _check_dims(block, what, positive=True)
    if math.prod(dims) > 1024:
        raise ValueError(f"{what} {dims} has {math.prod(dims)} threads; at most 1024 per block")
    return dims


def _grid_for(n: tuple, block: tuple) -> tuple[tuple, tuple]:
    if len(block) == 1 and len(n) > 1:
        block = block + (1,) * (len(n) - 1)
    elif len(block) != len(n):
        raise ValueError(
            f"the block {block} has {len(block)} dimensions but n_threads {n} has {len(n)}; "
            "pass a matching block= or n_threads="
        )
    return tuple(-(-a // b) for a, b in zip(n, block)), block


# ------------------------------------------------------------------ arrays inside arguments


def _device_type():
    cupy = sys.modules.get("cupy")
    return getattr(cupy, "ndarray", None) if cupy is not None else None


def _struct_fields(struct):
    names = []
    for f in getattr(struct, "fields", ()) or ():
        name = getattr(f, "name", None)
        if name is None and isinstance(f, tuple) and f:
            name = f[0]
        if isinstance(name, str):
            names.append(name)
    return names


def iter_arrays(args, prefix=""):
    """(path, device array) for every device array in the arguments, in argument/field order:
    plain arguments, items of ``__cuda_args__`` objects, fields of struct values and of
    CudaStructArguments objects. Paths look like ``0`` or ``0.markers``."""
    dev = _device_type()
    for i, obj in enumerate(args):
        path = f"{prefix}{i}"
        yield from _arrays_of(obj, path, dev, 0)


def _other_device_array(obj) -> bool:
    """A device array that is not CuPy's: CuPy's attribute protocol (``data.ptr``) or a
    ``__cuda_array_interface__`` (as the packer reads them)."""
    if isinstance(obj, (int, float, complex, str, np.generic)) or obj is None:
        return False
    try:
        return hasattr(getattr(obj, "data", None), "ptr") or hasattr(obj, "__cuda_array_interface__")
    except Exception:  # noqa: BLE001 - a user object's property may raise anything: not a device array
        return False


def _shape_of(obj):
    try:
        shape = obj.shape if hasattr(getattr(obj, "data", None), "ptr") else obj.__cuda_array_interface__["shape"]
        return tuple(shape)
    except Exception:  # noqa: BLE001 - a user object's property may raise anything: no shape
        return ()


class _Shaped:
    """An array's shape for the inference (test doubles and interface-only arrays)."""

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape


def _arrays_of(obj, path, dev, depth, host=False):
    if depth > 8:
        return
    if (dev is not None and isinstance(obj, dev)) or (host and isinstance(obj, np.ndarray)):
        yield path, obj
        return
    if host and not hasattr(type(obj), "__cuda_args__") and _other_device_array(obj):
        yield path, _Shaped(_shape_of(obj))
        return
    if not hasattr(type(obj), "__cuda_args__"):
        return
    struct = getattr(obj, "struct", None)
    fields = _struct_fields(struct) if struct is not None else []
    if fields:
        getter = obj.__getitem__ if hasattr(type(obj), "__getitem__") and not hasattr(type(obj), "pack") else None
        for name in fields:
            try:
                value = getter(name) if getter is not None else getattr(obj, name)
            except Exception:  # noqa: BLE001 - an unreadable field holds no array to check
                continue
            yield from _arrays_of(value, f"{path}.{name}", dev, depth + 1, host)
        return
    try:
        items = obj.__cuda_args__()
    except Exception:  # noqa: BLE001 - a user's __cuda_args__ that raises holds no array to check (the packer reports it)
        return
    if isinstance(items, tuple):
        for k, value in enumerate(items):
            yield from _arrays_of(value, f"{path}.{k}", dev, depth + 1, host)


def _first_shape(args):
    """Shape of the first array (device or NumPy: the CPU emulation passes NumPy arrays) with
    at least one dimension, searching argument objects."""
    dev = _device_type()
    for i, obj in enumerate(args):
        for _, a in _arrays_of(obj, f"{i}", dev, 0, host=True):
            shape = a.shape
            if len(shape) >= 1:
                return shape
    return None


def _flatten_unchecked(args):
    out = []
    for obj in args:
        if hasattr(type(obj), "__cuda_args__") and not isinstance(obj, (int, float, complex)):
            r = obj.__cuda_args__()
            if not isinstance(r, tuple):
                raise TypeError(f"{type(obj).__name__}.__cuda_args__() must return a tuple")
            out.extend(_flatten_unchecked(r))
        else:
            out.append(obj)
    return out


# ------------------------------------------------------------------ devices


def _cupy():
    """The imported CuPy module, importing it only when cunumpy considers it usable."""
    from .._backend import cupy_available, cupy_unavailable_reason

    if not cupy_available():
        return None, cupy_unavailable_reason()
    return sys.modules["cupy"], None


class _DeviceLimits:
    __slots__ = ("block", "grid", "id", "name", "shared", "shared_optin", "threads")
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    id: int
    name: str
    shared: int
    shared_optin: int
    threads: int


_limits_cache: dict[int, _DeviceLimits] = {}


def _device_limits(cupy, dev_id: int) -> _DeviceLimits:
    lim = _limits_cache.get(dev_id)
    if lim is not None:
        return lim
    lim = _DeviceLimits()
    lim.id = dev_id
    attrs = {}
    with contextlib.suppress(Exception):
        attrs = dict(cupy.cuda.Device(dev_id).attributes)
    name = None
    try:
        props = cupy.cuda.runtime.getDeviceProperties(dev_id)
        name = props.get("name")
        if isinstance(name, bytes):
            name = name.decode(errors="replace")
    except Exception:  # noqa: BLE001 - the name is optional: any driver failure leaves the default
        pass
    lim.name = name or f"device {dev_id}"
    lim.block = (
        attrs.get("MaxBlockDimX", 1024),
        attrs.get("MaxBlockDimY", 1024),
        attrs.get("MaxBlockDimZ", 64),
    )
    lim.grid = (
        attrs.get("MaxGridDimX", 2**31 - 1),
        attrs.get("MaxGridDimY", 65535),
        attrs.get("MaxGridDimZ", 65535),
    )
    lim.threads = attrs.get("MaxThreadsPerBlock", 1024)
    shared = optin = None
    try:
        # cunumpy.cuda's own query where it exists (it knows HIP and the properties API).
        from .. import cuda as _cuda

        query = getattr(_cuda, "max_shared_memory_per_block", None)
        if query is not None:
            shared = int(query(dev_id))
            optin = int(query(dev_id, opt_in=True))
    except Exception:  # noqa: BLE001 - any driver failure leaves the limits unknown
        shared = optin = None
    if shared is None:
        shared = attrs.get("MaxSharedMemoryPerBlock", _DEFAULT_SHARED)
        optin = attrs.get("MaxSharedMemoryPerBlockOptin", 0)
    lim.shared = shared
    lim.shared_optin = max(shared, optin or 0)
    _limits_cache[dev_id] = lim
    return lim


def _current_device(cupy) -> int:
    try:
        return int(cupy.cuda.runtime.getDevice())
    except Exception:  # noqa: BLE001 - any driver failure means the default device
        return 0


_getter_cache: list = [None, None]  # [cupy module, its device getter]


def _device_getter(cupy):
    """``cupy.cuda.runtime.getDevice`` looked up once per CuPy module."""
    if _getter_cache[0] is not cupy:
        getter = getattr(getattr(getattr(cupy, "cuda", None), "runtime", None), "getDevice", None)
        _getter_cache[1] = getter if callable(getter) else (lambda: 0)
        _getter_cache[0] = cupy
    return _getter_cache[1]


def _current_device_or_none(cupy):
    """The current device id (cheap: ``runtime.getDevice``), or None without a usable CuPy."""
    if cupy is None:
        return None
    try:
        dev = _device_getter(cupy)()
    except Exception:  # noqa: BLE001 - any driver failure means the device is unknown
        return None
    return dev if isinstance(dev, int) and dev >= 0 else None


def _check_stream(name, stream, cur):
    """An explicit stream must belong to the current device (same message as the C fast path)."""
    dev = getattr(stream, "device_id", None)
    if isinstance(dev, int) and dev >= 0 and dev != cur:
        raise ValueError(
            f"kernel '{name}': the stream is on device {dev} but the launch runs on the current device "
            f"{cur}; pass a stream of device {cur} or make device {dev} current"
        )


class _Compiled:
    __slots__ = ("dynamic_set", "handle", "kernel", "max_threads", "module", "static_shared")

    def __init__(self, module, kernel):
        self.module = module
        self.kernel = kernel
        fn = getattr(kernel, "kernel", None)
        self.handle = getattr(fn, "ptr", None) if fn is not None else None
        self.max_threads = getattr(kernel, "max_threads_per_block", None)
        self.static_shared = getattr(kernel, "shared_size_bytes", 0) or 0
        self.dynamic_set = 0


def _on_hip() -> bool:
    from .. import cuda as _cuda  # lazily: cunumpy.cuda may import this module

    try:
        return bool(_cuda.is_hip())
    except Exception:  # noqa: BLE001 - any driver failure means not HIP
        return False


# ------------------------------------------------------------------ launching

_CUDA_ERROR_INVALID_CONTEXT = 201

_DEFAULT_SHARED = 49152


def _cupy_arg(param: CudaParameter, value):
    """The value as CuPy's own launch takes it (fallback path only)."""
    if param.pointer:
        return value
    if param.view_ndim:
        rec = np.zeros((), dtype=_view_record(param.view_ndim, param.contiguous))
        rec["data"] = value.data.ptr
        rec["shape"] = value.shape
        if not param.contiguous:
            rec["strides"] = [s // value.itemsize for s in value.strides]
        return rec[()]
    if param.struct is not None:
        return value
    return param.dtype.type(value)  # type: ignore[union-attr]  # a scalar parameter has a dtype


def _raise_driver_error(cupy, status, name, grid, block):
    err = None
    try:
        from cupy_backends.cuda.api.driver import CUDADriverError

        err = CUDADriverError(status)
    except Exception:  # noqa: BLE001 - the driver's error class is optional decoration of the message
        err = None
    msg = f"launching kernel '{name}' with grid {grid} and block {block} failed (CUresult {status})"
    if err is not None:
        raise RuntimeError(f"{msg}: {err}") from err
    raise RuntimeError(msg)
