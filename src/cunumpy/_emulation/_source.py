"""The translation unit of an emulated kernel: source rewrites and entry stubs.

Two CUDA constructs cannot be expressed by the prelude and are rewritten in the kernel's
source text (outside comments and string literals):

* ``extern __shared__ T name[];`` becomes, inside a function, a local ``T* const name``
  pointing at the current block's dynamic shared memory; at file scope, an object that
  converts to that pointer wherever it is used;
* inline PTX (``asm(...)``, ``asm volatile(...)``, ``__asm__ ...``) becomes a trap, so a
  kernel that uses it compiles and fails only if the PTX is reached.

The stubs call the kernel through its name expression (``k`` or ``k<double, 3>``), with the
parameter types deduced from the function itself, so they never spell a C type.
"""

from __future__ import annotations

import re

__all__ = ["entry_points", "rewrite_source", "translation_unit"]

_IDENT = r"[A-Za-z_]\w*"
_EXTERN_SHARED = re.compile(
    r"\bextern\s+__shared__\s+((?:__align__\s*\(\s*\d+\s*\)\s*)?(?:[^;\[\]{}()]|\([^()]*\))+?)\s*"
    rf"\b({_IDENT})\s*\[\s*\]\s*;"
)
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s*(?:volatile|__volatile__|__volatile|goto|inline))*\s*\(")
_ALIGN = re.compile(r"__align__\s*\(\s*\d+\s*\)")
PTX_MESSAGE = "inline PTX (asm) cannot run under CPU emulation"


def _code_mask(text: str) -> list[tuple[int, int]]:
    """Spans of comments, string and character literals (rewrites skip them)."""
    spans = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            spans.append((i, j))
            i = j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            spans.append((i, j))
            i = j
        elif c in "\"'":
            if c == '"' and i > 0 and text[i - 1] == "R":
                m = re.compile(r'R"([^(\s]{0,16})\(').match(text, i - 1)
                if m:
                    end = text.find(")" + m.group(1) + '"', m.end())
                    j = n if end < 0 else end + len(m.group(1)) + 2
                    spans.append((i, j))
                    i = j
                    continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            spans.append((i, j))
            i = j
        else:
            i += 1
    return spans


def _inside(spans, pos: int) -> bool:
    lo, hi = 0, len(spans)
    while lo < hi:
        mid = (lo + hi) // 2
        if spans[mid][1] <= pos:
            lo = mid + 1
        else:
            hi = mid
    return lo < len(spans) and spans[lo][0] <= pos < spans[lo][1]


def _brace_depth(text: str, spans, pos: int) -> int:
    depth = 0
    k = 0
    for i in range(pos):
        while k < len(spans) and spans[k][1] <= i:
            k += 1
        if k < len(spans) and spans[k][0] <= i < spans[k][1]:
            continue
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
    return depth


def _closing_paren(text: str, spans, open_pos: int) -> int:
    depth = 0
    for i in range(open_pos, len(text)):
        if _inside(spans, i):
            continue
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def rewrite_source(source: str) -> str:
    """The source with ``extern __shared__`` arrays and inline PTX rewritten (see module doc)."""
    if "__shared__" not in source and "asm" not in source:
        return source
    out = source
    # Inline PTX first, from the end so earlier positions stay valid.
    spans = _code_mask(out)
    for m in reversed(list(_ASM.finditer(out))):
        if _inside(spans, m.start()):
            continue
        end = _closing_paren(out, spans, m.end() - 1)
        if end < 0:
            continue
        out = out[: m.start()] + f'cunumpy_emu_inline_ptx("{PTX_MESSAGE}")' + out[end + 1 :]
    spans = _code_mask(out)
    for m in reversed(list(_EXTERN_SHARED.finditer(out))):
        if _inside(spans, m.start()):
            continue
        ctype = _ALIGN.sub(" ", m.group(1)).strip()
        name = m.group(2)
        if _brace_depth(out, spans, m.start()) > 0:
            text = f"{ctype}* const {name} = static_cast<{ctype}*>(cunumpy_emu_dynamic_shared());"
        else:
            text = f"static const cunumpy_emu_extern_shared<{ctype}> {name};"
        out = out[: m.start()] + text + out[m.end() :]
    return out


# What the prelude does not provide: the trap of rewritten inline PTX and the file-scope
# form of an ``extern __shared__`` array.
_SUPPORT = r"""
static inline int cunumpy_emu_inline_ptx(const char *message)
{
    cunumpy_emu_trap(message);
}

template <typename T> struct cunumpy_emu_extern_shared {
    operator T *() const { return static_cast<T *>(cunumpy_emu_dynamic_shared()); }
    template <typename U> explicit operator U *() const { return static_cast<U *>(cunumpy_emu_dynamic_shared()); }
    template <typename I> T &operator[](I i) const { return static_cast<T *>(cunumpy_emu_dynamic_shared())[i]; }
};
"""


def _line_directive(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    return f'#line 1 "{safe}.cu"\n'


def entry_points(source: str, expression: str) -> list[str]:
    """The kernels a library of ``source`` exports, in order: every non-template ``__global__``
    function of the source (so kernels sharing a source share one library), then
    ``expression`` if it is not among them (a template instance)."""
    from ..cuda._source import cuda_kernel_names
    from ..kernels._cuda_kernel import _is_template

    names = [n for n in cuda_kernel_names(source) if not _is_template(source, n)]
    if expression not in names:
        names.append(expression)
    return names


def translation_unit(source: str, entries, file_name: str) -> str:
    """Prelude, rewritten source and the stubs of each entry ``k``: ``cunumpy_emu_thread_<k>``
    and ``cunumpy_emu_block_<k>`` (k is the entry's index)."""
    body = rewrite_source(source)
    stubs = ['#line 1 "cunumpy-emulation-stubs"']
    for k, expression in enumerate(entries):
        stubs.append(f"CUNUMPY_EMU_EXPORT_KERNEL({k}, {expression})")
    return (
        "#include <cunumpy_emu/prelude.h>\n"
        + _SUPPORT
        + _line_directive(file_name)
        + body
        + ("\n" if not body.endswith("\n") else "")
        + "\n".join(stubs)
        + "\n"
    )
