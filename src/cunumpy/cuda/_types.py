"""Type names of kernel signatures as nvcc sees them: CUDA's vector types, the names the
system headers define (``uint``, ``ushort``, ``ulong``), ``typedef`` and ``using`` aliases of the
source and its headers, object-like ``#define`` macros and the ``-D`` options of the kernel.

The C signature parser knows the scalar types, the array views and the struct names it is
given. This module reads everything else the way the preprocessor and the compiler would
before the parser runs: :func:`resolve_type_names` rewrites the aliases and macros of the text
handed to the parser (the source compiled is never changed) and lists the vector types and the
structs defined in the text, which the parser then takes as struct names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

# ------------------------------------------------------------------ vector types

#: base name -> (NumPy scalar dtype, alignment of the 1-, 2- and 4-vectors; a 3-vector aligns
#: to its scalar), as CUDA's vector_types.h declares them (LP64: long is 8 bytes).
_VECTOR_BASES = {
    "char": ("i1", (1, 2, 4)),
    "uchar": ("u1", (1, 2, 4)),
    "short": ("i2", (2, 4, 8)),
    "ushort": ("u2", (2, 4, 8)),
    "int": ("i4", (4, 8, 16)),
    "uint": ("u4", (4, 8, 16)),
    "long": ("i8", (8, 16, 16)),
    "ulong": ("u8", (8, 16, 16)),
    "longlong": ("i8", (8, 16, 16)),
    "ulonglong": ("u8", (8, 16, 16)),
    "float": ("f4", (4, 8, 16)),
    "double": ("f8", (8, 16, 16)),
}

_FIELDS = ("x", "y", "z", "w")


class CudaVectorType:
    """One CUDA vector type (``float2``, ``uint4``, ``half2``, ...): its scalar dtype, its
    length, its C alignment and the structured dtype (fields ``x, y, z, w``) of its layout.

    A pointer parameter of a vector type takes an array of the scalar dtype whose last axis is
    the vector length, or a structured array of :attr:`dtype`; by value, a tuple of
    :attr:`length` numbers or a structured scalar of :attr:`dtype`.
    """

    __slots__ = ("alignment", "dtype", "length", "name", "scalar")

    def __init__(self, name: str, scalar: np.dtype, length: int, alignment: int) -> None:
        self.name = name
        self.scalar = scalar
        self.length = length
        self.alignment = alignment
        size = scalar.itemsize * length
        itemsize = (size + alignment - 1) // alignment * alignment
        self.dtype = np.dtype(
            {
                "names": list(_FIELDS[:length]),
                "formats": [scalar] * length,
                "offsets": [scalar.itemsize * k for k in range(length)],
                "itemsize": itemsize,
            }
        )

    @property
    def field_names(self) -> tuple[str, ...]:
        """``("x", "y", ...)``, one per component."""
        return _FIELDS[: self.length]

    def __repr__(self) -> str:
        return f"<CUDA vector type {self.name}: {self.length} x {self.scalar}, aligned to {self.alignment}>"

    def __reduce__(self):
        return (vector_type, (self.name,))


def _vector_table() -> dict[str, CudaVectorType]:
    table = {}
    for base, (code, aligns) in _VECTOR_BASES.items():
        scalar = np.dtype(code)
        for n, align in ((1, aligns[0]), (2, aligns[1]), (3, scalar.itemsize), (4, aligns[2])):
            table[f"{base}{n}"] = CudaVectorType(f"{base}{n}", scalar, n, align)
    for name in ("half2", "__half2"):
        table[name] = CudaVectorType(name, np.dtype("f2"), 2, 4)
    return table


VECTOR_TYPES: dict[str, CudaVectorType] = _vector_table()


def vector_type(name: str) -> CudaVectorType:
    """The :class:`CudaVectorType` of a CUDA vector type name (``KeyError`` if it is none)."""
    return VECTOR_TYPES[name]


# ------------------------------------------------------------------ aliases

#: Names nvcc accepts through the system headers it includes (sys/types.h).
SYSTEM_ALIASES = {"uint": "unsigned int", "ushort": "unsigned short", "ulong": "unsigned long"}

_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_CONTINUATION = re.compile(r"\\\r?\n")
_TYPEDEF = re.compile(r"\btypedef\s+([^;{}()\[\]=]+?)\s*\b([A-Za-z_]\w*)\s*;")
_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([^;{}()\[\]]+?)\s*;")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*([^\n]*)$", re.M)
_TYPE_TEXT = re.compile(r"^[\w\s:*<>,]+$")
_STRUCT_DEF = re.compile(
    r"\b(?:struct|class)\s+(?:__align__\s*\(\s*\d+\s*\)\s*|alignas\s*\(\s*\d+\s*\)\s*)?([A-Za-z_]\w*)\s*(?::[^{;]*)?\{"
)
_TYPEDEF_STRUCT = re.compile(r"\btypedef\s+struct\s*(?:[A-Za-z_]\w*)?\s*\{")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_TEXTURES = re.compile(r"\b(texture|surface|cudaTextureObject_t|cudaSurfaceObject_t)\b")


def _clean(text: str) -> str:
    return _COMMENTS.sub(" ", _CONTINUATION.sub(" ", text))


def _template_alias(text: str, at: int) -> bool:
    """``template <...> using X = ...``: an alias template, which is not a plain type name."""
    return re.search(r">\s*$", text[max(0, at - 200) : at]) is not None


def option_macros(options: Iterable[str]) -> dict[str, str]:
    """The object-like macros of ``-DNAME=value`` / ``-D NAME=value`` options (``-DNAME`` is 1)."""
    out: dict[str, str] = {}
    opts = list(options)
    k = 0
    while k < len(opts):
        o = opts[k]
        text = None
        for prefix in ("--define-macro=", "-define-macro=", "-D"):
            if o.startswith(prefix) and len(o) > len(prefix):
                text = o[len(prefix) :]
                break
        if text is None and o in ("-D", "--define-macro", "-define-macro") and k + 1 < len(opts):
            text = opts[k + 1]
            k += 1
        k += 1
        if text is None:
            continue
        name, _, value = text.partition("=")
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            out[name] = value.strip() if "=" in text else "1"
    return out


def collect_aliases(texts: Iterable[str], options: Iterable[str] = ()) -> dict[str, str]:
    """Name -> replacement text of every type alias and object-like macro of ``texts`` (the
    headers first, the source last) and ``options``, on top of the system names. Aliases are
    expanded through each other."""
    aliases = dict(SYSTEM_ALIASES)
    aliases.update(option_macros(options))
    for raw in texts:
        text = _clean(raw)
        if "typedef" in text:
            for m in _TYPEDEF.finditer(text):
                target, name = " ".join(m.group(1).split()), m.group(2)
                if target.startswith(("struct ", "class ", "union ", "enum ")):
                    target = target.split(None, 1)[1]
                if target != name and _TYPE_TEXT.match(target):
                    aliases[name] = target
        if "using" in text:
            for m in _USING.finditer(text):
                if not _template_alias(text, m.start()) and _TYPE_TEXT.match(m.group(2)):
                    aliases[m.group(1)] = " ".join(m.group(2).split())
        if "define" in text:
            for m in _DEFINE.finditer(text):
                value = " ".join(m.group(2).split())
                if value and _TYPE_TEXT.match(value) and value != m.group(1):
                    aliases[m.group(1)] = value
    # Expand aliases through each other (a bounded number of rounds: a cycle stays as it is).
    for _ in range(8):
        changed = False
        for name, value in aliases.items():
            new = _substitute(value, aliases, skip=name)
            if new != value:
                aliases[name] = new
                changed = True
        if not changed:
            break
    return aliases


def collect_macros(texts: Iterable[str], options: Iterable[str] = ()) -> dict[str, str]:
    """Every object-like macro of ``texts`` and ``options`` (name -> replacement text), for
    constant expressions such as array extents."""
    macros = option_macros(options)
    for raw in texts:
        text = _clean(raw)
        if "define" in text:
            for m in _DEFINE.finditer(text):
                macros[m.group(1)] = " ".join(m.group(2).split())
    return macros


def _substitute(text: str, aliases: dict[str, str], skip: str | None = None) -> str:
    def repl(m):
        word = m.group(0)
        if word == skip:
            return word
        return aliases.get(word, word)

    return _IDENT.sub(repl, text)


def struct_names_in(texts: Iterable[str]) -> list[str]:
    """The names of the structs (and classes) the texts define, in order of appearance."""
    names: dict[str, None] = {}
    for raw in texts:
        text = _clean(raw)
        if "struct" not in text and "class" not in text:
            continue
        for m in _STRUCT_DEF.finditer(text):
            if not _template_alias(text, m.start()):
                names[m.group(1)] = None
        for m in _TYPEDEF_STRUCT.finditer(text):
            depth, i = 0, m.end() - 1
            while i < len(text):
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            after = re.match(r"\s*([A-Za-z_]\w*)\s*;", text[i + 1 :])
            if after:
                names[after.group(1)] = None
    return list(names)


def resolve_type_names(source: str, headers: Iterable[str] = (), options: Iterable[str] = ()) -> tuple[str, list[str]]:
    """(the source with its type aliases and macros replaced, for the signature parser; the
    struct names the parser may see: the vector types used and the structs defined)."""
    texts = [*headers, source]
    aliases = collect_aliases(texts, options)
    rewritten = _substitute(source, {k: v for k, v in aliases.items() if k not in SYSTEM_ALIASES or k in source})
    used = set(_IDENT.findall(rewritten))
    names = [n for n in VECTOR_TYPES if n in used]
    names += [n for n in struct_names_in(texts) if n not in VECTOR_TYPES]
    return rewritten, names


def texture_use(source: str) -> str | None:
    """The texture or surface construct a source uses (``texture``, ``cudaTextureObject_t``, ...), or None."""
    m = _TEXTURES.search(_clean(source))
    return m.group(1) if m else None
