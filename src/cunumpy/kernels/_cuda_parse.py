"""CudaKernel's parsing side: the parsed signature as the LaunchPlan of the C core (one spec
per parameter, the tables of NumPy scalar types each scalar parameter accepts, the record of a
packed array view) and what is read from the source text itself (linkage, templates, the
bounds-check switch, the views HIP cannot compile)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from .._native import core
from ..cuda._source import CudaParameter
from ..cuda._types import CudaVectorType

# ------------------------------------------------------------------ plan specs

# Kind, scalar and action codes: the rows of the C core's checker table (pack_kinds.c).
_K_POINTER, _K_VOID_POINTER, _K_VIEW, _K_CVIEW, _K_SCALAR, _K_STRUCT = range(6)

_S_BOOL, _S_INT, _S_UINT, _S_FLOAT, _S_COMPLEX = range(5)

_A_INDEX, _A_TRUTH, _A_FLOAT, _A_COMPLEX = range(4)

_NUMPY_SCALARS = tuple(
    np.dtype(c).type for c in ("?", "b", "B", "h", "H", "i", "I", "l", "L", "q", "Q", "e", "f", "d", "g", "F", "D", "G")
)

_SCALAR_TABLES: dict = {}


def _scalar_table(dtype: np.dtype) -> tuple[int, dict]:
    """(scalar code, {NumPy scalar type: action}) for a scalar parameter of ``dtype``; one
    table per dtype, shared (the plans only read it)."""
    found = _SCALAR_TABLES.get(dtype)
    if found is None:
        found = _SCALAR_TABLES[dtype] = _make_scalar_table(dtype)
    return found


def _make_scalar_table(dtype: np.dtype) -> tuple[int, dict]:
    kind = dtype.kind
    code = {"b": _S_BOOL, "i": _S_INT, "u": _S_UINT, "f": _S_FLOAT, "c": _S_COMPLEX}[kind]
    table: dict = {}
    for t in dict.fromkeys(_NUMPY_SCALARS):
        src = np.dtype(t)
        if code in (_S_INT, _S_UINT):
            if src.kind in "iu":
                table[t] = _A_INDEX  # NumPy integers are checked by value
            elif src.kind == "b":
                table[t] = _A_TRUTH
        elif np.can_cast(src, dtype, "safe"):
            if src.kind == "b":
                table[t] = _A_TRUTH
            elif src.kind in "iuf":
                table[t] = _A_FLOAT
            elif src.kind == "c":
                table[t] = _A_COMPLEX
    return code, table


def _spec(index: int, p: CudaParameter):
    label = p.declaration
    dtype: Any = p.dtype  # None only for void*
    vector = p.struct if isinstance(p.struct, CudaVectorType) else None
    if p.pointer:
        if dtype is None:
            return (_K_VOID_POINTER, label, None, "", 0, 0, 0, 8, 8, {})
        if vector is not None:
            # An array of the scalar dtype whose last axis is the vector length (the C packer
            # checks the axis and the alignment); structured arrays are viewed so by callers.
            sc = vector.scalar
            return (_K_POINTER, label, sc, sc.str, sc.itemsize, vector.length, 0, 8, 8, {})
        if p.struct is not None:
            # A struct: a structured array of its layout, or uint8 bytes with a last axis of its
            # size (the C packer's negative ndim), as CuPy has no structured dtypes.
            return (_K_POINTER, label, dtype, dtype.str, dtype.itemsize, -dtype.itemsize, 0, 8, 8, {})
        return (_K_POINTER, label, dtype, dtype.str, dtype.itemsize, 0, 0, 8, 8, {})
    if p.view_ndim:
        n = p.view_ndim
        if p.contiguous:
            return (_K_CVIEW, label, dtype, dtype.str, dtype.itemsize, n, 0, 8 * (1 + n), 8, {})
        return (_K_VIEW, label, dtype, dtype.str, dtype.itemsize, n, 0, 8 * (1 + 2 * n), 8, {})
    if vector is not None:
        # By value: a structured scalar of the vector's dtype, or a tuple the C packer converts.
        code = {"i": _S_INT, "u": _S_UINT}.get(vector.scalar.kind, _S_FLOAT)
        dt = vector.dtype
        return (_K_STRUCT, label, dt, dt.str, dt.itemsize, vector.length, code, dt.itemsize, vector.alignment, {})
    if p.struct is not None:
        dt = dtype
        # The C alignment (a complex<double> field aligns the struct to 16, NumPy says 8).
        align = getattr(p.struct, "alignment", None) or dt.alignment
        return (_K_STRUCT, label, dt, dt.str, dt.itemsize, 0, 0, dt.itemsize, min(align, 16), {})
    code, table = _scalar_table(dtype)
    size = dtype.itemsize
    return (_K_SCALAR, label, dtype, dtype.str, size, 0, code, size, size, table)


def _build_plan(name, signature):
    specs = tuple(_spec(i, p) for i, p in enumerate(signature))
    return core.launch_plan(name, specs, np.void, np.generic)


def _view_record(n: int, contiguous: bool) -> np.dtype:
    """The packed form of an ArrayND<T> (data, shape, strides in elements) or CArrayND<T> view:
    an aligned record (``isalignedstruct``), as the C struct is."""
    fields = [("data", "<u8"), ("shape", "<i8", (n,))]
    if not contiguous:
        fields.append(("strides", "<i8", (n,)))
    return np.dtype(fields, align=True)


# ------------------------------------------------------------------ the source text

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)

# Array5D<T> ... Array16D<T>, CArray5D<T> ..., ArrayView<T, 5> ... (and the contiguous variant)
_HIGH_VIEWS = re.compile(r"\bC?Array([5-9]|1[0-6])D\b|\bC?ArrayView\s*<[^<>;]*,\s*([5-9]|1[0-6])\s*>")

_BOUNDS_OPTION = re.compile(r"^(?:-D|--define-macro=?|-define-macro=?)\s*CUNUMPY_BOUNDS_CHECK(?:=.*)?$")

_BOUNDS_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+CUNUMPY_BOUNDS_CHECK\b", re.M)


def _bounds_check_in(options, source) -> bool:
    """CUNUMPY_BOUNDS_CHECK is defined by the compile options (``-D...``, also split in two
    tokens) or by the source itself."""
    opts = list(options)
    for k, o in enumerate(opts):
        if _BOUNDS_OPTION.match(o):
            return True
        if o in ("-D", "--define-macro", "-define-macro") and k + 1 < len(opts):
            if re.match(r"^CUNUMPY_BOUNDS_CHECK(?:=.*)?$", opts[k + 1]):
                return True
    return bool(_BOUNDS_DEFINE.search(_COMMENTS.sub(" ", source)))


def _read_text(path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _cxx_linkage(source: str, name: str) -> bool:
    """A plain (not extern "C") __global__ function, when the source can be parsed at all."""
    try:
        _, is_template, extern_c = core.cuda_parse_signature(source, name, (), None)
    except ValueError:
        return False
    return not is_template and not extern_c


def _is_template(source: str, name: str) -> bool:
    try:
        core.cuda_parse_signature(source, name, (), None)
    except ValueError as exc:
        return "is a template" in str(exc)
    return False


def _file_kwargs(path: Path, kwargs: dict) -> dict:
    kw = dict(kwargs)
    directory = path.resolve().parent
    dirs = kw.pop("include_dirs", ())
    if isinstance(dirs, (str, os.PathLike)) or not hasattr(dirs, "__iter__"):
        raise TypeError("CudaKernel: 'include_dirs' must be a sequence of paths")
    dirs = tuple(dirs)
    kw["include_dirs"] = (directory, *tuple(d for d in dirs if str(Path(d)) != str(directory)))
    kw["source_dir"] = directory
    return kw
