"""Kernel argument objects (API.md section 3): CudaArguments, CudaStruct, CudaStructValue,
CudaStructArguments and write_cuda_header.

A CudaStruct parses its field types once with the kernel signature parser of the C core and
builds one packing plan (``cunumpy._core.StructPacker``) that reuses the launch packer's
per-parameter checks; ``S(**values)`` and the automatic re-pack of CudaStructArguments go
through it. Layout checks live in ``_struct_layout`` (GPU probe or compile-time check).
"""

from __future__ import annotations

import abc
import ast
import inspect
import os
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._native import core
from .cuda._source import CudaParameter, ctype_of
from .kernels._cuda_parse import _spec

__all__ = [
    "CudaArguments",
    "CudaStruct",
    "CudaStructArguments",
    "CudaStructValue",
    "write_cuda_header",
]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# C++ keywords that the Python keyword list does not cover and that cannot name a field.
_C_RESERVED = frozenset(
    [
        "alignas",
        "alignof",
        "auto",
        "bool",
        "break",
        "case",
        "char",
        "class",
        "const",
        "constexpr",
        "continue",
        "decltype",
        "default",
        "delete",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "namespace",
        "new",
        "operator",
        "private",
        "protected",
        "public",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "template",
        "this",
        "typedef",
        "typename",
        "union",
        "unsigned",
        "using",
        "virtual",
        "void",
        "volatile",
        "while",
        "__restrict__",
        "__global__",
        "__device__",
    ]
)
_VIEW_INCLUDE = '#include "cunumpy/array_view.cuh"'
_MAX_VIEW_NDIM = 16


def _check_identifier(text, what) -> str:
    if not isinstance(text, str) or not _IDENTIFIER.match(text) or text in _C_RESERVED:
        raise ValueError(f"{what} {text!r} is not a valid C identifier")
    return text


# ------------------------------------------------------------------ CudaArguments


class CudaArguments(metaclass=abc.ABCMeta):  # noqa: B024 - ABCMeta only for register(): nothing is abstract
    """Several consecutive kernel parameters as one object; ``__cuda_args__()`` returns them.

    Subclassing is optional: :class:`cunumpy.kernels.CudaKernel` flattens any object whose
    ``__cuda_args__()`` returns a tuple, and launch-size inference looks into it for the
    first array. The owner of the data builds it once per backend and reuses it.
    :class:`CudaStructArguments` (one struct parameter) is a ``CudaArguments`` too for
    ``isinstance`` and ``issubclass``, as in earlier releases, without inheriting ``values``
    (a struct may have a field of that name).

    Parameters
    ----------
    *values : object
        The parameter values in order: device arrays, scalars or packed struct values.
    """

    __slots__ = ("_values",)

    def __init__(self, *values: Any) -> None:
        self._values = values

    def __cuda_args__(self) -> tuple:
        return self._values

    @property
    def values(self) -> tuple:
        """The parameter values, as given."""
        return self._values

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        kinds = ", ".join(type(v).__name__ for v in self._values)
        return f"<{type(self).__name__} ({kinds})>"


# ------------------------------------------------------------------ field layout


def _scalar_alignment(dt: np.dtype) -> int:
    # thrust::complex and cuda::std::complex are aligned to their full size (2 * sizeof(T)).
    return dt.itemsize


def _field_layout(p: CudaParameter):
    """(NumPy dtype of the stored value, C size, C alignment) of one parsed field."""
    if p.pointer:
        return np.dtype("<u8"), 8, 8
    if p.view_ndim:
        n = p.view_ndim
        parts = [("data", "<u8"), ("shape", "<i8", (n,))]
        if not p.contiguous:
            parts.append(("strides", "<i8", (n,)))
        dt = np.dtype(parts, align=True)
        return dt, dt.itemsize, 8
    vector: Any = getattr(p.struct, "length", None) and p.struct
    if vector:
        return vector.dtype, vector.dtype.itemsize, vector.alignment
    scalar: Any = p.dtype
    if scalar.byteorder == ">":
        scalar = scalar.newbyteorder("<")
    return scalar, scalar.itemsize, _scalar_alignment(scalar)


def _parse_fields(struct_name, fields):
    """Parsed CudaParameter per field, through the kernel signature parser of the C core."""
    if isinstance(fields, (str, bytes)) or not hasattr(fields, "__iter__"):
        raise TypeError(f"CudaStruct {struct_name!r}: 'fields' must be a sequence of (name, c_type) pairs")
    fields = list(fields)
    if not fields:
        raise ValueError(f"CudaStruct {struct_name!r}: a struct needs at least one field")
    names, texts, seen = [], [], set()
    for item in fields:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"CudaStruct {struct_name!r}: each field must be a (name, c_type) pair, got {item!r}")
        fname, ctype = item
        _check_identifier(fname, f"CudaStruct {struct_name!r}: field name")
        if fname in seen:  # a set: construction stays linear in the number of fields
            raise ValueError(f"CudaStruct {struct_name!r}: duplicate field name {fname!r}")
        seen.add(fname)
        if not isinstance(ctype, str) or not ctype.strip():
            raise ValueError(f"CudaStruct {struct_name!r}: field {fname!r} has no C type (got {ctype!r})")
        if any(ch in ctype for ch in ",;(){}[]#\n/="):
            raise ValueError(f"CudaStruct {struct_name!r}: field {fname!r} has unsupported type {ctype!r}")
        names.append(fname)
        texts.append(" ".join(ctype.split()))
    from .cuda._types import VECTOR_TYPES

    params = []
    for fname, text in zip(names, texts):
        source = f'extern "C" __global__ void cunumpy_field({text} {fname}) {{}}'
        vectors = tuple(n for n in VECTOR_TYPES if n in text)
        try:
            raw, _, _ = core.cuda_parse_signature(source, "cunumpy_field", vectors, None)
        except ValueError as exc:
            raise ValueError(
                f"CudaStruct {struct_name!r}: field {fname!r} has unsupported type {text!r} ({exc}); allowed: "
                "the scalar C types of CudaKernel, pointers to them, void*, ArrayND<T> and CArrayND<T> (N <= 16), "
                "CUDA vector types (float2, uint4, ...) by value"
            ) from None
        if len(raw) != 1:
            raise ValueError(f"CudaStruct {struct_name!r}: field {fname!r} has unsupported type {text!r}")
        _pname, ctype, dtype, pointer, sname, view_ndim, contiguous = raw[0]
        if sname is not None:
            if pointer:
                raise ValueError(
                    f"CudaStruct {struct_name!r}: field {fname!r} is a pointer to the vector type {sname}, which a "
                    "struct field cannot take; pass it as a kernel parameter, or as a pointer to its scalar type"
                )
            vector = VECTOR_TYPES[sname]
            params.append(CudaParameter(fname, ctype, vector.dtype, False, vector, None, False))
            continue
        dt = np.dtype(dtype) if dtype is not None else None
        params.append(CudaParameter(fname, ctype, dt, bool(pointer), None, int(view_ndim) or None, bool(contiguous)))
    return tuple(params), tuple(texts)


# ------------------------------------------------------------------ CudaStruct


class CudaStruct(core.StructCaller):
    """A C struct passed to kernels by value: its declaration, NumPy dtype with the C layout, and packer.

    ``S(**values)`` checks every field like a kernel argument of the same type (C-contiguous
    device arrays of the exact dtype for pointers, dtype and ndim for views, range-checked
    scalars; errors name the struct and the field) and returns a :class:`CudaStructValue`.
    Every field is required.

    Parameters
    ----------
    name : str
        The struct's C name.
    fields : sequence of (str, str)
        ``(field name, C type)`` pairs in order. Types: the kernel scalar types, pointers to
        them, ``void*``, ``ArrayND<T>`` and ``CArrayND<T>`` (N up to 16), complex types.

    Raises
    ------
    ValueError
        The name or a field name is not a C identifier, a field is repeated, a type is not
        supported, or there is no field.

    Notes
    -----
    The C side: :attr:`declaration` is the definition alone; :meth:`to_header` (or
    :func:`write_cuda_header`) adds the include it needs (``<cunumpy/array_view.cuh>`` for
    view fields) and a guard, so ``S.to_header() + source`` compiles where
    ``S.declaration + source`` needs that include first.
    """

    def __init__(self, name: str, fields: Iterable[tuple[str, str]]) -> None:
        _check_identifier(name, "CudaStruct: struct name")
        self._name = name
        self._fields, self._types = _parse_fields(name, fields)
        self._names = tuple(p.name for p in self._fields)
        self._type_of = dict(zip(self._names, self._types))
        self._index_of = {n: i for i, n in enumerate(self._names)}
        formats, offsets = [], []
        offset, align = 0, 1
        for p in self._fields:
            dt, size, a = _field_layout(p)
            offset = (offset + a - 1) // a * a
            formats.append(dt)
            offsets.append(offset)
            offset += size
            align = max(align, a)
        self._alignment = align
        itemsize = (offset + align - 1) // align * align
        self._offsets = tuple(offsets)
        # An aligned struct (``dtype.isalignedstruct``), as in earlier releases: the offsets are the
        # C layout's, so NumPy's alignment rules hold for them.
        self._dtype = np.dtype(
            {"names": list(self._names), "formats": formats, "offsets": offsets, "itemsize": itemsize}, align=True
        )
        self._has_views = any(p.view_ndim for p in self._fields)
        specs = []
        for p in self._fields:
            spec = _spec(0, p)
            specs.append((spec[0], f"field '{p.name}' ({self._type_text(p)} {p.name})", *spec[2:]))
        self._packer = core.struct_packer(
            name, tuple(specs), self._offsets, itemsize, self._dtype, self._names, np.void, np.generic, np.empty
        )
        self._attach(self._packer, CudaStructValue)

    # -------------------------------------------------------------- properties

    @property
    def name(self) -> str:
        """The struct's C name."""
        return self._name

    @property
    def dtype(self) -> np.dtype:
        """NumPy structured dtype with the C layout."""
        return self._dtype

    @property
    def fields(self) -> tuple[CudaParameter, ...]:
        """The parsed CudaParameter of each field."""
        return self._fields

    @property
    def field_names(self) -> tuple[str, ...]:
        """The field names in order."""
        return self._names

    @property
    def offsets(self) -> tuple[int, ...]:
        """The byte offset of each field."""
        return self._offsets

    @property
    def alignment(self) -> int:
        """The C struct's alignof."""
        return self._alignment

    @property
    def itemsize(self) -> int:
        """The C struct's sizeof."""
        return self._dtype.itemsize

    @property
    def has_views(self) -> bool:
        """Whether the struct has view fields (its header needs cunumpy/array_view.cuh)."""
        return self._has_views

    def _type_text(self, p: CudaParameter) -> str:
        return self._type_of[p.name]

    @property
    def declaration(self) -> str:
        """The C definition ``struct Name { ... };`` alone, without includes.

        Each field type is written as release 0.7.1 wrote it, so that generated headers stay
        byte-identical: without qualifiers (``const``, ``volatile``, ``__restrict__``), with
        ``complex<T>`` for ``thrust::complex<T>`` and ``cuda::std::complex<T>`` (CuPy's
        ``<cupy/complex.cuh>`` declares it), and spaces only between words (``double*``,
        ``Array1D<double>``).
        A struct with ``ArrayND``/``CArrayND`` fields needs ``#include <cunumpy/array_view.cuh>``
        before it (``Array1D`` is otherwise not a type); :meth:`to_header` gives the text with
        that include and a guard.
        """
        lines = [f"struct {self._name} {{"]
        for p, text in zip(self._fields, self._types):
            lines.append(f"    {_header_type_text(text)} {p.name};")
        lines.append("};")
        return "\n".join(lines) + "\n"

    def __repr__(self):
        return f"<CudaStruct {self._name} ({len(self._fields)} fields, {self._dtype.itemsize} bytes)>"

    def __eq__(self, other):
        if not isinstance(other, CudaStruct):
            return NotImplemented
        return self._name == other._name and self._signature() == other._signature()

    def __hash__(self):
        return hash((self._name, self._signature()))

    def _signature(self):
        return tuple((p.name, p.dtype, p.pointer, p.view_ndim, p.contiguous) for p in self._fields)

    def __reduce__(self):
        return (CudaStruct, (self._name, tuple(zip(self._names, self._types))))

    # -------------------------------------------------------------- packing

    # ``S(**values)`` is StructCaller's tp_call: the keyword dict goes to the C packer as it is.

    def pack(self, values: Mapping[str, Any], *, host_arrays: bool = False) -> CudaStructValue:
        """Pack a mapping of field values. ``host_arrays=True`` also accepts NumPy host arrays for
        pointer and view fields (their host addresses are stored): for the CPU emulation only."""
        if not hasattr(values, "keys"):
            raise TypeError(f"CudaStruct {self._name!r}: pack() takes a mapping of field values")
        values = dict(values)
        packed = self._packer.pack_dict(values, bool(host_arrays))
        return CudaStructValue(self, packed, tuple(values[n] for n in self._names))

    # -------------------------------------------------------------- headers and sources

    def to_header(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        guard: str | None = None,
        includes: Iterable[str | os.PathLike[str]] = (),
    ) -> str:
        """Header text (generated-file comment, include guard, includes, definition); written to ``path``.

        The guard is ``<NAME>_CUH`` by default; the text is byte-identical to release 0.7.1's
        for the same struct (see :func:`write_cuda_header`)."""
        if guard is None:
            guard = _guard_from_name(f"{self._name}_cuh")
        text = _header_text([self], guard, includes)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def check_source(self, source: str) -> None:
        """ValueError if ``source`` defines this struct differently; nothing if it does not define it."""
        if not isinstance(source, str):
            raise TypeError(f"CudaStruct.check_source(): 'source' must be a str, not {type(source).__name__}")
        from ._struct_layout import find_struct_members

        members = find_struct_members(source, self._name)
        if members is None:
            return
        problem = _compare_members(self, members)
        if problem:
            raise ValueError(f"the source defines struct {self._name} differently from the CudaStruct: {problem}")

    def layout_source(self, include: str | os.PathLike[str] | None = None) -> str:
        """The probe kernel ``cunumpy_layout_<Name>(unsigned long long* out)``: sizeof, alignof, offsets."""
        from ._struct_layout import probe_source

        return probe_source(self, include)

    def verify_layout(
        self,
        include: str | os.PathLike[str] | None = None,
        *,
        include_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] = (),
        options: Iterable[str] = (),
    ) -> dict[str, int]:
        """Compare the compiler's layout with ``dtype``: a one-thread probe on the GPU, or without a usable
        GPU a compile-time check with nvcc (sm_90). ValueError listing every difference. Returns one
        flat dict: ``{"sizeof": 16, "alignof": 8, "data": 0, "n": 8}`` (each field's offset)."""
        from ._struct_layout import verify_layout

        return verify_layout(self, include, include_dirs=include_dirs, options=options)

    # -------------------------------------------------------------- constructors

    @classmethod
    def from_source(
        cls,
        source: str,
        name: str,
        *,
        include_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] = (),
        options: Iterable[str] = (),
    ) -> CudaStruct:
        """The CudaStruct of a struct defined in CUDA source text (or the headers it includes).

        Parameters
        ----------
        source : str
            The CUDA source.
        name : str
            The struct's name (``struct Node {...};`` or ``typedef struct {...} Node;``).
        include_dirs : path or sequence of path, optional
            Folders searched for the source's quoted includes.
        options : sequence of str, optional
            Compiler options; their ``-D`` macros are read as the compiler would.

        Returns
        -------
        CudaStruct
            Fields, offsets and itemsize as the compiler lays the struct out; typedefs,
            ``using`` aliases and macros in member types are resolved.

        Raises
        ------
        TypeError
            ``source`` or ``name`` is not a str.
        ValueError
            The struct is not defined, or a member cannot be passed (a C array, a nested
            struct, a vector type, a bit field, a member function), named in the message.
        """
        if not isinstance(source, str):
            raise TypeError(f"CudaStruct.from_source(): 'source' must be a str, not {type(source).__name__}")
        if not isinstance(name, str):
            raise TypeError(f"CudaStruct.from_source(): 'name' must be a str, not {type(name).__name__}")
        from ._struct_layout import struct_member_decls
        from .cuda._source import resolve_includes
        from .cuda._types import _substitute, collect_aliases

        if isinstance(include_dirs, (str, os.PathLike)):
            include_dirs = (include_dirs,)
        options = tuple(options)
        headers = [p.read_text(encoding="utf-8", errors="replace") for p in resolve_includes(source, include_dirs)]
        text = "\n".join([*headers, source])
        decls = struct_member_decls(text, name)
        if decls is None:
            raise ValueError(f"CudaStruct.from_source(): the source defines no struct {name!r}")
        if isinstance(decls, str):
            raise ValueError(f"CudaStruct.from_source(): struct {name!r}: {decls}")
        aliases = collect_aliases([*headers, source], options)
        pairs = [(fname, _substitute(ctype, aliases)) for ctype, fname in decls]
        return cls(name, pairs)

    @classmethod
    def from_signature(
        cls,
        func: Callable[..., Any],
        name: str,
        *,
        int_type: str = "long long",
        scalar_names: Mapping[str, str] | None = None,
        contiguous: bool | str | Iterable[str] = False,
    ) -> CudaStruct:
        """One field per parameter of ``func`` from Pyccel-style annotations (strings or types)."""
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"CudaStruct.from_signature(): cannot read the signature of {func!r}: {exc}") from None
        params = [
            p
            for p in sig.parameters.values()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        ]
        if params and params[0].name == "self":
            params = params[1:]
        pairs = []
        mapper = _AnnotationMapper(name, int_type, scalar_names, contiguous)
        for p in params:
            pairs.append((p.name, mapper.ctype(p.name, p.annotation)))
        mapper.check_contiguous()
        return cls(name, pairs)

    @classmethod
    def from_pyccel_class(
        cls,
        source: str | Path,
        class_name: str,
        name: str | None = None,
        *,
        int_type: str = "long long",
        scalar_names: Mapping[str, str] | None = None,
        exclude: str | Iterable[str] = (),
        attribute_names: bool = True,
        contiguous: bool | str | Iterable[str] = False,
    ) -> CudaStruct:
        """Fields from the ``__init__`` of a Pyccel class, parsed statically (the file is never imported)."""
        text, where = _read_python_source(source)
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            raise ValueError(f"CudaStruct.from_pyccel_class(): {where} is not valid Python: {exc}") from None
        klass = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name), None)
        if klass is None:
            raise ValueError(f"CudaStruct.from_pyccel_class(): no class {class_name!r} in {where}")
        init = next(
            (n for n in klass.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__init__"),
            None,
        )
        if init is None:
            raise ValueError(f"CudaStruct.from_pyccel_class(): class {class_name!r} has no __init__ in {where}")
        if isinstance(exclude, str):
            exclude = (exclude,)
        exclude = set(exclude)
        args = list(init.args.posonlyargs) + list(init.args.args) + list(init.args.kwonlyargs)
        if args and args[0].arg == "self":
            args = args[1:]
        stored = _stored_attributes(init) if attribute_names else {}
        struct_name = name if name is not None else class_name
        mapper = _AnnotationMapper(struct_name, int_type, scalar_names, contiguous)
        pairs = []
        for a in args:
            field = stored.get(a.arg, a.arg)
            if a.arg in exclude or field in exclude:
                continue
            annotation: Any = inspect.Parameter.empty
            if a.annotation is not None:
                node = a.annotation
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    annotation = node.value
                else:
                    annotation = ast.unparse(node)
            mapper.contiguous_names_alias(a.arg, field)
            pairs.append((field, mapper.ctype(field, annotation)))
        mapper.check_contiguous()
        return cls(struct_name, pairs)


def _compare_members(struct: CudaStruct, members) -> str:
    """'' when the parsed members of a source definition equal the struct's fields, else why not."""
    ours = [(p.name, p.dtype, p.pointer, p.view_ndim, p.contiguous) for p in struct.fields]
    if isinstance(members, str):
        return members
    theirs = [(p.name, p.dtype, p.pointer, p.view_ndim, p.contiguous) for p in members]
    if [m[0] for m in ours] != [m[0] for m in theirs]:
        return f"fields {[m[0] for m in theirs]} instead of {[m[0] for m in ours]}"
    for a, b, p, q in zip(ours, theirs, struct.fields, members):
        if a != b:
            return f"field {p.name!r} is '{q.declaration}' instead of '{struct._type_text(p)} {p.name}'"
    return ""


# ------------------------------------------------------------------ annotations


_ANNOTATION_TYPES = {
    "float": "double",
    "bool": "bool",
    "complex": "complex<double>",
    "float32": "float",
    "float64": "double",
    "int8": "signed char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "uint8": "unsigned char",
    "uint16": "unsigned short",
    "uint32": "unsigned int",
    "uint64": "unsigned long long",
    "complex64": "complex<float>",
    "complex128": "complex<double>",
    "double": "double",
}
_ARRAY = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)\s*\[\s*(:(?:\s*,\s*:)*)\s*\](\s*\(.*\))?$")
_FINAL = re.compile(r"^(?:typing\.|t\.)?Final\s*\[(.*)\]$", re.S)


def _unwrap_annotation(text: str) -> str:
    """The type inside quotes, ``Final[...]`` and ``const``, in any nesting: ``'Final["int[:]"]'``
    (a quoted annotation under ``from __future__ import annotations``) gives ``int[:]``."""
    while True:
        before = text
        text = " ".join(text.split())
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
        m = _FINAL.match(text)
        if m:
            text = m.group(1)
        text = " ".join(w for w in text.split() if w != "const")
        if text == before:
            return text


class _AnnotationMapper:
    def __init__(self, struct_name, int_type, scalar_names, contiguous):
        self.struct_name = struct_name
        if not isinstance(int_type, str) or not int_type.strip():
            raise TypeError(f"CudaStruct {struct_name!r}: 'int_type' must be a C type string")
        table = dict(_ANNOTATION_TYPES)
        table["int"] = int_type
        if scalar_names is not None:
            if not hasattr(scalar_names, "items"):
                raise TypeError(f"CudaStruct {struct_name!r}: 'scalar_names' must be a mapping of name -> C type")
            for k, v in scalar_names.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise TypeError(f"CudaStruct {struct_name!r}: 'scalar_names' maps str to str, got {k!r}: {v!r}")
                table[k] = v
        self.table = table
        if isinstance(contiguous, bool):
            self.all_contiguous, self.contiguous_names = contiguous, set()
        elif isinstance(contiguous, str):
            self.all_contiguous, self.contiguous_names = False, {contiguous}
        else:
            try:
                self.all_contiguous, self.contiguous_names = False, set(contiguous)
            except TypeError:
                raise TypeError(
                    f"CudaStruct {struct_name!r}: 'contiguous' must be a bool or a collection of field names"
                ) from None
        self.aliases: dict = {}  # field name -> the parameter it was given as (from_pyccel_class)
        self.array_fields: set = set()
        self.scalar_fields: dict = {}  # field -> annotation, for the message of check_contiguous

    def contiguous_names_alias(self, parameter, field):
        if parameter in self.contiguous_names:
            self.contiguous_names.add(field)
            self.aliases[field] = parameter

    def check_contiguous(self):
        """Every name given in ``contiguous=`` is an array field (by field or parameter name)."""
        fields_of: dict = {}
        for field, parameter in self.aliases.items():
            fields_of.setdefault(parameter, set()).add(field)
        for name in sorted(self.contiguous_names):
            candidates = {name} | fields_of.get(name, set())
            if candidates & self.array_fields:
                continue
            scalars = [c for c in candidates if c in self.scalar_fields]
            if scalars:
                raise ValueError(
                    f"CudaStruct {self.struct_name!r}: contiguous= names field {scalars[0]!r}, which is not an "
                    f"array (annotation {self.scalar_fields[scalars[0]]!r})"
                )
            raise ValueError(f"CudaStruct {self.struct_name!r}: contiguous= names {name!r}, which is no field")

    def _fail(self, field, annotation, why):
        return ValueError(
            f"CudaStruct {self.struct_name!r}: field {field!r}: {why} (annotation {annotation!r}); "
            "use scalar_names= to map it"
        )

    def ctype(self, field, annotation) -> str:
        text = self._ctype(field, annotation)
        if "Array" in text:
            self.array_fields.add(field)
        else:
            self.scalar_fields[field] = annotation
        return text

    def _ctype(self, field, annotation) -> str:
        if annotation is inspect.Parameter.empty:
            raise self._fail(field, None, "missing annotation")
        if isinstance(annotation, typing.ForwardRef):  # Final["int[:]"] holds a ForwardRef
            annotation = annotation.__forward_arg__
        if not isinstance(annotation, str):
            origin = typing.get_origin(annotation)
            if origin is typing.Final:
                args = typing.get_args(annotation)
                if len(args) != 1:
                    raise self._fail(field, annotation, "Final without a type")
                return self._ctype(field, args[0])
            if (
                isinstance(annotation, type)
                and annotation.__name__ in self.table
                and annotation.__module__ == "builtins"
            ):
                return self.table[annotation.__name__]
            if isinstance(annotation, type) and issubclass(annotation, np.generic):
                name = np.dtype(annotation).name
                if name in self.table:
                    return self.table[name]
                try:
                    return ctype_of(annotation)
                except ValueError:
                    raise self._fail(field, annotation, "no C type for this NumPy type") from None
            if isinstance(annotation, np.dtype):
                try:
                    return ctype_of(annotation)
                except ValueError:
                    raise self._fail(field, annotation, "no C type for this dtype") from None
            raise self._fail(field, annotation, "unmappable annotation")
        text = _unwrap_annotation(annotation)
        m = _ARRAY.match(text)
        if m and m.group(3):
            # Pyccel's "float[:, :](order=F)": a CUDA view's memory order is its strides, not the
            # annotation; an ArrayND<T> takes any order, a CArrayND<T> (contiguous=) C order only.
            raise ValueError(
                f"CudaStruct {self.struct_name!r}: field {field!r}: the trailing clause {m.group(3).strip()!r} "
                f"(annotation {annotation!r}) has no CUDA equivalent: an ArrayND<T> view takes any memory "
                "order, a CArrayND<T> (contiguous=) C order only; drop the clause"
            )
        if m:
            element = self._scalar(field, annotation, m.group(1))
            rank = m.group(2).count(":")
            if rank > _MAX_VIEW_NDIM:
                raise self._fail(field, annotation, f"rank {rank} is above {_MAX_VIEW_NDIM}")
            contiguous = self.all_contiguous or field in self.contiguous_names
            return f"{'C' if contiguous else ''}Array{rank}D<{element}>"
        return self._scalar(field, annotation, text)

    def _scalar(self, field, annotation, text):
        name = text
        for prefix in ("numpy.", "np."):
            if name.startswith(prefix):
                name = name[len(prefix) :]
        if text in self.table:
            return self.table[text]
        if name in self.table:
            return self.table[name]
        raise self._fail(field, annotation, f"unknown type {text!r}")


def _read_python_source(source):
    if isinstance(source, Path):
        return source.read_text(encoding="utf-8"), str(source)
    if not isinstance(source, str):
        raise TypeError(
            f"CudaStruct.from_pyccel_class(): 'source' must be a path or source text, not {type(source).__name__}"
        )
    if "\n" not in source and source.strip().endswith(".py"):
        path = Path(source.strip())
        return path.read_text(encoding="utf-8"), str(path)
    return source, "the source text"


def _stored_attributes(init) -> dict:
    """{parameter: attribute} for ``self.attr = param`` statements (also tuple assignments)."""
    stored: dict = {}

    def pair(target, value):
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and isinstance(value, ast.Name)
        ):
            stored.setdefault(value.id, target.attr)
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            if len(target.elts) == len(value.elts):
                for t, v in zip(target.elts, value.elts):
                    pair(t, v)

    for node in ast.walk(init):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pair(target, node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pair(node.target, node.value)
    return stored


# ------------------------------------------------------------------ headers


# The header text is byte-identical to what release 0.7.1 wrote for the same structs (codes commit
# the generated headers and test that regenerating them changes nothing): this banner, the
# field types of _header_type_text and "#endif  // GUARD" with two spaces.
_HEADER_BANNER = "// Generated by cunumpy.arguments.CudaStruct from the Python definition; do not edit."
_QUALIFIERS = frozenset(["const", "volatile", "__restrict__", "__restrict", "restrict"])
_LEGACY_COMPLEX = re.compile(r"(?:(?:thrust|cuda::std)::)?complex\s*<\s*(float|double)\s*>")
_LEGACY_VIEW = re.compile(r"\b(C?)Array([1-9]|1[0-6])D\s*<((?:[^<>]|complex<[^<>]*>)+?)>")
_LEGACY_TOKEN = re.compile(
    r"C?Array(?:[1-9]|1[0-6])D<[^<>]*(?:<[^<>]*>[^<>]*)?>|complex<(?:float|double)>|[A-Za-z_]\w*|\*"
)


def _header_type_text(text: str) -> str:
    """A field's C type as release 0.7.1 wrote it in a declaration (``const double *`` ->
    ``double*``, ``thrust::complex<double>`` -> ``complex<double>``, ``Array1D< const float >``
    -> ``Array1D<float>``); the layout is the same, only the spelling is canonical."""

    def view(m):
        words = [w for w in m.group(3).split() if w not in _QUALIFIERS]
        return f"{m.group(1)}Array{m.group(2)}D<{' '.join(words)}>"

    text = _LEGACY_COMPLEX.sub(lambda m: f"complex<{m.group(1)}>", text)
    text = _LEGACY_VIEW.sub(view, text)
    tokens = _LEGACY_TOKEN.findall(text)
    pointers = tokens.count("*")
    words = [t for t in tokens if t != "*" and t not in _QUALIFIERS]
    if words[:1] == ["struct"]:
        words = words[1:]
    return " ".join(words) + "*" * pointers


def _include_line(item) -> str:
    if isinstance(item, Path):
        item = str(item)
    if not isinstance(item, str) or not item.strip() or "\n" in item.strip():
        raise ValueError(f"includes: {item!r} is neither a file name nor an #include line")
    item = item.strip()
    if item.startswith("#"):
        return item
    if item.startswith("<") and item.endswith(">"):
        return f"#include {item}"
    return f'#include "{item}"'


def _header_text(structs, guard, includes) -> str:
    if not isinstance(guard, str) or not _IDENTIFIER.match(guard):
        raise ValueError(f"guard {guard!r} is not a valid C identifier")
    if isinstance(includes, (str, Path)):
        includes = (includes,)
    lines = [_include_line(i) for i in includes]
    out = [
        _HEADER_BANNER,
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
    ]
    head = []
    if any(s.has_views for s in structs):
        head.append(_VIEW_INCLUDE)
    head.extend(line for line in lines if line not in head)
    if head:
        out.extend(head)
        out.append("")
    for s in structs:
        out.append(s.declaration.rstrip("\n"))
        out.append("")
    out.append(f"#endif  // {guard}")
    return "\n".join(out) + "\n"


def _guard_from_name(name: str) -> str:
    # As release 0.7.1 derived it: non-word characters to "_", upper case, leading and trailing
    # "_" removed, and "_" before a leading digit (``_under.cuh`` -> ``UNDER_CUH``).
    guard = re.sub(r"\W", "_", name).upper().strip("_")
    return guard if re.match(r"[A-Z_]", guard) else f"_{guard}"


def _guard_from_path(path) -> str:
    return _guard_from_name(Path(path).name)


def write_cuda_header(
    path: str | os.PathLike[str],
    structs: CudaStruct | Iterable[CudaStruct],
    guard: str | None = None,
    *,
    includes: Iterable[str | os.PathLike[str]] = (),
) -> str:
    """Write several structs, in order, to one header and return its text.

    Commit the header and keep a test that regenerates it and compares the text. The text is
    byte for byte what release 0.7.1 wrote for the same structs (its banner line,
    ``#endif  // GUARD``, field types without qualifiers: see :attr:`CudaStruct.declaration`),
    so headers generated with that release regenerate unchanged.

    Parameters
    ----------
    path : path
        The header file to write.
    structs : CudaStruct or sequence of CudaStruct
        The structs, each once.
    guard : str, optional
        The include guard; by default from the file name (``pusher_args.cuh`` ->
        ``PUSHER_ARGS_CUH``).
    includes : sequence of str or path, optional
        Headers to include (file names, ``<...>`` names or whole ``#include`` lines), after
        ``<cunumpy/array_view.cuh>``, which is added when a struct has view fields.

    Returns
    -------
    str
        The header text.

    Raises
    ------
    TypeError
        An entry of ``structs`` is not a CudaStruct.
    ValueError
        ``structs`` is empty or names a struct twice, the guard is not a C identifier, or an
        include is malformed.
    """
    if isinstance(structs, CudaStruct):
        structs = (structs,)
    structs = tuple(structs)
    for s in structs:
        if not isinstance(s, CudaStruct):
            raise TypeError(f"write_cuda_header(): {s!r} is not a CudaStruct")
    if not structs:
        raise ValueError("write_cuda_header(): no structs given")
    seen = set()
    for s in structs:
        if s.name in seen:
            raise ValueError(f"write_cuda_header(): struct {s.name!r} is given twice")
        seen.add(s.name)
    if guard is None:
        guard = _guard_from_path(path)
    text = _header_text(structs, guard, includes)
    Path(path).write_text(text, encoding="utf-8")
    return text


# ------------------------------------------------------------------ values


class CudaStructValue(core.StructValue):
    """A packed struct value: ``struct``, ``packed`` (a ``numpy.void`` with the C layout, whose
    bytes are the kernel argument) and the source values, kept alive while the value is.

    The packed bytes hold device addresses: after replacing an array, pack a new value.
    Created by ``S(**values)`` in C (the base holds the three attributes and ``__cuda_args__``).
    """

    __slots__ = ()

    def __new__(cls, struct, packed, values):
        # ``values``: a tuple in field order, or a mapping field -> value (as earlier releases
        # took it). Values made by ``S(**values)`` are created in C without this method.
        if not isinstance(values, tuple):
            if not hasattr(values, "keys"):
                raise TypeError(
                    f"CudaStructValue: 'values' must be a tuple in field order or a mapping of field values, "
                    f"not {type(values).__name__}"
                )
            names = getattr(struct, "field_names", None)
            if not isinstance(names, tuple):
                raise TypeError("CudaStructValue: a mapping of values needs a CudaStruct as 'struct'")
            values = dict(values)
            missing = [n for n in names if n not in values]
            known = set(names)
            unknown = [k for k in values if k not in known]
            if missing or unknown:
                raise TypeError(
                    f"CudaStructValue of struct {struct.name!r}: every field is required; missing fields "
                    f"{missing!r}, unknown fields {unknown!r}"
                )
            values = tuple(values[n] for n in names)
        return super().__new__(cls, struct, packed, values)  # type: ignore[call-arg]  # the C base takes three

    def __getitem__(self, field):
        try:
            return self._values[self.struct._index_of[field]]
        except (KeyError, TypeError, AttributeError):
            raise KeyError(f"struct {self.struct.name!r} has no field {field!r}") from None

    def __contains__(self, field):
        try:
            return field in self.struct._index_of
        except TypeError:  # an unhashable key is no field
            return False

    def __iter__(self):
        return iter(self.struct.field_names)

    def keys(self) -> tuple[str, ...]:
        """Return the field names.

        Returns
        -------
        tuple of str
            The struct's field names, in order.
        """
        return self.struct.field_names

    @property
    def values(self) -> dict:
        """The source value of each field, in field order."""
        return dict(zip(self.struct.field_names, self._values))

    def tobytes(self) -> bytes:
        """Return the packed bytes: the kernel argument as the GPU receives it.

        Returns
        -------
        bytes
            ``itemsize`` bytes with the C layout.
        """
        return self.packed.tobytes()

    def __repr__(self):
        return f"<CudaStructValue {self.struct.name} ({self.struct.itemsize} bytes)>"


# ------------------------------------------------------------------ CudaStructArguments


_STATE = "_cunumpy_struct_state"


class CudaStructArguments:
    """A class whose instances are one struct kernel argument.

    A subclass sets ``struct_name`` and ``fields`` (as for :class:`CudaStruct`); the struct
    is built when the class is defined and is the class attribute ``struct``, so the C side
    of the class is ``PushArgs.struct.to_header()`` (or ``PushArgs.struct.declaration``, the
    definition alone) and ``write_cuda_header(path, [PushArgs.struct])``. Each field is an
    attribute of the instance, plain or a property (a property follows the owner's arrays
    when they are reallocated). ``packed`` and ``__cuda_args__()`` re-pack when a field
    changed (the device address, shape or strides of an array; the value or type of a
    scalar); the check runs in C. Copies and pickles re-pack from their own arrays.

    Raises
    ------
    TypeError
        A subclass sets only one of ``struct_name`` and ``fields``.
    """

    struct: CudaStruct | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own_name = "struct_name" in cls.__dict__
        own_fields = "fields" in cls.__dict__
        if own_name != own_fields:
            missing = "fields" if own_name else "struct_name"
            raise TypeError(
                f"{cls.__name__}: set both 'struct_name' and 'fields' (or neither, for an intermediate base); "
                f"'{missing}' is missing"
            )
        if own_name:
            struct = CudaStruct(cls.__dict__["struct_name"], cls.__dict__["fields"])
            for field in struct.field_names:
                if field in _RESERVED_ATTRIBUTES:
                    raise ValueError(
                        f"{cls.__name__}: struct {struct.name!r} has a field named {field!r}, which is an attribute "
                        f"of CudaStructArguments itself (reserved: {', '.join(sorted(_PUBLIC_RESERVED))}); "
                        "rename the field"
                    )
            cls.struct = struct
        packer = cls.struct._packer if cls.struct is not None else None
        cls._cunumpy_packer = packer

    _cunumpy_packer = None

    def pack(self, *, host_arrays: bool = False) -> np.void:
        """Pack now and return the packed value.

        Call it at the end of ``__init__`` so that errors show up there, not at the first launch.

        Parameters
        ----------
        host_arrays : bool, optional
            Accept NumPy host arrays for pointer and view fields (their host addresses are
            stored): for the CPU emulation only. Later automatic re-packs keep the choice.

        Returns
        -------
        numpy.void
            The packed struct.

        Raises
        ------
        TypeError
            The class has no struct (an intermediate base without ``struct_name`` and ``fields``),
            or a field has the wrong type.
        """
        packer = type(self)._cunumpy_packer
        if packer is None:
            raise TypeError(
                f"{type(self).__name__} has no struct: set 'struct_name' and 'fields' in a subclass before packing"
            )
        return packer.repack(self, bool(host_arrays))

    def __getstate__(self):
        # The default state (instance dict, and slots if any) without the packed state: copies,
        # deep copies and unpickled objects pack again from their own arrays.
        base = getattr(super(), "__getstate__", None)  # object.__getstate__: Python 3.11+
        if base is not None:
            state = base()
        else:
            import copyreg

            d = dict(getattr(self, "__dict__", None) or {})
            slots = {
                n: getattr(self, n)
                for n in copyreg._slotnames(type(self))  # type: ignore[attr-defined]  # what pickle uses
                if n not in ("__dict__", "__weakref__") and hasattr(self, n)
            }
            state = (d or None, slots) if slots else d
        if isinstance(state, tuple) and len(state) == 2:
            d, slots = state
            if d and _STATE in d:
                d = {k: v for k, v in d.items() if k != _STATE}
            return (d or None, slots)
        if isinstance(state, dict) and _STATE in state:
            state = {k: v for k, v in state.items() if k != _STATE}
        return state

    def __repr__(self):
        s = type(self).struct
        return f"<{type(self).__name__} struct {s.name if s is not None else None}>"


# A CudaArguments for isinstance/issubclass (as in release 0.7.1, where it was a subclass),
# registered rather than inherited: ``values``, ``_values`` and ``__len__`` of CudaArguments
# would take names that a struct's fields may have.
CudaArguments.register(CudaStructArguments)

# ``packed`` and ``__cuda_args__`` are C descriptors: the no-change check is the hot path.
CudaStructArguments.__cuda_args__, CudaStructArguments.packed = core.struct_arguments_descriptors(  # type: ignore[attr-defined]
    CudaStructArguments, _STATE
)

# Field names that would replace what packing itself reads (a field ``packed`` made the packer
# read its own result without end): every attribute of the base class and of object, and the
# class attributes a subclass sets.
_RESERVED_ATTRIBUTES = frozenset(dir(CudaStructArguments)) | {"struct_name", "fields", _STATE}
_PUBLIC_RESERVED = {n for n in _RESERVED_ATTRIBUTES if not n.startswith("_")} | {"__cuda_args__"}
