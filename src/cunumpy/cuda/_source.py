"""CUDA source tools (API.md section 4.4): the shipped headers, C type names, signatures,
kernel names and tracked includes.

The parsing itself is done by ``cunumpy._core`` (C, or its pure-Python twin); this module
turns its tuples into :class:`CudaParameter` objects with NumPy dtypes.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._native import core

__all__ = [
    "CudaParameter",
    "ctype_of",
    "cuda_include_dir",
    "cuda_kernel_names",
    "include_hash",
    "parse_cuda_signature",
    "resolve_includes",
]

_INCLUDE_DIR = Path(__file__).resolve().parent / "include"

_CTYPES = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "signed char",
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int16): "short",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.int32): "int",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.int64): "long long",
    np.dtype(np.uint64): "unsigned long long",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "complex<float>",
    np.dtype(np.complex128): "complex<double>",
}


class CudaParameter(NamedTuple):
    """One parameter of a checked ``__global__`` signature."""

    name: str
    #: normalised C type without qualifiers or ``*`` (``"double"``, ``"Array2D<float>"``, ``"S"``)
    ctype: str
    #: element/value dtype; the structured dtype for a struct; None for ``void*``
    dtype: np.dtype | None
    pointer: bool
    #: the CudaStruct of a struct parameter, else None
    struct: object
    #: N of an ``ArrayND<T>`` / ``CArrayND<T>`` view parameter; None for every other parameter
    view_ndim: int | None
    contiguous: bool

    @property
    def declaration(self) -> str:
        """The parameter as C text, e.g. ``double* x``."""
        text = self.ctype + ("*" if self.pointer else "")
        return f"{text} {self.name}" if self.name else text


def cuda_include_dir() -> str:
    """Return the folder holding the shipped ``cunumpy/*.cuh`` headers.

    Every :class:`cunumpy.kernels.CudaKernel` has it on its include path.

    Returns
    -------
    str
        The folder's path.
    """
    return str(_INCLUDE_DIR)


def ctype_of(dtype: npt.DTypeLike) -> str:
    """Return the C type name of a NumPy dtype (``float64`` -> ``"double"``), as CUDA parameters use it.

    Parameters
    ----------
    dtype : dtype
        A dtype with a kernel type (bool, integers, float32/64, complex64/128).

    Returns
    -------
    str
        The C name (LP64: ``int64`` is ``"long long"``).

    Raises
    ------
    ValueError
        ``dtype`` is not a dtype, or has no C type of the kernel layer.
    """
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ValueError(f"ctype_of(): {dtype!r} is not a dtype: {exc}") from None
    try:
        return _CTYPES[dt]
    except KeyError:
        raise ValueError(
            f"ctype_of(): dtype {dt} has no CUDA C type (supported: {', '.join(str(d) for d in _CTYPES)})"
        ) from None


def _refuse_nul(source, function: str) -> None:
    """A NUL character would cut the C parser's messages short: refuse it with its place."""
    if isinstance(source, str):
        at = source.find("\0")
        if at >= 0:
            line = source.count("\n", 0, at) + 1
            raise ValueError(f"{function}: 'source' contains a NUL character (line {line}, offset {at})")


def cuda_kernel_names(source: str) -> list[str]:
    """List the ``__global__`` functions of a CUDA source.

    Parameters
    ----------
    source : str
        The CUDA source.

    Returns
    -------
    list of str
        The names in order of appearance; comments are ignored, a forward declaration and its
        definition count once.

    Raises
    ------
    TypeError
        ``source`` is not a str.
    """
    if not isinstance(source, str):
        raise TypeError(f"cuda_kernel_names(): 'source' must be a str, not {type(source).__name__}")
    return core.cuda_kernel_names(source)


def template_arg_text(arg) -> str:
    """C text of one template argument: a C type string, a NumPy dtype, an int or a bool."""
    if isinstance(arg, (bool, np.bool_)):
        return "true" if arg else "false"
    if isinstance(arg, (int, np.integer)):
        return str(int(arg))
    if isinstance(arg, str):
        if not arg.strip():
            raise ValueError("template_args: an empty string is not a C type")
        return arg.strip()
    if isinstance(arg, (np.dtype, type)):
        return ctype_of(arg)
    raise TypeError(f"template_args: {arg!r} is neither a C type string, a NumPy dtype, an int nor a bool")


def _struct_map(structs) -> dict:
    if isinstance(structs, (str, bytes)) or not hasattr(structs, "__iter__"):
        raise TypeError("structs must be a sequence of CudaStruct objects")
    out = {}
    for s in structs:
        name = getattr(s, "name", None)
        if not isinstance(name, str) or not hasattr(s, "dtype"):
            raise TypeError(f"structs: {s!r} is not a CudaStruct (it needs 'name' and 'dtype')")
        out[name] = s
    return out


_DTYPES: dict[str, np.dtype] = {}


def _dtype(name):
    if name is None:
        return None
    dt = _DTYPES.get(name)
    if dt is None:
        dt = _DTYPES[name] = np.dtype(name)
    return dt


#: Parser messages after which reading the type names as nvcc does (aliases, macros, vector
#: types, structs of the source) may let the signature be checked.
_RETRY = ("unknown type", "looks like a macro")


def _with_type_names(source, name, by_name, targs, headers, options, make_struct):
    """Parse again with the type names resolved as the compiler sees them: (raw parameters,
    is_template, extern_c, {struct name: CudaStruct or CudaVectorType})."""
    from ._types import VECTOR_TYPES, resolve_type_names

    rewritten, names = resolve_type_names(source, headers, options)
    known = dict.fromkeys(by_name)
    for n in names:
        known.setdefault(n, None)
    raw, is_template, extern_c = core.cuda_parse_signature(rewritten, name, tuple(known), targs)
    found: dict[str, Any] = {}
    for item in raw:
        sname = item[4]
        if sname is None or sname in by_name or sname in found:
            continue
        if sname in VECTOR_TYPES:
            found[sname] = VECTOR_TYPES[sname]
        elif make_struct is not None:
            found[sname] = make_struct("\n".join([*headers, source]), sname, tuple(options))
        else:
            raise ValueError(
                f"kernel '{name}': struct '{sname}' is defined in the source; pass "
                f"structs=[CudaStruct.from_source(source, {sname!r})] (CudaKernel reads it by itself)"
            )
    return raw, is_template, extern_c, found


def parse_signature_full(source, name, *, structs=(), template_args=None, headers=(), options=(), make_struct=None):
    """(parameters, is_template, extern_c) with the template arguments substituted.

    ``headers`` (texts) and ``options`` (``-D`` macros) are read with the source when the
    signature uses type names the parser does not know by itself: typedefs, ``using``
    aliases, macros, CUDA's vector types and structs defined in the source (``make_struct(text,
    name, options)`` builds the CudaStruct of one: the struct layer sits above this module)."""
    if not isinstance(source, str):
        raise TypeError(f"parse_cuda_signature(): 'source' must be a str, not {type(source).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"parse_cuda_signature(): 'name' must be a str, not {type(name).__name__}")
    by_name = _struct_map(structs)
    targs = None
    if template_args is not None:
        if isinstance(template_args, (str, bytes)) or not hasattr(template_args, "__iter__"):
            template_args = (template_args,)
        targs = tuple(template_arg_text(a) for a in template_args)
    found: dict = {}
    try:
        raw, is_template, extern_c = core.cuda_parse_signature(source, name, tuple(by_name), targs)
    except ValueError as exc:
        # The C messages quote source text as C strings: a NUL would cut them short.
        _refuse_nul(source, "parse_cuda_signature()")
        if not any(r in str(exc) for r in _RETRY):
            raise
        try:
            raw, is_template, extern_c, found = _with_type_names(
                source, name, by_name, targs, headers, options, make_struct
            )
        except ValueError as again:
            if str(again).startswith("no __global__"):
                raise exc from None
            from ._types import texture_use

            texture = texture_use(str(again))
            if texture is not None:
                raise ValueError(
                    f"{again}: textures and surfaces ({texture}) are not supported; pass the data as an array"
                ) from None
            raise again from None
    params = []
    for pname, ctype, dtype, pointer, struct_name, view_ndim, contiguous in raw:
        struct = (by_name.get(struct_name) or found.get(struct_name)) if struct_name is not None else None
        dt = np.dtype(struct.dtype) if struct is not None else _dtype(dtype)
        params.append(CudaParameter(pname, ctype, dt, pointer, struct, view_ndim or None, contiguous))
    for struct in by_name.values():
        check = getattr(struct, "check_source", None)
        if callable(check):
            check(source)
    return tuple(params), is_template, extern_c


def parse_cuda_signature(
    source: str, name: str, *, structs: Iterable[Any] = (), template_args: Any = None
) -> tuple[CudaParameter, ...]:
    """Parse and check the parameters of one ``__global__`` function.

    Parameters
    ----------
    source : str
        The CUDA source.
    name : str
        The kernel's name.
    structs : sequence of cunumpy.arguments.CudaStruct, optional
        Struct types that parameters may have.
    template_args : sequence, optional
        The template arguments of a template kernel.

    Returns
    -------
    tuple of CudaParameter
        One per parameter (``()`` for ``void`` or none).

    Raises
    ------
    TypeError
        ``source`` or ``name`` is not a str.
    ValueError
        A signature that cannot be checked (function-like macros, pointer to pointer,
        unknown types, textures; the message names the parameter), an unknown kernel,
        template arguments that do not fit, or a struct the source defines (pass it in
        ``structs``; CudaKernel reads it by itself). Typedefs, ``using`` aliases,
        object-like macros, ``uint``/``ushort``/``ulong`` and CUDA vector types are read as
        nvcc reads them.
    """
    return parse_signature_full(source, name, structs=structs, template_args=template_args)[0]


# ------------------------------------------------------------------ includes

_CLOSING_BRACKET = {"(": ")", "{": "}", "[": "]"}


def _matching_bracket(text: str, open_pos: int, skip=None) -> int:
    """Index of the bracket that closes ``text[open_pos]`` (``(``, ``{`` or ``[``), counting
    brackets of that kind only and passing over the positions ``i`` where ``skip(i)`` is true
    (string literals, say); -1 when it is not closed. Shared by the source scanners of
    cunumpy._struct_layout and cunumpy._emulation._source."""
    opening = text[open_pos]
    closing = _CLOSING_BRACKET[opening]
    depth = 0
    for i in range(open_pos, len(text)):
        if skip is not None and skip(i):
            continue
        c = text[i]
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i
    return -1


_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def _includes_of(text: str):
    if "include" not in text:
        return []
    return _INCLUDE.findall(_COMMENTS.sub("", text))


def _as_dirs(dirs, what):
    if isinstance(dirs, (str, os.PathLike)):
        dirs = (dirs,)
    try:
        return [Path(d) for d in dirs]
    except TypeError:
        raise TypeError(f"resolve_includes(): '{what}' must be a sequence of paths") from None


def resolve_includes(
    source: str,
    include_dirs: Iterable[str | os.PathLike[str]] = (),
    *,
    base_dir: str | os.PathLike[str] | None = None,
    angle_dirs: Iterable[str | os.PathLike[str]] = (),
) -> list[Path]:
    """List the headers a source includes, recursively, depth first, each once.

    Quoted includes are searched in the including file's folder (``base_dir`` for the source
    itself), then ``include_dirs``, then ``angle_dirs``; angle-bracket includes only in
    ``angle_dirs``. Includes that resolve nowhere are ignored. A source without includes
    never touches the file system.

    Parameters
    ----------
    source : str
        The CUDA source.
    include_dirs : sequence of path, optional
        Folders for quoted includes.
    base_dir : path, optional
        The folder of the source itself.
    angle_dirs : sequence of path, optional
        Folders for ``<...>`` includes (and the last resort of quoted ones).

    Returns
    -------
    list of pathlib.Path
        The header files found.

    Raises
    ------
    TypeError
        ``source`` is not a str or a folder list is not a sequence of paths.
    """
    if not isinstance(source, str):
        raise TypeError(f"resolve_includes(): 'source' must be a str, not {type(source).__name__}")
    dirs = _as_dirs(include_dirs, "include_dirs")
    angles = _as_dirs(angle_dirs, "angle_dirs")
    base = Path(base_dir) if base_dir is not None else None
    found: list[Path] = []
    seen: set[Path] = set()

    def visit(text: str, here: Path | None) -> None:
        for kind, target in _includes_of(text):
            target = target.strip()
            if kind == '"':
                candidates = ([here] if here is not None else []) + dirs + angles
            else:
                candidates = angles
            for d in candidates:
                path = d / target
                if path.is_file():
                    path = path.resolve()
                    if path not in seen:
                        seen.add(path)
                        found.append(path)
                        try:
                            child = path.read_text(encoding="utf-8", errors="replace")
                        except OSError:
                            break
                        visit(child, path.parent)
                    break

    visit(source, base)
    return found


def include_hash(paths: Iterable[str | os.PathLike[str]]) -> str:
    """Hash the contents of header files, for compile cache keys.

    Parameters
    ----------
    paths : sequence of path
        The files, in order.

    Returns
    -------
    str
        The first 16 hex digits of SHA-256 over the length and content of each file.

    Raises
    ------
    TypeError
        ``paths`` is a single path instead of a sequence.
    """
    if isinstance(paths, (str, os.PathLike)):
        raise TypeError("include_hash(): 'paths' must be a sequence of paths, not a single path")
    h = hashlib.sha256()
    for p in paths:
        data = Path(p).read_bytes()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:16]
