"""Layout checks of CudaStruct (API.md section 3.2) and the parser of struct definitions in
CUDA sources (``check_source``).

``verify_layout`` runs a one-thread probe kernel through CuPy when a real GPU is usable.
Without one it compiles the same layout at compile time for sm_90 with nvcc: the probe values are emitted as a ``__device__``
array whose initializer is read back from the PTX, and ``static_assert``s on ``sizeof``,
``alignof`` and every ``offsetof`` state the expected layout. Neither needs a GPU.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .cuda._source import CudaParameter, _matching_bracket, cuda_include_dir

__all__ = ["compile_time_layouts", "find_struct_members", "probe_source", "toolkit_compiler", "verify_layout"]

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ARCH = "sm_90"

# ------------------------------------------------------------------ struct definitions in sources


def _split_top(text: str, sep: str) -> list[str]:
    parts: list = []
    depth = 0
    cur: list = []
    for c in text:
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def _struct_body(source: str, name: str):
    text = _COMMENTS.sub(" ", source)
    for m in re.finditer(r"\bstruct\s+" + re.escape(name) + r"\s*(?::[^{;]*)?\{", text):
        end = _matching_bracket(text, m.end() - 1)
        if end >= 0:
            return text[m.end() : end]
    # typedef struct [tag] { ... } Name;
    for m in re.finditer(r"\btypedef\s+struct\s*(?:[A-Za-z_]\w*)?\s*\{", text):
        end = _matching_bracket(text, m.end() - 1)
        if end >= 0 and re.match(r"\s*" + re.escape(name) + r"\s*;", text[end + 1 :]):
            return text[m.end() : end]
    return None


def struct_member_decls(source: str, name: str):
    """The members of ``struct name {...}`` in ``source`` as (C type, name) pairs; None if the
    source does not define it; a string saying why when a member cannot be read."""
    body = _struct_body(source, name)
    if body is None:
        return None
    decls = []
    for statement in _split_top(body, ";"):
        statement = " ".join(statement.split())
        if not statement:
            continue
        if "(" in statement or "{" in statement or statement.startswith(("static ", "using ", "typedef ")):
            return f"member '{statement}' is not a plain data field"
        statement = _split_top(statement, "=")[0].strip()
        pieces = [p.strip() for p in _split_top(statement, ",")]
        m = re.match(r"^(.*?)([A-Za-z_]\w*)\s*(\[[^\]]*\])?$", pieces[0])
        if m is None or not m.group(1).strip():
            return f"member '{statement}' cannot be read"
        if m.group(3):
            return f"member '{statement}' is a C array"
        base = m.group(1).strip()
        stars = ""
        while base.endswith("*"):
            stars += "*"
            base = base[:-1].strip()
        decls.append((base + stars, m.group(2)))
        for extra in pieces[1:]:
            mm = re.match(r"^(\**)\s*([A-Za-z_]\w*)$", extra)
            if mm is None:
                return f"member '{extra}' cannot be read"
            decls.append((base + mm.group(1), mm.group(2)))
    if not decls:
        return "the definition has no fields"
    return decls


def find_struct_members(source: str, name: str):
    """The members of ``struct name {...}`` in ``source`` as CudaParameters; None if the source
    does not define it; a string saying why when a member cannot be read."""
    from ._native import core

    decls = struct_member_decls(source, name)
    if decls is None or isinstance(decls, str):
        return decls
    from .cuda._types import VECTOR_TYPES

    params = ", ".join(f"{t} {n}" for t, n in decls)
    vectors = tuple(v for v in VECTOR_TYPES if v in params)
    try:
        raw, _, _ = core.cuda_parse_signature(
            f'extern "C" __global__ void cunumpy_members({params}) {{}}', "cunumpy_members", vectors, None
        )
    except ValueError as exc:
        return f"a member cannot be checked ({exc})"
    import numpy as np

    return [
        CudaParameter(
            n,
            ct,
            VECTOR_TYPES[s].dtype if s is not None else (np.dtype(dt) if dt is not None else None),
            bool(ptr),
            VECTOR_TYPES[s] if s is not None else None,
            int(nd) or None,
            bool(c),
        )
        for n, ct, dt, ptr, s, nd, c in raw
    ]


# ------------------------------------------------------------------ probe sources

_COMPLEX_PRELUDE = """#ifdef __CUDACC_RTC__
#if __has_include(<cupy/complex.cuh>)
#include <cupy/complex.cuh>
using thrust::complex;
#else
#include <cuda/std/complex>
using cuda::std::complex;
#endif
#else
#include <cuda/std/complex>
using cuda::std::complex;
#endif
"""


def _definition(struct, include) -> str:
    lines = []
    if struct.has_views:
        lines.append("#include <cunumpy/array_view.cuh>")
    if _needs_complex(struct):
        lines.append(_COMPLEX_PRELUDE.rstrip("\n"))
    if any("thrust::" in t for t in struct._types):
        lines.append("#ifndef __CUDACC_RTC__\n#include <thrust/complex.h>\n#endif")
    if include is not None:
        lines.append(f'#include "{include}"')
    else:
        lines.append(struct.declaration.rstrip("\n"))
    return "\n".join(lines) + "\n"


def probe_source(struct, include=None) -> str:
    """The probe kernel ``cunumpy_layout_<Name>(unsigned long long* out)``: out[0] = sizeof,
    out[1] = alignof, out[2 + i] = offsetof of field i."""
    if include is not None:
        include = str(include)
    name = struct.name
    # Offsets by address arithmetic on a pointer that is never dereferenced: NVRTC has no offsetof.
    body = [
        f"    const {name}* probe = reinterpret_cast<const {name}*>(out);",
        "    const char* base = reinterpret_cast<const char*>(probe);",
        f"    out[0] = sizeof({name});",
        f"    out[1] = alignof({name});",
    ]
    for i, p in enumerate(struct.fields):
        body.append(f"    out[{2 + i}] = (unsigned long long)(reinterpret_cast<const char*>(&probe->{p.name}) - base);")
    return (
        _definition(struct, include)
        + f'\nextern "C" __global__ void cunumpy_layout_{name}(unsigned long long* out)\n{{\n'
        + "\n".join(body)
        + "\n}\n"
    )


def _needs_complex(struct) -> bool:
    return any("complex" in t for t in struct._types)


def _static_source(structs, include, asserts: bool) -> str:
    """One translation unit for several structs, each in its own namespace (names may repeat):
    a ``__device__`` array of sizeof, alignof and the offsets (read back from the PTX) and, with
    ``asserts``, a static_assert per expected value."""
    head = ["#include <cstddef>"]
    if any(s.has_views for s in structs):
        head.append("#include <cunumpy/array_view.cuh>")
    if any(_needs_complex(s) for s in structs):
        head.append(_COMPLEX_PRELUDE.rstrip("\n"))
    if any("thrust::" in t for s in structs for t in s._types):
        head.append("#include <thrust/complex.h>")
    if include is not None:
        head.append(f'#include "{include}"')
    parts = ["\n".join(head) + "\n"]
    for k, struct in enumerate(structs):
        name = struct.name
        values = [f"sizeof({name})", f"alignof({name})"] + [f"offsetof({name}, {p.name})" for p in struct.fields]
        text = f"namespace cunumpy_layout_{k} {{\n" if include is None else ""
        if include is None:
            text += struct.declaration
        text += (
            f'extern "C" __device__ const unsigned long long cunumpy_layout_values_{k}[{len(values)}] = {{\n    '
            + ",\n    ".join(values)
            + "\n};\n"
        )
        if asserts:
            expected = _expected(struct)
            checks = [
                ("sizeof", f"sizeof({name})", expected["sizeof"]),
                ("alignof", f"alignof({name})", expected["alignof"]),
            ]
            checks += [(p.name, f"offsetof({name}, {p.name})", expected["offsets"][p.name]) for p in struct.fields]
            for _, expr, value in checks:
                text += f'static_assert({expr} == {value}, "cunumpy layout: {expr} != {value}");\n'
        if include is None:
            text += f"}} // namespace cunumpy_layout_{k}\n"
        parts.append(text)
    return "\n".join(parts)


def _expected(struct) -> dict:
    return {
        "sizeof": struct.itemsize,
        "alignof": struct.alignment,
        "offsets": dict(zip(struct.field_names, struct.offsets)),
    }


def _result(struct, values) -> dict:
    """The flat result of verify_layout: ``{"sizeof": ..., "alignof": ..., field: offset, ...}``
    (no field is named sizeof or alignof: both are C++ keywords, refused as field names)."""
    n = len(struct.fields)
    if len(values) != 2 + n:
        raise RuntimeError(f"layout probe of struct {struct.name!r}: expected {2 + n} values, got {len(values)}")
    result = {"sizeof": int(values[0]), "alignof": int(values[1])}
    result.update((p.name, int(v)) for p, v in zip(struct.fields, values[2:]))
    return result


def _compare(struct, got: dict, how: str) -> dict:
    want = _expected(struct)
    diffs = []
    for key in ("sizeof", "alignof"):
        if got[key] != want[key]:
            diffs.append(f"{key}: compiler {got[key]}, dtype {want[key]}")
    for field, off in want["offsets"].items():
        if got.get(field) != off:
            diffs.append(f"offsetof {field}: compiler {got.get(field)}, dtype {off}")
    if diffs:
        raise ValueError(
            f"struct {struct.name!r}: the compiler's layout ({how}) differs from CudaStruct.dtype: " + "; ".join(diffs)
        )
    return got


# ------------------------------------------------------------------ toolkit


def _toolkit_root():
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and Path(root, "include").is_dir():
            return Path(root)
    nvcc = shutil.which("nvcc")
    if nvcc:
        nvcc_root = Path(nvcc).resolve().parent.parent
        if (nvcc_root / "include").is_dir():
            return nvcc_root
    if Path("/usr/local/cuda/include").is_dir():
        return Path("/usr/local/cuda")
    return None


def toolkit_compiler() -> tuple:
    """("nvcc", path) of the compile-time layout check, or (None, why not).

    nvcc, not NVRTC: NVRTC has no constant ``offsetof``, so it cannot evaluate the
    ``static_assert``s on field offsets (its runtime probe is the GPU path)."""
    root = _toolkit_root()
    nvcc = shutil.which("nvcc")
    if nvcc is None and root is not None and (root / "bin" / "nvcc").exists():
        nvcc = str(root / "bin" / "nvcc")
    if nvcc:
        return "nvcc", nvcc
    return None, "no CUDA toolkit found (nvcc is not on PATH and CUDA_HOME does not hold bin/nvcc)"


def _include_options(root, include_dirs) -> list[str]:
    opts = [f"-I{d}" for d in include_dirs]
    opts.append(f"-I{cuda_include_dir()}")
    if root is not None:
        opts.append(f"-I{root / 'include'}")
        if (root / "include" / "cccl").is_dir():
            opts.append(f"-I{root / 'include' / 'cccl'}")
    return opts


def _compile_nvcc(source, options, nvcc) -> tuple[bool, str, str]:
    with tempfile.TemporaryDirectory(prefix="cunumpy_layout_") as tmp:
        src = Path(tmp, "layout.cu")
        out = Path(tmp, "layout.ptx")
        src.write_text(source, encoding="utf-8")
        cmd = [nvcc, f"-arch={_ARCH}", "--std=c++17", "-ptx", str(src), "-o", str(out), *list(options)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            return False, "", log
        return True, out.read_text(encoding="utf-8", errors="replace"), log


def _values_from_ptx(ptx: str, index: int, name: str) -> list[int]:
    """The initializer of probe array ``index`` in the PTX (bytes, trailing zeros omitted, or 64-bit words)."""
    m = re.search(r"\.(b8|b64|u64)\s+cunumpy_layout_values_" + str(index) + r"\[(\d+)\]\s*=\s*\{([^}]*)\}", ptx)
    if m is None:
        raise RuntimeError(f"layout check of struct {name!r}: the probe values are missing from the PTX")
    items = [int(v.strip(), 0) for v in m.group(3).split(",") if v.strip()]
    count = int(m.group(2))
    if m.group(1) != "b8":
        return items + [0] * (count - len(items))
    data = bytes(items) + bytes(count - len(items))
    return [int.from_bytes(data[k : k + 8], "little") for k in range(0, count, 8)]


def compile_time_layouts(structs, include=None, include_dirs=(), options=()) -> list[dict]:
    """The compile-time check of several structs in one nvcc run; ValueError listing every
    difference of every struct."""
    structs = list(structs)
    names = ", ".join(repr(s.name) for s in structs)
    kind, detail = toolkit_compiler()
    if kind is None:
        raise RuntimeError(
            f"CudaStruct.verify_layout() of {names} needs a usable GPU with CuPy, or the CUDA toolkit "
            f"(nvcc) for the compile-time check: {detail}"
        )
    root = _toolkit_root()
    opts = list(options) + _include_options(root, include_dirs)
    if include is not None:
        opts.append(f"-I{Path(include).resolve().parent}")
    how = f"{kind}, {_ARCH}"
    ok, ptx, log = _compile_nvcc(_static_source(structs, include, asserts=True), opts, detail)
    asserts_failed = not ok
    if not ok:
        # The static_asserts failed (or the definition does not compile): compile without them for the values.
        ok, ptx, log2 = _compile_nvcc(_static_source(structs, include, asserts=False), opts, detail)
        if not ok:
            raise ValueError(f"struct {names}: the layout probe does not compile ({how}):\n{log2.strip()}")
    results, problems = [], []
    for k, struct in enumerate(structs):
        got = _result(struct, _values_from_ptx(ptx, k, struct.name))
        try:
            _compare(struct, got, how)
        except ValueError as exc:
            problems.append(str(exc))
        results.append(got)
    if problems:
        raise ValueError("\n".join(problems))
    if asserts_failed:
        raise ValueError(f"struct {names}: the layout static_asserts failed ({how}):\n{log.strip()}")
    return results


def _compile_time_layout(struct, include, include_dirs, options) -> dict:
    return compile_time_layouts([struct], include, include_dirs, options)[0]


# ------------------------------------------------------------------ GPU probe


def _gpu_usable() -> bool:
    from ._backend import cupy_available, fake_cupy_active

    if fake_cupy_active() or not cupy_available():
        return False
    cupy = sys.modules.get("cupy")
    try:
        return cupy is not None and cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any driver failure means no device to check against
        return False


def _gpu_layout(struct, include, include_dirs, options) -> dict:
    cupy = sys.modules["cupy"]
    opts = tuple(options) + tuple(_include_options(None, include_dirs))
    if include is not None:
        opts += (f"-I{Path(include).resolve().parent}",)
    module = cupy.RawModule(code=probe_source(struct, include), options=opts)
    kernel = module.get_function(f"cunumpy_layout_{struct.name}")
    out = cupy.zeros(2 + len(struct.fields), dtype=cupy.uint64)
    kernel((1,), (1,), (out,))
    return _compare(struct, _result(struct, [int(v) for v in out.get()]), "GPU probe")


_INCLUDE_LINE = re.compile(r'\s*#\s*include\s*([<"])(.+?)[>"]\s*$')


def _find_header(include, include_dirs) -> str:
    """The absolute path of header ``include`` (a path, a file name or an ``#include`` line), as
    the compiler finds it: relative to the working directory, then in each of ``include_dirs``
    in order (as release 0.7.1 took it)."""
    text = os.fspath(include)
    m = _INCLUDE_LINE.match(text)
    name = m.group(2).strip() if m else text
    candidates = [Path(name)]
    if not Path(name).is_absolute():
        candidates += [Path(d, name) for d in include_dirs]
    for path in candidates:
        if path.is_file():
            return str(path.resolve())
    where = ", ".join(repr(str(p)) for p in candidates)
    raise ValueError(f"CudaStruct.verify_layout(): header {text!r} does not exist (looked for {where})")


def verify_layout(struct, include=None, *, include_dirs=(), options=()) -> dict:
    if isinstance(include_dirs, (str, os.PathLike)):
        include_dirs = (include_dirs,)
    include_dirs = tuple(str(d) for d in include_dirs)
    if isinstance(options, str):
        options = (options,)
    options = tuple(options)
    if include is not None:
        include = _find_header(include, include_dirs)
    if _gpu_usable():
        return _gpu_layout(struct, include, include_dirs, options)
    return _compile_time_layout(struct, include, include_dirs, options)
