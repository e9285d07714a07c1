"""Emulated launches: building a kernel's library, running it, and the launch hooks.

``emulate_cuda_kernel`` runs one launch; ``emulated_launches()`` installs a hook through
which every ``CudaKernel`` launch and compilation (and the fake CuPy's raw kernels) runs on
the CPU for the duration of a ``with`` block, in the thread that entered it. With the fake
CuPy active, launches outside any block emulate by themselves (``CUNUMPY_EMULATION=0``
turns that off).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import os
import re
import sys
import threading
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from .._native import core
from ..kernels import _cuda_kernel
from ..kernels._cuda_kernel import CudaKernel
from . import _analysis, _globals
from ._arguments import marshal_arguments
from ._build import CHECKS_CALLS, CHECKS_NONE, CHECKS_SHADOW, CHECKS_TRACK, build_library, emulation_compiler
from ._errors import EmulationUnavailable, emulation_error
from ._source import entry_points, translation_unit

__all__ = [
    "SANITIZERS",
    "LaunchOptions",
    "compile_for_emulation",
    "emulate_cuda_kernel",
    "emulated_launches",
    "emulation_workers",
]

#: The names ``sanitize=`` and ``CUNUMPY_EMULATION_SANITIZE`` accept (memcheck is always on).
SANITIZERS = ("memcheck", "racecheck", "initcheck")

#: Dynamic shared memory a block may request: the opt-in limit of sm_90 (227 KiB).
DYNAMIC_SHARED_LIMIT = 232448

# NVRTC options that carry over to the host compiler; the rest (architecture, -lineinfo,
# --use_fast_math, ...) mean nothing there.
_TWO_WORD = {
    "-D": "-D",
    "--define-macro": "-D",
    "-define-macro": "-D",
    "-U": "-U",
    "--undefine-macro": "-U",
    "-undefine-macro": "-U",
    "-I": "-I",
    "--include-path": "-I",
    "-include-path": "-I",
}


def host_compiler_flags(options) -> list[str]:
    """The ``-D``, ``-U``, ``-I`` and ``-ffp-contract`` options of NVRTC ``options``."""
    out: list[str] = []
    it = iter(options)
    for o in it:
        if o in _TWO_WORD:
            value = next(it, None)
            if value is not None:
                out.append(_TWO_WORD[o] + value)
            continue
        head, eq, value = o.partition("=")
        if eq and head in _TWO_WORD and head.startswith("--"):
            out.append(_TWO_WORD[head] + value)
        elif (o[:2] in ("-D", "-U", "-I") and len(o) > 2) or o.startswith("-ffp-contract="):
            out.append(o)
        elif head == "--fmad":
            out.append("-ffp-contract=" + ("off" if value.lower() == "false" else "fast"))
    return out


def _check_options(options, what) -> tuple:
    if isinstance(options, (str, bytes)) or not hasattr(options, "__iter__"):
        raise TypeError(f"{what}: 'options' must be a sequence of str")
    options = tuple(options)
    if not all(isinstance(o, str) for o in options):
        raise TypeError(f"{what}: 'options' must be a sequence of str")
    return options


def _check_compiler(compiler, what):
    if compiler is not None and (not isinstance(compiler, str) or not compiler.strip()):
        raise TypeError(f"{what}: 'compiler' must be None or a non-empty str, not {compiler!r}")
    return compiler


def _resolve_compiler(compiler) -> str:
    if compiler is None:
        compiler = emulation_compiler()
        if compiler is None:
            raise RuntimeError("CPU emulation needs a C++ compiler: none found (set CXX or install c++, e.g. g++)")
    return compiler


def check_sanitize(sanitize, what) -> frozenset:
    """``sanitize`` as a set of names: a str (comma-separated) or an iterable of str;
    ValueError naming an unknown one."""
    if sanitize is None:
        return frozenset()
    if isinstance(sanitize, str):
        names = [n.strip() for n in sanitize.split(",") if n.strip()]
    else:
        if isinstance(sanitize, bytes) or not hasattr(sanitize, "__iter__"):
            raise TypeError(f"{what}: 'sanitize' must be a str or a sequence of str, not {type(sanitize).__name__}")
        names = list(sanitize)
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"{what}: 'sanitize' entries must be str, not {type(n).__name__}")
        names = [n.strip() for n in names]
    for n in names:
        if n not in SANITIZERS:
            raise ValueError(f"{what}: unknown sanitizer {n!r}; choose from {', '.join(SANITIZERS)}")
    return frozenset(names)


def _environment_sanitize() -> frozenset:
    return check_sanitize(os.environ.get("CUNUMPY_EMULATION_SANITIZE", ""), "CUNUMPY_EMULATION_SANITIZE")


def _environment_memcheck() -> bool:
    value = os.environ.get("CUNUMPY_EMULATION_MEMCHECK", "").strip().lower()
    if value in ("", "1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"CUNUMPY_EMULATION_MEMCHECK must be 0 or 1, got {value!r}")


def check_timeout(timeout, what) -> float:
    """Seconds (0.0: none); None reads CUNUMPY_EMULATION_TIMEOUT."""
    if timeout is None:
        raw = os.environ.get("CUNUMPY_EMULATION_TIMEOUT", "").strip()
        if not raw:
            return 0.0
        try:
            timeout = float(raw)
        except ValueError:
            raise ValueError(f"CUNUMPY_EMULATION_TIMEOUT must be a number of seconds, got {raw!r}") from None
        what = "CUNUMPY_EMULATION_TIMEOUT"
    if isinstance(timeout, (bool, np.bool_)) or not isinstance(timeout, (int, float, np.integer, np.floating)):
        raise TypeError(f"{what}: 'timeout' must be a number of seconds or None, not {type(timeout).__name__}")
    timeout = float(timeout)
    if timeout == math.inf:
        return 0.0  # no limit
    if not math.isfinite(timeout) or timeout <= 0 or timeout > 1e9:
        raise ValueError(f"{what}: 'timeout' must be a positive number of seconds (math.inf: no limit), got {timeout}")
    return timeout


def _check_outputs(outputs, what) -> tuple:
    """Names or indices of the output-only parameters (initcheck)."""
    if isinstance(outputs, (str, int)) and not isinstance(outputs, bool):
        outputs = (outputs,)
    if not hasattr(outputs, "__iter__"):
        raise TypeError(f"{what}: 'outputs' must be parameter names or indices, not {type(outputs).__name__}")
    outputs = tuple(outputs)
    for o in outputs:
        if isinstance(o, bool) or not isinstance(o, (str, int)):
            raise TypeError(f"{what}: 'outputs' entries must be parameter names or indices, not {o!r}")
    return outputs


def check_memcheck(memcheck, what) -> bool:
    """``memcheck=False`` is the documented performance option (also CUNUMPY_EMULATION_MEMCHECK=0)."""
    if memcheck is None:
        return _environment_memcheck()
    if not isinstance(memcheck, (bool, np.bool_)):
        raise TypeError(f"{what}: 'memcheck' must be True, False or None, not {type(memcheck).__name__}")
    return bool(memcheck)


def checks_mode(sanitize: frozenset, memcheck: bool) -> int:
    """The instrumentation a launch needs (see _build.CHECKS_*)."""
    if sanitize & {"racecheck", "initcheck"}:
        return CHECKS_TRACK
    if not memcheck:
        return CHECKS_NONE
    return CHECKS_SHADOW if core.emu_shadow_available() else CHECKS_CALLS


def _check_kernel(kernel, what):
    if not isinstance(kernel, CudaKernel):
        raise TypeError(f"{what}: expected a CudaKernel, got {type(kernel).__module__}.{type(kernel).__qualname__}")
    if kernel.signature is None:
        raise TypeError(
            f"{what}: kernel '{kernel.name}' was built with check_signature=False; the CPU emulation "
            "needs the parsed signature to pass arguments"
        )


# ------------------------------------------------------------------ libraries

_per_kernel: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_per_kernel_lock = threading.Lock()


def library_for(kernel: CudaKernel, compiler, options: tuple, *, fresh: bool = False, checks: int | None = None):
    """The emulation library of ``kernel``, built once per kernel object and settings, as a
    CUDA kernel compiles once per device; ``fresh`` (recompile) re-reads headers and options.
    ``checks``: the instrumentation (default: memcheck as the environment says)."""
    if checks is None:
        checks = checks_mode(_environment_sanitize(), _environment_memcheck())
    memo_key = (compiler, options, kernel.debug_active(), checks)
    with _per_kernel_lock:
        memo = _per_kernel.setdefault(kernel, {})
        lib = None if fresh else memo.get(memo_key)
    if lib is not None:
        return lib
    resolved = _resolve_compiler(compiler)
    flags = []
    if kernel.source_dir is not None:
        flags += ["-iquote", str(kernel.source_dir)]
    compile_options = kernel.compile_options()
    options_headers = kernel.included_headers
    flags += host_compiler_flags(compile_options)
    flags += list(options)
    entries = entry_points(kernel.source, kernel.expression)
    # The kernels of one fake-CuPy RawModule share one library (its __constant__ memory too).
    entries += [e for e in getattr(kernel, "_module_expressions", ()) if e not in entries]
    unit = translation_unit(kernel.source, entries, entries[0], tuple(_globals.declarations_of(kernel)))
    headers = _headers_of(kernel, options_headers)
    try:
        lib = build_library(
            unit,
            name=kernel.name,
            entries=entries,
            compiler=resolved,
            flags=tuple(flags),
            headers=headers,
            checks=checks,
        )
    except RuntimeError as exc:
        lib = None
        if _globals.ACCESSOR_PREFIX in str(exc):
            # A variable the text declares but the preprocessor leaves out (#if): no accessor.
            names = tuple(_globals.declarations_of(kernel))
            kept = tuple(n for n in names if f"{_globals.ACCESSOR_PREFIX}{n}(" not in str(exc))
            try:
                lib = build_library(
                    translation_unit(kernel.source, entries, entries[0], kept),
                    name=kernel.name,
                    entries=entries,
                    compiler=resolved,
                    flags=tuple(flags),
                    headers=headers,
                    checks=checks,
                )
            except RuntimeError:
                lib = None
        if lib is None:
            lib = _build_without_gaps(kernel, exc, entries, resolved, tuple(flags), headers, checks)
        if lib is None:
            hint = _complex_hint(kernel, headers)
            if hint:
                raise RuntimeError(f"{exc}\n{hint}") from None
            raise
    with _per_kernel_lock:
        memo[memo_key] = lib
    return lib


def _build_without_gaps(kernel, exc, entries, compiler, flags, headers, checks):
    """After a failed build: the library built without the other functions of the source that
    the emulation cannot build (warning once for each), or None when the gap is the launched
    kernel's own (the original error stands). A texture or surface in the launched kernel is a
    NotImplementedError naming it."""
    from . import _gaps

    file_name = _source_file_name(entries[0])
    source = kernel.source
    base = kernel.name
    dropped_all: list = []
    message = str(exc)
    for _ in range(8):
        errors = _gaps.errors_in(message, file_name)
        if not errors:
            break
        result = _gaps.leave_out(source, errors, base)
        if result is None:
            own = next(
                (
                    (name, s, e)
                    for name, s, e in _gaps.top_level_functions(source)
                    if name == base
                    and any(source.count("\n", 0, s) < line <= source.count("\n", 0, e) + 1 for line, _ in errors)
                ),
                None,
            )
            texture = _gaps.texture_in(source[own[1] : own[2]]) if own is not None else None
            if texture is not None and own is not None:
                line = source.count("\n", 0, own[1]) + texture[1]
                raise NotImplementedError(
                    f"kernel '{base}' uses {texture[0]} (line {line}): textures and surfaces are not supported by "
                    "the CPU emulation; pass the data as an array (a pointer or an ArrayND<T> view)"
                ) from None
            break
        source, dropped = result
        dropped_all += dropped
        names = {name for name, _, _ in dropped}
        kept = [e for e in entries if e.split("<", 1)[0].strip() not in names]
        if not kept or kernel.expression not in kept:
            break
        unit = translation_unit(source, kept, entries[0], tuple(_globals.declarations_of(kernel)))
        try:
            lib = build_library(
                unit, name=kernel.name, entries=kept, compiler=compiler, flags=flags, headers=headers, checks=checks
            )
        except RuntimeError as again:
            message = str(again)
            entries = kept
            continue
        _gaps.warn_left_out(kernel.name, kernel.source, dropped_all)
        return lib
    return None


def _source_file_name(first_entry: str) -> str:
    """The name the translation unit's line directive gives the source (see _source)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in first_entry) + ".cu"


_COMPLEX_USE = re.compile(r"\bcomplex\s*<")
_COMPLEX_HEADER = re.compile(
    r"#\s*include\s*[<\"](?:cupy/complex\.cuh|thrust/complex\.h|cuda/std/complex|complex)[>\"]"
)


def _complex_hint(kernel, headers) -> str:
    """A note for a failed build of a kernel that uses complex<T> without a header declaring it
    (NVRTC needs the same include)."""
    texts = [kernel.source]
    for path in headers:
        with contextlib.suppress(OSError):
            texts.append(Path(path).read_text(encoding="utf-8", errors="replace"))
    if any(_COMPLEX_USE.search(t) for t in texts) and not any(_COMPLEX_HEADER.search(t) for t in texts):
        return (
            f"note: kernel '{kernel.name}' uses complex<T> without including a header that declares it: "
            "add #include <cupy/complex.cuh> (or <thrust/complex.h>, <cuda/std/complex>)"
        )
    return ""


def _headers_of(kernel, tracked=None) -> tuple:
    """The headers whose contents key the build: the kernel's tracked headers (``tracked``, if
    already known) and also those it includes with angle brackets from its own include dirs
    (``#include <mine.cuh>``)."""
    from ..cuda._source import cuda_include_dir, resolve_includes

    tracked = list(kernel.included_headers if tracked is None else tracked)
    if kernel.include_dirs:
        for path in resolve_includes(
            kernel.source,
            kernel.include_dirs,
            base_dir=kernel.source_dir,
            angle_dirs=(*kernel.include_dirs, cuda_include_dir()),
        ):
            if path not in tracked:
                tracked.append(path)
    return tuple(tracked)


# ------------------------------------------------------------------ launches


def _check_shared_mem(kernel, shared_mem) -> int:
    if isinstance(shared_mem, (bool, np.bool_)) or not isinstance(shared_mem, (int, np.integer)):
        raise TypeError(f"shared_mem must be an int, not {type(shared_mem).__name__}")
    shared_mem = int(shared_mem)
    if shared_mem < 0:
        raise ValueError(f"shared_mem must be >= 0, got {shared_mem}")
    if shared_mem > DYNAMIC_SHARED_LIMIT:
        raise ValueError(
            f"kernel '{kernel.name}' (CPU emulation): shared_mem = {shared_mem} bytes exceeds the "
            f"limit {DYNAMIC_SHARED_LIMIT} bytes per block"
        )
    return shared_mem


def _skip_dirs() -> tuple:
    """Directories whose lines a report skips for the user's own (the prelude, shipped headers)."""
    from ..cuda._source import cuda_include_dir
    from ._build import prelude_dir

    return (str(prelude_dir()), str(Path(cuda_include_dir()) / "cunumpy"))


def _run(
    kernel,
    marshalled,
    grid,
    block,
    shared_mem,
    compiler,
    options,
    checked,
    *,
    args=None,
    sanitize=frozenset(),
    timeout=None,
    memcheck=None,
    analyze=None,
):
    """One launch; ``timeout`` and ``memcheck`` None: the environment's, read now. ``analyze``:
    the arch of a performance analysis (None: analyzed_launches()'s or the environment's, if
    any); an analysed launch returns its KernelAnalysis (and hands it to the collectors)."""
    if 0 in grid or 0 in block:
        return None  # nothing to launch, and nothing is compiled
    sanitize = frozenset(sanitize) | _environment_sanitize()
    timeout = check_timeout(timeout, "emulated launch") if timeout is None else timeout
    memcheck = _environment_memcheck() if memcheck is None else memcheck
    if analyze is None:
        analyze = _analysis.active_arch()
    checks = CHECKS_TRACK if analyze is not None else checks_mode(sanitize, memcheck)
    if analyze is not None:
        options = tuple(options) + _analysis.ANALYSIS_FLAGS
    lib = library_for(kernel, compiler, options, checks=checks)
    runtime_abi = getattr(core, "EMU_ABI_VERSION", None)
    if runtime_abi is None or not hasattr(core, "emu_launch"):
        raise RuntimeError(
            f"kernel '{kernel.name}': this build of cunumpy._core has no CPU emulation runtime (emu_launch)"
        )
    if lib.abi_version != runtime_abi:
        raise RuntimeError(
            f"kernel '{kernel.name}': the emulation library {str(lib.path)!r} was built for ABI version "
            f"{lib.abi_version}, the runtime has version {runtime_abi}"
        )
    thread_fn, block_fn = lib.entry(kernel.expression)
    _globals.apply(kernel, lib)  # __constant__/__device__ values set from Python
    _globals.add_regions(kernel, lib, marshalled)  # memcheck bounds them, initcheck sees unset constants
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    block3 = tuple(block) + (1,) * (3 - len(block))
    names = ", ".join(f"'{n}'" for n in lib.extern_shared)
    extra = {"analysis": marshalled.allocations} if analyze is not None else {}
    # an analysed launch runs every thread as a fiber: the thread function keeps the kernel's
    # own control flow (the block loop's copy is the compiler's to restructure)
    fibers = lib.fibers or analyze is not None
    try:
        rows = core.emu_launch(
            lib.bind,
            thread_fn,
            0 if fibers else block_fn,
            grid3,
            block3,
            marshalled.table,
            params=marshalled.params,
            shared_mem=shared_mem,
            fibers=fibers,
            checked=True,  # faults are always caught
            workers=emulation_workers(),
            kernel_name=kernel.name,
            checks=lib.checks,
            racecheck="racecheck" in sanitize,
            initcheck="initcheck" in sanitize,
            regions=marshalled.regions,
            dynamic_shared_name=f"extern __shared__ {names}" if names else "",
            library=lib.handle,
            timeout=timeout,
            interruptible=threading.current_thread() is threading.main_thread(),
            **extra,
        )
    except RuntimeError as exc:
        error = emulation_error(exc, kernel.name, _skip_dirs())
        if error is exc:
            raise
        raise error from None
    finally:
        marshalled.write_back()
    if kernel.check_finite and args is not None:
        _check_finite(kernel, args)
    if analyze is None or rows is None:
        return None
    result = _analysis.build(
        kernel,
        lib,
        rows,
        grid3,
        block3,
        shared_mem,
        analyze,
        _analysis_file_name(kernel),
        _skip_dirs(),
    )
    _analysis.deliver(result)
    return result


def _analysis_file_name(kernel) -> str:
    """The pseudo file name of the kernel's source in its library's line tables."""
    name = entry_points(kernel.source, kernel.expression)[0]
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) + ".cu"


def _check_finite(kernel, args):
    for path, a in _cuda_kernel.iter_arrays(args):
        host = getattr(a, "_a", None)
        if host is None or host.dtype.kind not in "fc" or host.size == 0:
            continue
        if not np.isfinite(host).all():
            raise RuntimeError(
                f"kernel '{kernel.name}' left NaN or inf in argument {path} "
                f"(dtype {host.dtype}, shape {tuple(host.shape)})"
            )


def emulate_cuda_kernel(
    kernel: CudaKernel,
    *args: object,
    n_threads: int | tuple[int, ...] | None = None,
    grid: int | tuple[int, ...] | None = None,
    block: int | tuple[int, ...] | None = None,
    compiler: str | None = None,
    options: Iterable[str] = (),
    shared_mem: int = 0,
    checked: bool = False,
    sanitize: str | Iterable[str] = (),
    timeout: float | None = None,
    memcheck: bool | None = None,
    outputs: Iterable[str | int] | None = None,
) -> None:
    """Run a CUDA kernel on the CPU as if it were launched with these arguments.

    The source is compiled once with the host C++ compiler against a prelude that provides
    the CUDA built-ins (cached in memory and in :func:`emulation_cache_dir`), and every
    thread of every block runs; blocks run in parallel. Kernels without barriers or warp
    operations run as plain loops, the others run each CUDA thread as a fiber. Memcheck is
    always on: an access outside the memory the launch gives the kernel is a
    :class:`MemcheckError` naming the variable, the element, the thread and the source line,
    and the access does not happen.

    Parameters
    ----------
    kernel : cunumpy.kernels.CudaKernel
        A kernel built with ``check_signature=True``.
    *args : object
        The kernel arguments: NumPy arrays (fake CuPy arrays through their host buffer) of
        the declared dtype, any strides (a copy's changed elements are written back into
        them; ``const`` parameters never); scalars, checked as in a launch; struct parameters
        as a mapping, a ``CudaStructValue`` or an object with one attribute per field.
    n_threads, grid, block : int or tuple of int, optional
        The launch shape, as for a GPU launch (inferred from the first array without them,
        in blocks of the kernel's ``block_size``).
    compiler : str, optional
        The C++ compiler (default: :func:`emulation_compiler`).
    options : sequence of str, optional
        Extra compiler options (``"-ffp-contract=off"`` gives NumPy's rounding).
    shared_mem : int, optional
        Bytes of ``extern __shared__`` memory per block.
    checked : bool, optional
        Accepted for earlier callers: faults are always caught now.
    sanitize : str or sequence of str, optional
        ``"racecheck"`` and/or ``"initcheck"`` (``"memcheck"`` is always on);
        ``CUNUMPY_EMULATION_SANITIZE`` adds to it.
    timeout : float, optional
        Stop the launch after this many seconds (default: ``CUNUMPY_EMULATION_TIMEOUT``, or
        none; ``math.inf``: none). A launch whose blocks all finished is never stopped.
    memcheck : bool, optional
        ``False`` is the performance option that turns memcheck off (default:
        ``CUNUMPY_EMULATION_MEMCHECK``, on).
    outputs : sequence of str or int, optional
        The output-only parameters, by name or index: initcheck reports reads of them before
        a write.

    Returns
    -------
    None
        Results are in the array arguments.

    Raises
    ------
    TypeError
        A kernel without signature checking, a wrong argument count or type, a missing struct
        field, a read-only array for a parameter the kernel may write, a masked array.
    ValueError
        An unknown sanitizer, a bad timeout, a kernel name no CUDA compiler accepts, an
        explicit ``grid=`` with a zero dimension (a launch inferred over zero elements
        launches nothing).
    MemcheckError
        An access outside an argument, a struct's pointer field or shared memory.
    KernelFaultError
        A null or wild pointer, a stack overflow, an integer division by zero.
    RacecheckError, InitcheckError
        With ``sanitize``: a data race, a read of unwritten memory.
    EmulationTimeoutError
        The launch ran longer than ``timeout``.
    EmulationError
        ``__trap()``, a failed ``assert`` or bounds check, a barrier some threads never reach,
        inconsistent warp masks.
    RuntimeError
        No C++ compiler, or a compile error (with the compiler's output).
    KeyboardInterrupt
        Ctrl-C while the kernel ran.
    """
    what = "emulate_cuda_kernel()"
    _check_kernel(kernel, what)
    _check_compiler(compiler, what)
    options = _check_options(options, what)
    sanitize = check_sanitize(sanitize, what)
    timeout = check_timeout(timeout, what)
    memcheck = check_memcheck(memcheck, what)
    marshalled = marshal_arguments(kernel, args, () if outputs is None else _check_outputs(outputs, what))
    g, blk = kernel._shape(n_threads, grid, block, args, marshalled.first_shape)
    if grid is not None and 0 in g:
        # a GPU refuses an empty grid (an inferred launch over zero elements launches nothing)
        raise ValueError(f"{what}: grid {g}: every dimension must be at least 1, as on a GPU")
    shared_mem = _check_shared_mem(kernel, shared_mem)
    _run(
        kernel,
        marshalled,
        g,
        blk,
        shared_mem,
        compiler,
        options,
        checked,
        sanitize=sanitize,
        timeout=timeout,
        memcheck=memcheck,
    )
    return None


def analyze_kernel(
    kernel: CudaKernel,
    *args: object,
    n_threads: int | tuple[int, ...] | None = None,
    grid: int | tuple[int, ...] | None = None,
    block: int | tuple[int, ...] | None = None,
    shared_mem: int = 0,
    arch: str = "sm_90",
    compiler: str | None = None,
    options: Iterable[str] = (),
) -> _analysis.KernelAnalysis:
    """Run a launch in the CPU emulation and say how it would use the GPU.

    The launch runs as :func:`emulate_cuda_kernel` runs it (the results are written into the
    arguments the same way; memcheck stays on), while the runtime counts, per source line,
    what the GPU's memory system and warp schedulers would see: global-memory requests and
    32-byte sectors against the ideal, shared-memory wavefronts and bank conflicts, atomics,
    divergent branches and active lanes, barriers; the occupancy comes from ``nvcc``'s
    resource usage for ``arch``. The counting rules are in the performance-analysis guide.
    These are counts, not a timing: caches, latencies, the instruction mix and clocks are
    not modelled.

    Parameters
    ----------
    kernel : cunumpy.kernels.CudaKernel
        A kernel built with ``check_signature=True``.
    *args : object
        The kernel arguments, as for :func:`emulate_cuda_kernel`.
    n_threads, grid, block : int or tuple of int, optional
        The launch shape.
    shared_mem : int, optional
        Bytes of ``extern __shared__`` memory per block.
    arch : str, optional
        The GPU architecture of the occupancy figures: ``"sm_70"``, ``"sm_75"``,
        ``"sm_80"``, ``"sm_86"``, ``"sm_89"`` or ``"sm_90"``.
    compiler : str, optional
        The C++ compiler (default: :func:`emulation_compiler`).
    options : sequence of str, optional
        Extra compiler options.

    Returns
    -------
    KernelAnalysis
        ``totals``, ``lines`` (per source line), ``to_text()``, ``to_dict()``, ``to_html()``.

    Raises
    ------
    TypeError, ValueError
        As :func:`emulate_cuda_kernel`; an unknown ``arch``.
    MemcheckError, KernelFaultError, EmulationError
        As :func:`emulate_cuda_kernel`.
    """
    what = "analyze_kernel()"
    _check_kernel(kernel, what)
    _check_compiler(compiler, what)
    options = _check_options(options, what)
    arch = _analysis.check_arch(arch, what)
    marshalled = marshal_arguments(kernel, args)
    g, blk = kernel._shape(n_threads, grid, block, args, marshalled.first_shape)
    shared_mem = _check_shared_mem(kernel, shared_mem)
    result = _run(kernel, marshalled, g, blk, shared_mem, compiler, options, False, args=args, analyze=arch)
    if result is None:  # an empty launch: nothing ran
        empty = _analysis.build(kernel, None, [], _dim3(g), _dim3(blk), shared_mem, arch, "", ())
        return empty
    return result


def _dim3(shape) -> tuple[int, int, int]:
    x, y, z = (*tuple(shape), 1, 1, 1)[:3]
    return (x, y, z)


def compile_for_emulation(kernel: CudaKernel, *, compiler: str | None = None, options: Iterable[str] = ()) -> Path:
    """Build (or find in the cache) the emulation library of a kernel, without launching it.

    Parameters
    ----------
    kernel : cunumpy.kernels.CudaKernel
        The kernel.
    compiler : str, optional
        The C++ compiler (default: :func:`emulation_compiler`).
    options : sequence of str, optional
        Extra compiler options.

    Returns
    -------
    pathlib.Path
        The path of the shared library.
    """
    _check_kernel(kernel, "compile_for_emulation()")
    _check_compiler(compiler, "compile_for_emulation()")
    options = _check_options(options, "compile_for_emulation()")
    return library_for(kernel, compiler, options).path


# ------------------------------------------------------------------ hooks
#
# The hook of a launch is looked up per thread and per context (contextvars): an
# ``emulated_launches()`` block applies to the code it encloses and to nothing running in
# other threads. Where no block is open and the fake CuPy is active, the automatic emulation
# applies; when it is off or has no compiler, CudaKernel takes the device path, and the fake
# CuPy's kernel objects refuse with the reason (RefusingHook). CudaKernel finds its hook
# through ``_cuda_kernel.context_hook`` (set at the end of this module), the fake CuPy's
# kernel objects through :func:`fake_cupy_hook`. The launch options of a hook are one
# frozen ``LaunchOptions``, handed to ``_run`` as keywords.


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """The options of emulated launches: every field is a keyword of ``_run``.

    Adding an option of ``emulated_launches`` is one field here (and its check there).
    """

    compiler: str | None = None
    options: tuple = ()
    checked: bool = False
    #: racecheck/initcheck (CUNUMPY_EMULATION_SANITIZE adds to it at each launch)
    sanitize: frozenset = frozenset()
    #: seconds, or None: CUNUMPY_EMULATION_TIMEOUT at each launch
    timeout: float | None = None
    #: False: the performance option; None: CUNUMPY_EMULATION_MEMCHECK at each launch
    memcheck: bool | None = None

    def run_keywords(self) -> dict:
        """The keyword arguments of ``_run`` for these options."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


#: The options of a launch outside any ``emulated_launches()`` block (the automatic emulation).
DEFAULT_OPTIONS = LaunchOptions()

_THREADS_VARIABLE = "CUNUMPY_EMULATION_THREADS"
_MAX_WORKERS = 256  # EMU_MAX_WORKERS of the C runtime


def emulation_workers() -> int:
    """The emulator's worker threads for a launch: ``CUNUMPY_EMULATION_THREADS`` when set (a
    whole number >= 1; more than 256 means 256), else the thread count of the host algorithms
    (``xp.threads.get_num_threads()``: ``CUNUMPY_NUM_THREADS`` or the usable CPUs)."""
    raw = os.environ.get(_THREADS_VARIABLE, "").strip()
    if raw:
        try:
            value = int(raw, 10)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(
                f"{_THREADS_VARIABLE} must be a whole number >= 1 (the CPU emulator's worker threads), got {raw!r}"
            )
        return min(value, _MAX_WORKERS)
    from .. import threads

    return max(1, min(int(threads.get_num_threads()), _MAX_WORKERS))


class EmulationHook:
    """What ``emulated_launches()`` (and the automatic emulation) applies: CudaKernel's
    launch and compilation hook and the fake CuPy's launch hook, with one ``LaunchOptions``."""

    def __init__(self, settings: LaunchOptions = DEFAULT_OPTIONS):
        if not isinstance(settings, LaunchOptions):
            raise TypeError(f"EmulationHook: expected LaunchOptions, not {type(settings).__name__}")
        self.settings = settings

    def __repr__(self):
        return f"EmulationHook({self.settings!r})"

    def _library(self, kernel, *, fresh=False):
        settings = self.settings
        memcheck = _environment_memcheck() if settings.memcheck is None else settings.memcheck
        checks = checks_mode(settings.sanitize | _environment_sanitize(), memcheck)
        return library_for(kernel, settings.compiler, settings.options, fresh=fresh, checks=checks)

    # CudaKernel's hook
    def launch(self, kernel, args, grid, block, shared_mem):
        cupy = sys.modules.get("cupy")
        if cupy is not None and getattr(cupy, "__cunumpy_fake__", False) is True:
            # The fake device's limits, as a launch on a GPU checks its device's.
            device = _cuda_kernel._current_device_or_none(cupy) or 0
            kernel._validate(_cuda_kernel._device_limits(cupy, device), grid, block, shared_mem)
        if 0 in grid or 0 in block:
            return None  # nothing to launch (CudaKernel has checked the arguments), nothing compiled
        marshalled = marshal_arguments(kernel, args)
        shared_mem = _check_shared_mem(kernel, shared_mem)
        _run(kernel, marshalled, grid, block, shared_mem, args=args, **self.settings.run_keywords())
        return None

    def compile(self, kernel):
        _check_kernel(kernel, f"CudaKernel.compile() of '{kernel.name}' under the CPU emulation")
        self._library(kernel)
        return None

    def recompile(self, kernel):
        _check_kernel(kernel, f"CudaKernel.recompile() of '{kernel.name}' under the CPU emulation")
        self._library(kernel, fresh=True)
        return None

    # CudaKernel.set_global / get_global
    def set_global(self, kernel, name):
        """Copy the value just set on ``kernel`` into the library its launches use now."""
        _globals.apply(kernel, self._library(kernel))

    def get_global(self, kernel, name):
        """The variable in the library of the kernel's last launch (else the one its launches
        use now): a fake-CuPy array on the fake CuPy, else a NumPy array, sharing its memory."""
        lib = _globals.last_library(kernel) or self._library(kernel)
        _globals.apply(kernel, lib)
        arr = _globals.view(kernel, lib, _globals.declarations_of(kernel)[name])
        return _device_view(arr)

    def _module_global(self, module, name):
        return _module_global_of(self, module, name)

    # the fake CuPy's RawKernel / RawModule / ElementwiseKernel / ReductionKernel
    def fake_cupy(self, action, obj, args, kwargs):
        kind = type(obj).__name__
        if kind == "RawKernel":
            kernel = _raw_kernel(obj)
            if action == "compile":
                return self.compile(kernel)
            if action == "launch":
                grid, block, kernel_args = args
                g = _cuda_kernel._check_dims(grid, "grid")
                blk = _cuda_kernel._check_block(block, "block")
                if 0 in g:  # CuPy's launch fails on a GPU (CUDA_ERROR_INVALID_VALUE)
                    raise ValueError(f"RawKernel {obj.name!r}: grid {g}: every dimension must be at least 1")
                if not isinstance(kernel_args, tuple):
                    raise TypeError(f"RawKernel {obj.name!r}: args must be a tuple, not {type(kernel_args).__name__}")
                return self.launch(kernel, kernel_args, g, blk, kwargs.get("shared_mem", 0))
        if kind == "RawModule" and action == "read globals of":
            return self._module_global(obj, args[0])
        if kind == "RawModule" and action == "compile":
            from ..cuda._source import cuda_kernel_names

            code = obj.code if obj.code is not None else Path(obj.path).read_text(encoding="utf-8")
            for name in cuda_kernel_names(code):
                if _cuda_kernel._is_template(code, name):
                    continue
                try:
                    kernel = CudaKernel(code, name, options=obj.options)
                except ValueError:
                    continue  # a parameter type only a CudaKernel with structs= can read
                self.compile(kernel)
            return None
        raise NotImplementedError(
            f"the CPU emulation cannot {action} a fake-CuPy {kind} ({getattr(obj, 'name', '')!r}); it emulates "
            "CudaKernel launches and RawKernel launches"
        )

    __call__ = fake_cupy


def _device_view(arr: np.ndarray):
    """A fake-CuPy array over the memory of ``arr`` on the fake CuPy, else ``arr`` itself."""
    cupy = sys.modules.get("cupy")
    if cupy is None or getattr(cupy, "__cunumpy_fake__", False) is not True:
        return arr
    from .._fake_cupy._cuda import Memory, MemoryPointer

    return cupy.ndarray(arr.shape, arr.dtype, memptr=MemoryPointer(Memory(arr.reshape(-1).view(np.uint8)), 0))


def _set_module_expressions(kernel, module) -> None:
    """The name expressions of the fake-CuPy RawModule a kernel comes from, normalised as
    CudaKernel spells them, so that all its kernels build one library."""
    names = tuple(getattr(module, "name_expressions", ()) or ()) if module is not None else ()
    if not names:
        return
    out = []
    for n in names:
        try:
            out.append(CudaKernel(kernel.source, n, options=kernel.options, check_signature=False).expression)
        except (TypeError, ValueError):
            continue
    kernel._module_expressions = tuple(out)


def _module_kernel(module) -> CudaKernel:
    """A CudaKernel of a fake-CuPy RawModule's source: its library holds the module's globals."""
    from ..cuda._source import cuda_kernel_names

    code = module.code if module.code is not None else Path(module.path).read_text(encoding="utf-8")
    for name in cuda_kernel_names(code):
        if _cuda_kernel._is_template(code, name):
            continue
        try:
            kernel = CudaKernel(code, name, options=module.options)
        except ValueError:
            continue
        _set_module_expressions(kernel, module)
        return kernel
    for expression in getattr(module, "name_expressions", ()) or ():
        kernel = CudaKernel(code, expression, options=module.options)
        _set_module_expressions(kernel, module)
        return kernel
    raise NotImplementedError(
        f"RawModule {getattr(module, 'name', '')!r}: the CPU emulation needs a kernel whose signature it can "
        "read to build the module"
    )


def _module_global_of(hook, module, name):
    if not isinstance(name, str):
        raise TypeError(f"RawModule.get_global(): 'name' must be a str, not {type(name).__name__}")
    kernel = _module_kernel(module)
    decls = _globals.declarations_of(kernel)
    lib = hook._library(kernel)
    try:
        ptr, size = _globals.address(lib, name)
    except KeyError:
        raise ValueError(
            f"RawModule.get_global(): the source declares no __constant__ or __device__ variable {name!r} "
            f"that the CPU emulation can read (found: {', '.join(sorted(decls)) or 'none'})"
        ) from None
    import ctypes

    from .._fake_cupy._cuda import Memory, MemoryPointer

    raw = (ctypes.c_char * size).from_address(ptr)
    host = np.frombuffer(raw, dtype=np.uint8)  # type: ignore[call-overload]  # a ctypes buffer
    return MemoryPointer(Memory(host), 0)


class RefusingHook:
    """The fake CuPy's launch hook when the automatic emulation cannot run: launching or
    compiling its kernel objects raises ``EmulationUnavailable`` (a ``NotImplementedError``) with the reason
    (``CUNUMPY_EMULATION=0``, or no C++ compiler). CudaKernel launches then take the device
    path, which ends there."""

    def __init__(self, reason: str, remedy: str):
        self.reason = reason
        self.remedy = remedy

    def __repr__(self):
        return f"RefusingHook({self.reason!r})"

    def fake_cupy(self, action, obj, args, kwargs):
        kind = type(obj).__name__
        what = f"{kind} {getattr(obj, 'name', None)!r}"
        if kind == "RawModule":
            names = list(getattr(obj, "name_expressions", ()) or ())
            if not names and isinstance(getattr(obj, "code", None), str):
                from ..cuda._source import cuda_kernel_names

                names = cuda_kernel_names(obj.code)
            if names:
                shown = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
                what = f"RawModule of kernel {shown}"
        raise EmulationUnavailable(
            f"{what}: the fake CuPy cannot {action} CUDA kernels: {self.reason}; {self.remedy}", self.reason
        )

    __call__ = fake_cupy


_raw_kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_raw_kernels_lock = threading.Lock()


def _raw_kernel(raw) -> CudaKernel:
    with _raw_kernels_lock:
        kernel = _raw_kernels.get(raw)
    if kernel is None:
        code = raw.code
        if code is None and getattr(raw.module, "path", None) is not None:
            code = Path(raw.module.path).read_text(encoding="utf-8")
        kernel = CudaKernel(code, raw.name, options=raw.options)
        _set_module_expressions(kernel, raw.module)
        with _raw_kernels_lock:
            kernel = _raw_kernels.setdefault(raw, kernel)
    return kernel


#: The hook of the innermost ``emulated_launches()`` block of this thread and context.
_context_hook: contextvars.ContextVar = contextvars.ContextVar("cunumpy_emulation_hook", default=None)

EMULATION_VARIABLE = "CUNUMPY_EMULATION"
_OFF = ("0", "false", "no", "off")
_ON = ("", "1", "true", "yes", "on")

_automatic_lock = threading.Lock()
_automatic: dict = {}  # (CUNUMPY_EMULATION, CXX, PATH) -> the hook outside any block


def _fake_cupy_active() -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and getattr(cupy, "__cunumpy_fake__", False) is True


def automatic_emulation_status() -> tuple[bool, str]:
    """(True, compiler) when launches on the fake CuPy emulate by themselves, else (False,
    why not): ``CUNUMPY_EMULATION=0``, or no C++ compiler (saying which one was looked for).
    ValueError for a ``CUNUMPY_EMULATION`` that is neither on nor off."""
    raw = os.environ.get(EMULATION_VARIABLE, "")
    setting = raw.strip().lower()
    if setting in _OFF:
        return False, f"the automatic CPU emulation is off ({EMULATION_VARIABLE}={raw.strip()})"
    if setting not in _ON:
        raise ValueError(f"{EMULATION_VARIABLE} must be 1 or 0 (true/false, yes/no, on/off), got {raw!r}")
    compiler = emulation_compiler()
    if compiler is None:
        return False, f"the CPU emulation needs a C++ compiler: {compiler_looked_for()}"
    return True, compiler


def compiler_looked_for() -> str:
    """Which compiler the emulation looked for and did not find, in words."""
    cxx = os.environ.get("CXX", "").strip()
    if cxx:
        return f"neither $CXX ({cxx!r}) nor c++ was found on PATH"
    return "c++ was not found on PATH ($CXX is not set)"


def _automatic_hook():
    key = (os.environ.get(EMULATION_VARIABLE), os.environ.get("CXX"), os.environ.get("PATH"))
    hook = _automatic.get(key)
    if hook is None:
        usable, detail = automatic_emulation_status()
        if usable:
            hook = EmulationHook(DEFAULT_OPTIONS)
        elif os.environ.get(EMULATION_VARIABLE, "").strip().lower() in _OFF:
            hook = RefusingHook(
                detail,
                f"unset {EMULATION_VARIABLE}, run the launch inside cunumpy.kernel_testing.emulated_launches(), "
                "or use a real GPU",
            )
        else:
            hook = RefusingHook(detail, "install a C++17 compiler (g++ or clang++) or set CXX, or use a real GPU")
        with _automatic_lock:
            if len(_automatic) > 64:
                _automatic.clear()
            hook = _automatic.setdefault(key, hook)
    return hook


def current_hook():
    """CudaKernel's hook for the calling thread and context: the innermost
    ``emulated_launches()`` block's; else, on the fake CuPy, the automatic emulation when it
    can run; else None (the device path: the GPU, or the fake CuPy's refusal)."""
    hook = _context_hook.get()
    if hook is None and _fake_cupy_active():
        hook = _automatic_hook()
        if isinstance(hook, RefusingHook):
            return None
    return hook


def fake_cupy_hook():
    """The launch hook of the fake CuPy's kernel objects for the calling thread and context:
    an ``emulated_launches()`` block's, else the automatic emulation or its refusal."""
    hook = _context_hook.get()
    return _automatic_hook() if hook is None else hook


@contextlib.contextmanager
def emulated_launches(
    *,
    compiler: str | None = None,
    options: Iterable[str] = (),
    checked: bool = False,
    sanitize: str | Iterable[str] = (),
    timeout: float | None = None,
    memcheck: bool | None = None,
) -> Iterator[None]:
    """Run every CUDA kernel launch and compilation inside the block on the CPU.

    Every :class:`~cunumpy.kernels.CudaKernel` launch (also through ``Kernel`` on the CuPy
    backend, argument objects and structs) runs through the emulation on the host buffers
    of fake-CuPy arrays, and ``compile()`` (so also ``CudaKernelVariants.compile_all`` and
    ``KernelCatalog.compile_all``) builds the emulation and returns None. On the fake CuPy
    launches emulate by themselves; the block is for the options. It applies to the thread
    (and the ``contextvars`` context) that entered it, and to the worker threads of
    ``compile_all``; threads started otherwise do not inherit it (run them with
    ``contextvars.copy_context().run``). Blocks nest: leaving one (also by an exception)
    restores the one around it.

    Parameters
    ----------
    compiler : str, optional
        The C++ compiler.
    options : sequence of str, optional
        Extra compiler options.
    checked : bool, optional
        Accepted for earlier callers: faults are always caught now.
    sanitize : str or sequence of str, optional
        ``"racecheck"`` and/or ``"initcheck"`` for every launch of the block.
    timeout : float, optional
        Seconds after which a launch is stopped (default: ``CUNUMPY_EMULATION_TIMEOUT``).
    memcheck : bool, optional
        ``False`` turns memcheck off (the performance option).

    Yields
    ------
    None

    Raises
    ------
    TypeError, ValueError
        A bad compiler, options, sanitizer name or timeout.
    """
    what = "emulated_launches()"
    _check_compiler(compiler, what)
    options = _check_options(options, what)
    sanitize = check_sanitize(sanitize, what)
    if timeout is not None:
        timeout = check_timeout(timeout, what)
    if memcheck is not None:
        memcheck = check_memcheck(memcheck, what)
    hook = EmulationHook(
        LaunchOptions(
            compiler=compiler,
            options=options,
            checked=bool(checked),
            sanitize=sanitize,
            timeout=timeout,
            memcheck=memcheck,
        )
    )
    previous = _context_hook.get()
    token = _context_hook.set(hook)
    try:
        yield
    finally:
        try:
            _context_hook.reset(token)
        except ValueError:  # left in another context than the one that entered it
            _context_hook.set(previous)


_cuda_kernel.context_hook = current_hook
