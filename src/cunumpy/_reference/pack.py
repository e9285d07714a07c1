"""Twin of the launch packer of the C core (_core/pack_*.c): the per-kernel argument plan,
its checker table and the packer.

Same checks, messages of the same kinds and the same packed bytes (the pointer table holds
the addresses of the values in the C version and zeros here). Without a CUDA driver there is
nothing to launch: ``driver_available()`` is False and ``launch`` raises.
"""

from __future__ import annotations

import math
import struct
import sys
from typing import Any, NamedTuple

_FLT_MAX = 3.4028234663852886e38  # numpy.finfo(numpy.float32).max

__all__ = [
    "LaunchPlan",
    "driver_available",
    "kernel_call_method",
    "kernel_prepare_method",
    "launch",
    "launch_plan",
    "packed_address",
    "register_fake_device_type",
    "register_ndarray_type",
]

_DEVICE_ADVICE = (
    "CudaKernel never copies arrays to the device: create the array on the device (xp.asarray on the "
    "CuPy backend, xp.to_cupy or xp.as_device_array) once, where the data is made"
)


def _not_device_advice(obj) -> str:
    """As pack_arrays.c: the advice of the kernel module when it is loaded (never imported here)."""
    module = sys.modules.get("cunumpy.kernels._cuda_kernel")
    try:
        advice = module._not_device_advice(obj) if module is not None else None
    except Exception:  # noqa: BLE001 - as the C core, which clears any error there
        advice = None
    return advice if isinstance(advice, str) else _DEVICE_ADVICE


K_POINTER, K_VOID_POINTER, K_VIEW, K_CVIEW, K_SCALAR, K_STRUCT = range(6)
S_BOOL, S_INT, S_UINT, S_FLOAT, S_COMPLEX = range(5)
A_INDEX, A_TRUTH, A_FLOAT, A_COMPLEX = range(4)
_MAX_NDIM = 16


class _Kind(NamedTuple):
    """A row of the checker table (pack_kinds.c's cn_kinds): what a slot of the kind takes."""

    array: bool  # a device array: its address is packed (8 bytes)
    typed: bool  # the spec gives a dtype, and an array's must be it
    contiguous: bool  # the array must be C-contiguous
    shape: bool  # a view: the shape follows the address (8 bytes per dimension)
    strides: bool  # ... then the strides in elements (8 bytes per dimension)
    pack: str  # the LaunchPlan method that checks and packs an argument
    scalar_sizes: dict[int, tuple[int, ...]] | None = None  # scalars: item sizes per S_* code
    max_size: int = 0  # largest value in bytes (0: no limit beyond the kind's)

    def value_size(self, itemsize: int, ndim: int) -> int:
        """Bytes of a value: an address or the item, then the shape and strides of a view."""
        return (8 if self.array else itemsize) + 8 * ndim * (self.shape + self.strides)


_KINDS = {
    K_POINTER: _Kind(array=True, typed=True, contiguous=True, shape=False, strides=False, pack="_array"),
    K_VOID_POINTER: _Kind(array=True, typed=False, contiguous=True, shape=False, strides=False, pack="_array"),
    K_VIEW: _Kind(array=True, typed=True, contiguous=False, shape=True, strides=True, pack="_array"),
    K_CVIEW: _Kind(array=True, typed=True, contiguous=True, shape=True, strides=False, pack="_array"),
    K_SCALAR: _Kind(
        array=False,
        typed=True,
        contiguous=False,
        shape=False,
        strides=False,
        pack="_scalar",
        scalar_sizes={S_BOOL: (1,), S_INT: (1, 2, 4, 8), S_UINT: (1, 2, 4, 8), S_FLOAT: (4, 8), S_COMPLEX: (8, 16)},
    ),
    K_STRUCT: _Kind(
        array=False, typed=True, contiguous=False, shape=False, strides=False, pack="_struct", max_size=1 << 20
    ),
}
_MAX_FLATTEN_DEPTH = 8
_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}
_UINT_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _device_type():
    cupy = sys.modules.get("cupy")
    t = getattr(cupy, "ndarray", None) if cupy is not None else None
    return t if isinstance(t, type) else None


def _is_device(obj) -> bool:
    t = _device_type()
    return t is not None and isinstance(obj, t)


def _has_data_ptr(obj) -> bool:
    """CuPy's attribute protocol: an object with ``data.ptr`` (as pack_arrays.c's cn_has_data_ptr)."""
    data = getattr(obj, "data", None)
    return data is not None and hasattr(data, "ptr")


def _device_id_of(value) -> int:
    """An int, or an object with an int ``id`` (CuPy's Device); -1 when neither."""
    if not isinstance(value, int):
        try:
            value = getattr(value, "id", None)
        except Exception:  # noqa: BLE001 - a user object's property may raise anything: no device, as in pack_arrays.c
            return -1
    if not isinstance(value, int) or isinstance(value, bool):
        return -1
    return value if value >= 0 else -1


def _maybe_duck(obj, generic_type) -> bool:
    import numpy as np

    t = type(obj)
    if t in (int, float, bool, complex, str) or obj is None or t is np.ndarray:
        return False
    return not isinstance(obj, generic_type)


def _duck_shape(obj):
    """The shape of a device array that is not CuPy's (as pack_plan.c's duck_shape), or None."""
    try:
        if _has_data_ptr(obj):
            shape = obj.shape
        else:
            cai = getattr(obj, "__cuda_array_interface__", None)
            shape = cai.get("shape") if isinstance(cai, dict) else None
        if shape is not None and not isinstance(shape, tuple):
            shape = tuple(shape)
        return shape
    except Exception:  # noqa: BLE001 - a user object's property may raise anything: no shape, as in pack_plan.c
        return None


class _Slot:
    __slots__ = ("dtype", "itemsize", "kind", "label", "ndim", "offset", "scalar", "size", "table", "typestr")
    dtype: Any
    itemsize: int
    kind: int
    label: str
    ndim: int
    offset: int
    scalar: int
    size: int
    table: Any
    typestr: Any


def _kind_name(slot) -> str:
    return {S_BOOL: "a bool", S_INT: "an integer", S_UINT: "an integer", S_FLOAT: "a floating"}.get(
        slot.scalar, "a complex"
    )


class LaunchPlan:
    """Per-kernel argument plan built by :func:`launch_plan`; see :meth:`pack`."""

    def __init__(self, name, slots, total, table_bytes, void_type, generic_type):
        self._name = name
        self._slots = slots
        self._total = total
        self._table_bytes = table_bytes
        self._void_type = void_type
        self._generic_type = generic_type

    @property
    def n_params(self):
        return len(self._slots)

    @property
    def layout(self):
        return tuple((s.offset, s.size) for s in self._slots)

    def forget(self):
        return None

    def configure_launch(self, block, infer):
        """Checked as the C plan checks it; the twin's calls always take the general path."""
        dims = (block,) if type(block) is int else tuple(block) if isinstance(block, (tuple, list)) else ()
        if not 1 <= len(dims) <= 3 or any(type(d) is not int or d < 1 for d in dims) or math.prod(dims) > 1024:
            raise ValueError("configure_launch(): block must be 1 to 3 positive ints, at most 1024 threads")
        if not isinstance(infer, int) or not -1 <= infer <= 2:
            raise ValueError("configure_launch(): infer must be -1, 0, 1 or 2")

    def configure_device(self, *config):
        """Accepted for parity with the C plan; the twin's calls always take the general path."""
        if config == (None,):
            return
        if len(config) != 6:
            raise TypeError("configure_device() takes 6 arguments or None")
        if not isinstance(config[0], int) or config[0] < 0:
            raise ValueError("configure_device(): device must be an int >= 0")
        if not callable(config[5]):
            raise TypeError("configure_device(): device_getter must be callable")

    def configure_prepare(self, empty, dtypes, cupy, device_getter):
        if (
            not callable(empty)
            or not isinstance(dtypes, tuple)
            or len(dtypes) != len(self._slots)
            or (device_getter is not None and not callable(device_getter))
        ):
            raise TypeError(
                "configure_prepare(empty, dtypes, cupy, device_getter) takes numpy.empty, one dtype or None per "
                "parameter, the CuPy module or None and a callable or None"
            )
        self._prepare = (empty, dtypes)

    _prepare: tuple[Any, tuple] | None = None

    def prepare(self, *args, device=None):
        """Twin of the C prepare(): the argument itself, or a value of the configured dtype
        holding the packed bytes."""
        if self._prepare is None:
            raise TypeError("prepare(): call configure_prepare() first")
        empty, dtypes = self._prepare
        flat: list = []
        self._flatten(
            args, flat, {"first": None, "shape": None, "composite": False, "struct_seen": False, "expanded": False}, 0
        )
        packed, _, _ = self.pack(*args, device=device)
        out = []
        for slot, obj, dtype in zip(self._slots, flat, dtypes):
            if dtype is None:
                out.append(obj)
                continue
            holder = empty(1, dtype)
            memoryview(holder).cast("B")[:] = packed[slot.offset : slot.offset + slot.size]
            out.append(holder[0])
        return tuple(out)

    def _error(self, exc, i, detail):
        return exc(f"kernel '{self._name}': argument {i} ({self._slots[i].label}): {detail}")

    def _flatten(self, args, out, state, depth):
        for obj in args:
            t = type(obj)
            plain = t in (int, float, bool, complex) or _is_device(obj)
            if not plain and hasattr(t, "__cuda_args__"):
                if depth >= _MAX_FLATTEN_DEPTH:
                    raise TypeError("__cuda_args__ nested too deeply")
                r = obj.__cuda_args__()
                if not isinstance(r, tuple):
                    raise TypeError(f"{t.__name__}.__cuda_args__() must return a tuple, not {type(r).__name__}")
                state["expanded"] = True
                self._flatten(r, out, state, depth + 1)
                continue
            if state["first"] is None and _is_device(obj):
                if len(obj.shape) >= 1:
                    state["first"] = obj
                    state["shape"] = obj.shape
                    state["composite"] = state["struct_seen"]
            elif state["first"] is None and t is self._void_type:
                state["struct_seen"] = True
            elif state["first"] is None and _maybe_duck(obj, self._generic_type):
                shape = _duck_shape(obj)
                if shape is not None and len(shape) >= 1:
                    state["first"] = obj
                    state["shape"] = shape
                    state["composite"] = state["struct_seen"]
            out.append(obj)

    def pack(self, *args, device=None):
        if device is not None and (isinstance(device, bool) or not isinstance(device, int)):
            raise TypeError(f"device must be an int or None, not {type(device).__name__}")
        cur = -1 if device is None or device < 0 else device
        flat: list = []
        state = {"first": None, "shape": None, "composite": False, "struct_seen": False, "expanded": False}
        self._flatten(args, flat, state, 0)
        n = len(self._slots)
        if len(flat) != n:
            raise TypeError(
                f"kernel '{self._name}' takes {n} argument{'' if n == 1 else 's'}, got {len(flat)}"
                + (" (after expanding __cuda_args__)" if state["expanded"] else "")
            )
        buf = bytearray(self._total)
        for i, (slot, obj) in enumerate(zip(self._slots, flat)):
            buf[slot.offset : slot.offset + slot.size] = getattr(self, _KINDS[slot.kind].pack)(i, obj, cur)
        first = state["first"]
        flag = state["composite"] if first is not None else state["struct_seen"]
        return bytes(buf), (state["shape"] if first is not None else None), flag

    # -------------------------------------------------------------- arrays

    def _array(self, i, obj, cur=-1):
        slot = self._slots[i]
        kind = _KINDS[slot.kind]
        is_device = _is_device(obj)
        duck = not is_device and _has_data_ptr(obj)
        if not is_device and not duck and not hasattr(obj, "__cuda_array_interface__"):
            raise self._error(
                TypeError,
                i,
                f"expected a device array (an object with __cuda_array_interface__), got "
                f"{type(obj).__module__}.{type(obj).__qualname__}; {_not_device_advice(obj)}",
            )
        from_attrs = False
        try:
            if is_device or duck:
                try:
                    info = self._attributes(obj)
                    from_attrs = info[2] is not None
                except Exception:
                    # Unreadable attributes: a complete interface still serves (as in pack_arrays.c).
                    if not duck or not hasattr(obj, "__cuda_array_interface__"):
                        raise
                    try:
                        info = self._interface(obj)
                    except Exception:  # noqa: BLE001 - the interface is a fallback: its failure leaves the first error to be raised
                        pass
                    else:
                        is_device = duck = False
                    if duck:
                        raise
                else:
                    is_device = True
            else:
                info = self._interface(obj)
            dtype, shape, strides, ptr, dev, read_only, itemsize_of_array = info
            if not 0 <= ptr < 2**64:
                raise OverflowError(f"the data pointer {ptr} is not an unsigned 64-bit address")
            if len(shape) > _MAX_NDIM:
                raise TypeError(f"arrays with more than {_MAX_NDIM} dimensions are not supported")
            if strides is not None and len(strides) != len(shape):
                raise TypeError("the array's strides do not match its shape")
        except Exception as exc:  # noqa: BLE001 - re-raised as the documented TypeError naming the argument
            raise self._error(TypeError, i, f"cannot read the device array: {exc}") from None
        if cur >= 0 and dev >= 0 and dev != cur:
            raise self._error(
                ValueError,
                i,
                f"the array is on device {dev} but the launch runs on the current device {cur}; make device "
                f"{dev} current (with cupy.cuda.Device({dev}):) or pass arrays of device {cur}",
            )
        raw_bytes = False
        if kind.typed:
            ok = (dtype == slot.dtype) if is_device else (dtype == slot.typestr)
            if not ok and slot.kind == K_POINTER and slot.ndim < 0 and shape and shape[-1] == -slot.ndim:
                # A pointer to a struct also takes its bytes: uint8 with a last axis of sizeof.
                ok = raw_bytes = dtype == "|u1"
            if not ok and slot.kind == K_POINTER and slot.ndim < 0:
                raise self._error(
                    TypeError,
                    i,
                    f"expected a structured array of dtype {slot.dtype}, or uint8 bytes with a last axis of "
                    f"{-slot.ndim}, got {dtype} (arrays are never cast or copied)",
                )
            if not ok:
                raise self._error(
                    TypeError, i, f"expected dtype {slot.dtype}, got {dtype} (arrays are never cast or copied)"
                )
        if slot.kind == K_POINTER and slot.ndim > 0:
            # A pointer to a CUDA vector type: a last axis of the vector length, aligned as the vector.
            if not shape or shape[-1] != slot.ndim:
                last = f"last axis {shape[-1]}" if shape else "no axes: 0"
                raise self._error(
                    TypeError,
                    i,
                    f"a vector of {slot.ndim} components takes an array whose last axis has length {slot.ndim}, "
                    f"got shape with {last}",
                )
            nbytes = slot.itemsize * slot.ndim
            align = slot.itemsize if slot.ndim == 3 else min(nbytes, 16)
            if ptr % align:
                raise self._error(
                    TypeError,
                    i,
                    f"the array's address {ptr:#x} is not aligned to {align} bytes, as the vector type must be",
                )
        if read_only:
            raise self._error(
                TypeError,
                i,
                "the array is read-only (__cuda_array_interface__ data[1] is True) and CudaKernel cannot tell "
                "whether the kernel writes it; pass a writable array",
            )
        itemsize = (1 if raw_bytes else slot.itemsize) if kind.typed else itemsize_of_array
        if kind.contiguous and (
            not _c_contiguous(shape, strides, itemsize) or (from_attrs and _flags_say_not_contiguous(obj))
        ):
            raise self._error(
                TypeError,
                i,
                "the array is not C-contiguous (e.g. a[:, 0:3]); pass xp.ascontiguousarray(a) or declare "
                "the parameter as an ArrayND<T> view",
            )
        out = struct.pack("<Q", ptr)
        if kind.shape:
            if len(shape) != slot.ndim:
                raise self._error(
                    TypeError, i, f"expected a {slot.ndim}-dimensional array, got {len(shape)} dimensions"
                )
            out += struct.pack(f"<{slot.ndim}q", *shape)
            if kind.strides:
                elem = []
                for k in range(slot.ndim):
                    if strides is not None:
                        if strides[k] % itemsize:
                            raise self._error(
                                TypeError,
                                i,
                                f"stride {strides[k]} bytes of axis {k} is not a multiple of the item size {itemsize}",
                            )
                        elem.append(strides[k] // itemsize)
                    else:
                        step = 1
                        for m in range(k + 1, slot.ndim):
                            step *= shape[m]
                        if not -(2**63) <= step < 2**63:
                            raise self._error(TypeError, i, "the array's shape is too large")
                        elem.append(step)
                out += struct.pack(f"<{slot.ndim}q", *elem)
        return out

    @staticmethod
    def _attributes(obj):
        """CuPy's attribute protocol (as pack_arrays.c's array_info with attrs)."""
        dtype = obj.dtype
        shape = _ints(obj.shape, "shape")
        st = getattr(obj, "strides", None)
        if st is not None:
            strides = _ints(st, "strides")
            if len(strides) != len(shape):
                raise TypeError("the array's strides do not match its shape")
        else:
            try:
                flags = obj.flags
            except Exception:  # noqa: BLE001 - re-raised as the documented TypeError
                raise TypeError("the array has neither strides nor flags.c_contiguous") from None
            if not bool(flags.c_contiguous):
                raise TypeError("the array has no strides and is not C-contiguous")
            strides = None
        for extent in shape:
            if extent < 0:
                raise TypeError(f"the array's shape has a negative extent ({extent})")
        data = obj.data
        ptr = data.ptr
        ptr = ptr if isinstance(ptr, int) else ptr.__index__()
        if hasattr(data, "device_id"):
            dev = _device_id_of(data.device_id)
        elif hasattr(obj, "device"):
            dev = _device_id_of(obj.device)
        else:
            dev = -1
        try:
            itemsize = int(dtype.itemsize)
        except Exception:  # noqa: BLE001 - a user dtype's itemsize may raise anything: 1, as in pack_arrays.c
            itemsize = 1
        return dtype, shape, strides, int(ptr), dev, False, itemsize if itemsize > 0 else 1

    @staticmethod
    def _interface(obj):
        """__cuda_array_interface__ (as pack_arrays.c's array_info without attrs)."""
        cai = obj.__cuda_array_interface__
        if not isinstance(cai, dict):
            raise TypeError("__cuda_array_interface__ is not a dict")
        cai = dict(cai)
        if "typestr" not in cai or "shape" not in cai or not isinstance(cai.get("data"), tuple) or not cai["data"]:
            raise TypeError("incomplete __cuda_array_interface__")
        dtype = cai["typestr"]
        shape = _ints(cai["shape"], "shape")
        if cai.get("mask") is not None:
            raise TypeError(
                "a masked __cuda_array_interface__ ('mask' is not None) is not supported: the kernel "
                "would read masked elements"
            )
        stream = cai.get("stream")
        if stream is not None and not (type(stream) is int and stream == 1):
            raise TypeError(
                f"the __cuda_array_interface__ names a producer stream ({stream!r}) that CudaKernel "
                "does not wait for: synchronize it and export the array with 'stream': None"
            )
        for extent in shape:
            if extent < 0:
                raise TypeError(f"the array's shape has a negative extent ({extent})")
        read_only = len(cai["data"]) >= 2 and bool(cai["data"][1])
        st = cai.get("strides")
        strides = None if st is None else _ints(st, "strides")
        ptr = cai["data"][0]
        ptr = ptr if isinstance(ptr, int) else ptr.__index__()
        digits = "".join(ch for ch in dtype[2:] if ch.isdigit()) if isinstance(dtype, str) else ""
        return dtype, shape, strides, int(ptr), -1, read_only, int(digits) if digits else 1

    # -------------------------------------------------------------- scalars

    def _int(self, i, value):
        slot = self._slots[i]
        bits = 8 * slot.itemsize
        if slot.scalar == S_INT:
            lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            fmt = _INT_FORMATS[slot.itemsize]
        else:
            lo, hi = 0, (1 << bits) - 1
            fmt = _UINT_FORMATS[slot.itemsize]
        if not lo <= value <= hi:
            raise self._error(OverflowError, i, f"{value!r} is out of range for {slot.dtype} [{lo}, {hi}]")
        return struct.pack("<" + fmt, value)

    def _float(self, slot, d, i=None, obj=None):
        if slot.scalar == S_COMPLEX:
            return self._complex(slot, complex(d, 0.0), i, obj)
        if slot.itemsize == 4:
            self._single_range(i, obj, d)
        return struct.pack("<f" if slot.itemsize == 4 else "<d", d)

    def _complex(self, slot, c, i=None, obj=None):
        if slot.itemsize == 8:
            self._single_range(i, obj, c.real)
            self._single_range(i, obj, c.imag)
        return struct.pack("<ff" if slot.itemsize == 8 else "<dd", c.real, c.imag)

    def _single_range(self, i, obj, x):
        """As pack_scalars.c: a finite value past the largest float32 is an OverflowError, not inf."""
        if math.isfinite(x) and abs(x) > _FLT_MAX:
            slot = self._slots[i]
            what = repr(obj) if type(obj) in (float, complex) else "the value"
            raise self._error(
                OverflowError, i, f"{what} is out of range for {slot.dtype} (largest finite value 3.4028235e+38)"
            )

    def _int_as_float(self, i, obj):
        try:
            return float(obj)
        except OverflowError:
            raise self._error(OverflowError, i, f"the int is out of range for {self._slots[i].dtype}") from None

    def _number(self, i, obj, action):
        slot = self._slots[i]
        if action == A_INDEX:
            return self._int(i, int(obj.__index__()))
        if action == A_TRUTH:
            t = bool(obj)
            if slot.scalar == S_FLOAT:
                return self._float(slot, float(t))
            if slot.scalar == S_COMPLEX:
                return self._complex(slot, complex(float(t), 0.0))
            return bytes([int(t)]) + bytes(slot.itemsize - 1)
        if action == A_FLOAT:
            return self._float(slot, float(obj), i, obj)
        return self._complex(slot, complex(obj), i, obj)

    def _scalar(self, i, obj, cur=-1):
        slot = self._slots[i]
        t = type(obj)
        if t is bool:
            if slot.scalar in (S_BOOL, S_INT, S_UINT):
                return self._number(i, obj, A_TRUTH)
            raise self._error(TypeError, i, f"a Python bool is not accepted for {_kind_name(slot)} parameter")
        if t is not int and t is not float and t is not complex:
            action = slot.table.get(t)
            if action is not None:
                return self._number(i, obj, action)
            if isinstance(obj, self._generic_type):
                raise self._error(TypeError, i, f"a NumPy {obj.dtype} scalar does not cast safely to {slot.dtype}")
        if isinstance(obj, int):
            if slot.scalar in (S_INT, S_UINT):
                return self._int(i, int(obj))
            if slot.scalar in (S_FLOAT, S_COMPLEX):
                return self._float(slot, self._int_as_float(i, obj), i, obj)
            raise self._error(TypeError, i, "a Python int is not accepted for a bool parameter (pass True/False)")
        if isinstance(obj, float):
            if slot.scalar in (S_FLOAT, S_COMPLEX):
                return self._float(slot, float(obj), i, obj)
            raise self._error(TypeError, i, f"a Python float is not accepted for {_kind_name(slot)} parameter")
        if isinstance(obj, complex):
            if slot.scalar == S_COMPLEX:
                return self._complex(slot, complex(obj), i, obj)
            raise self._error(TypeError, i, f"a Python complex is not accepted for {_kind_name(slot)} parameter")
        raise self._error(TypeError, i, f"expected {_kind_name(slot)} scalar, got {t.__module__}.{t.__qualname__}")

    def _struct(self, i, obj, cur=-1):
        slot = self._slots[i]
        if slot.ndim > 0 and isinstance(obj, tuple):
            obj = self._vector_tuple(i, obj)
        if type(obj) is not self._void_type:
            if slot.ndim > 0:
                raise self._error(
                    TypeError,
                    i,
                    f"expected a tuple of {slot.ndim} numbers or a structured scalar of dtype {slot.dtype}, got "
                    f"{type(obj).__module__}.{type(obj).__qualname__}",
                )
            raise self._error(
                TypeError,
                i,
                "expected a packed value of the struct (a CudaStructValue or CudaStructArguments), got "
                f"{type(obj).__module__}.{type(obj).__qualname__}",
            )
        if obj.dtype != slot.dtype:
            raise self._error(
                TypeError, i, f"the packed value has dtype {obj.dtype}, expected the struct's {slot.dtype}"
            )
        data = bytes(memoryview(obj))
        if len(data) != slot.size:
            raise self._error(TypeError, i, f"the packed value has {len(data)} bytes, expected {slot.size}")
        return data

    def _vector_tuple(self, i, obj):
        """A CUDA vector type by value from a tuple (as pack_scalars.c's pack_vector_tuple)."""
        slot = self._slots[i]
        if len(obj) != slot.ndim:
            raise self._error(TypeError, i, f"expected a tuple of {slot.ndim} numbers, got {len(obj)}")
        for k, item in enumerate(obj):
            ok = hasattr(item, "__index__")
            if not ok and slot.scalar == S_FLOAT:
                ok = isinstance(item, float) or getattr(getattr(item, "dtype", None), "kind", None) == "f"
            if not ok:
                what = "a real number" if slot.scalar == S_FLOAT else "an integer"
                raise self._error(
                    TypeError,
                    i,
                    f"component {k}: expected {what}, got {type(item).__module__}.{type(item).__qualname__}",
                )
        try:
            return self._void_type(obj, dtype=slot.dtype)
        except OverflowError as exc:
            raise self._error(OverflowError, i, f"a component is out of range for dtype {slot.dtype}: {exc}") from None


def _ints(seq, what):
    if not isinstance(seq, (tuple, list)):
        raise TypeError(f"the array's {what} is not a tuple")
    if len(seq) > _MAX_NDIM:
        raise TypeError(f"arrays with more than {_MAX_NDIM} dimensions are not supported")
    return tuple(int(v.__index__()) for v in tuple(seq))


def _flags_say_not_contiguous(obj) -> bool:
    """Whether ``obj.flags.c_contiguous`` is false (as pack_arrays.c's flags_say_not_contiguous:
    an array object is not contiguous when it says so, whatever its strides say)."""
    missing = object()
    flags = getattr(obj, "flags", missing)
    cc = missing if flags is missing else getattr(flags, "c_contiguous", missing)
    return cc is not missing and not bool(cc)


def _c_contiguous(shape, strides, itemsize) -> bool:
    if strides is None:
        return True
    expected = itemsize
    for n, st in zip(reversed(shape), reversed(strides)):
        if n == 0:
            return True
        if n != 1 and st != expected:
            return False
        expected *= n
    return True


def _spec_error(kind, label, dtype, typestr, table, itemsize, ndim, scalar, size, align):
    """The first invalid field of a spec, in the order pack_kinds.c's cn_spec_error checks them."""
    row = _KINDS.get(kind)
    if row is None:
        return "kind"
    if not isinstance(label, str):
        return "label"
    if row.typed and (dtype is None or not isinstance(typestr, str)):
        return "dtype"
    if not isinstance(table, dict):
        return "table"
    if row.shape and not 1 <= ndim <= _MAX_NDIM:
        return "ndim"
    if row.scalar_sizes is not None and scalar not in row.scalar_sizes:
        return "scalar"
    if row.typed and itemsize <= 0:
        return "itemsize"
    if not 1 <= align <= 16 or align & (align - 1):
        return "align"
    if row.scalar_sizes is not None and itemsize not in row.scalar_sizes[scalar]:
        return "itemsize"
    if size != row.value_size(itemsize, ndim) or (row.max_size and not 0 < size <= row.max_size):
        return "size"
    return None


def launch_plan(name, specs, void_type, generic_type):
    """Build the argument plan of kernel ``name`` (same spec format as the C function)."""
    if not isinstance(name, str):
        raise TypeError("launch_plan(): 'name' must be a str")
    if not isinstance(specs, tuple):
        raise TypeError("launch_plan(): 'specs' must be a tuple")
    if not isinstance(void_type, type) or not isinstance(generic_type, type):
        raise TypeError("launch_plan(): 'void_type' and 'generic_type' must be types")
    slots = []
    off = 8 * len(specs)
    table_bytes = off
    for i, sp in enumerate(specs):
        if not isinstance(sp, tuple) or len(sp) != 10:
            raise TypeError(f"launch_plan(): spec {i} must be a 10-tuple")
        kind, label, dtype, typestr, itemsize, ndim, scalar, size, align, table = sp
        for v in (kind, itemsize, ndim, scalar, size, align):
            if not isinstance(v, int):
                raise TypeError(f"launch_plan(): spec {i} holds a non-integer field")
        bad = _spec_error(kind, label, dtype, typestr, table, itemsize, ndim, scalar, size, align)
        if bad is not None:
            raise ValueError(f"launch_plan(): invalid {bad} in spec {i}")
        slot = _Slot()
        slot.kind, slot.label, slot.dtype, slot.typestr = kind, label, dtype, typestr
        slot.itemsize, slot.ndim, slot.scalar, slot.size, slot.table = itemsize, ndim, scalar, size, table
        off = (off + align - 1) // align * align
        slot.offset = off
        off += size
        slots.append(slot)
    return LaunchPlan(name, tuple(slots), off, table_bytes, void_type, generic_type)


def kernel_call_method(cls):
    """The twin of the C ``__call__``: always the general path, ``cls._call_slow``."""
    if not isinstance(cls, type):
        raise TypeError(f"kernel_call_method(): expected a class, got {type(cls).__name__}")

    def __call__(self, *args, **kwargs):
        return self._call_slow(*args, **kwargs)

    return __call__


def kernel_prepare_method(cls):
    """The twin of the C ``prepare_args``: always ``cls._prepare_slow``."""
    if not isinstance(cls, type):
        raise TypeError(f"kernel_prepare_method(): expected a class, got {type(cls).__name__}")

    def prepare_args(self, *args, **kwargs):
        return self._prepare_slow(*args, **kwargs)

    return prepare_args


def driver_available():
    """The Python twin never talks to a CUDA driver."""
    return False


def launch(*args):
    raise ValueError("launch(): no CUDA driver is loaded in this process")


def packed_address(packed):
    if not isinstance(packed, bytes):
        raise TypeError(f"packed_address(): expected bytes, got {type(packed).__name__}")
    return 0


def register_ndarray_type(ndarray, probes):
    """Twin of the C function: reading arrays from their C struct is a C-only shortcut (the
    twin reads the same values through the attributes); never enabled here."""
    if not isinstance(ndarray, type) or not isinstance(probes, tuple):
        raise TypeError("register_ndarray_type(ndarray, probes) takes a type and a tuple")
    return False


def register_fake_device_type(type_, slot):
    """Twin of the C function (a C-only shortcut, see register_ndarray_type)."""
    if not isinstance(type_, type) or not isinstance(slot, str):
        raise TypeError("register_fake_device_type(type, slot) takes a type and a str")
    return False
