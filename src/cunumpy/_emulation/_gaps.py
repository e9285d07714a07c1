"""One kernel's gap never sinks its neighbours.

A CUDA file may hold a function the CPU emulation cannot build (a texture fetch, a device-side
runtime call, an intrinsic it lacks) beside kernels it can. When the build of a library fails
on an error inside another top-level function of the source than the kernel launched, the
library is built again without that function (its lines left blank, so every other line keeps
its number), and without every function whose build then fails because it used it; a warning
names what was left out, once per function and source. An error in the launched kernel itself
(or in a function it cannot do without) is reported as before; a texture or surface in it is a
``NotImplementedError`` naming the construct and its line.
"""

from __future__ import annotations

import re
import threading
import warnings

_TEXTURE = re.compile(
    r"\b(texture\s*<|surface\s*<|cudaTextureObject_t|cudaSurfaceObject_t|tex[123]D\w*|tex1Dfetch|surf[123]D\w*)"
)
_TRANSPARENT = re.compile(r'(?:\bnamespace\b[\w\s:]*|\bextern\s*"[^"]*"\s*)$')
_NOT_FUNCTION = re.compile(r"\b(?:struct|class|union|enum)\b")
_ATTRIBUTE_CALLS = frozenset(("__launch_bounds__", "__align__", "__attribute__", "alignas", "decltype", "__declspec"))
_CALL = re.compile(r"([A-Za-z_]\w*)\s*\(")

_warned: set = set()
_warned_lock = threading.Lock()


def _blank_literals(text: str) -> str:
    """Comments, string and character literals replaced by spaces (newlines kept): offsets and
    line numbers stay those of ``text``."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def top_level_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, start offset, end offset) of each function defined at file scope (or in a
    namespace or ``extern "C"`` block), its template header included."""
    text = _blank_literals(source)
    # Preprocessor lines are boundaries and hold no braces of their own.
    text = re.sub(r"(?m)^[ \t]*#[^\n]*", lambda m: " " * len(m.group(0)), text)
    found = []
    depth = 0
    boundary = 0
    transparent: list[int] = []  # depths of namespace / extern "C" braces (not counted)
    i = 0
    n = len(text)
    open_at = -1
    while i < n:
        c = text[i]
        if c == "{":
            header = text[boundary:i]
            if depth == 0 and _TRANSPARENT.search(header.strip()):
                transparent.append(0)
                boundary = i + 1
            else:
                if depth == 0:
                    open_at = i
                depth += 1
        elif c == "}":
            if depth == 0 and transparent:
                transparent.pop()
                boundary = i + 1
            elif depth > 0:
                depth -= 1
                if depth == 0:
                    header = text[boundary:open_at]
                    end = i + 1
                    if (
                        "(" in header
                        and not _NOT_FUNCTION.search(header.split("(", 1)[0])
                        and "=" not in header.split("(", 1)[0]
                    ):
                        names = [m.group(1) for m in _CALL.finditer(header) if m.group(1) not in _ATTRIBUTE_CALLS]
                        if names:
                            start = boundary + (len(header) - len(header.lstrip()))
                            found.append((names[-1] if "operator" not in header else "operator", start, end))
                    boundary = end
        elif c == ";" and depth == 0:
            boundary = i + 1
        i += 1
    # A function's name is the identifier before its parameter list: the first call-like name
    # after the return type (the last one would be a call in a default argument).
    out = []
    for _name, start, end in found:
        header = text[start : text.find("{", start)]
        calls = [m for m in _CALL.finditer(header) if m.group(1) not in _ATTRIBUTE_CALLS]
        out.append((calls[0].group(1) if calls else _name, start, end))
    return out


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def errors_in(output: str, file_name: str) -> list[tuple[int, str]]:
    """(line, message) of each compiler error located in the source file ``file_name``."""
    pattern = re.compile(r"^" + re.escape(file_name) + r":(\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(.*)$", re.M)
    return [(int(m.group(1)), m.group(2).strip()) for m in pattern.finditer(output)]


def texture_in(text: str) -> tuple[str, int] | None:
    """(construct, line) of the first texture or surface construct in ``text``."""
    m = _TEXTURE.search(_blank_literals(text))
    if m is None:
        return None
    return m.group(1).rstrip("<").strip(), _line_of(text, m.start())


def leave_out(source: str, errors: list[tuple[int, str]], keep: str) -> tuple[str, list[tuple[str, int, str]]] | None:
    """The source with the functions holding ``errors`` blanked out, and (name, line, first
    error) of each; None when an error is outside any function or inside ``keep`` (the
    kernel launched), whose own gap must be reported."""
    functions = top_level_functions(source)
    spans = [(name, _line_of(source, s), _line_of(source, e), s, e) for name, s, e in functions]
    chosen: dict = {}
    for line, message in errors:
        hit = next((sp for sp in spans if sp[1] <= line <= sp[2]), None)
        if hit is None or hit[0] == keep:
            return None
        chosen.setdefault(hit[3], (hit, line, message))
    if not chosen:
        return None
    out = source
    dropped = []
    for start in sorted(chosen, reverse=True):
        (name, l0, _l1, s, e), line, message = chosen[start]
        texture = texture_in(source[s:e])
        if texture is not None:
            line = l0 + texture[1] - 1
            message = f"{texture[0]} (textures and surfaces are not emulated)"
        out = out[:s] + "".join("\n" if ch == "\n" else " " for ch in out[s:e]) + out[e:]
        dropped.append((name, line, message))
    return out, dropped[::-1]


def warn_left_out(kernel_name: str, source: str, dropped) -> None:
    """Warn once per source and function left out."""
    for name, line, message in dropped:
        key = (hash(source), name)
        with _warned_lock:
            if key in _warned:
                continue
            _warned.add(key)
        warnings.warn(
            f"CPU emulation of kernel '{kernel_name}': function '{name}' of the source cannot be built for "
            f"emulation (line {line}: {message}); the library is built without it, so kernels that need it "
            "cannot be emulated",
            RuntimeWarning,
            stacklevel=4,
        )
