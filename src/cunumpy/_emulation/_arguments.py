"""Arguments of an emulated launch, by the kernel's parsed signature.

Pointer and view parameters take host arrays (NumPy arrays, or fake-CuPy arrays through
their host buffers) of the declared dtype and dimensions. Where the kernel needs a layout the
array does not have (a pointer or ``CArrayND`` of a non-contiguous array, a view whose byte
strides are not whole elements, a read-only array given to a ``const`` parameter), a
contiguous copy is passed. After the launch the elements the kernel changed in a copy are
copied back into the given array, and only those, so that writes the kernel made through
another argument sharing the memory are kept; ``const`` parameters are never written back. A
read-only array given to a parameter the kernel may write is refused (``TypeError``), as a
device launch refuses it.

Every array the kernel can reach is described to the runtime as a region (its bytes, its
name, ``out`` or ``args.efield``): memcheck reports accesses outside them.
Scalars are checked and packed by the kernel's own launch plan (the same checks and messages
as a device launch). Struct parameters take a packed value, a mapping field -> value, a
CudaStructValue / CudaStructArguments, or any object with one attribute per field.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import re
import sys
import weakref
from collections.abc import Mapping
from struct import pack_into
from typing import Any

import numpy as np

from .._native import core
from ..cuda._source import CudaParameter, _matching_bracket
from ..cuda._types import CudaVectorType
from ..kernels import _cuda_kernel
from ._source import _split_declarators

__all__ = ["MarshalledArguments", "marshal_arguments"]

_MAX_FLATTEN_DEPTH = 8

# Region flags (emu_check.h).
REGION_CONST = 1
REGION_OUTPUT_ONLY = 2


class _HostArray:
    """A host buffer presented to the launch plan as a device array (its address is host memory)."""

    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, a: np.ndarray, strides):
        self.__cuda_array_interface__ = {
            "shape": a.shape,
            "typestr": a.dtype.str,
            "data": (a.__array_interface__["data"][0] if a.size else 0, False),
            "strides": strides,
            "version": 3,
        }


class MarshalledArguments:
    """The packed parameter values, the arrays they point into, and the pending copies back."""

    __slots__ = ("allocations", "buffer", "copies", "first_shape", "keep", "params", "regions", "table")

    def __init__(self):
        self.buffer = None
        #: the parameter address table at the start of ``buffer`` (None without parameters)
        self.table = None
        #: the packed parameter values the table points into (the runtime copies them)
        self.params = None
        self.keep: list = []
        #: (the user's array, the contiguous copy the kernel used, the copy's first contents, or
        #: None: copy all of it back)
        self.copies: list = []
        self.first_shape = None
        #: (lo, hi, base, itemsize, flags, name, what) of every array the kernel can reach
        self.regions: list = []
        #: (lo, hi, start) of every region: start is the first byte of the allocation owning it
        #: (the performance analysis counts sectors from there, as from a cudaMalloc)
        self.allocations: list = []

    def write_back(self) -> None:
        """Copies back the elements the kernel changed in each copy (and only those)."""
        for target, copy, snapshot in self.copies:
            if snapshot is None:  # a padded copy of an argument no other argument overlaps
                np.copyto(target, copy, casting="no")
                continue
            changed = _changed(copy, snapshot)
            if changed is True:
                np.copyto(target, copy, casting="no")
            elif changed is not False:
                np.copyto(target, copy, casting="no", where=changed)


def _changed(copy: np.ndarray, snapshot: np.ndarray):
    """Which elements differ bit for bit (so NaN to the same NaN is no change): True, False or
    a boolean array of ``copy``'s shape."""
    if copy.size == 0:
        return False
    itemsize = copy.dtype.itemsize
    a = copy.reshape(-1).view(np.uint8).reshape(-1, itemsize)
    b = snapshot.reshape(-1).view(np.uint8).reshape(-1, itemsize)
    diff = (a != b).any(axis=1)
    if not diff.any():
        return False
    if diff.all():
        return True
    return diff.reshape(copy.shape)


def _extent(a: np.ndarray) -> tuple[int, int, int]:
    """(lo, hi, base) addresses of the bytes an array's elements occupy; (0, 0, 0) when empty."""
    if a.size == 0:
        return 0, 0, 0
    base = a.__array_interface__["data"][0]
    lo = hi = 0
    for n, stride in zip(a.shape, a.strides):
        step = (n - 1) * stride
        if step < 0:
            lo += step
        else:
            hi += step
    return base + lo, base + hi + a.dtype.itemsize, base


def _allocation_start(a: np.ndarray, lo: int) -> int:
    """The first byte of the memory that owns ``a`` (the outermost NumPy array it views)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is a:
        return lo
    start = _extent(root)[0]
    return start if start and start <= lo else lo


def _what(a: np.ndarray) -> str:
    """The array's description in reports, made for every array of every launch: remembered
    per dtype and shape (NumPy's str(dtype) alone cost a tenth of a small launch)."""
    return _describe(a.dtype, a.shape)


@functools.lru_cache(maxsize=512)
def _describe(dtype: np.dtype, shape: tuple[int, ...]) -> str:
    size = 1
    for n in shape:
        size *= n
    return f"{dtype}, shape {'x'.join(str(n) for n in shape) or 'scalar'}, {size} elements"


def _fake_array_type():
    cupy = sys.modules.get("cupy")
    if cupy is None or not getattr(cupy, "__cunumpy_fake__", False):
        return None
    return getattr(cupy, "ndarray", None)


def _device_array_type():
    cupy = sys.modules.get("cupy")
    if cupy is None or getattr(cupy, "__cunumpy_fake__", False):
        return None
    return getattr(cupy, "ndarray", None)


def host_array(obj):
    """The host ndarray behind ``obj`` (itself, or a fake-CuPy array's buffer), or None."""
    if isinstance(obj, np.ndarray):
        if isinstance(obj, np.ma.MaskedArray):
            return None  # refused by the caller: a kernel would ignore the mask
        return obj
    fake = _fake_array_type()
    if fake is not None and isinstance(obj, fake):
        return obj._a
    return None


def _type_name(obj) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


class _Marshaller:
    def __init__(self, kernel, outputs=frozenset()):
        self.kernel = kernel
        self.name = kernel.name
        self.outputs = outputs
        self.out = MarshalledArguments()
        #: (region index, passed array, read only, strides) of the last array
        self.last: tuple = ()
        #: (value index, region index, passed array, read only, strides) of each array parameter
        self.movable: list = []

    def error(self, exc, where, p, detail):
        return exc(f"kernel '{self.name}': {where} ({p.declaration}): {detail}")

    # ------------------------------------------------------------ arrays

    def array(self, where, p: CudaParameter, obj, *, label=None, const=False, output=False):
        if isinstance(obj, np.ma.MaskedArray):
            raise self.error(
                TypeError,
                where,
                p,
                "a masked array cannot be passed to a kernel (the kernel would ignore the mask); pass "
                "a.filled(value) or a.data",
            )
        a = host_array(obj)
        if a is None:
            device = _device_array_type()
            if device is not None and isinstance(obj, device):
                raise self.error(
                    TypeError,
                    where,
                    p,
                    "a CuPy device array cannot be read by the CPU emulation; pass a NumPy array (a.get())",
                )
            raise self.error(
                TypeError,
                where,
                p,
                f"expected a NumPy array (or a fake-CuPy array), got {_type_name(obj)}",
            )
        if a.dtype.hasobject:
            raise self.error(TypeError, where, p, f"arrays of dtype {a.dtype} cannot be passed to a kernel")
        if p.dtype is not None and a.dtype != p.dtype:
            raise self.error(TypeError, where, p, f"expected dtype {p.dtype}, got {a.dtype} (arrays are never cast)")
        if p.view_ndim and a.ndim != p.view_ndim:
            raise self.error(
                TypeError, where, p, f"expected a {p.view_ndim}-dimensional array, got {a.ndim} dimensions"
            )
        if self.out.first_shape is None and a.ndim >= 1:
            self.out.first_shape = a.shape
        if not a.flags.writeable and not const and a.size:
            raise self.error(
                TypeError,
                where,
                p,
                "the array is read-only, but the parameter is not const, so the kernel may write it "
                "(pass a writeable array, or declare the parameter const)",
            )
        itemsize = a.dtype.itemsize
        if p.view_ndim and not p.contiguous:
            usable = a.flags.writeable and all(s % itemsize == 0 for s in a.strides)
        else:
            usable = a.flags.writeable and a.flags.c_contiguous
        if usable and a.dtype.kind == "c" and a.size and a.__array_interface__["data"][0] % itemsize:
            # complex<T> is aligned to its size (as on the GPU); NumPy only aligns to T.
            usable = False
        vector = p.struct if isinstance(p.struct, CudaVectorType) else None
        if usable and vector is not None and a.size and a.__array_interface__["data"][0] % vector.alignment:
            usable = False  # a vector array is aligned as its vector type (NumPy may not be)
        if usable:
            passed = a
        else:
            passed = np.array(a, order="C", copy=True)
            if a.flags.writeable and not const:
                self.out.copies.append((a, passed, passed.copy()))
        self.out.keep.append(passed)
        lo, hi, base = _extent(passed)
        flags = (REGION_CONST if const else 0) | (REGION_OUTPUT_ONLY if output else 0)
        self.out.regions.append((lo, hi, base, itemsize, flags, label or where, _what(passed)))
        self.out.allocations.append((lo, hi, _allocation_start(passed, lo)))
        strides = passed.strides if (p.view_ndim and not p.contiguous) else None
        self.last = (len(self.out.regions) - 1, passed, const or not a.flags.writeable, strides)
        return _HostArray(passed, strides)

    # ------------------------------------------------------------ structs

    def struct_fields(self, p: CudaParameter):
        """(name, CudaParameter) of each field, from the struct's parsed fields or its dtype."""
        struct = p.struct
        parsed = getattr(struct, "fields", None)
        dtype = np.dtype(p.dtype)
        fields = []
        if isinstance(parsed, tuple) and parsed and all(isinstance(f, CudaParameter) for f in parsed):
            for f in parsed:
                fields.append((f.name, f))
            return fields
        dtype_fields: Mapping[str, tuple] = dtype.fields or {}
        for fname in dtype.names or ():
            fdt = dtype_fields[fname][0]
            if fdt.names and "data" in fdt.names and "shape" in fdt.names:
                n = fdt["shape"].shape[0] if fdt["shape"].shape else 1
                contiguous = "strides" not in fdt.names
                fields.append((fname, CudaParameter(fname, "view", None, False, None, n, contiguous)))
            elif fdt == np.dtype("<u8") and fdt.kind == "u":
                fields.append((fname, CudaParameter(fname, "void", None, True, None, 0, False)))
            else:
                fields.append((fname, CudaParameter(fname, str(fdt), fdt, False, None, 0, False)))
        return fields

    def struct(self, index, p: CudaParameter, obj, label=None):
        dtype = np.dtype(p.dtype)
        if isinstance(obj, np.void):
            if obj.dtype != dtype:
                raise self.error(
                    TypeError,
                    f"argument {index}",
                    p,
                    f"the packed value has dtype {obj.dtype}, expected the struct's {dtype}",
                )
            return obj
        sname = getattr(p.struct, "name", p.ctype)
        missing: type[Exception] | tuple[type[Exception], ...]
        if isinstance(obj, Mapping):

            def read(fname):
                return obj[fname]

            missing = KeyError
        elif hasattr(type(obj), "pack") or not hasattr(type(obj), "__getitem__"):

            def read(fname):
                return getattr(obj, fname)

            missing = AttributeError
        else:

            def read(fname):
                return obj[fname]

            missing = (KeyError, IndexError)
        record = bytearray(dtype.itemsize)
        dtype_fields: Mapping[str, tuple] = dtype.fields or {}
        for fname, f in self.struct_fields(p):
            where = f"argument {index} (struct {sname}), field '{fname}'"
            try:
                value = read(fname)
            except missing:
                raise TypeError(
                    f"kernel '{self.name}': argument {index} (struct {sname}) has no field '{fname}'"
                ) from None
            if f.pointer or f.view_ndim:
                if f.view_ndim and f.dtype is None:
                    # A view field known only from the struct's dtype: its element type is the array's.
                    a = host_array(value)
                    f = f._replace(dtype=a.dtype if a is not None else np.dtype("u1"))
                value = self.array(where, f, value, label=f"{label or p.name or index}.{fname}")
            plan = _field_plan(sname, f)
            try:
                packed, _, _ = plan.pack(value)
            except (TypeError, ValueError, OverflowError) as exc:
                detail = str(exc).split("): ", 1)[-1]
                raise type(exc)(f"kernel '{self.name}': {where} ({f.declaration}): {detail}") from None
            off, size = plan.layout[0]
            at = dtype_fields[fname][1]
            record[at : at + size] = packed[off : off + size]
        return np.frombuffer(bytes(record), dtype)[0]


_field_plans: dict = {}


def _field_plan(struct_name: str, f: CudaParameter):
    key = (struct_name, f)
    plan = _field_plans.get(key)
    if plan is None:
        plan = _field_plans[key] = core.launch_plan(struct_name, (_cuda_kernel._spec(0, f),), np.void, np.generic)
    return plan


# The checks' redzones (emu_check.h: EMU_REDZONE, EMU_REDZONE_MAX): an access within an
# argument's redzone is caught, unless it lands in the bytes of another argument.
_REDZONE = 64 * 1024
_REDZONE_MAX = 4 * 1024 * 1024
#: Arguments up to this size that lie within another argument's redzone get a padded copy.
PAD_LIMIT = 1024 * 1024
_PAGE = 4096


def _redzone(lo: int, hi: int) -> int:
    return min(max(hi - lo, _REDZONE), _REDZONE_MAX)


def _separate_neighbours(m: _Marshaller, values: list) -> None:
    """Give every array argument that lies within another argument's redzone (and does not
    overlap it) a copy of its own, padded on both sides by the largest redzone of the launch,
    as AddressSanitizer's allocator pads: a kernel's stray access from one argument then lands
    in poisoned bytes instead of silently in its neighbour. The largest argument of a crowd
    stays in place, and so do arguments over PAD_LIMIT bytes, the ones that share memory with
    another argument, and pointer fields of structs. Copies go back after the launch."""
    out = m.out
    regions = out.regions
    if len(regions) < 2:
        return
    spans = sorted((r[0], r[1]) for r in regions if r[0] != r[1])
    if len(spans) < 2:
        return
    # the common case: every argument farther from the next than either redzone
    crowded = False
    for (lo1, hi1), (lo2, hi2) in itertools.pairwise(spans):
        if lo2 - hi1 < max(_redzone(lo1, hi1), _redzone(lo2, hi2)):
            crowded = True
            break
    if not crowded:
        return
    pad = max(_redzone(lo, hi) for lo, hi in spans) + _PAGE
    movable = {index: (vi, passed, read_only, strides) for vi, index, passed, read_only, strides in m.movable}
    order = sorted(range(len(regions)), key=lambda i: regions[i][1] - regions[i][0], reverse=True)
    all_spans = [(r[0], r[1]) for r in regions if r[0] != r[1]]
    placed: list = []  # (lo, hi) of the arguments that stay where they are
    for i in order:
        lo, hi = regions[i][0], regions[i][1]
        if lo == hi:
            continue
        # an argument sharing memory with another stays (a copy would separate the two views)
        shares = sum(lo < ohi and olo < hi for olo, ohi in all_spans) > 1
        near = any(
            (olo - hi if olo >= hi else lo - ohi) < max(_redzone(lo, hi), _redzone(olo, ohi)) for olo, ohi in placed
        )
        if i not in movable or shares or hi - lo > PAD_LIMIT or not near:
            placed.append((lo, hi))
            continue
        vi, passed, read_only, strides = movable[i]
        raw = np.empty(passed.nbytes + 2 * pad + 64, np.uint8)
        start = pad + (-raw.__array_interface__["data"][0] - pad) % 64
        copy = raw[start : start + passed.nbytes].view(passed.dtype).reshape(passed.shape)
        np.copyto(copy, passed, casting="no")
        out.keep.append(raw)
        if not read_only:
            out.copies.insert(0, (passed, copy, None))
        clo, chi, cbase = _extent(copy)
        regions[i] = (clo, chi, cbase, *regions[i][3:])
        # the performance analysis: the copy keeps the argument's offset in its allocation
        old_lo, _, alloc_start = out.allocations[i]
        out.allocations[i] = (clo, chi, clo - (old_lo - alloc_start))
        values[vi] = _HostArray(copy, copy.strides if strides is not None else None)


def _is_struct_input(obj, p: CudaParameter) -> bool:
    if isinstance(obj, (np.void, Mapping)):
        return True
    struct = getattr(obj, "struct", None)
    if struct is not None and getattr(struct, "name", None) == getattr(p.struct, "name", None):
        return True
    if hasattr(type(obj), "__cuda_args__"):
        return False
    names = np.dtype(p.dtype).names or ()
    return bool(names) and all(hasattr(obj, n) for n in names)


def _flatten(args, signature):
    out: list = []
    expanded = [False]
    fake = _fake_array_type()

    def visit(obj, depth):
        slot = signature[len(out)] if len(out) < len(signature) else None
        if slot is not None and slot.struct is not None and _is_struct_input(obj, slot):
            out.append(obj)
            return
        t = type(obj)
        plain = (
            t in (int, float, bool, complex)
            or isinstance(obj, np.ndarray)
            or (fake is not None and isinstance(obj, fake))
        )
        if not plain and hasattr(t, "__cuda_args__"):
            if depth >= _MAX_FLATTEN_DEPTH:
                raise TypeError("__cuda_args__ nested too deeply")
            items = obj.__cuda_args__()
            if not isinstance(items, tuple):
                raise TypeError(f"{t.__name__}.__cuda_args__() must return a tuple, not {type(items).__name__}")
            expanded[0] = True
            for item in items:
                visit(item, depth + 1)
            return
        out.append(obj)

    for obj in args:
        visit(obj, 0)
    return out, expanded[0]


def _vector_array(kernel, i, p: CudaParameter, vector: CudaVectorType, obj):
    """A pointer to a CUDA vector type: (the array as the scalar dtype with a last axis of the
    vector length, the parameter with that element dtype). A structured array of the vector's
    layout (fields x, y, z, w) is viewed so, without a copy."""
    a = host_array(obj)
    if a is not None and a.dtype.names is not None:
        dt: Any = a.dtype
        if dt == vector.dtype or (
            dt.names == vector.field_names
            and dt.itemsize == vector.dtype.itemsize
            and all(
                dt.fields[f][0] == vector.scalar and dt.fields[f][1] == vector.scalar.itemsize * k
                for k, f in enumerate(dt.names)
            )
        ):
            if vector.dtype.itemsize != vector.scalar.itemsize * vector.length:
                raise TypeError(
                    f"kernel '{kernel.name}': argument {i} ({p.declaration}): a structured array of "
                    f"{vector.name} (padded to {vector.dtype.itemsize} bytes) cannot be passed; pass an array of "
                    f"dtype {vector.scalar} with a last axis of length {vector.length}"
                )
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            obj = a.view(vector.scalar).reshape((*a.shape, vector.length))
        else:
            raise TypeError(
                f"kernel '{kernel.name}': argument {i} ({p.declaration}): expected an array of dtype "
                f"{vector.scalar} with a last axis of length {vector.length}, or a structured array of dtype "
                f"{vector.dtype}; got dtype {dt}"
            )
    elif a is not None and a.dtype == vector.scalar and (a.ndim < 1 or a.shape[-1] != vector.length):
        raise TypeError(
            f"kernel '{kernel.name}': argument {i} ({p.declaration}): a {vector.name} array needs a last axis of "
            f"length {vector.length}, got shape {a.shape}"
        )
    return obj, p._replace(dtype=vector.scalar)


def _check_record_dtype(kernel, i, p: CudaParameter, obj):
    """A pointer to a struct takes a structured array of exactly the struct's layout (or its
    bytes: uint8 with a last axis of the struct's size, viewed as the structured array): a
    TypeError listing every difference (names, offsets, formats, itemsize) otherwise."""
    a = host_array(obj)
    if a is None or a.dtype == p.dtype:
        return obj
    size = p.dtype.itemsize if p.dtype is not None else 0
    if a.dtype == np.uint8 and a.ndim >= 1 and a.shape[-1] == size and a.flags.c_contiguous:
        return a.view(p.dtype).reshape(a.shape[:-1])
    want: Any = p.dtype
    got: Any = a.dtype
    diffs = []
    if got.names is None:
        diffs.append(f"the array has dtype {got}, not a structured dtype")
    else:
        if got.names != want.names:
            diffs.append(f"fields {list(got.names)} instead of {list(want.names)}")
        for f in want.names:
            if got.names is not None and f in got.fields:
                gt, go = got.fields[f][:2]
                wt, wo = want.fields[f][:2]
                if gt != wt:
                    diffs.append(f"field '{f}' has dtype {gt} instead of {wt}")
                if go != wo:
                    diffs.append(f"field '{f}' is at offset {go} instead of {wo}")
        if got.itemsize != want.itemsize:
            diffs.append(f"itemsize {got.itemsize} instead of {want.itemsize}")
    raise TypeError(
        f"kernel '{kernel.name}': argument {i} ({p.declaration}): the structured array does not match the "
        f"layout of struct {p.ctype}: {'; '.join(diffs) or f'dtype {got} instead of {want}'}"
    )


def marshal_arguments(kernel, args, outputs=()) -> MarshalledArguments:
    """Check ``args`` against ``kernel``'s signature and pack them for the emulation.

    The result's ``buffer`` (16-byte aligned) starts with ``table``, the addresses of the
    parameter values in it (CUDA's ``kernelParams``); ``keep`` holds every array they point
    into, ``regions`` describes them. ``outputs``: names or indices of output-only parameters
    (initcheck reports reads of them before a write).
    """
    signature = kernel.signature
    if signature is None:
        raise TypeError(
            f"kernel '{kernel.name}' was built with check_signature=False: the CPU emulation needs "
            "the parsed signature to pass arguments"
        )
    offsets = _kernel_offsets(kernel)
    flat, expanded = _flatten(args, signature)
    n = len(signature)
    if len(flat) != n:
        raise TypeError(
            f"kernel '{kernel.name}' takes {n} argument{'' if n == 1 else 's'}, got {len(flat)}"
            + (" (after expanding __cuda_args__)" if expanded else "")
        )
    m = _Marshaller(kernel)
    const = _const_parameters(kernel)
    output_set = set(outputs)
    values = []
    for i, (p, obj) in enumerate(zip(signature, flat)):
        label = p.name or f"argument {i}"
        vector = p.struct if isinstance(p.struct, CudaVectorType) else None
        if p.pointer and vector is not None:
            obj, p = _vector_array(kernel, i, p, vector, obj)
        elif p.pointer and p.struct is not None:
            obj = _check_record_dtype(kernel, i, p, obj)
        if p.pointer or p.view_ndim:
            is_output = i in output_set or (i - n) in output_set or (p.name and p.name in output_set)
            values.append(m.array(f"argument {i}", p, obj, label=label, const=const[i], output=bool(is_output)))
            m.movable.append((len(values) - 1, *m.last))
        elif vector is not None:
            values.append(obj)  # a tuple or a structured scalar: checked and packed by the C packer
        elif p.struct is not None:
            values.append(m.struct(i, p, obj, label=label))
        else:
            values.append(obj)
    _separate_neighbours(m, values)
    packed, _, _ = kernel._plan.pack(*values)
    out = m.out
    total = len(packed)
    buffer = (ctypes.c_char * (total + 16))()
    base = ctypes.addressof(buffer)
    start = (-base) % 16
    ctypes.memmove(base + start, packed, total)
    if n:
        pack_into(f"<{n}Q", buffer, start, *[base + start + off for off in offsets])
        out.table = memoryview(buffer).cast("B")[start : start + 8 * n]
        out.params = memoryview(buffer).cast("B")[start : start + total]
    out.buffer = buffer
    return out


_consts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_GLOBAL = re.compile(r"\b__global__\b[^;{}]*")
_CONST = re.compile(r"\bconst\b")
_TEMPLATE_CONST = re.compile(r"<\s*const\b")


def _global_parameters_at(source: str, name: str) -> int:
    """Index of the ``(`` opening the parameters of the __global__ function ``name`` (its first
    declaration), or -1. Without a pattern made for the name: compiling one cost more than the
    rest of a new process's first launch."""
    for m in _GLOBAL.finditer(source):
        head = m.group(0)
        at = 0
        while True:
            at = head.find(name, at)
            if at < 0:
                break
            end = at + len(name)
            before_ok = at == 0 or not (head[at - 1].isalnum() or head[at - 1] == "_")
            rest = head[end:].lstrip()
            if before_ok and (not rest[:1] or not (rest[0].isalnum() or rest[0] == "_")):
                if rest.startswith("<"):
                    close = rest.find(">")
                    inner = rest[1:close] if close > 0 else "("
                    if close > 0 and not any(c in inner for c in ";{}()"):
                        rest = rest[close + 1 :].lstrip()
                if rest.startswith("("):
                    return m.start() + len(head) - len(rest)
            at = end
    return -1


def _const_parameters(kernel) -> tuple:
    """Per parameter of ``kernel``: whether it points to const data (``const double* x``,
    ``double const* x``, ``Array1D<const float>``); such arguments are never written back. Read
    from the source text; False where it cannot be told."""
    found = _consts.get(kernel)
    if found is not None:
        return found
    n = len(kernel.signature)
    result = [False] * n
    name = kernel.name.split("<", 1)[0]
    opening = _global_parameters_at(kernel.source, name)
    if opening >= 0:
        end = _matching_bracket(kernel.source, opening)
        params = _split_declarators(kernel.source[opening + 1 : end]) if end > 0 else []
        if len(params) == n:
            for i, text in enumerate(params):
                if "*" in text:
                    result[i] = _CONST.search(text[: text.rindex("*")]) is not None
                else:
                    result[i] = _TEMPLATE_CONST.search(text) is not None
    _consts[kernel] = found = tuple(result)
    return found


_offsets: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _kernel_offsets(kernel) -> tuple:
    """Offsets of the parameter values in the kernel's packed buffer (once per kernel).
    Complex parameters need no special case: the emulation's complex<T> has NumPy's value
    layout and CUDA's alignment, which the packed buffer follows."""
    offsets = _offsets.get(kernel)
    if offsets is None:
        offsets = _offsets[kernel] = tuple(off for off, _ in kernel._plan.layout)
    return offsets
