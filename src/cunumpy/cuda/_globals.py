"""``__constant__`` and ``__device__`` variables of a CUDA source: their declarations (name, NumPy
dtype, shape) and the check of a value a program sets from Python (``CudaKernel.set_global``)."""

from __future__ import annotations

import itertools
import re
import threading
from typing import Any, NamedTuple

import numpy as np

from .._native import core
from ._types import VECTOR_TYPES, _clean, _substitute, collect_aliases, collect_macros

_generation_lock = threading.Lock()
_generation = itertools.count(1)


def next_generation() -> int:
    """A number larger than every one returned before (orders the values set on variables)."""
    with _generation_lock:
        return next(_generation)


class CudaGlobal(NamedTuple):
    """One ``__constant__`` or ``__device__`` variable at file scope."""

    name: str
    #: ``"__constant__"`` or ``"__device__"``
    space: str
    #: the element dtype (a vector type's structured dtype for ``float2`` & co.)
    dtype: np.dtype
    #: ``()`` for a scalar, the extents of a C array; None when an extent is not a number
    shape: tuple[int, ...] | None
    #: the C type as written (after aliases and macros)
    ctype: str
    #: the declaration has an initializer (``= ...``)
    initialized: bool = False


_DECL = re.compile(
    r"(?:^|(?<=[;}{]))\s*(?:(?:static|extern|const|volatile)\s+)*"
    r"(__constant__|__device__)\s+((?:(?:__constant__|__device__|static|const|volatile|__managed__)\s+)*)"
    r"([^;{}()=\[\]]+?)\s*\b([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)(=[^;]*)?;",
    re.M,
)


def _element_dtype(ctype: str) -> np.dtype | None:
    text = " ".join(w for w in ctype.split() if w not in ("const", "volatile", "static", "__managed__"))
    if text in VECTOR_TYPES:
        return VECTOR_TYPES[text].dtype
    try:
        raw, _, _ = core.cuda_parse_signature(f'extern "C" __global__ void g({text} v) {{}}', "g", (), None)
    except ValueError:
        return None
    if len(raw) != 1 or raw[0][3] or raw[0][2] is None or raw[0][5]:
        return None
    return np.dtype(raw[0][2])


def declared_globals(source: str, headers=(), options=()) -> dict[str, CudaGlobal]:
    """The ``__constant__`` / ``__device__`` variables the source (and its headers) declare at
    file scope whose element type is a scalar, complex or vector type, by name."""
    texts = [*headers, source]
    joined = "\n".join(texts)
    if "__constant__" not in joined and "__device__" not in joined:
        return {}
    aliases = collect_aliases(texts, options)
    macros = {**aliases, **collect_macros(texts, options)}
    out: dict[str, CudaGlobal] = {}
    for text in texts:
        clean = _clean(text)
        for m in _DECL.finditer(clean):
            space, ctype, name, dims = m.group(1), m.group(3), m.group(4), m.group(5)
            if ctype.strip().endswith("*") or "*" in ctype or "template" in ctype:
                continue
            resolved = _substitute(" ".join(ctype.split()), aliases)
            dtype = _element_dtype(resolved)
            if dtype is None:
                continue
            shape: tuple[int, ...] | None = ()
            for extent in re.findall(r"\[([^\]]*)\]", dims or ""):
                value = extent.strip()
                for _ in range(8):
                    expanded = _substitute(value, macros)
                    if expanded == value:
                        break
                    value = expanded
                value = re.sub(r"(?<=\d)[uUlL]+\b", "", value)
                try:
                    n = _constant(value)
                except (SyntaxError, ValueError, ZeroDivisionError, TypeError):
                    n = None
                if n is None or n < 0 or shape is None:
                    shape = None
                else:
                    shape = (*shape, n)
            out[name] = CudaGlobal(name, space, dtype, shape, resolved, m.group(6) is not None)
    return out


def _constant(text: str) -> int | None:
    """The value of an integer constant expression of numbers, + - * / % ( ) and shifts."""
    if not re.fullmatch(r"[\d\s+*()\-/%<>]+", text) or "<<<" in text:
        return None
    try:
        value = eval(text.replace("/", "//"), {"__builtins__": {}}, {})  # digits and operators only
    except (SyntaxError, ValueError, ZeroDivisionError, TypeError):
        return None
    return int(value) if isinstance(value, int) else None


def global_value(where: str, decl: CudaGlobal, value: Any, size: int | None = None) -> np.ndarray:
    """``value`` as a C-contiguous array of the declaration's dtype and shape (``size``: the
    variable's bytes when the shape is not known from the text): TypeError for a dtype that
    does not cast safely or a value that changes on conversion, ValueError for a wrong shape."""
    dtype: Any = decl.dtype
    shape = decl.shape
    if shape is None:
        if size is None or size % dtype.itemsize:
            raise ValueError(f"{where}: the extent of '{decl.name}' is not a number the text gives")
        shape = (size // dtype.itemsize,)
    if dtype.names is not None:
        # A vector type: a structured array of its dtype, or numbers with a last axis of its length.
        arr = np.asarray(value)
        if arr.dtype != dtype:
            n = len(dtype.names)
            scalar = dtype.fields[dtype.names[0]][0]
            flat = _checked_cast(where, decl, arr, scalar)
            if flat.shape != (*shape, n):
                raise ValueError(
                    f"{where}: '{decl.name}' ({decl.ctype}, shape {shape}) takes values of shape {(*shape, n)} "
                    f"(a last axis of the vector length) or a structured array of dtype {dtype}, got shape {flat.shape}"
                )
            arr = np.ascontiguousarray(flat).view(dtype).reshape(shape)
    else:
        arr = _checked_cast(where, decl, np.asarray(value), dtype)
    if arr.shape != tuple(shape):
        if arr.ndim == 0 and shape == (1,):
            arr = arr.reshape(1)
        else:
            raise ValueError(
                f"{where}: '{decl.name}' ({decl.ctype}) has shape {tuple(shape)}, got a value of shape {arr.shape}"
            )
    return np.ascontiguousarray(arr)


def _checked_cast(where: str, decl: CudaGlobal, arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if arr.dtype == dtype:
        return arr
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"{where}: '{decl.name}' ({decl.ctype}) takes numbers, got dtype {arr.dtype}")
    if np.can_cast(arr.dtype, dtype, "safe"):
        return arr.astype(dtype)
    # Python numbers (int64/float64 arrays from lists): accepted when the value is exact.
    with np.errstate(all="ignore"):
        cast = arr.astype(dtype)
    if cast.dtype.kind in "iu" and arr.dtype.kind in "iu":
        same = np.array_equal(cast.astype(arr.dtype), arr)
    elif cast.dtype.kind in "iub" and arr.dtype.kind not in "iub":
        same = False
    elif cast.dtype.kind == "f" and arr.dtype.kind in "iuf":
        same = True  # rounding to the declared precision, as a kernel argument float would
    else:
        same = cast.dtype.kind == "c" and arr.dtype.kind in "iufc"
    if not same:
        raise TypeError(
            f"{where}: '{decl.name}' ({decl.ctype}) has dtype {dtype}; the value of dtype {arr.dtype} does not fit it"
        )
    return cast
