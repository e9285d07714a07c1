"""Kernel: a host kernel paired with an optional CUDA port, dispatched per call (API.md 2.5).

The host side of a call is a precomputed plan held by the C base class (``_core.HostKernel``,
the base of PyccelKernel too): the host function of the current implementation selection,
the backend state and a few flags. A host call on the NumPy backend is one backend test and a
type test per argument in C, then the host function itself; a selection change only marks
the plan stale (it is resolved again on the next call).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import _backend, _transfers
from .._backend import _state as _backend_state
from .._native import core
from . import _selection
from ._cuda_kernel import CudaKernel
from ._host_impl import CompiledHostKernel, HostImplementations, _python_function
from ._pyccel_kernel import PyccelKernel, _pyccel_stub_names

__all__ = ["Kernel"]

_MISSING_CUDA = ("raise", "fallback")
_DISPATCH = ("backend", "arrays")
_epoch = _selection.epoch

# Types seen as top-level arguments that are neither device arrays nor argument objects
# (no __cuda_args__): the Python path of dispatch="arrays" tests membership here first (the
# C direct path makes the same decision for host calls on the NumPy backend).
_host_types: set = {int, float, complex, bool, str, type(None)}
_host_types_lock = threading.Lock()


def _is_device_argument(value) -> bool:
    t = type(value)
    if hasattr(t, "__cuda_args__"):
        return True
    cupy = sys.modules.get("cupy")
    device_type = getattr(cupy, "ndarray", None) if cupy is not None else None
    if device_type is not None and isinstance(value, device_type):
        return True
    with _host_types_lock:
        _host_types.add(t)
    return False


def _any_device_argument(args) -> bool:
    for value in args:  # noqa: SIM110 - a plain loop: any() over a generator costs more per call
        if type(value) not in _host_types and _is_device_argument(value):
            return True
    return False


def _positional_names(function):
    """Positional parameter names from the Python signature; None when not inspectable."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    names = []
    for p in signature.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            return None  # *args: the names are unknown
    return tuple(names)


def _function_parameters(function):
    """Positional parameter names of one host implementation (the uncompiled function where
    there is one), from its signature or its Pyccel stub; None if unknown."""
    python = _python_function(function)
    names = _positional_names(python) if python is not None else None
    if names is None and python is not None:
        names = _pyccel_stub_names(python)
    return names


def _check_options(host_options, where):
    if host_options is None:
        return {}
    if not isinstance(host_options, Mapping):
        raise TypeError(
            f"{where}: 'host_options' must be a mapping of PyccelKernel options, not {type(host_options).__name__}"
        )
    return dict(host_options)


_LAUNCH_KEYWORDS = ("n_threads", "grid", "block", "shared_mem", "stream")
_KEYWORDS_CONVERT = 1  # C base: calls with keywords take the Python path
_ARGUMENT_OBJECTS = 2  # C base: a top-level __cuda_args__ object takes the Python path

# Kernels whose host side is an implementation set: a selection change invalidates their plan.
_selectable: weakref.WeakSet = weakref.WeakSet()


def _selection_changed():
    for kernel in list(_selectable):
        kernel._invalidate()


_selection.listeners.append(_selection_changed)


class Kernel(core.HostKernel):
    """A host kernel and an optional CUDA port of it, chosen per call.

    The CUDA kernel mirrors the host kernel: the same name and the same positional
    parameters (:meth:`check_signature` compares them). A call takes the positional kernel
    arguments plus the launch keywords of :class:`CudaKernel` (``n_threads=``, ``grid=``,
    ``block=``, ``shared_mem=``, ``stream=``), which host kernels ignore. A host call costs
    about as much as a :class:`PyccelKernel` call: the decision is made in C.

    Parameters
    ----------
    host_kernel : callable
        The host kernel: a plain function (wrapped in a :class:`PyccelKernel` with
        ``host_options``), a ready :class:`PyccelKernel`, a :class:`HostImplementations` or a
        :class:`CompiledHostKernel`.
    cuda_kernel : CudaKernel, optional
        The CUDA port; None while it is not written yet.
    name : str, optional
        The kernel's name (default: the host function's).
    missing_cuda : {"raise", "fallback"}, optional
        The device path without a CUDA port: ``"raise"`` (default) is a
        :class:`NotImplementedError` naming the expected ``.cu`` path; ``"fallback"`` runs
        the host kernel on host copies (one :class:`RuntimeWarning` per kernel, a
        ``fallback`` transfer event per call).
    cuda_path : path, optional
        The ``.cu`` file the port is expected in, for that message.
    host_options : mapping, optional
        :class:`PyccelKernel` options for the host kernel (declare ``outputs`` so a fallback
        copies back only what the kernel writes).
    dispatch : {"backend", "arrays"}, optional
        ``"backend"`` (default): the host kernel on the NumPy backend, CUDA on CuPy.
        ``"arrays"``: CUDA when a top-level argument is a device array or has
        ``__cuda_args__``, else the host function is called directly, whatever the backend.
    test_args : str, optional
        The dotted name of the kernel's ``<name>_test_args`` module (set by kernel folders),
        read by :func:`cunumpy.kernel_testing.check_parity`.

    Raises
    ------
    TypeError
        ``host_kernel`` is not callable, ``cuda_kernel`` is not a CudaKernel, or ``name``
        or ``test_args`` has the wrong type.
    ValueError
        ``missing_cuda`` or ``dispatch`` is not one of its values, or ``host_options`` is
        given with a ready PyccelKernel.
    """

    def __init__(
        self,
        host_kernel: Callable[..., Any],
        cuda_kernel: CudaKernel | None = None,
        *,
        name: str | None = None,
        missing_cuda: str = "raise",
        cuda_path: str | os.PathLike[str] | None = None,
        host_options: Mapping[str, Any] | None = None,
        dispatch: str = "backend",
        test_args: str | None = None,
    ) -> None:
        if missing_cuda not in _MISSING_CUDA:
            raise ValueError(f"Kernel: 'missing_cuda' must be 'raise' or 'fallback', not {missing_cuda!r}")
        if dispatch not in _DISPATCH:
            raise ValueError(f"Kernel: 'dispatch' must be 'backend' or 'arrays', not {dispatch!r}")
        if cuda_kernel is not None and not isinstance(cuda_kernel, CudaKernel):
            raise TypeError(f"Kernel: 'cuda_kernel' must be a CudaKernel or None, not {type(cuda_kernel).__name__}")
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"Kernel: 'name' must be a non-empty str or None, not {name!r}")
        if test_args is not None and not isinstance(test_args, str):
            raise TypeError(f"Kernel: 'test_args' must be a dotted module name or None, not {type(test_args).__name__}")
        wrapped: PyccelKernel | None
        if isinstance(host_kernel, PyccelKernel):
            if host_options is not None:
                raise ValueError(
                    "Kernel: 'host_options' cannot be combined with a ready PyccelKernel; pass "
                    "the options to the PyccelKernel or pass the plain function"
                )
            options: Any = None
            wrapped = host_kernel
        else:
            if not callable(host_kernel):
                raise TypeError(f"Kernel: 'host_kernel' must be callable, not {type(host_kernel).__name__}")
            options = _check_options(host_options, "Kernel")
            wrapped = None
        function = wrapped.kernel if wrapped is not None else host_kernel
        self._implementation_set = function if isinstance(function, HostImplementations) else None
        self._host_function = function
        if name is None:
            if self._implementation_set is not None:
                name = self._implementation_set.name
            else:
                name = getattr(function, "__name__", None)
                if not isinstance(name, str):
                    name = cuda_kernel.name if cuda_kernel is not None else type(function).__name__
        self._name = name
        self._cuda = cuda_kernel
        self._missing_cuda = missing_cuda
        self._cuda_path = None if cuda_path is None else Path(cuda_path)
        self._dispatch = dispatch
        self._arrays = dispatch == "arrays"
        self._test_args_module = test_args
        self._test_args: ModuleType | None = None
        self._warned_fallback = False
        self._lock = threading.RLock()
        params = self.host_parameters()
        if wrapped is None:
            if "parameters" not in options and params is not None and _positional_names(function) is None:
                options["parameters"] = params
            wrapped = PyccelKernel(function, **options)
        self._host_kernel = wrapped
        # Options reused for the PyccelKernel of each selected implementation.
        self._wrap_options: dict[str, Any] = {
            "use_cupy": wrapped._use_cupy,
            "object_modules": wrapped.object_modules,
            "is_array": wrapped._user_is_array,
            "outputs": wrapped.outputs,
            "parameters": params if params is not None else wrapped.parameters,
        }
        self._wrapped_by_function: dict = {}
        # The host plan: the function and PyccelKernel of the selection of epoch _plan_epoch.
        self._plan_epoch: int | None = None
        self._plan_function = function
        self._plan_wrapped = wrapped
        if self._implementation_set is not None:
            _selectable.add(self)
            self._invalidate()
        else:
            self._configure_direct(function, wrapped)

    # ------------------------------------------------------------------ the plan

    def _configure_direct(self, function, wrapped):
        """Point the C base's direct path at the host callable of the current plan."""
        flags = _KEYWORDS_CONVERT
        if self._arrays:
            flags |= _ARGUMENT_OBJECTS
            target, modules = function, ()
        else:
            # A PyccelKernel forced to convert (or not) keeps its own rule on host calls.
            target = function if wrapped._use_cupy is None else wrapped
            modules = wrapped.object_modules
        self._configure(target, None, modules, vars(_backend._state), Kernel._python_path, flags)

    def _invalidate(self):
        """The selection changed: the next host call resolves the implementation again."""
        self._configure_direct(self._resolve_and_call, self._host_kernel)

    def _resolve_host(self):
        """(function, PyccelKernel) for the current implementation selection."""
        if self._implementation_set is None:
            return self._plan_function, self._plan_wrapped
        with self._lock:
            current = _epoch[0]
            if self._plan_epoch == current:
                return self._plan_function, self._plan_wrapped
            impls = self._implementation_set
            function = impls.get(impls.selected())
            wrapped = self._wrapped_by_function.get(id(function))
            if wrapped is None or wrapped.kernel is not function:
                wrapped = PyccelKernel(function, **self._wrap_options)
                self._wrapped_by_function[id(function)] = wrapped
            self._plan_function = function
            self._plan_wrapped = wrapped
            self._plan_epoch = current
            self._configure_direct(function, wrapped)
            return function, wrapped

    def _resolve_and_call(self, *args):
        """Direct-path target while the plan is stale: resolve, then call the host function."""
        function, _ = self._resolve_host()
        return function(*args)

    def _host_wrapped(self):
        return self._resolve_host()[1]

    # ------------------------------------------------------------------ call

    def _python_path(self, args, kwargs):
        """Calls the C direct path does not take: launch keywords, device arguments, the
        CuPy backend (``dispatch="backend"``)."""
        launch = {}
        if kwargs:
            for key, value in kwargs.items():
                if key not in _LAUNCH_KEYWORDS:
                    raise TypeError(
                        f"kernel {self._name!r}: unexpected keyword argument {key!r}; kernel arguments "
                        f"are positional, the keywords are {', '.join(_LAUNCH_KEYWORDS)}"
                    )
                launch[key] = value
        if self._arrays:
            if not _any_device_argument(args):
                return self._resolve_host()[0](*args)
        elif _backend_state.backend != "cupy":
            return self._host_wrapped()(*args)
        return self._device_call(args, **launch)

    def _missing(self):
        """The device path without a CUDA kernel: the fallback PyccelKernel, or raise."""
        if _selection.selection.device == "cuda":
            raise LookupError(
                f"kernel {self._name!r} has no CUDA implementation, and the device kernel "
                "implementation is set to 'cuda' (no host fallback)"
            )
        if self._missing_cuda == "raise":
            where = f"expected at {str(self._cuda_path)!r}" if self._cuda_path is not None else "no cuda_path given"
            raise NotImplementedError(
                f"kernel {self._name!r} has no CUDA version ({where}); write the port or "
                "use missing_cuda='fallback' to run the host kernel on copies"
            )
        return self._host_wrapped()

    def _device_call(self, args, n_threads=None, grid=None, block=None, shared_mem=0, stream=None):
        cuda = self._cuda
        if cuda is None:
            host = self._missing()
            if not self._warned_fallback:
                self._warned_fallback = True
                warnings.warn(
                    f"kernel {self._name!r} has no CUDA version; running the host kernel on copies "
                    "of the device arrays (slow)",
                    RuntimeWarning,
                    stacklevel=3,
                )
            if _transfers.sinks:
                _transfers.record("fallback", f"kernel {self._name}: host fallback for device arguments")
            return host(*args)
        if n_threads is None and grid is None and cuda.n_threads_from is None:
            raise ValueError(
                f"kernel {self._name!r}: n_threads is required (its CUDA kernel has "
                "n_threads_from=None); pass n_threads= or grid="
            )
        return cuda(*args, n_threads=n_threads, grid=grid, block=block, shared_mem=shared_mem, stream=stream)

    def get_kernel(self) -> Callable[..., Any]:
        """The callable a call makes now on the active backend (raises like a call would)."""
        if _backend_state.backend == "cupy":
            if self._cuda is not None:
                return self._cuda
            return self._missing()
        function, wrapped = self._resolve_host()
        return function if self._arrays else wrapped

    def compile(self) -> bool:
        """Compile the CUDA kernel now; False when there is none."""
        if self._cuda is None:
            return False
        self._cuda.compile()
        return True

    # ------------------------------------------------------------------ signatures

    def host_parameters(self) -> tuple[str, ...] | None:
        """Host positional parameter names (the uncompiled Python function's, or a Pyccel
        stub's); None when unknown."""
        if self._implementation_set is not None:
            try:
                return _function_parameters(self._implementation_set.python)
            except LookupError:
                return None
        return _function_parameters(self._host_function)

    def _other_host_signatures(self):
        """(implementation name, parameter names) of the other host implementations."""
        found = []
        impls = self._implementation_set
        functions = []
        if impls is not None:
            for key in impls.names:
                if key == "python" or not impls.available(key):
                    continue
                functions.append((key, impls.get(key)))
        for key, function in functions:
            if isinstance(function, CompiledHostKernel):
                if function.fallback is not None:
                    names = _function_parameters(function.fallback)
                    if names is not None:
                        found.append((f"{key} fallback", names))
                continue
            names = _function_parameters(function)
            if names is not None:
                found.append((key, names))
        function = self._host_function
        if isinstance(function, CompiledHostKernel) and function.fallback is not None:
            names = _function_parameters(function.fallback)
            if names is not None:
                found.append(("fallback", names))
        return found

    def check_signature(self) -> None:
        """ValueError when the host parameter names differ from the CUDA kernel's or from the
        other host implementations'; sides without a known signature are skipped."""
        problems = self._signature_problems()
        if problems:
            raise ValueError("; ".join(problems))

    def _signature_problems(self) -> list:
        host = self.host_parameters()
        problems: list = []
        if host is None:
            return problems
        cuda = self._cuda
        if cuda is not None and cuda.signature is not None:
            device = tuple(p.name for p in cuda.signature)
            if device != host:
                problems.append(
                    f"kernel {self._name!r}: host parameters ({', '.join(host)}) differ from the "
                    f"CUDA parameters ({', '.join(device)})"
                )
        for key, names in self._other_host_signatures():
            if names != host:
                problems.append(
                    f"kernel {self._name!r}: host parameters ({', '.join(host)}) differ from the "
                    f"{key} implementation's ({', '.join(names)})"
                )
        return problems

    # ------------------------------------------------------------------ introspection

    @property
    def implementations(self) -> tuple:
        """Implementation names: the host set's (or ``"host"``), plus ``"cuda"``."""
        host = self._implementation_set.names if self._implementation_set is not None else ("host",)
        return host + (("cuda",) if self._cuda is not None else ())

    def selected(self, device: bool = False) -> str:
        """The implementation a host call (or, with ``device=True``, a device call) uses now."""
        if not device:
            impls = self._implementation_set
            if impls is None:
                return "host"
            chosen = impls.selected()
            impls.get(chosen)  # LookupError when a chosen implementation is missing or fails
            return chosen
        if self._cuda is not None:
            return "cuda"
        self._missing()
        return "host"

    @property
    def name(self) -> str:
        """The kernel's name."""
        return self._name

    @property
    def host_kernel(self) -> PyccelKernel:
        """The host side: a PyccelKernel around the host function."""
        return self._host_kernel

    @property
    def cuda_kernel(self) -> CudaKernel | None:
        """The CUDA port, or None."""
        return self._cuda

    @property
    def has_cuda(self) -> bool:
        """Whether a CUDA port exists."""
        return self._cuda is not None

    @property
    def missing_cuda(self) -> str:
        """The policy without a CUDA port: ``"raise"`` or ``"fallback"``."""
        return self._missing_cuda

    @property
    def cuda_path(self) -> Path | None:
        """The ``.cu`` path a port is expected at, or None."""
        return self._cuda_path

    @property
    def dispatch(self) -> str:
        """``"backend"`` or ``"arrays"``."""
        return self._dispatch

    @property
    def test_args_module(self) -> str | None:
        """The dotted name of the kernel's test-arguments module, or None."""
        return self._test_args_module

    @property
    def test_args(self) -> ModuleType | None:
        """The test-argument module (imported on first access), or None."""
        if self._test_args_module is None:
            return None
        if self._test_args is None:
            self._test_args = importlib.import_module(self._test_args_module)
        return self._test_args

    def build_emulation(self, sanitize: str | Iterable[str] = ()) -> list:
        """Build the CPU-emulation library of the CUDA port before a launch needs it.

        The library goes to the emulation cache under the key a launch with the same settings
        looks up; ``KernelCatalog.build_emulation`` does this for a whole catalog, in
        parallel.

        Parameters
        ----------
        sanitize : str or sequence of str, optional
            Build for launches with these checks (``"racecheck"``, ``"initcheck"``).

        Returns
        -------
        list
            One record (fields ``name``, ``source``, ``status`` (``"built"``, ``"cached"``
            or ``"skipped"``), ``seconds``, ``error``, ``library``), or none when the kernel
            has no CUDA port.

        Raises
        ------
        RuntimeError
            When the build failed (no C++ compiler, a compiler error), with the compiler output.
        """
        if self._cuda is None:
            return []
        source = str(self._cuda_path) if self._cuda_path is not None else self._name
        # The emulation sits above the kernels, which never import it: this call asks for it,
        # so it is loaded by name here (as the fake CuPy's launch hook loads it).
        prebuild = importlib.import_module("cunumpy._emulation._prebuild")
        return prebuild.build_or_raise(
            [(self._name, source, self._cuda)], jobs=1, sanitize=sanitize, what="Kernel.build_emulation()"
        )

    def __repr__(self):
        cuda = "with CUDA" if self._cuda is not None else f"without CUDA (missing_cuda={self._missing_cuda!r})"
        return f"<Kernel {self._name!r} {cuda}, dispatch={self._dispatch!r}>"

    # from_folder(): the folder reader lives in _catalog.py with the other folder helpers,
    # which attaches it (the catalog sits above the kernel classes).


# CPython < 3.12 does not pass the base's fast call protocol on to Python subclasses.
core.enable_vectorcall(Kernel)
