"""The translation unit of an emulated kernel: source rewrites and entry stubs.

Two CUDA constructs cannot be expressed by the prelude and are rewritten in the
*preprocessed* translation unit (outside string literals), in every part that comes from
the kernel's source or a user header (the prelude, cunumpy's shipped headers and the
compiler's system headers are left alone): so a header, or a macro, that declares
``extern __shared__`` or uses inline PTX is rewritten too.

* ``extern __shared__ T name[];`` becomes, inside a function, a local ``T* const name``
  pointing at the current block's dynamic shared memory; at file scope, an object that
  converts to that pointer wherever it is used;
* inline PTX (``asm(...)``, ``asm volatile(...)``, ``__asm__ ...``) becomes a trap, so a
  kernel that uses it compiles and fails only if the PTX is reached.

The stubs call the kernel through its name expression (``k`` or ``k<double, 3>``), with the
parameter types deduced from the function itself, so they never spell a C type.

Rewrites keep the number of lines, so the line markers of the preprocessed text still
point compiler errors at the user's file and line.
"""

from __future__ import annotations

import re

from ..cuda._source import _matching_bracket

__all__ = ["RewriteFindings", "entry_points", "rewrite_preprocessed", "rewrite_source", "translation_unit"]

_IDENT = r"[A-Za-z_]\w*"
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s*(?:volatile|__volatile__|__volatile|goto|inline))*\s*\(")
_ALIGN = re.compile(r"__align__\s*\(\s*\d+\s*\)")
PTX_MESSAGE = "inline PTX (asm) cannot run under CPU emulation"
#: The pseudo-file name of the entry stubs in the translation unit.
STUBS_FILE = "cunumpy-emulation-stubs"


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


# ``extern __shared__`` after the prelude's ``#define __shared__ static thread_local``: the
# expansion ``extern static thread_local`` is never valid C++, so it can only come from it.
_EXPANDED_EXTERN_SHARED = re.compile(r"\bextern\s+static\s+thread_local\b")
_DECLARED_ARRAY = re.compile(rf"^(.*?)\b({_IDENT})\s*\[\s*\]\s*$", re.S)
_ATTRIBUTE = re.compile(r"\b(?:__attribute__|alignas)\s*\(")


def _without_attributes(text: str) -> str:
    """``text`` without ``__attribute__((...))``, ``alignas(...)`` and ``__align__(n)``."""
    text = _ALIGN.sub(" ", text)
    while True:
        m = _ATTRIBUTE.search(text)
        if m is None:
            return text
        end = _matching_bracket(text, m.end() - 1)
        if end < 0:
            return text
        text = text[: m.start()] + " " + text[end + 1 :]


# A brace opening a namespace, a class, an enum or an ``extern "C"`` block: what it holds is not
# in a function. Any other brace opens a function body or a block inside one.
_NON_FUNCTION_BRACE = re.compile(
    r'(?:\bnamespace\b[\w\s:]*|\b(?:struct|class|union|enum)\b[^;{}()=]*|\bextern\s*"[^"]*"\s*)$'
)
FUNCTION, OTHER = "f", "n"


def _brace_events(text: str, spans) -> list[tuple[int, str]]:
    """(position, kind) of every brace outside comments and literals: kind ``f``/``n`` for an
    opening brace (see ``_NON_FUNCTION_BRACE``), ``}`` for a closing one."""
    events = []
    k = 0
    for i, c in enumerate(text):
        if c not in "{}":
            continue
        while k < len(spans) and spans[k][1] <= i:
            k += 1
        if k < len(spans) and spans[k][0] <= i < spans[k][1]:
            continue
        if c == "}":
            events.append((i, "}"))
        else:
            before = text[max(0, i - 400) : i].rstrip()
            events.append((i, OTHER if _NON_FUNCTION_BRACE.search(before) else FUNCTION))
    return events


def _braces_after(stack, events, upto: int | None = None) -> list:
    """The stack of open brace kinds after the events before ``upto`` (all if None)."""
    stack = list(stack)
    for pos, kind in events:
        if upto is not None and pos >= upto:
            break
        if kind == "}":
            if stack:
                stack.pop()
        else:
            stack.append(kind)
    return stack


def _same_lines(replacement: str, replaced: str) -> str:
    """``replacement`` followed by as many newlines as ``replaced`` held (line numbers of the
    rest of the file stay right)."""
    return replacement + "\n" * replaced.count("\n")


def _statement_end(text: str, spans, start: int) -> int:
    """Index of the ``;`` ending the statement that starts at ``start`` (len(text) if none)."""
    i = start
    while i < len(text) and (text[i] != ";" or _inside(spans, i)):
        i += 1
    return i


def _split_declarators(decl: str) -> list[str]:
    """``decl`` split at the commas between declarators (not inside brackets or template
    arguments; ``<`` counts as a bracket only outside ``[]`` and ``()``)."""
    parts, depth, angle, start = [], 0, 0, 0
    for i, c in enumerate(decl):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "<" and depth == 0:
            angle += 1
        elif c == ">" and depth == 0 and angle > 0:
            angle -= 1
        elif c == "," and depth == 0 and angle == 0:
            parts.append(decl[start:i])
            start = i + 1
    parts.append(decl[start:])
    return parts


_WORD = re.compile(_IDENT)
_NOT_NAMES = frozenset(
    "const volatile unsigned signed int long short char float double bool void auto typename struct "  # noqa: SIM905  a list of words reads best as words
    "class union enum static thread_local".split()
)


def _declared_names(decl: str) -> list[str] | None:
    """The names a declaration such as ``volatile float a[32], b[4]`` declares, or None when it
    is not of that simple form (the rewrite then leaves it alone)."""
    names = []
    for part in _split_declarators(_without_attributes(decl)):
        head = part.split("[", 1)[0].split("=", 1)[0]
        if "(" in head:
            return None  # function pointers and the like
        words = _WORD.findall(head)
        if not words or words[-1] in _NOT_NAMES:
            return None
        names.append(words[-1])
    return names or None


def _static_shared(decl: str, k: int) -> str | None:
    """The replacement of a function-scope ``__shared__`` declaration ``decl`` (without its
    storage class): a local struct holding the declaration, placed in the block's shared arena
    by the runtime (see the prelude's shared_register), and a reference per declared name."""
    names = _declared_names(decl)
    if names is None:
        return None
    s = f"cunumpy_emu_shared_{k}"
    if len(names) == 1:
        itemsize = f"sizeof(::std::remove_all_extents_t<decltype({s}::{names[0]})>)"
    else:
        itemsize = "1"
    refs = " ".join(f"auto &{n} = {s}_ref.{n};" for n in names)
    return (
        f"struct {s} {{ {decl.strip()}; }}; "
        f"static const ::std::size_t {s}_offset = ::cunumpy_emu::shared_register(sizeof({s}), alignof({s}), "
        f'{itemsize}, "{", ".join(names)}"); '
        f"{s} &{s}_ref = ::cunumpy_emu::shared_at<{s}>({s}_offset); {refs}"
    )


class RewriteFindings:
    """What the rewrites of one translation unit found: the names of its ``extern __shared__``
    arrays (for memcheck reports), a counter for the unique names of the rewritten
    ``__shared__`` declarations, and the calls of a ``__global__`` function from a function
    body (``(kernel, file, line)``: valid for the emulation, not for nvcc)."""

    __slots__ = ("extern_shared", "kernel_calls", "shared_count")

    def __init__(self):
        self.extern_shared: list[str] = []
        self.shared_count = 0
        self.kernel_calls: list[tuple[str, str, int]] = []


def _rewrite(
    text: str, extern_shared, static_shared, stack=(), found: RewriteFindings | None = None, asm: bool = True
) -> str:
    """Rewrite inline PTX, the ``extern __shared__`` declarations found by the pattern
    ``extern_shared`` (its match ends where the element type starts) and the function-scope
    ``__shared__`` declarations found by ``static_shared`` in ``text``, whose first character
    lies inside the open braces ``stack`` (kinds, see ``_brace_events``)."""
    found = found if found is not None else RewriteFindings()
    out = text
    # Inline PTX first, from the end so earlier positions stay valid.
    spans = _code_mask(out)
    for m in reversed(list(_ASM.finditer(out)) if asm else []):
        if _inside(spans, m.start()):
            continue
        end = _matching_bracket(out, m.end() - 1, lambda i: _inside(spans, i))
        if end < 0:
            continue
        trap = f'cunumpy_emu_inline_ptx("{PTX_MESSAGE}")'
        out = out[: m.start()] + _same_lines(trap, out[m.start() : end + 1]) + out[end + 1 :]
    spans = _code_mask(out)
    events = _brace_events(out, spans)
    for m in reversed(list(extern_shared.finditer(out))):
        if _inside(spans, m.start()):
            continue
        semicolon = _statement_end(out, spans, m.end())
        declared = _DECLARED_ARRAY.match(_without_attributes(out[m.end() : semicolon]))
        if semicolon >= len(out) or declared is None:
            continue  # not an unsized array: left for the compiler to reject
        ctype = " ".join(declared.group(1).split())
        name = declared.group(2)
        if not ctype:
            continue
        if name not in found.extern_shared:
            found.extern_shared.insert(0, name)
        scope = _braces_after(stack, events, m.start())
        if scope and scope[-1] == FUNCTION:
            text = f"{ctype}* const {name} = static_cast<{ctype}*>(cunumpy_emu_dynamic_shared());"
        else:
            text = f"static const cunumpy_emu_extern_shared<{ctype}> {name};"
        out = out[: m.start()] + _same_lines(text, out[m.start() : semicolon + 1]) + out[semicolon + 1 :]
    if static_shared is None:
        return out
    spans = _code_mask(out)
    events = _brace_events(out, spans)
    matches = [m for m in static_shared.finditer(out) if not _inside(spans, m.start())]
    for m in reversed(matches):
        scope = _braces_after(stack, events, m.start())
        if not scope or scope[-1] != FUNCTION:
            continue  # file scope: stays a thread_local
        semicolon = _statement_end(out, spans, m.end())
        if semicolon >= len(out):
            continue
        found.shared_count += 1
        declaration = _static_shared(out[m.end() : semicolon], found.shared_count)
        if declaration is None:
            continue
        out = out[: m.start()] + _same_lines(declaration, out[m.start() : semicolon + 1]) + out[semicolon + 1 :]
    return out


_SOURCE_EXTERN_SHARED = re.compile(r"\bextern\s+__shared__\b")
_SOURCE_STATIC_SHARED = re.compile(r"(?<![\w])(?:static\s+)?__shared__\b")


def rewrite_source(source: str, found: RewriteFindings | None = None) -> str:
    """The (unpreprocessed) source with ``extern __shared__`` arrays, function-scope
    ``__shared__`` declarations and inline PTX rewritten; the emulation build uses
    ``rewrite_preprocessed``, which also covers headers and macros."""
    if "__shared__" not in source and "asm" not in source:
        return source
    return _rewrite(source, _SOURCE_EXTERN_SHARED, _SOURCE_STATIC_SHARED, (), found)


# A line marker of the preprocessor: ``# line "file" flags`` (flag 3: a system header).
_LINE_MARKER = re.compile(r'^#\s*\d+\s+"((?:[^"\\]|\\.)*)"([ \t\d]*)$', re.M)


def _marker_file(quoted: str) -> str:
    return re.sub(r"\\(.)", r"\1", quoted)


def _user_file_rule(clean_dirs=(), clean_files=()):
    """``owned(name, flags)``: whether a line marker's file is the user's. Not a system header
    (line marker flag 3), not under one of ``clean_dirs`` (the prelude, the shipped headers),
    not one of ``clean_files`` and not a pseudo-file such as ``<command-line>``."""
    clean_dirs = tuple(str(d).rstrip("/") + "/" for d in clean_dirs)
    clean_files = set(map(str, clean_files))

    def owned(name: str, flags: str) -> bool:
        return not ("3" in flags.split() or name.startswith("<") or name in clean_files or name.startswith(clean_dirs))

    return owned


def user_files(text: str, clean_dirs=(), clean_files=()) -> list[str]:
    """The files of the user that the preprocessed ``text`` came from (those
    ``rewrite_preprocessed`` rewrites): every header it read, however it was named
    (``#include MACRO`` too), so a build can be checked against their contents later."""
    owned = _user_file_rule(clean_dirs, clean_files)
    found: dict[str, None] = {}  # a set in the order the files were read
    for m in _LINE_MARKER.finditer(text):
        name = _marker_file(m.group(1))
        if owned(name, m.group(2)):
            found[name] = None
    return list(found)


def rewrite_preprocessed(
    text: str, clean_dirs=(), clean_files=(), found: RewriteFindings | None = None, shared_dirs=()
) -> str:
    """The preprocessed translation unit ``text`` with inline PTX, ``extern __shared__`` and
    function-scope ``__shared__`` declarations rewritten in every part that comes from a file
    of the user (see ``_user_file_rule``); in the parts from ``shared_dirs`` (cunumpy's own
    headers) the function-scope ``__shared__`` declarations only. ``found`` collects what was
    rewritten."""
    found = found if found is not None else RewriteFindings()
    owned = _user_file_rule(clean_dirs, clean_files)
    shared_dirs = tuple(str(d).rstrip("/") + "/" for d in shared_dirs)
    pieces = []
    braces_of: dict[str, list] = {}  # the braces open in each user file, across its pieces
    pos = 0
    name, kind = "", None
    for m in _LINE_MARKER.finditer(text):
        pieces.append(_rewrite_piece(text[pos : m.start()], name, kind, braces_of, found))
        pieces.append(m.group(0))
        name = _marker_file(m.group(1))
        kind = "user" if owned(name, m.group(2)) else ("shared" if name.startswith(shared_dirs) else None)
        pos = m.end()
    pieces.append(_rewrite_piece(text[pos:], name, kind, braces_of, found))
    return "".join(pieces)


# ``__shared__`` after the prelude's ``#define __shared__ static thread_local`` (``static
# __shared__`` gives ``static static thread_local``; the extern ones are rewritten first).
_EXPANDED_STATIC_SHARED = re.compile(r"(?<![\w])(?:static\s+)?static\s+thread_local\b")


_NOTHING = re.compile(r"(?!)")


def _rewrite_piece(piece: str, name: str, kind, braces_of: dict, found: RewriteFindings) -> str:
    """``kind``: "user" (every rewrite), "shared" (function-scope ``__shared__`` only) or None."""
    if kind is None or ("asm" not in piece and "thread_local" not in piece and "{" not in piece and "}" not in piece):
        return piece
    stack = braces_of.get(name, [])
    if kind == "user" and ("asm" in piece or "thread_local" in piece):
        piece = _rewrite(piece, _EXPANDED_EXTERN_SHARED, _EXPANDED_STATIC_SHARED, stack, found)
    elif kind == "shared" and "thread_local" in piece:
        piece = _rewrite_shared_only(piece, stack, found)
    braces_of[name] = _braces_after(stack, _brace_events(piece, _code_mask(piece)))
    return piece


def _rewrite_shared_only(piece: str, stack, found: RewriteFindings) -> str:
    """The function-scope ``__shared__`` declarations of a cunumpy header, into the arena."""
    return _rewrite(piece, _NOTHING, _EXPANDED_STATIC_SHARED, stack, found, asm=False)


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


# Kernel names that collide with what the prelude's C++ headers declare but that CUDA device
# code does not have (NVRTC compiles a kernel called `exit`): the translation unit renames them
# with a macro after the prelude, consistently in the source and the stubs.
_RENAMED = frozenset(
    "exit abort atexit quick_exit at_quick_exit getenv system rand srand time puts putchar getchar perror "  # noqa: SIM905  a list of words reads best as words
    "remove rename tmpfile fopen fclose fflush fprintf sprintf snprintf scanf fscanf sscanf qsort bsearch "
    "atoi atol atof strtol strtoul strtod div ldiv labs abs_ signal raise".split()
)
# Names no kernel can have, on a GPU either: CUDA built-ins and device functions, the C++
# namespace std, main, the emulation's own prefix.
_REFUSED = frozenset(
    "std main printf malloc free memcpy memset assert clock clock64 min max abs fabs sqrt rsqrt cbrt exp exp2 exp10 "  # noqa: SIM905  a list of words reads best as words
    "expm1 log log2 log10 log1p pow sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh erf erfc "
    "tgamma lgamma floor ceil trunc round rint nearbyint fmod remainder fma fmin fmax hypot ldexp frexp modf "
    "copysign isnan isinf isfinite signbit sincos sinpi cospi "
    "atomicAdd atomicSub atomicExch atomicMin atomicMax atomicInc atomicDec atomicCAS atomicAnd atomicOr atomicXor "
    "__syncthreads __syncwarp __shfl_sync __shfl_up_sync __shfl_down_sync __shfl_xor_sync __ballot_sync "
    "__any_sync __all_sync __activemask __threadfence __trap __ldg threadIdx blockIdx blockDim gridDim warpSize "
    "dim3 make_float2 make_float3 make_float4 make_int2 make_int3 make_int4 make_double2".split()
)


def check_kernel_name(name: str) -> None:
    """ValueError, before any compilation, for a kernel whose name no CUDA compiler accepts."""
    base = name.split("<", 1)[0].strip().split("::")[-1]
    if base in _REFUSED or base.startswith("cunumpy_emu"):
        raise ValueError(
            f"kernel '{name}': the name {base!r} is taken by a CUDA built-in, a device function of the C++ "
            "library or the emulation itself, so neither nvcc nor the CPU emulation can compile a kernel of "
            "that name: rename the kernel"
        )


def translation_unit(source: str, entries, file_name: str, global_names=()) -> str:
    """Prelude, source and the stubs of each entry ``k``: ``cunumpy_emu_thread_<k>``
    and ``cunumpy_emu_block_<k>`` (k is the entry's index); one accessor per name of
    ``global_names`` (the source's ``__constant__``/``__device__`` variables)."""
    for expression in entries:
        check_kernel_name(expression)
    body = source  # rewritten after preprocessing (rewrite_preprocessed), headers included
    renames = sorted({e.split("<", 1)[0].strip() for e in entries} & _RENAMED)
    defines = "".join(f"#define {n} cunumpy_emu_kernel_{n}\n" for n in renames)
    stubs = [f'#line 1 "{STUBS_FILE}"']
    for k, expression in enumerate(entries):
        stubs.append(f"CUNUMPY_EMU_EXPORT_KERNEL({k}, {expression})")
    if global_names:
        from ._globals import accessor_source

        stubs.append(accessor_source(global_names))
    return (
        "#include <cunumpy_emu/prelude.h>\n"
        + _SUPPORT
        + defines
        + _line_directive(file_name)
        + body
        + ("\n" if not body.endswith("\n") else "")
        + "\n".join(stubs)
        + "\n"
    )


# ------------------------------------------------------------------ copies of entry kernels
#
# In loop mode the runtime calls a block function that runs every thread of a block as a loop
# with the kernel inlined. If the kernel read threadIdx & co. through the library's
# thread-local worker, each CUDA thread would pay a thread-local lookup (a call of
# __tls_get_addr in a dlopen'ed library) and the loads behind it, which the compiler can
# neither hoist nor see through, so the loop could never run at memory speed. So beside the
# definition of each exported kernel the rewrite adds a copy of it that takes the built-ins as
# its first parameter and declares them as locals of the names the prelude's threadIdx, ...
# macros expand to; those locals hide the file-scope functions of the same names (which read
# the worker) in the copy's body, so the built-ins become values the compiler sees: the thread
# index is the loop variable. Both entry stubs call the copy (so the kernel's static locals
# exist once). The copy keeps the kernel's body verbatim under line markers naming the user's
# lines, so diagnostics, memcheck reports and debuggers point at the kernel.
#
# No copy is made (the stubs call the kernel, which reads the worker) when the body has a lambda
# that does not capture by default or a class of its own, and uses a built-in: a lambda or a
# member function cannot name the enclosing function's locals.

COPY_PREFIX = "cunumpy_emu_loop_"
_SHADOWED = ("cunumpy_emu_threadIdx", "cunumpy_emu_blockIdx", "cunumpy_emu_blockDim", "cunumpy_emu_gridDim")
_SHADOWED_USE = re.compile(r"\b(?:" + "|".join(_SHADOWED) + r")\b")
_COPY_LOCALS = (
    "[[maybe_unused]] const ::cunumpy_emu::builtin_value "
    + ", ".join(
        f"{name}{{cunumpy_emu_b_.{field}}}"
        for name, field in zip(_SHADOWED, ("thread_idx", "block_idx", "block_dim", "grid_dim"))
    )
    + ";"
)
_STUB_CALL = re.compile(r"\bcunumpy_emu::run_(thread|block)<&")
_MARKER_LINE = re.compile(r'^#\s*(\d+)\s+("(?:[^"\\]|\\.)*")[ \t\d]*$', re.M)
_QUALIFIED_BEFORE = re.compile(r"(?:::|\.|->|~|\boperator)\s*$")
_LOCAL_CLASS = re.compile(r"\b(?:struct|class|union)\b(?!\s+cunumpy_emu_shared_\d+\s*\{)[^;{}()=]*\{")
_FUNCTION_NAME = re.compile(r"\b(?:__func__|__FUNCTION__)\b")
_CHAR_PREFIX = re.compile(r"(?:^|[^\w])(?:u8|[LuU])$")


def _literal_end(text: str, i: int) -> int:
    """``text[i]`` starts a string or character literal (or is a digit separator): the index
    just past it."""
    c = text[i]
    if c == "'":
        before = text[max(0, i - 3) : i]
        if before and (before[-1].isalnum() or before[-1] == "_") and not _CHAR_PREFIX.search(before):
            return i + 1  # a digit separator (1'000), not a character literal
    elif i > 0 and text[i - 1] == "R":
        m = re.compile(r'"([^(\s]{0,16})\(').match(text, i)
        if m:
            end = text.find(")" + m.group(1) + '"', m.end())
            return len(text) if end < 0 else end + len(m.group(1)) + 2
    j = i + 1
    n = len(text)
    while j < n and text[j] != c and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, n)


_BRACES_AND_LITERALS = re.compile(r"[{}()\[\]\"']")


def _closing(text: str, open_pos: int) -> int:
    """Index of the bracket closing ``text[open_pos]``, passing over literals; -1 if none."""
    opening = text[open_pos]
    closing = {"{": "}", "(": ")", "[": "]"}[opening]
    depth = 0
    i = open_pos
    while True:
        m = _BRACES_AND_LITERALS.search(text, i)
        if m is None:
            return -1
        c = m.group(0)
        i = m.start()
        if c in "\"'":
            i = _literal_end(text, i)
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1


def _template_header(head: str) -> str | None:
    """The ``template <...>`` that starts a declaration's ``head`` ("" when none); None when it
    cannot be read."""
    text = "\n".join(line for line in head.splitlines() if not line.lstrip().startswith("#")).strip()
    if not text.startswith("template"):
        return ""
    start = text.find("<")
    if start < 0 or text[len("template") : start].strip():
        return None
    end = _angle_close(text, start + 1)
    return None if end < 0 else " ".join(text[: end + 1].split())


def _angle_close(text: str, i: int) -> int:
    """The index of the ``>`` that closes a template argument list whose ``<`` is just before
    ``text[i]``, passing over brackets (a ``<`` or ``>`` inside them is a comparison); -1 when
    it is not closed."""
    depth, parens = 1, 0
    for j in range(i, len(text)):
        c = text[j]
        if c in "([{":
            parens += 1
        elif c in ")]}":
            parens -= 1
        elif parens == 0 and c == "<":
            depth += 1
        elif parens == 0 and c == ">":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _lambda_needs_capture(body: str) -> bool:
    """Whether ``body`` has a lambda whose captures do not start with a default one (``[&]``,
    ``[=]``, ``[&, x]``): such a lambda could not use the copy's built-in locals. A ``[`` after
    a name, ``)`` or ``]`` is a subscript; any other (attributes, structured bindings) counts."""
    i = 0
    while True:
        m = _BRACES_AND_LITERALS.search(body, i)
        if m is None:
            return False
        i = m.start()
        c = m.group(0)
        if c in "\"'":
            i = _literal_end(body, i)
            continue
        if c == "[":
            before = body[max(0, i - 64) : i].rstrip()
            subscript = bool(before) and (before[-1].isalnum() or before[-1] in "_)]")
            if subscript and re.search(r"\breturn$", before):
                subscript = False
            if not subscript:
                end = _closing(body, i)
                if end < 0:
                    return True
                first = body[i + 1 : end].split(",")[0].strip()
                if first not in ("&", "="):
                    return True
        i += 1


class _Markers:
    """Line numbers of positions in a preprocessed text (from its line markers)."""

    def __init__(self, text: str):
        self.text = text
        self.marks = [(m.end(), int(m.group(1)), m.group(2)) for m in _MARKER_LINE.finditer(text)]
        self.starts = [end for end, _, _ in self.marks]

    def at(self, pos: int) -> tuple[int, str] | None:
        """(line, quoted file name) of ``pos``; None before the first marker."""
        import bisect

        k = bisect.bisect_right(self.starts, pos) - 1
        if k < 0:
            return None
        end, line, name = self.marks[k]
        if pos <= end:
            return None  # on the marker line itself
        return line + self.text.count("\n", end + 1, pos), name


def _stub_expressions(text: str) -> list[tuple[int, int, str]]:
    """(start, end, expression) of every ``run_thread<&EXPR>`` / ``run_block<&EXPR>`` of the
    stubs (the text after their line marker), ``start:end`` spanning ``EXPR``."""
    stubs_at = text.rfind(f'"{STUBS_FILE}"')
    if stubs_at < 0:
        return []
    found = []
    for m in _STUB_CALL.finditer(text, stubs_at):
        end = _angle_close(text, m.end())
        if end >= 0:
            found.append((m.end(), end, text[m.end() : end]))
    return found


def _base_name(expression: str) -> tuple[str, int, int] | None:
    """The kernel's own name in a name expression (``ns::k<float, 2>`` -> ``k``) and its span."""
    cut = expression.find("<")
    head = expression if cut < 0 else expression[:cut]
    m = re.search(rf"({_IDENT})\s*$", head)
    if m is None:
        return None
    return m.group(1), m.start(1), m.end(1)


def _entry_copy(text: str, markers: _Markers, name_at: int, name: str):
    """The copy of the kernel whose definition names it at ``name_at``: (the positions of the
    body's braces, the text to insert after the closing one); None when this is not the
    definition of a __global__ function, False when it is one that cannot be copied."""
    if _QUALIFIED_BEFORE.search(text, max(0, name_at - 16), name_at):
        return None
    paren = text.find("(", name_at + len(name))
    close_paren = _closing(text, paren) if paren >= 0 else -1
    if close_paren < 0:
        return None
    # between the parameters and the body: attributes, noexcept, throw(), a trailing return type
    i = close_paren + 1
    while True:
        m = _BRACES_AND_LITERALS.search(text, i)
        if m is None:
            return None
        between = text[i : m.start()]
        if ";" in between or "=" in between.replace("->", "").replace(">=", ""):
            return None
        if m.group(0) == "{":
            open_brace = m.start()
            break
        if m.group(0) == "(":
            i = _closing(text, m.start())
            if i < 0:
                return None
            i += 1
            continue
        return None
    close_brace = _closing(text, open_brace)
    if close_brace < 0:
        return None
    boundary = max(text.rfind(";", 0, name_at), text.rfind("{", 0, name_at), text.rfind("}", 0, name_at))
    head = text[boundary + 1 : name_at]
    if 'visibility("hidden")' not in head:  # the prelude's __global__
        return None
    template = _template_header(head)
    params = text[paren + 1 : close_paren]
    if template is None or "\n#" in params or "\n#" in text[close_paren:open_brace]:
        return False
    opened, closed = markers.at(open_brace), markers.at(close_brace)
    if opened is None or closed is None or opened[1] != closed[1] or markers.at(name_at) is None:
        return False
    body = text[open_brace + 1 : close_brace + 1]
    uses_builtins = _SHADOWED_USE.search(body) is not None
    if uses_builtins and (_LOCAL_CLASS.search(body) or _lambda_needs_capture(body)):
        return False
    spans = _code_mask(body)
    for m in reversed(list(_FUNCTION_NAME.finditer(body))):
        if not _inside(spans, m.start()):
            body = body[: m.start()] + f'"{name}"' + body[m.end() :]
    params = " ".join(params.split())
    if params in ("", "void"):
        params = "::cunumpy_emu::builtins cunumpy_emu_b_"
    else:
        params = "::cunumpy_emu::builtins cunumpy_emu_b_, " + params
    copy = (
        f"\n# {opened[0]} {opened[1]}\n"
        f'extern "C++" {{ {template} static __inline__ __attribute__((always_inline)) void '
        f"{COPY_PREFIX}{name}({params}) {{ {_COPY_LOCALS}{body} }}"
        f"\n# {closed[0]} {closed[1]}\n"
    )
    return open_brace, close_brace, copy


def add_entry_copies(text: str, clean_dirs=(), clean_files=(), found: RewriteFindings | None = None) -> str:
    """The preprocessed, rewritten translation unit ``text`` with a copy of each exported kernel
    defined in the user's files beside its definition, and the stubs calling the copies (see
    the comment above).

    A kernel whose name is called inside a function body (a test wrapper kernel calling the
    kernel under test: ``outer() { inner(dt, m, n); }``, which nvcc rejects but codes use to
    unit-test kernels in emulation) keeps its own body, so that the call runs it on the
    calling thread; each such call is recorded in ``found.kernel_calls``."""
    stubs = _stub_expressions(text)
    names: dict[str, None] = {}  # a set in the order of the stubs
    for _, _, expression in stubs:
        base = _base_name(expression)
        if base is not None:
            names[base[0]] = None
    if not names:
        return text
    owned = _user_file_rule(clean_dirs, clean_files)
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\s*\(")
    markers = _Markers(text)
    inserts: list[tuple[int, int, str, str]] = []
    failed: set = set()
    copied: set = set()
    called: set = set()  # kernels called from a function body: their own bodies stay
    braces_of: dict[str, list] = {}
    bounds = [(m.start(), m.end(), _marker_file(m.group(1)), m.group(2)) for m in _LINE_MARKER.finditer(text)]
    stubs_at = text.rfind(f'"{STUBS_FILE}"')
    for k, (_, end, file_name, flags) in enumerate(bounds):
        if not owned(file_name, flags):
            continue
        start = end
        stop = bounds[k + 1][0] if k + 1 < len(bounds) else len(text)
        if stubs_at >= 0 and start >= stubs_at:
            break
        piece = text[start:stop]
        stack = braces_of.get(file_name, [])
        if "{" not in piece and "}" not in piece:
            continue
        events = None
        for m in pattern.finditer(piece):
            if events is None:
                events = _brace_events(piece, _code_mask(piece))
            if FUNCTION in _braces_after(stack, events, m.start()):
                # a call inside a function: the kernel called as a device function
                called.add(m.group(1))
                if found is not None:
                    where = markers.at(start + m.start())
                    if where is not None:
                        found.kernel_calls.append((m.group(1), _marker_file(where[1][1:-1]), where[0]))
                continue
            name = m.group(1)
            made = _entry_copy(text, markers, start + m.start(), name)
            if made is False:
                failed.add(name)  # a kernel's definition without a copy: its stubs stay
            if not made:
                continue
            inserts.append((made[0], made[1], made[2], name))
            copied.add(name)
        braces_of[file_name] = _braces_after(
            stack, events if events is not None else _brace_events(piece, _code_mask(piece))
        )
    usable = copied - failed
    if not usable:
        return text
    # the stubs, from the end so that positions stay valid
    for start, end, expression in reversed(stubs):
        base = _base_name(expression)
        if base is None or base[0] not in usable:
            continue
        copy_expression = expression[: base[1]] + COPY_PREFIX + base[0] + expression[base[2] :]
        call_start = text.rfind("run_", 0, start)
        kind = text[call_start + 4 : start - 2]  # "thread" or "block"
        text = text[:call_start] + f"run_{kind}_copy<&{expression}, &{copy_expression}>" + text[end + 1 :]
    # The copies, and the kernels' own bodies emptied (lines kept): only the copies run, so
    # the body is compiled once and its diagnostics are not repeated. A kernel that another
    # function calls keeps its body: emptying it would make that call a silent no-op.
    for open_brace, close_brace, copy, name in sorted(inserts, reverse=True):
        if name not in usable:
            continue
        if name in called:
            text = text[: close_brace + 1] + copy + text[close_brace + 1 :]
            continue
        emptied = "{" + "\n" * text.count("\n", open_brace, close_brace) + "}"
        text = text[:open_brace] + emptied + copy + text[close_brace + 1 :]
    return text
