"""Twin of _core/cudasig.c: the CUDA ``__global__`` signature parser.

Same algorithm as the C file, token for token, so that the tests can compare the two on
generated sources. Results are plain tuples; ``cunumpy.cuda._source`` builds the public
``CudaParameter`` objects from them.
"""

from __future__ import annotations

__all__ = ["cuda_kernel_names", "cuda_parse_signature"]

_MAX_VIEW_NDIM = 16
_MAX_EXTERN_NESTING = 64

_QUALIFIERS = frozenset(
    (
        "const",
        "volatile",
        "__restrict__",
        "__restrict",
        "restrict",
        "__grid_constant__",
        "struct",
        "class",
        "typename",
        "register",
    )
)
_BUILTIN = frozenset(("signed", "unsigned", "char", "short", "int", "long", "float", "double", "bool", "void"))
_ATTRIBUTE_CALLS = frozenset(("__launch_bounds__", "__attribute__", "__declspec", "alignas", "__align__"))

_TYPEDEFS = {
    "int8_t": ("int8_t", "int8"),
    "uint8_t": ("uint8_t", "uint8"),
    "int16_t": ("int16_t", "int16"),
    "uint16_t": ("uint16_t", "uint16"),
    "int32_t": ("int32_t", "int32"),
    "uint32_t": ("uint32_t", "uint32"),
    "int64_t": ("int64_t", "int64"),
    "uint64_t": ("uint64_t", "uint64"),
    "ptrdiff_t": ("ptrdiff_t", "int64"),
    "ssize_t": ("ssize_t", "int64"),
    "size_t": ("size_t", "uint64"),
}
_COMPLEX_PREFIXES = ("", "::", "std::", "::std::", "thrust::", "::thrust::", "cuda::std::", "::cuda::std::")
_TYPEDEF_PREFIXES = ("", "::", "std::", "::std::")


def _is_ident_start(c: str) -> bool:
    return c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z") or ord(c) >= 0x80


def _is_ident_char(c: str) -> bool:
    return _is_ident_start(c) or ("0" <= c <= "9")


# Token kinds (same numbering as the C file).
IDENT, NUMBER, PUNCT, STRING = 0, 1, 2, 3


def _ascii_digits(text: str) -> bool:
    return bool(text) and all("0" <= ch <= "9" for ch in text)


def _tokenize(s: str) -> list[tuple[int, str]]:
    """Tokens of C++ source without comments and preprocessor lines."""
    toks: list[tuple[int, str]] = []
    n = len(s)
    i = 0
    line_start = True  # only whitespace seen since the last newline
    while i < n:
        c = s[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "/" and i + 1 < n and s[i + 1] == "/":
            while i < n and s[i] != "\n":
                i += 1
            continue
        if c == "/" and i + 1 < n and s[i + 1] == "*":
            j = s.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == "#" and line_start:
            # A preprocessor line, continued by a trailing backslash.
            while i < n and s[i] != "\n":
                if s[i] == "\\" and i + 1 < n and s[i + 1] == "\n":
                    i += 2
                    continue
                if s[i] == "\\" and i + 2 < n and s[i + 1] == "\r" and s[i + 2] == "\n":
                    i += 3
                    continue
                i += 1
            continue
        line_start = False
        if _is_ident_start(c):
            j = i + 1
            while j < n and _is_ident_char(s[j]):
                j += 1
            toks.append((IDENT, s[i:j]))
            i = j
            continue
        if "0" <= c <= "9":
            j = i + 1
            while j < n and (_is_ident_char(s[j]) or s[j] in ".'"):
                j += 1
            toks.append((NUMBER, s[i:j]))
            i = j
            continue
        if c == '"' or c == "'":
            j = i + 1
            while j < n and s[j] != c and s[j] != "\n":
                j += 2 if s[j] == "\\" else 1
            j = min(j + 1, n)
            toks.append((STRING, s[i:j]))
            i = j
            continue
        if c == ":" and i + 1 < n and s[i + 1] == ":":
            toks.append((PUNCT, "::"))
            i += 2
            continue
        if c == "." and s.startswith("...", i):
            toks.append((PUNCT, "..."))
            i += 3
            continue
        if c == "&" and i + 1 < n and s[i + 1] == "&":
            toks.append((PUNCT, "&&"))
            i += 2
            continue
        toks.append((PUNCT, c))
        i += 1
    return toks


def _matching(toks, i, open_, close):
    """Index of the token closing the group opened at ``i`` (``len(toks)`` if unbalanced)."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t[0] == PUNCT:
            if t[1] == open_:
                depth += 1
            elif t[1] == close:
                depth -= 1
                if depth == 0:
                    return j
    return len(toks)


def _find_kernels(toks):
    """(name, template_start, params_open, params_close, is_definition, extern_c) per kernel."""
    found = []
    stack: list[int] = []
    depth = 0
    decl_start = 0
    n = len(toks)
    for i, (kind, text) in enumerate(toks):
        if kind == PUNCT:
            if text == "{":
                if i >= 2 and toks[i - 2] == (IDENT, "extern") and toks[i - 1] == (STRING, '"C"'):
                    if len(stack) < _MAX_EXTERN_NESTING:
                        stack.append(depth)
                depth += 1
                decl_start = i + 1
            elif text == "}":
                depth -= 1
                if stack and stack[-1] == depth:
                    stack.pop()
                decl_start = i + 1
            elif text == ";":
                decl_start = i + 1
            continue
        if kind != IDENT or text != "__global__":
            continue
        extern_c = bool(stack)
        template_at = -1
        for j in range(decl_start, i):
            if toks[j] == (IDENT, "extern") and j + 1 < i and toks[j + 1] == (STRING, '"C"'):
                extern_c = True
            if toks[j] == (IDENT, "template") and template_at < 0:
                template_at = j
        j = i + 1
        name = None
        while j < n:
            k, t = toks[j]
            if k == PUNCT and t in (";", "{", "}"):
                break
            if k == IDENT and j + 1 < n and toks[j + 1] == (PUNCT, "("):
                if t in _ATTRIBUTE_CALLS:
                    j = _matching(toks, j + 1, "(", ")") + 1
                    continue
                name = t
                break
            j += 1
        if name is None:
            continue
        close = _matching(toks, j + 1, "(", ")")
        if close >= n:
            continue
        # A definition has a body: skip trailing qualifiers/attributes up to "{" or ";".
        k = close + 1
        is_def = False
        while k < n:
            if toks[k] == (PUNCT, "{"):
                is_def = True
                break
            if toks[k][0] == PUNCT and toks[k][1] in (";", "}", "("):
                break
            k += 1
        found.append((name, template_at, j + 2, close, is_def, extern_c))
    return found


def cuda_kernel_names(source):
    """``__global__`` function names in order of first appearance, comments ignored."""
    if not isinstance(source, str):
        raise TypeError(f"cuda_kernel_names(): 'source' must be a str, not {type(source).__name__}")
    _require_utf8(source, "source", "cuda_kernel_names")
    names: list[str] = []
    for entry in _find_kernels(_tokenize(source)):
        if entry[0] not in names:
            names.append(entry[0])
    return names


def _split_top(toks, start, stop):
    """Split toks[start:stop] at commas outside (), [], {} and <>."""
    parts = []
    depth = 0
    cur_start = start
    for j in range(start, stop):
        k, t = toks[j]
        if k == PUNCT:
            if t in "([{<":
                depth += 1
            elif t in ")]}>":
                depth -= 1
            elif t == "," and depth == 0:
                parts.append(toks[cur_start:j])
                cur_start = j + 1
    parts.append(toks[cur_start:stop])
    return parts


def _text(toks) -> str:
    out = ""
    prev = None
    prev_text = None
    for k, t in toks:
        if prev is not None and (
            (prev in (IDENT, NUMBER) and k in (IDENT, NUMBER))
            or (k == IDENT and prev == PUNCT and prev_text in (">", "*", "&"))
        ):
            out += " "
        out += t
        if k == PUNCT and t == ",":
            out += " "
        prev = k
        prev_text = t
    return out


def _template_params(toks, at):
    """[(is_type, name, default_tokens or None)] of the template list starting at ``at``."""
    if at + 1 >= len(toks) or toks[at + 1] != (PUNCT, "<"):
        raise ValueError("malformed template parameter list")
    close = _matching(toks, at + 1, "<", ">")
    if close >= len(toks):
        raise ValueError("malformed template parameter list")
    if close == at + 2:
        return []
    params = []
    for part in _split_top(toks, at + 2, close):
        if not part:
            raise ValueError("malformed template parameter list")
        default = None
        for j, tok in enumerate(part):
            if tok == (PUNCT, "="):
                default = part[j + 1 :]
                part = part[:j]
                break
        if any(tok == (PUNCT, "...") for tok in part):
            raise ValueError("variadic template parameters cannot be checked")
        idents = [t for k, t in part if k == IDENT]
        if not idents:
            raise ValueError("malformed template parameter list")
        is_type = part[0][0] == IDENT and part[0][1] in ("typename", "class")
        name = idents[-1] if len(idents) > 1 else ""
        params.append((is_type, name, default))
    return params


def _builtin(idents):
    """(ctype, dtype) of a combination of builtin type words, or None when invalid."""
    counts = {w: idents.count(w) for w in _BUILTIN}
    longs = counts["long"]
    sign = counts["signed"] + counts["unsigned"]
    if sign > 1 or longs > 2 or any(counts[w] > 1 for w in _BUILTIN if w != "long"):
        return None
    unsigned = counts["unsigned"] == 1
    base = [w for w in ("char", "short", "int", "float", "double", "bool", "void") if counts[w]]
    if base in (["float"], ["double"], ["bool"], ["void"]):
        if sign or longs:
            return None
        name = base[0]
        return name, {"float": "float32", "double": "float64", "bool": "bool", "void": ""}[name]
    if base == ["char"]:
        if longs:
            return None
        if unsigned:
            return "unsigned char", "uint8"
        return ("signed char" if counts["signed"] else "char"), "int8"
    if base in (["short"], ["short", "int"]):
        if longs:
            return None
        return ("unsigned short", "uint16") if unsigned else ("short", "int16")
    if base in ([], ["int"]):
        if longs == 0:
            if not base and not sign:
                return None
            return ("unsigned int", "uint32") if unsigned else ("int", "int32")
        word = "long long" if longs == 2 else "long"
        return ("unsigned " + word, "uint64") if unsigned else (word, "int64")
    return None


def _scalar_type(text_toks):
    """(ctype, dtype) of a scalar type written as tokens, or None."""
    if text_toks and all(k == IDENT and t in _BUILTIN for k, t in text_toks):
        return _builtin([t for _, t in text_toks])
    text = _text(text_toks)
    if len(text.encode("utf-8", "surrogatepass")) >= 255:
        return None  # far longer than any scalar type (the C parser's buffer)
    for prefix in _TYPEDEF_PREFIXES:
        if text.startswith(prefix) and text[len(prefix) :] in _TYPEDEFS:
            return _TYPEDEFS[text[len(prefix) :]]
    for prefix in _COMPLEX_PREFIXES:
        rest = text[len(prefix) :] if text.startswith(prefix) else None
        if rest is not None and rest.startswith("complex<") and rest.endswith(">"):
            inner = _tokenize(rest[len("complex<") : -1])
            inner = [tok for tok in inner if not (tok[0] == IDENT and tok[1] in _QUALIFIERS)]
            if inner and all(k == IDENT and t in _BUILTIN for k, t in inner):
                base = _builtin([t for _, t in inner])
                if base is not None and base[1] == "float32":
                    return "complex<float>", "complex64"
                if base is not None and base[1] == "float64":
                    return "complex<double>", "complex128"
            return None
    return None


def _view_type(toks):
    """(ndim, contiguous, element tokens) of an array-view type, or None."""
    if len(toks) < 4 or toks[0][0] != IDENT or toks[1] != (PUNCT, "<") or toks[-1] != (PUNCT, ">"):
        return None
    name = toks[0][1]
    inner = toks[2:-1]
    contiguous = name.startswith("C")
    base = name[1:] if contiguous else name
    if base in ("ArrayView",):
        parts = _split_top(inner, 0, len(inner))
        if len(parts) != 2 or len(parts[1]) != 1 or parts[1][0][0] != NUMBER:
            return None
        digits = parts[1][0][1]
        if not _ascii_digits(digits) or len(digits) > 3:
            return None
        ndim = int(digits)
        return ndim, contiguous, parts[0]
    if base.startswith("Array") and base.endswith("D"):
        digits = base[len("Array") : -1]
        if not _ascii_digits(digits) or len(digits) > 2 or digits[0] == "0":
            return None
        return int(digits), contiguous, inner
    return None


def _classify(toks, struct_names):
    """(ctype, dtype, struct_name, view_ndim, contiguous) of a type, or an error string."""
    view = _view_type(toks)
    if view is not None:
        ndim, contiguous, elem = view
        if not 1 <= ndim <= _MAX_VIEW_NDIM:
            return f"array views have 1 to {_MAX_VIEW_NDIM} dimensions, not {ndim}"
        elem = [tok for tok in elem if not (tok[0] == IDENT and tok[1] in _QUALIFIERS)]
        scalar = _scalar_type(elem) if len(elem) <= 64 else None
        if scalar is None or scalar[1] == "":
            return f"unsupported array view element type '{_text(elem)}'"
        ctype = f"{'CArray' if contiguous else 'Array'}{ndim}D<{scalar[0]}>"
        return ctype, scalar[1], None, ndim, contiguous
    scalar = _scalar_type(toks)
    if scalar is not None:
        return scalar[0], scalar[1], None, 0, False
    if len(toks) == 1 and toks[0][0] == IDENT and toks[0][1] in struct_names:
        return toks[0][1], "", toks[0][1], 0, False
    if any(tok[0] == PUNCT and tok[1] == "(" for tok in toks):
        return f"'{_text(toks)}' looks like a macro or function type"
    return f"unknown type '{_text(toks)}' (not a scalar, array view or declared struct)"


def _parse_param(toks, struct_names, tparams, targs):
    """(name, ctype, dtype, pointer, struct, view_ndim, contiguous) or an error string."""
    for j, tok in enumerate(toks):
        if tok == (PUNCT, "="):
            toks = toks[:j]
            break
    expanded = []
    for tok in toks:
        if tok[0] == IDENT and tok[1] in tparams:
            expanded.extend(targs[tparams[tok[1]]])
        else:
            expanded.append(tok)
    pointer = 0
    type_toks = []
    name = ""
    depth = 0
    j = 0
    n = len(expanded)
    while j < n:
        k, t = expanded[j]
        if k == PUNCT:
            if t == "<":
                depth += 1
                type_toks.append((k, t))
            elif t == ">":
                depth -= 1
                type_toks.append((k, t))
            elif depth > 0:
                if t in ("(", ")", "*", "&", "&&", "[", "]", "...", ";", "{", "}"):
                    return f"'{_text(expanded)}' cannot be checked"
                type_toks.append((k, t))
            elif t == "*":
                if name:
                    return "a '*' after the parameter name"
                pointer += 1
            elif t in ("&", "&&"):
                return "reference parameters cannot be checked"
            elif t == "[":
                close = _matching(expanded, j, "[", "]")
                if close >= n or not name:
                    return "malformed array parameter"
                pointer += 1
                j = close + 1
                continue
            elif t == "::":
                type_toks.append((k, t))
            elif t == "...":
                return "variadic parameters cannot be checked"
            else:
                return f"'{_text(expanded)}' cannot be checked (macro or unsupported syntax)"
        elif k == IDENT:
            if depth > 0:
                type_toks.append((k, t))
            elif t in _QUALIFIERS:
                pass
            elif name:
                return f"'{_text(expanded)}' cannot be checked (macro or unsupported syntax)"
            elif (
                type_toks
                and t not in _BUILTIN
                and type_toks[-1] != (PUNCT, "::")
                and (pointer > 0 or _ends_type(type_toks))
            ):
                name = t
            elif pointer > 0:
                return f"'{_text(expanded)}' cannot be checked (type after '*')"
            else:
                type_toks.append((k, t))
        else:
            if depth > 0:
                type_toks.append((k, t))
            else:
                return f"'{_text(expanded)}' cannot be checked (macro or unsupported syntax)"
        j += 1
    if depth != 0:
        return "unbalanced '<' '>'"
    if not type_toks:
        return "no type"
    kind = _classify(type_toks, struct_names)
    if isinstance(kind, str):
        return kind
    ctype, dtype, struct, view_ndim, contiguous = kind
    if pointer > 1:
        return "pointer-to-pointer parameters cannot be checked"
    # A struct by pointer is an array of that struct (a structured array of its dtype).
    if pointer and view_ndim:
        return "array views are passed by value, not by pointer"
    if dtype == "" and not struct:  # void
        if pointer != 1:
            return "'void' is only valid as 'void*'"
    return (name, ctype, dtype or None, pointer == 1, struct, view_ndim, contiguous)


def _ends_type(type_toks) -> bool:
    """True when the tokens already form a type, so a following identifier is the name."""
    last = type_toks[-1]
    return last == (PUNCT, ">") or last[0] == IDENT


def _require_utf8(text, what, fn):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{fn}(): '{what}' is not valid UTF-8 text (it contains a lone surrogate)") from None


def cuda_parse_signature(source, name, struct_names=(), template_args=None):
    """(params, is_template, extern_c) of the ``__global__`` function ``name``.

    ``params`` holds one ``(name, ctype, dtype_name | None, pointer, struct_name | None,
    view_ndim, contiguous)`` tuple per parameter. ``template_args`` are C text strings.
    """
    if not isinstance(source, str):
        raise TypeError(f"cuda_parse_signature(): 'source' must be a str, not {type(source).__name__}")
    _require_utf8(source, "source", "cuda_parse_signature")
    if not isinstance(name, str):
        raise TypeError(f"cuda_parse_signature(): 'name' must be a str, not {type(name).__name__}")
    _require_utf8(name, "name", "cuda_parse_signature")
    if not isinstance(struct_names, tuple) or not all(isinstance(s, str) for s in struct_names):
        raise TypeError("cuda_parse_signature(): 'struct_names' must be a tuple of str")
    if template_args is not None and (
        not isinstance(template_args, tuple) or not all(isinstance(s, str) for s in template_args)
    ):
        raise TypeError("cuda_parse_signature(): 'template_args' must be None or a tuple of str")
    toks = _tokenize(source)
    chosen = None
    for entry in _find_kernels(toks):
        if entry[0] != name:
            continue
        if chosen is None or (entry[4] and not chosen[4]):
            chosen = entry
        if chosen[4]:
            break
    if chosen is None:
        raise ValueError(f"no __global__ function named '{name}' in the source")
    _, template_at, open_, close, _, extern_c = chosen
    tparams: dict[str, int] = {}
    targs: list = []
    is_template = template_at >= 0
    if is_template:
        try:
            tlist = _template_params(toks, template_at)
        except ValueError as exc:
            raise ValueError(f"kernel '{name}': {exc}") from None
        required = sum(1 for p in tlist if p[2] is None)
        if template_args is None:
            raise ValueError(f"kernel '{name}' is a template with {len(tlist)} parameter(s): pass template_args")
        if not required <= len(template_args) <= len(tlist):
            raise ValueError(
                f"kernel '{name}' takes {required} to {len(tlist)} template arguments, got {len(template_args)}"
            )
        for idx, (_, pname, _default) in enumerate(tlist):
            if pname:
                tparams[pname] = idx
        full = []
        for idx, (_, _pname, default) in enumerate(tlist):
            if idx < len(template_args):
                full.append(_tokenize(template_args[idx]))
            else:
                full.append(default or [])
        targs = full
    elif template_args is not None:
        raise ValueError(f"kernel '{name}' is not a template, but template_args were given")
    params = []
    if close > open_:
        parts = _split_top(toks, open_, close)
        if len(parts) == 1 and parts[0] == [(IDENT, "void")]:
            parts = []
        for idx, part in enumerate(parts):
            decl = _text(part)
            if not part:
                raise ValueError(f"kernel '{name}': parameter {idx} is empty")
            result = _parse_param(part, struct_names, tparams, targs)
            if isinstance(result, str):
                raise ValueError(f"kernel '{name}': cannot check parameter {idx} '{decl}': {result}")
            params.append(result)
    return tuple(params), is_template, extern_c
