"""CudaKernel (API.md section 2.3).

A CudaKernel is parsed once at construction (never importing CuPy): the signature becomes a
``LaunchPlan`` of the C core that checks and packs the arguments of every call. Compilation
goes through NVRTC (``cupy.RawModule``) on the first launch or on ``compile()``; launches hand
the packed buffer to the CUDA driver (``cuLaunchKernel`` with the kernel handle and the
stream), falling back to CuPy's own launch functions where that is not possible.

The class and the hooks of the CPU emulation live here; the parsing side (plan specs, source
text) is ``_cuda_parse``, the launch side (sizes, devices, arrays in arguments) ``_cuda_launch``
and CudaKernelVariants ``_cuda_variants``. Their names that other modules and tests use are
importable from here as before.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _transfers
from .._native import core
from ..cuda import _debug
from ..cuda._source import (
    CudaParameter,
    cuda_include_dir,
    include_hash,
    parse_signature_full,
    resolve_includes,
    template_arg_text,
)
from ._cuda_launch import (
    _CUDA_ERROR_INVALID_CONTEXT,
    _check_block,
    _check_dims,
    _check_stream,
    _Compiled,
    _cupy,
    _cupy_arg,
    _current_device,
    _current_device_or_none,
    _device_getter,
    _device_limits,
    _device_type as _device_type,
    _first_shape,
    _flatten_unchecked,
    _grid_for,
    _limits_cache,
    _on_hip,
    _raise_driver_error,
    _struct_fields as _struct_fields,
    iter_arrays,
)
from ._cuda_parse import (
    _COMMENTS,
    _HIGH_VIEWS,
    _bounds_check_in,
    _build_plan,
    _cxx_linkage,
    _file_kwargs,
    _is_template,
    _read_text,
    _spec as _spec,
    _view_record,
)

if TYPE_CHECKING:
    from ..arguments import CudaStruct

__all__ = ["CudaKernel"]


_N_THREADS_FROM = ("auto", "first_array", "last_axis")
_INFER_CODES = {"auto": 0, "first_array": 1, "last_axis": 2}  # the C path's codes (pack_plan.h INFER_*)

#: A hook that takes over every launch and compilation when set (tests set one):
#: ``hook.launch(kernel, args, grid, block, shared_mem)`` and ``hook.compile(kernel)``.
emulation_hook = None


def _load_context_hook():
    """Until cunumpy._emulation is imported: on the fake CuPy, the fake's launch hook, which
    loads the emulation (that replaces ``context_hook`` with its lookup, and launches there
    emulate by themselves). The emulation sits above the kernels: they never import it."""
    launch_hook = getattr(sys.modules.get("cupy"), "__cunumpy_launch_hook__", None)  # the fake's only
    return None if launch_hook is None else launch_hook()


#: The CPU emulation's hook of the calling thread and context (an ``emulated_launches()``
#: block, or the automatic emulation on the fake CuPy), or None: see cunumpy._emulation._launch.
context_hook = _load_context_hook


def _emulation_hook():
    """The hook that takes over launches and compilation here and now, or None."""
    hook = emulation_hook
    return context_hook() if hook is None else hook


def _not_device_advice(obj) -> str:
    """What the C packer's "expected a device array" message advises for ``obj``.

    On the NumPy backend a host array cannot be moved anywhere useful: the advice names what
    runs a CUDA kernel on the CPU. Otherwise: create the array on the device.
    """
    from .._backend import get_backend

    if get_backend() == "numpy" and isinstance(obj, np.ndarray):
        return (
            "CudaKernel never copies arrays to the device, and the NumPy backend is active: to run this "
            "kernel on the CPU with NumPy arrays, call cunumpy.kernel_testing.emulate_cuda_kernel(kernel, "
            "*args), or use the fake CuPy, whose launches emulate automatically (CUNUMPY_FAKE_CUPY=1 "
            "CUNUMPY_BACKEND=cupy, arrays made with xp.asarray); on a GPU, activate the CuPy backend and "
            "create the arrays there"
        )
    return (
        "CudaKernel never copies arrays to the device: create the array on the device (xp.asarray on the "
        "CuPy backend, xp.to_cupy or xp.as_device_array) once, where the data is made"
    )


def _split_expression(expression: str) -> tuple[str, tuple[str, ...]]:
    """``"matrixMul<32>"`` -> ``("matrixMul", ("32",))``: the kernel's name and the template
    arguments of a name expression, split at the top-level commas."""
    base, _, rest = expression.partition("<")
    base = base.strip()
    rest = rest.strip()
    if not base.isidentifier() or not rest.endswith(">"):
        raise ValueError(
            f"CudaKernel: {expression!r} is neither a kernel name nor a name expression like 'matrixMul<32>'"
        )
    inner = rest[:-1]
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in inner:
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur).strip())
    if depth != 0 or any(not p for p in parts):
        raise ValueError(f"CudaKernel: malformed name expression {expression!r}")
    return base, tuple(parts)


def _struct_from_source(text: str, name: str, options: tuple):
    """The CudaStruct of a struct the kernel's source (or a header) defines."""
    from ..arguments import CudaStruct

    return CudaStruct.from_source(text, name, options=options)


class _LazyHeaders:
    """The texts of the headers a kernel includes, read only when the signature needs them
    (type aliases and structs in a header)."""

    def __init__(self, kernel):
        self._kernel = kernel

    def __iter__(self):
        k = self._kernel
        paths = resolve_includes(k._source, k._include_dirs, base_dir=k._source_dir)
        return iter([_read_text(p) for p in paths])


# ------------------------------------------------------------------ CudaKernel


class _NThreadsRule:
    """``kernel.n_threads_from`` for a string setting: the rule as a callable of the argument
    tuple, for that kernel's block (earlier releases exposed the inference this way)."""

    __slots__ = ("_kernel", "name")

    def __init__(self, kernel, name):
        self._kernel = kernel
        self.name = name

    def __call__(self, args):
        args = tuple(args)
        k = self._kernel
        return k._infer(k._block, args, _first_shape(args), mode=self.name)

    def __eq__(self, other):
        if isinstance(other, _NThreadsRule):
            return self.name == other.name and self._kernel is other._kernel
        if isinstance(other, str):
            return self.name == other
        return NotImplemented

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"<n_threads_from {self.name!r} of kernel {self._kernel.name!r}>"


class CudaKernel:
    """A CUDA C/C++ kernel compiled with NVRTC through CuPy and launched with checked arguments.

    Constructing one never imports CuPy; the source is compiled on the first launch (or
    :meth:`compile`), once per device. It never copies data: pointer parameters take
    C-contiguous device arrays of exactly the declared dtype, ``ArrayND<T>`` parameters
    device arrays of any strides, ``CArrayND<T>`` C-contiguous ones; integer scalars are
    range-checked. A call is ``kernel(*args, n_threads=, grid=, block=, shared_mem=,
    stream=)``; without sizes the launch covers the first array argument (see
    ``n_threads_from``).

    Parameters
    ----------
    source : str
        The CUDA source, holding the kernel (``extern "C" __global__``, a plain
        ``__global__`` or a template).
    name : str
        The kernel's name in the source.
    block_size : int or tuple of int, optional
        The block of launches whose size is inferred or given as ``n_threads`` (default 128).
    options : sequence of str, optional
        NVRTC options (``-D...``, ``-I...``, ...).
    include_dirs : sequence of path, optional
        Folders searched for ``#include "..."``; included headers are hashed into the
        compile cache key, so editing them recompiles.
    source_dir : path, optional
        The folder the source came from (set by :meth:`from_file`); searched for includes.
    structs : sequence of cunumpy.arguments.CudaStruct, optional
        The struct types of struct parameters; a struct the source also defines must agree.
    template_args : object or sequence, optional
        Template arguments of a template kernel: dtypes, C type names or integers.
    check_signature : bool, optional
        Parse the signature and check every argument (default). False passes arguments to
        CuPy unchecked and makes the kernel impossible to emulate.
    debug : bool or None, optional
        Compile with ``-lineinfo -DCUNUMPY_BOUNDS_CHECK`` and synchronise after each launch;
        None follows :func:`cunumpy.cuda.get_cuda_debug`.
    n_threads_from : {"auto", "first_array", "last_axis"}, callable or None, optional
        How a launch without sizes is sized: ``"auto"`` from the first array (1-D block:
        ``shape[0]``; 2-D: ``shape[:2]``; 3-D: ``shape[:3]``), ``"first_array"`` always
        ``shape[0]`` of the first array, ``"last_axis"`` from its last axis (component-major
        ``(ncomp, N)`` arrays), a callable of the arguments, or None to require explicit
        sizes. The attribute reads
        back as a callable rule (``k.n_threads_from(args)`` is the size a launch would use);
        ``n_threads_from_setting`` is the value as set.
    check_finite : bool, optional
        After each launch, check floating output arrays for NaN and infinity (a
        synchronisation; :class:`RuntimeError` naming the array).

    Raises
    ------
    TypeError
        An argument has the wrong type (``source`` or ``name`` not a str, ``options`` not a
        sequence of str, ...).
    ValueError
        The signature cannot be parsed or checked, the kernel is not in the source, the
        template arguments do not fit, a struct definition differs from its ``CudaStruct``,
        or ``block_size`` is not positive.
    """

    def __init__(
        self,
        source: str,
        name: str,
        *,
        block_size: int | tuple[int, ...] = 128,
        options: Iterable[str] = (),
        include_dirs: Iterable[str | os.PathLike[str]] = (),
        source_dir: str | os.PathLike[str] | None = None,
        structs: Iterable[CudaStruct] = (),
        template_args: Any = None,
        check_signature: bool = True,
        debug: bool | None = None,
        n_threads_from: str | Callable[[tuple], int | tuple[int, ...]] | None = "auto",
        check_finite: bool = False,
    ) -> None:
        if not isinstance(source, str):
            raise TypeError(f"CudaKernel: 'source' must be a str, not {type(source).__name__}")
        if not isinstance(name, str) or not name:
            raise TypeError(f"CudaKernel: 'name' must be a non-empty str, not {name!r}")
        self._block = _check_block(block_size)
        if isinstance(options, str) or not hasattr(options, "__iter__"):
            raise TypeError("CudaKernel: 'options' must be a sequence of str")
        options = tuple(options)
        if not all(isinstance(o, str) for o in options):
            raise TypeError("CudaKernel: 'options' must be a sequence of str")
        if isinstance(include_dirs, (str, os.PathLike)) or not hasattr(include_dirs, "__iter__"):
            raise TypeError("CudaKernel: 'include_dirs' must be a sequence of paths")
        try:
            self._include_dirs = tuple(Path(d) for d in include_dirs)
            self._source_dir = Path(source_dir) if source_dir is not None else None
        except TypeError:
            raise TypeError("CudaKernel: 'include_dirs' and 'source_dir' must be paths") from None
        self._options = options + tuple(f"-I{d}" for d in self._include_dirs)
        if debug is not None and not isinstance(debug, bool):
            raise TypeError(f"CudaKernel: 'debug' must be None, True or False, not {debug!r}")
        if isinstance(structs, (str, bytes)) or not hasattr(structs, "__iter__"):
            raise TypeError("CudaKernel: 'structs' must be a sequence of CudaStruct objects")
        self._structs = tuple(structs)
        self._source = source
        if "<" in name and template_args is None:
            # A name expression (CuPy's name_expressions): "matrixMul<32>", "k<float, 4>".
            name, template_args = _split_expression(name)
        self._name = name
        self._debug = debug
        self._check_signature = bool(check_signature)
        if template_args is not None:
            if isinstance(template_args, (str, bytes)) or not hasattr(template_args, "__iter__"):
                template_args = (template_args,)
            template_args = tuple(template_args)
            texts = tuple(template_arg_text(a) for a in template_args)
            self._expression = f"{name}<{', '.join(texts)}>"
        else:
            self._expression = name
        self._template_args = template_args
        if self._check_signature:
            params, is_template, extern_c = parse_signature_full(
                source,
                name,
                structs=self._structs,
                template_args=template_args,
                headers=_LazyHeaders(self),
                options=options,
                make_struct=_struct_from_source,
            )
            # A plain __global__ (C++ linkage) is compiled through its name expression, as
            # CuPy's RawModule(name_expressions=...) does for templates.
            self._by_expression = is_template or not extern_c
            self._signature = params
            self._plan = _build_plan(name, params)
            self._plan.configure_launch(self._block, -1)  # the rule is set with n_threads_from below
        else:
            self._signature = None
            self._plan = None
            self._by_expression = template_args is not None or _cxx_linkage(source, name)
        self._n_threads_from = "auto"
        self.n_threads_from = n_threads_from
        self._check_finite = bool(check_finite)
        self._compiled: dict[int, _Compiled] = {}
        self._lock = threading.Lock()

    # -------------------------------------------------------------- constructors

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], name: str | None = None, *, suffix: str = "_cuda.cu", **kwargs: Any
    ) -> CudaKernel:
        """Kernel ``name`` (default: the file name minus ``suffix``) of a ``.cu`` file."""
        path = Path(path)
        if name is None:
            if not path.name.endswith(suffix) or len(path.name) == len(suffix):
                raise ValueError(
                    f"CudaKernel.from_file(): cannot derive the kernel name from {path.name!r} "
                    f"(it does not end with {suffix!r}); pass name="
                )
            name = path.name[: -len(suffix)]
        source = path.read_text(encoding="utf-8")
        return cls(source, name, **_file_kwargs(path, kwargs))

    @classmethod
    def all_from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> dict[str, CudaKernel]:
        """One kernel per ``__global__`` function of the file, in order of first appearance."""
        from ..cuda._source import cuda_kernel_names

        path = Path(path)
        source = path.read_text(encoding="utf-8")
        names = cuda_kernel_names(source)
        if not names:
            raise ValueError(f"CudaKernel.all_from_file(): no __global__ function in {str(path)!r}")
        kw = _file_kwargs(path, kwargs)
        kernels = {}
        for n in names:
            kn = kw
            if kw.get("check_signature", True) and kw.get("template_args") is None and _is_template(source, n):
                # A template is listed too; without template_args it can only be unchecked.
                kn = dict(kw, check_signature=False)
            kernels[n] = cls(source, n, **kn)
        # One compilation for the file: the kernels share their per-device modules.
        shared: dict = {}
        share = (shared, tuple(kernels.values()))  # one tuple for all: linear in the kernels
        for k in share[1]:
            k._module_share = share
        return kernels

    # -------------------------------------------------------------- properties

    @property
    def name(self) -> str:
        """The kernel's name in the source."""
        return self._name

    @property
    def expression(self) -> str:
        """The name expression compiled (``name<args>`` for a template)."""
        return self._expression

    @property
    def source(self) -> str:
        """The CUDA source text."""
        return self._source

    @property
    def options(self) -> tuple[str, ...]:
        """The NVRTC options, including ``-I`` for each include folder."""
        return self._options

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        """The include folders given at construction."""
        return self._include_dirs

    @property
    def source_dir(self) -> Path | None:
        """The folder of the source file (a pathlib.Path), or None."""
        return self._source_dir

    @property
    def structs(self) -> tuple[CudaStruct, ...]:
        """The CudaStruct types of struct parameters."""
        return self._structs

    @property
    def template_args(self) -> tuple | None:
        """The template arguments, or None."""
        return self._template_args

    @property
    def signature(self) -> tuple[CudaParameter, ...] | None:
        """The parsed parameters (a tuple of cunumpy.cuda.CudaParameter), or None without signature checking."""
        return self._signature

    @property
    def debug(self) -> bool | None:
        """The kernel's own debug setting: True, False or None (follow the global debug mode)."""
        return self._debug

    @property
    def block_size(self) -> int | tuple[int, ...]:
        """The block size of launches sized by ``n_threads`` or inference (an int, or a tuple for 2-D and 3-D blocks)."""
        return self._block[0] if len(self._block) == 1 else self._block

    @property
    def n_threads_from(self) -> Callable[[tuple], int | tuple[int, ...]] | None:
        """The launch-size inference as a callable ``f(args) -> int | tuple`` (as earlier releases
        had it), or None. For a string setting, a callable implementing that rule for this kernel
        whose ``name`` is the string (it also compares equal to it)."""
        mode = self._n_threads_from
        if isinstance(mode, str):
            return _NThreadsRule(self, mode)
        return mode

    @n_threads_from.setter
    def n_threads_from(self, value):
        if isinstance(value, _NThreadsRule):
            value = value.name  # a rule read from a kernel: the same rule for this one
        if not (value is None or callable(value) or (isinstance(value, str) and value in _N_THREADS_FROM)):
            raise TypeError(
                f"n_threads_from must be a callable, 'auto', 'first_array', 'last_axis' or None, not {value!r}"
            )
        self._n_threads_from = value
        plan = getattr(self, "_plan", None)
        if plan is not None:
            # The rules the C path applies itself; a callable or None is Python's.
            plan.configure_launch(self._block, _INFER_CODES.get(value, -1) if isinstance(value, str) else -1)

    @property
    def n_threads_from_setting(self) -> str | Callable[[tuple], int | tuple[int, ...]] | None:
        """The setting as given: ``"auto"``, ``"first_array"``, ``"last_axis"``, a callable or None."""
        return self._n_threads_from

    @property
    def check_finite(self) -> bool:
        """Whether floating outputs are checked for NaN and infinity after each launch; settable."""
        return self._check_finite

    @check_finite.setter
    def check_finite(self, value):
        self._check_finite = bool(value)

    @property
    def included_headers(self) -> tuple:
        """Tracked headers (quoted includes and cunumpy's own), resolved now."""
        return tuple(
            resolve_includes(
                self._source, self._include_dirs, base_dir=self._source_dir, angle_dirs=(cuda_include_dir(),)
            )
        )

    @property
    def is_compiled(self) -> bool:
        """Compiled successfully for the current CUDA device."""
        if not self._compiled:
            return False
        cupy = sys.modules.get("cupy")
        dev = _current_device(cupy) if cupy is not None else 0
        return dev in self._compiled

    def debug_active(self) -> bool:
        """The effective debug setting (this kernel's, else the global one)."""
        return _debug.get_cuda_debug() if self._debug is None else self._debug

    def compile_options(self) -> tuple:
        """Options given to NVRTC: options, the header directory, debug options, header hash."""
        opts = list(self._options)
        inc = f"-I{cuda_include_dir()}"
        if inc not in opts:
            opts.append(inc)
        if self.debug_active():
            opts.extend(o for o in _debug.DEBUG_OPTIONS if o not in opts)
        headers = self.included_headers
        if headers:
            opts.append(f"-DCUNUMPY_INCLUDE_HASH=0x{include_hash(headers)}")
        return tuple(opts)

    def __repr__(self):
        return f"<CudaKernel {self._expression!r} block={self.block_size}>"

    # prepare_args(*args) is C (below the class): it runs _prepare_slow until the plan knows how
    # to make the values and which CuPy module to ask for the current device.

    def _prepare_slow(self, *args) -> tuple:
        """The values a launch would pass, without launching (``prepare_args``)."""
        plan = self._plan
        if plan is None:
            return tuple(_flatten_unchecked(args))
        cupy = sys.modules.get("cupy")
        cur = _current_device_or_none(cupy)
        plan.configure_prepare(np.empty, self._value_dtypes(), cupy, _device_getter(cupy) if cupy is not None else None)
        return plan.prepare(*args, device=cur)

    def _value_dtypes(self) -> tuple:
        """Per parameter, the dtype of the value prepare_args makes from the packed bytes: the
        parameter's own for scalars, a (data, shape, strides) record for views, None where the
        argument itself is the value (pointers and structs)."""
        out: list = []
        for p in self._signature:
            if p.pointer or p.struct is not None:
                out.append(None)
            elif p.view_ndim:
                out.append(_view_record(p.view_ndim, p.contiguous))
            else:
                out.append(p.dtype)
        return tuple(out)

    # -------------------------------------------------------------- launch shape

    def launch_shape(
        self,
        n_threads: int | tuple[int, ...] | None = None,
        *,
        grid: int | tuple[int, ...] | None = None,
        block: int | tuple[int, ...] | None = None,
        args: tuple | None = None,
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(grid, block) of a launch; infers the size from ``args`` if given. Never compiles."""
        first = _first_shape(args) if args is not None else None
        return self._shape(n_threads, grid, block, args, first)

    def _shape(self, n_threads, grid, block, args, first):
        blk = self._block if block is None else _check_block(block, "block")
        if grid is not None:
            if n_threads is not None:
                raise TypeError("pass exactly one of n_threads= and grid=, not both")
            g = _check_dims(grid, "grid")
            return g, blk
        if n_threads is None:
            n_threads = self._infer(blk, args, first)
        n = _check_dims(n_threads, "n_threads")
        return _grid_for(n, blk)

    def _infer(self, blk, args, first, mode=None):
        if mode is None:
            mode = self._n_threads_from
        if mode is None:
            raise TypeError(f"kernel '{self._name}': n_threads_from is None, so pass n_threads= or grid= explicitly")
        if callable(mode):
            return mode(tuple(args) if args is not None else ())
        if first is None:
            raise TypeError(
                f"kernel '{self._name}': no device array among the arguments to infer the launch size "
                "from; pass n_threads= or grid="
            )
        shape = tuple(int(v) for v in first)
        if mode == "last_axis":
            return shape[-1]
        if mode == "first_array":
            return shape[0]
        nd = len(blk)
        if len(shape) < nd:
            raise ValueError(
                f"kernel '{self._name}': the first array has shape {shape}, too few dimensions for a "
                f"{nd}-D block {blk}; pass n_threads="
            )
        return shape[0] if nd == 1 else shape[:nd]

    # -------------------------------------------------------------- compilation

    def _hip_unsupported(self) -> tuple:
        """Features of this kernel that a HIP/ROCm build cannot compile (API.md 2.3, 16):
        cunumpy/reduce.cuh or scan.cuh, array views of 5 or more dimensions, array_view.cuh
        with CUNUMPY_BOUNDS_CHECK (debug mode included). Empty when none is used."""
        headers = self.included_headers
        own = Path(cuda_include_dir()).resolve() / "cunumpy"
        own_names = {h.name for h in headers if h.parent == own}
        problems = []
        for header in ("reduce.cuh", "scan.cuh"):
            if header in own_names:
                problems.append(f"cunumpy/{header} (warp-shuffle reductions and scans)")
        dims = set()
        for p in self._signature or ():
            if (p.view_ndim or 0) >= 5:
                dims.add(p.view_ndim)
        for text in [self._source] + [_read_text(h) for h in headers if h.parent != own]:
            for m in _HIGH_VIEWS.finditer(_COMMENTS.sub(" ", text)):
                dims.add(int(m.group(1) or m.group(2)))
        if dims:
            problems.append(f"array views with {min(dims)} dimensions (Array5D/CArray5D and higher; at most 4 on HIP)")
        if "array_view.cuh" in own_names and _bounds_check_in(self.compile_options(), self._source):
            problems.append("cunumpy/array_view.cuh with CUNUMPY_BOUNDS_CHECK (debug mode or -DCUNUMPY_BOUNDS_CHECK)")
        return tuple(problems)

    def _reject_on_hip(self):
        if not _on_hip():
            return
        problems = self._hip_unsupported()
        if problems:
            raise NotImplementedError(
                f"kernel '{self._name}' uses {'; '.join(problems)}: not supported on HIP/ROCm "
                "(this CuPy is a ROCm build); nothing was compiled"
            )

    # -------------------------------------------------------------- __constant__ / __device__

    def _global_declaration(self, name, what):
        from ..cuda._globals import declared_globals

        if not isinstance(name, str):
            raise TypeError(f"CudaKernel.{what}(): 'name' must be a str, not {type(name).__name__}")
        decls = getattr(self, "_global_declarations", None)
        if decls is None:
            decls = self._global_declarations = declared_globals(self._source, list(_LazyHeaders(self)), self._options)
        decl = decls.get(name)
        if decl is None:
            raise ValueError(
                f"CudaKernel.{what}(): kernel '{self._name}': the source declares no __constant__ or __device__ "
                f"variable {name!r} of a scalar, complex or vector type (declared: {', '.join(sorted(decls)) or 'none'})"
            )
        return decl

    def set_global(self, name: str, value: Any) -> None:
        """Set a ``__constant__`` or ``__device__`` variable of the kernel's source.

        Parameters
        ----------
        name : str
            The variable's name.
        value : array_like
            Its value: the declared shape (``()`` for a scalar, the extents of a C array) and
            a dtype that casts to the declared one without changing the value (Python numbers
            are checked by value); a vector type takes a last axis of its length.

        Raises
        ------
        TypeError
            ``name`` is not a str, or the value does not fit the declared type.
        ValueError
            The source declares no such variable, or the value's shape differs.

        Notes
        -----
        On a GPU the value is copied into the compiled module (compiling it first); under the
        CPU emulation into the emulation library, and again into any other library a later
        launch of this kernel uses (sanitizer builds); as in CUDA, kernels sharing a source
        share its variables, and a value written by a kernel stays until it is set again.
        """
        from ..cuda._globals import global_value, next_generation

        decl = self._global_declaration(name, "set_global")
        arr = global_value(f"CudaKernel.set_global() of kernel '{self._name}'", decl, value)
        pending: dict[str, tuple[int, bytes]] | None = getattr(self, "_pending_globals", None)
        if pending is None:
            pending = {}
            self._pending_globals = pending
        pending[name] = (next_generation(), arr.tobytes())
        hook = _emulation_hook()
        if hook is not None:
            setter = getattr(hook, "set_global", None)
            if setter is not None:
                setter(self, name)
            return
        cupy, _reason = _cupy()
        if cupy is None:
            return  # no GPU: the CPU emulation's next launch of this kernel copies it in
        ptr = self._module_global(cupy, name)
        ptr.copy_from_host(arr.ctypes.data, arr.nbytes)

    def get_global(self, name: str) -> Any:
        """The ``__constant__`` or ``__device__`` variable ``name``: an array sharing its memory.

        Parameters
        ----------
        name : str
            The variable's name.

        Returns
        -------
        array
            On a GPU (and on the fake CuPy) a CuPy array over the variable in the compiled
            module; under ``emulate_cuda_kernel`` without CuPy a NumPy array over it in the
            emulation library of the kernel's last launch (before any launch: a copy of the
            value set, else ``RuntimeError``). A vector type's components are a last axis.

        Raises
        ------
        TypeError
            ``name`` is not a str.
        ValueError
            The source declares no such variable.
        RuntimeError
            Neither a GPU nor an emulated launch has made the variable exist yet.
        """
        decl = self._global_declaration(name, "get_global")
        hook = _emulation_hook()
        if hook is not None and getattr(hook, "get_global", None) is not None:
            return hook.get_global(self, name)
        cupy, reason = _cupy()
        if cupy is not None:
            ptr = self._module_global(cupy, name)
            dtype, shape = decl.dtype, decl.shape
            if shape is None:
                shape = (ptr.mem.size // dtype.itemsize,) if hasattr(ptr, "mem") else (1,)
            if dtype.names is not None:
                scalar = dtype.fields[dtype.names[0]][0]
                return cupy.ndarray((*shape, len(dtype.names)), scalar, memptr=ptr)
            return cupy.ndarray(shape, dtype, memptr=ptr)
        lib = getattr(self, "_emulated_library", None)
        if lib is not None:
            return lib(self, decl)
        pending = getattr(self, "_pending_globals", None) or {}
        if name in pending:
            data = pending[name][1]
            n = len(data) // decl.dtype.itemsize
            shape = decl.shape if decl.shape is not None else (n,)
            if decl.dtype.names is not None:
                scalar = decl.dtype.fields[decl.dtype.names[0]][0]
                return np.frombuffer(data, dtype=scalar).reshape((*shape, len(decl.dtype.names))).copy()
            return np.frombuffer(data, dtype=decl.dtype).reshape(shape).copy()
        raise RuntimeError(
            f"CudaKernel.get_global(): kernel '{self._name}': variable {name!r} exists only on a GPU ({reason}) or "
            "after an emulated launch"
        )

    def _module_global(self, cupy, name):
        self._reject_on_hip()
        state = self._compile(cupy, _current_device(cupy))
        return state.module.get_global(name)

    def compile(self, *, log_stream: Any = None) -> Any:
        """Compile for the current device (cached per device) and return CuPy's raw kernel."""
        hook = _emulation_hook()
        if hook is not None:
            return hook.compile(self)
        self._reject_on_hip()
        cupy, reason = _cupy()
        if cupy is None:
            raise RuntimeError(f"CudaKernel.compile() of '{self._name}' needs a functional CuPy: {reason}")
        return self._compile(cupy, _current_device(cupy), log_stream).kernel

    def recompile(self, *, log_stream: Any = None) -> Any:
        """Discard the current device's compiled state and compile again (headers, debug options)."""
        hook = _emulation_hook()
        if hook is not None:
            # The emulation re-reads headers and options too (a hook may lack the method).
            return getattr(hook, "recompile", hook.compile)(self)
        self._reject_on_hip()
        cupy, reason = _cupy()
        if cupy is None:
            raise RuntimeError(f"CudaKernel.recompile() of '{self._name}' needs a functional CuPy: {reason}")
        dev = _current_device(cupy)
        with self._lock:
            self._compiled.pop(dev, None)
        return self._compile(cupy, dev, log_stream, fresh=True).kernel

    def _compile(self, cupy, dev, log_stream=None, fresh=False):
        state = self._compiled.get(dev)
        if state is not None:
            return state
        with self._lock:
            state = self._compiled.get(dev)
            if state is not None:
                return state
            self._reject_on_hip()  # the first launch compiles here
            options = self.compile_options()
            is_template = self._by_expression
            module = None
            share = getattr(self, "_module_share", None)
            key = (dev, options)
            if share is not None and not fresh and not is_template:
                module = share[0].get(key)
            if module is None:
                module = cupy.RawModule(
                    code=self._source,
                    options=options,
                    name_expressions=[self._expression] if is_template else None,
                )
                if log_stream is not None:
                    module.compile(log_stream=log_stream)
                else:
                    compile_now = getattr(module, "compile", None)
                    if compile_now is not None:
                        compile_now()
                if share is not None and not is_template:
                    share[0][key] = module
            kernel = module.get_function(self._expression)
            state = _Compiled(module, kernel)
            self._compiled[dev] = state
            return state

    # -------------------------------------------------------------- call

    def _call_slow(self, *args, n_threads=None, grid=None, block=None, shared_mem=0, stream=None):
        """The general call; ``__call__`` (in C) handles the common 1-D case itself."""
        plan = self._plan
        # Sizes first: a bad launch size is reported as such, whatever the arguments.
        if n_threads is not None and not callable(n_threads):
            _check_dims(n_threads, "n_threads")
        if grid is not None:
            _check_dims(grid, "grid")
        cupy = sys.modules.get("cupy")
        cur = _current_device_or_none(cupy)
        if plan is not None:
            # first: the first array's shape; arrays on another device than `cur` are refused
            packed, first, hidden = plan.pack(*args, device=cur)
            if hidden:
                first = _first_shape(args)
        else:
            packed = None
            first = _first_shape(args) if n_threads is None and grid is None else None
        g, blk = self._shape(n_threads, grid, block, args, first)
        if shared_mem.__class__ is not int:
            if isinstance(shared_mem, bool) or not isinstance(shared_mem, (int, np.integer)):
                raise TypeError(f"shared_mem must be an int, not {type(shared_mem).__name__}")
            shared_mem = int(shared_mem)
        if shared_mem < 0:
            raise ValueError(f"shared_mem must be >= 0, got {shared_mem}")
        if stream is not None and cur is not None:
            _check_stream(self._name, stream, cur)
        hook = _emulation_hook()
        if hook is not None:
            return hook.launch(self, args, g, blk, shared_mem)
        if cupy is None:
            if 0 in g:
                return None  # nothing to launch, and no device to check the shape against
            raise RuntimeError(f"launching kernel '{self._name}' needs CuPy (no device arrays were given)")
        dev = cur if cur is not None else _device_getter(cupy)()
        lim = _limits_cache.get(dev) or _device_limits(cupy, dev)
        self._validate(lim, g, blk, shared_mem)
        if plan is not None and dev == cur:
            # A launch validated on this device: later calls of every form take the C path,
            # which checks against these limits itself (and comes back here past them).
            plan.configure_device(
                dev, tuple(lim.block), tuple(lim.grid), lim.threads, lim.shared_optin, _device_getter(cupy)
            )
        if 0 in g:
            return None
        return self._launch(cupy, dev, lim, args, packed, g, blk, shared_mem, stream)

    def _launch_fast(self, packed, g, blk, shared_mem, stream, args):
        """Continuation of the C path for a non-empty launch whose checks it made."""
        hook = _emulation_hook()
        if hook is not None:
            return hook.launch(self, args, g, blk, shared_mem)
        cupy = sys.modules.get("cupy")
        if cupy is None:
            raise RuntimeError(f"launching kernel '{self._name}' needs CuPy (no device arrays were given)")
        dev = _device_getter(cupy)()
        lim = _limits_cache.get(dev) or _device_limits(cupy, dev)
        return self._launch(cupy, dev, lim, args, packed, g, blk, shared_mem, stream)

    def _fail(self, lim, what):
        raise ValueError(f"kernel '{self._name}' on device {lim.id} ({lim.name}): {what}")

    def _validate(self, lim, g, blk, shared_mem):
        for axis, b in enumerate(blk):
            if b > lim.block[axis]:
                self._fail(lim, f"block[{axis}] = {b} exceeds the device's maximum {lim.block[axis]}")
        for axis, v in enumerate(g):
            if v > lim.grid[axis]:
                self._fail(lim, f"grid[{axis}] = {v} exceeds the device's maximum {lim.grid[axis]}")
        threads = math.prod(blk)
        if threads > lim.threads:
            self._fail(lim, f"{threads} threads per block exceed the device's maximum {lim.threads}")
        if shared_mem > lim.shared_optin:
            self._fail(
                lim,
                f"shared_mem = {shared_mem} bytes exceeds the device's maximum {lim.shared_optin} bytes per block",
            )

    def _launch(self, cupy, dev, lim, args, packed, g, blk, shared_mem, stream):
        state = self._compile(cupy, dev)
        threads = math.prod(blk)
        if state.max_threads is not None and threads > min(lim.threads, state.max_threads):
            self._fail(
                lim,
                f"{threads} threads per block exceed the compiled kernel's max_threads_per_block {state.max_threads}",
            )
        total_shared = state.static_shared + shared_mem
        limit = max(lim.shared, lim.shared_optin)
        if total_shared > limit:
            self._fail(
                lim,
                f"static ({state.static_shared}) + dynamic ({shared_mem}) shared memory = {total_shared} "
                f"bytes exceeds the limit {limit}",
            )
        if shared_mem > state.dynamic_set and total_shared > lim.shared:
            # Above the default 48 KiB allowance the kernel must opt in first.
            state.kernel.max_dynamic_shared_size_bytes = shared_mem
            state.dynamic_set = shared_mem
        if stream is None:
            stream = cupy.cuda.get_current_stream()
        grid3 = g + (1,) * (3 - len(g))
        block3 = blk + (1,) * (3 - len(blk))
        if packed is not None and state.handle:
            stream_ptr = int(getattr(stream, "ptr", 0) or 0)
            if core.driver_available():
                status = core.launch(state.handle, *grid3, *block3, shared_mem, stream_ptr, packed)  # type: ignore[call-arg]  # 3 + 3 items
                if status == _CUDA_ERROR_INVALID_CONTEXT:
                    # A thread that has not touched CUDA yet: make the device's context
                    # current through the runtime, as CuPy would, and try once more.
                    cupy.cuda.runtime.setDevice(dev)
                    cupy.cuda.runtime.free(0)
                    status = core.launch(state.handle, *grid3, *block3, shared_mem, stream_ptr, packed)  # type: ignore[call-arg]  # 3 + 3 items
                if status != 0:
                    _raise_driver_error(cupy, status, self._name, grid3, block3)
            else:
                driver = getattr(getattr(cupy, "cuda", None), "driver", None)
                launch = getattr(driver, "launchKernel", None)
                if launch is None:
                    self._cupy_launch(state, args, grid3, block3, shared_mem, stream)
                else:
                    launch(state.handle, *grid3, *block3, shared_mem, stream_ptr, core.packed_address(packed), 0)
        else:
            self._cupy_launch(state, args, grid3, block3, shared_mem, stream)
        if self.debug_active() or self._check_finite:
            self._after_launch(cupy, stream, args, g, blk)
        return None

    def _cupy_launch(self, state, args, grid3, block3, shared_mem, stream):
        flat = _flatten_unchecked(args)
        if self._signature is not None:
            flat = [_cupy_arg(p, a) for p, a in zip(self._signature, flat)]
        # CuPy's raw kernels launch on the current stream.
        enter = getattr(stream, "__enter__", None)
        if enter is None:
            state.kernel(grid3, block3, tuple(flat), shared_mem=shared_mem)
            return
        with stream:
            state.kernel(grid3, block3, tuple(flat), shared_mem=shared_mem)

    def _after_launch(self, cupy, stream, args, g, blk):
        capturing = False
        with contextlib.suppress(Exception):
            capturing = bool(stream.is_capturing())
        if capturing:
            return
        why = "debug mode" if self.debug_active() else "check_finite"
        _transfers.record("sync", f"wait for kernel '{self._name}' ({why})")
        try:
            stream.synchronize()
        except Exception as exc:
            raise RuntimeError(
                f"CUDA error after launching kernel '{self._name}' with grid {g} and block {blk}: {exc} "
                "(after an illegal memory access the process must be restarted)"
            ) from exc
        if self._check_finite:
            for path, a in iter_arrays(args):
                if a.dtype.kind not in "fc" or a.size == 0:
                    continue
                if not bool(cupy.isfinite(a).all()):
                    raise RuntimeError(
                        f"kernel '{self._name}' left NaN or inf in argument {path} "
                        f"(dtype {a.dtype}, shape {tuple(a.shape)})"
                    )

    if TYPE_CHECKING:  # both are set below from the C core; _module_share by from_file()
        _module_share: tuple

        def __call__(self, *args: Any, **kwargs: Any) -> None: ...

        def prepare_args(self, *args: Any, **kwargs: Any) -> Any: ...


CudaKernel.__call__ = core.kernel_call_method(CudaKernel)  # type: ignore[method-assign]  # the C core's fast call
CudaKernel.prepare_args = core.kernel_prepare_method(CudaKernel)  # type: ignore[method-assign]  # the C core's
