"""Twin of _core/struct_pack.c and struct_state.c: struct packing through a plan laid out as
the struct (its fields go through the launch packer's checker table), and the re-pack check of
CudaStructArguments. Same checks, messages and packed bytes."""

from __future__ import annotations

from typing import Any

from . import pack as _pack

__all__ = [
    "StructCaller",
    "StructPacker",
    "StructState",
    "StructValue",
    "struct_arguments_descriptors",
    "struct_packer",
]


class _StructPlan(_pack.LaunchPlan):
    def _error(self, exc, i, detail):
        return exc(f"struct '{self._name}': {self._slots[i].label}: {detail}")


class _HostArrayView:
    """A host array's __array_interface__ presented as __cuda_array_interface__."""

    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


def _host_or_self(obj, host, kind):
    if not host or not _pack._KINDS[kind].array or _pack._is_device(obj):
        return obj
    if hasattr(obj, "__cuda_array_interface__") or not hasattr(obj, "__array_interface__"):
        return obj
    return _HostArrayView(obj.__array_interface__)


class StructValue:
    """Twin of the C base of CudaStructValue: the struct, the packed value, the source values."""

    __slots__ = ("__weakref__", "_values", "packed", "struct")

    def __init__(self, struct, packed, values):
        if not isinstance(values, tuple):
            raise TypeError("StructValue() argument 'values' must be a tuple")
        self.struct, self.packed, self._values = struct, packed, values

    def __cuda_args__(self):
        return (self.packed,)


class StructCaller:
    """Twin of the C base of CudaStruct: calling it with the fields as keywords packs a value."""

    _caller = None

    def _attach(self, packer, value_type):
        if not isinstance(packer, StructPacker) or not (
            isinstance(value_type, type) and issubclass(value_type, StructValue)
        ):
            raise TypeError("_attach(packer, value_type) takes a StructPacker and a StructValue subclass")
        self._caller = (packer, value_type)

    def __call__(self, *args, **values):
        if self._caller is None:
            raise TypeError(f"{type(self).__name__}: the struct has no packer (StructCaller._attach was not called)")
        packer, value_type = self._caller
        if args:
            n = len(args)
            raise TypeError(
                f"struct '{packer._name}' takes its fields as keyword arguments (S(name=value, ...)), "
                f"got {n} positional argument{'' if n == 1 else 's'}"
            )
        packed = packer.pack_dict(values, False)
        return value_type(self, packed, tuple(values[n] for n in packer.names))


_MISSING = object()


def _object_signature(v):
    ptr = getattr(getattr(v, "data", None), "ptr", _MISSING)
    if ptr is _MISSING:
        cai = v.__cuda_array_interface__
        if not isinstance(cai, dict):
            raise TypeError("__cuda_array_interface__ is not a dict")
        return ("cai", dict(cai))
    flags = getattr(v, "flags", None)
    return (
        ptr,
        getattr(v, "shape", None),
        getattr(v, "strides", None),
        getattr(v, "dtype", None),
        getattr(flags, "c_contiguous", None),
    )


class StructState:
    __slots__ = ("always", "host", "packed", "packer", "shapes", "values")
    always: Any
    host: Any
    packed: Any
    packer: Any
    shapes: Any
    values: Any

    @property
    def host_arrays(self):
        return self.host


class StructPacker:
    """Packing plan of one CudaStruct, built by :func:`struct_packer`."""

    def __init__(self, name, plan, names, dtype, itemsize, empty):
        self._name = name
        self.plan = plan
        self.names = names
        self._dtype = dtype
        self._itemsize = itemsize
        self._empty = empty

    def _pack_values(self, values, host):
        buf = bytearray(self._itemsize)
        for i, (slot, obj) in enumerate(zip(self.plan._slots, values)):
            obj = _host_or_self(obj, host, slot.kind)
            buf[slot.offset : slot.offset + slot.size] = getattr(self.plan, _pack._KINDS[slot.kind].pack)(i, obj)
        arr = self._empty(64, self._dtype)[:1]
        memoryview(arr).cast("B")[:] = buf
        return arr[0]

    def pack(self, values, host):
        if not isinstance(values, tuple):
            raise TypeError(f"struct '{self._name}': pack() takes a tuple of field values")
        if len(values) != len(self.names):
            raise TypeError(f"struct '{self._name}' has {len(self.names)} fields, got {len(values)} values")
        return self._pack_values(values, bool(host))

    def _mismatch(self, values):
        missing = [n for n in self.names if n not in values]
        unknown = [k for k in values if k not in self.names]
        return TypeError(
            f"struct '{self._name}': every field is required; missing fields {missing!r}, unknown fields {unknown!r}"
        )

    def pack_dict(self, values, host):
        if not isinstance(values, dict):
            raise TypeError(f"struct '{self._name}': pack_dict() takes a dict")
        host = bool(host)
        if any(n not in values for n in self.names) or len(values) != len(self.names):
            raise self._mismatch(values)
        return self._pack_values(tuple(values[n] for n in self.names), host)

    # -------------------------------------------------------------- CudaStructArguments

    def _read(self, obj, i):
        name = self.names[i]
        try:
            return getattr(obj, name)
        except AttributeError:
            raise AttributeError(
                f"{type(obj).__name__}: field '{name}' of struct '{self._name}' is not set (every field must be an "
                "attribute of the same name, plain or property)"
            ) from None

    def _shape_key(self, i, v):
        kind = _pack._KINDS[self.plan._slots[i].kind]
        if not kind.array:
            return None, False
        if not _pack._is_device(v):
            if type(v).__module__ == "numpy":  # NumPy host arrays: re-packed every time
                return None, True
            # Another array object: what the packer reads from it (as struct_state.c's
            # object_signature); an unreadable one is re-packed every time.
            try:
                return _object_signature(v), False
            except Exception:  # noqa: BLE001 - packing reports why it cannot be read
                return None, True
        if not kind.shape:
            return None, False
        return v.shape, False

    def repack(self, obj, host):
        host = bool(host)
        values = tuple(self._read(obj, i) for i in range(len(self.names)))
        packed = self._pack_values(values, host)
        state = StructState()
        state.packer, state.values, state.packed, state.host = self, values, packed, host
        shapes, always = [], False
        for i, v in enumerate(values):
            key, vol = self._shape_key(i, v)
            shapes.append(key)
            always = always or vol
        state.shapes, state.always = tuple(shapes), always
        object.__setattr__(obj, _state_name[0], state)
        return packed

    def current(self, obj):
        state = getattr(obj, _state_name[0], None)
        if not isinstance(state, StructState) or state.packer is not self:
            return self.repack(obj, False)
        if not state.always:
            for i in range(len(self.names)):
                v = self._read(obj, i)
                if v is not state.values[i]:
                    break
                key = state.shapes[i]
                if key is not None:
                    try:
                        changed = bool(self._shape_key(i, v)[0] != key)
                    except Exception:  # noqa: BLE001 - an uncomparable value counts as changed
                        changed = True
                    if changed:
                        break
            else:
                return state.packed
        return self.repack(obj, state.host)


def struct_packer(name, specs, offsets, itemsize, dtype, names, void_type, generic_type, empty):
    """The packing plan of struct ``name`` (same arguments as the C function)."""
    if not isinstance(names, tuple) or not isinstance(specs, tuple) or len(names) != len(specs):
        raise TypeError("struct_packer(): 'names' must be a tuple with one str per spec")
    if not callable(empty):
        raise TypeError("struct_packer(): 'empty' must be callable")
    base = _pack.launch_plan(name, specs, void_type, generic_type)
    plan = _StructPlan(name, base._slots, itemsize, 0, void_type, generic_type)
    if not isinstance(offsets, tuple) or len(offsets) != len(specs):
        raise TypeError("struct plan: 'offsets' must be a tuple with one int per field")
    if not 0 < itemsize <= 1 << 20:
        raise ValueError(f"struct plan: invalid itemsize {itemsize}")
    end = 0
    for i, (slot, off) in enumerate(zip(plan._slots, offsets)):
        if off < end or off > itemsize - slot.size:
            raise ValueError(f"struct plan: field {i} at offset {off} overlaps or leaves the {itemsize} bytes")
        slot.offset = off
        end = off + slot.size
    return StructPacker(name, plan, names, dtype, itemsize, empty)


_state_name = ["_cunumpy_struct_state"]


def struct_arguments_descriptors(cls, state_name):
    """(__cuda_args__ method, packed property) for CudaStructArguments (same behaviour as C)."""
    if not isinstance(cls, type) or not isinstance(state_name, str):
        raise TypeError("struct_arguments_descriptors(cls, state_name) takes a class and a str")
    _state_name[0] = state_name

    def _packer(self):
        packer = getattr(self, "_cunumpy_packer", None)
        if not isinstance(packer, StructPacker):
            raise TypeError(
                f"{type(self).__name__} has no struct: set 'struct_name' and 'fields' in a subclass before packing"
            )
        return packer

    def __cuda_args__(self):
        return (_packer(self).current(self),)

    return __cuda_args__, property(lambda self: _packer(self).current(self))
