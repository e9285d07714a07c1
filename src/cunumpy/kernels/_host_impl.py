"""Sets of host implementations and host kernels compiled on first call (API.md 2.9, 2.10).

cunumpy compiles nothing itself: a ``CompiledHostKernel`` calls the user's ``compiler(module)``
once, the first time it is needed, and falls back to a given function (or the uncompiled
Python function) with one warning when that fails.
"""

from __future__ import annotations

import importlib
import threading
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from . import _selection

__all__ = ["CompiledHostKernel", "HostImplementations"]

_AUTOMATIC_ORDER = ("pyccel", "numba", "numpy")


def _python_function(function):
    """The plain Python function behind a host implementation (Numba dispatchers keep it in
    ``py_func``, compiled host kernels in ``python``), or None when there is none."""
    if isinstance(function, CompiledHostKernel):
        return function.python
    inner = getattr(function, "py_func", None)
    if inner is not None:
        return inner
    return function


class HostImplementations:
    """Named host implementations of one kernel, each loaded on first use.

    Calling the object runs the implementation that the current selection picks
    (:func:`set_host_kernel_implementation`): by default the first available of pyccel,
    numba and numpy, else python with a warning. A chosen implementation that is missing or
    fails to load is a :class:`LookupError`, never a silent substitute.

    Parameters
    ----------
    name : str
        The kernel's name.
    loaders : mapping
        Implementation names (``"pyccel"``, ``"numba"``, ``"numpy"``, ``"python"``) to
        zero-argument functions returning the implementation; a loader may raise, which
        makes that implementation unavailable (the error is kept in ``errors``). A
        ``"python"`` entry is required.

    Raises
    ------
    TypeError
        ``name`` is not a non-empty str, ``loaders`` is not a mapping, or a loader is not
        callable.
    ValueError
        An implementation name is unknown, or there is no ``"python"`` entry.
    """

    def __init__(self, name: str, loaders: Mapping[str, Callable[[], Callable[..., Any] | None]]) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"HostImplementations: 'name' must be a non-empty str, not {name!r}")
        try:
            items = dict(loaders)
        except (TypeError, ValueError):
            raise TypeError(
                f"HostImplementations {name!r}: 'loaders' must be a mapping of implementation "
                f"names to zero-argument loaders, not {type(loaders).__name__}"
            ) from None
        for key, loader in items.items():
            if key not in _selection.HOST_IMPLEMENTATIONS:
                raise ValueError(
                    f"HostImplementations {name!r}: unknown implementation {key!r}; expected one "
                    f"of {', '.join(_selection.HOST_IMPLEMENTATIONS)}"
                )
            if not callable(loader):
                raise TypeError(f"HostImplementations {name!r}: the loader of {key!r} is not callable")
        if "python" not in items:
            raise ValueError(f"HostImplementations {name!r}: a 'python' implementation is required")
        self._name = name
        self._loaders = {k: items[k] for k in _selection.HOST_IMPLEMENTATIONS if k in items}
        self._loaded: dict = {}
        self.errors: dict = {}
        self._lock = threading.RLock()
        self._warned_python = False

    @property
    def name(self) -> str:
        """The kernel's name."""
        return self._name

    @property
    def names(self) -> tuple:
        """Implementation names, in HOST_IMPLEMENTATIONS order."""
        return tuple(self._loaders)

    def _load(self, key):
        try:
            return self._loaded[key]
        except KeyError:
            pass
        if key in self.errors:
            return None
        with self._lock:
            if key in self._loaded:
                return self._loaded[key]
            if key in self.errors:
                return None
            try:
                function = self._loaders[key]()
                if not callable(function):
                    raise TypeError(f"the loader returned {type(function).__name__}, which is not callable")
            except Exception as exc:  # noqa: BLE001 - a loader's error is kept and reported with the others
                self.errors[key] = exc
                return None
            self._loaded[key] = function
            return function

    def available(self, name: str) -> bool:
        """Load ``name`` now; False when it is absent or its loader failed."""
        return name in self._loaders and self._load(name) is not None

    def get(self, name: str) -> Callable[..., Any]:
        """The implementation ``name``; LookupError (load error chained) if absent or failing."""
        if name not in self._loaders:
            raise LookupError(
                f"kernel {self._name!r} has no {name!r} host implementation (available: {', '.join(self._loaders)})"
            )
        function = self._load(name)
        if function is None:
            error = self.errors.get(name)
            raise LookupError(
                f"the {name!r} host implementation of kernel {self._name!r} failed to load: {error}"
            ) from error
        return function

    @property
    def python(self) -> Callable[..., Any]:
        """The uncompiled Python function."""
        return self.get("python")

    def selected(self) -> str:
        """The implementation a call makes now: the requested one, else the first available
        of pyccel, numba, numpy, else python (with one RuntimeWarning)."""
        requested = _selection.selection.host
        if requested is not None:
            return requested
        for key in _AUTOMATIC_ORDER:
            if self.available(key):
                return key
        if not self._warned_python:
            self._warned_python = True
            warnings.warn(
                f"kernel {self._name!r}: no pyccel, numba or numpy host implementation is "
                "available; using the uncompiled Python function",
                RuntimeWarning,
                stacklevel=3,
            )
        return "python"

    def build(self) -> Callable[..., Any]:
        """Load the implementation the current selection picks, now; returns it."""
        return self.get(self.selected())

    def __call__(self, *args, **kwargs):
        return self.get(self.selected())(*args, **kwargs)

    def __repr__(self):
        return f"HostImplementations({self._name!r}, {list(self._loaders)})"


class CompiledHostKernel:
    """A host kernel compiled by your compiler on its first call.

    Two threads calling first compile once. When compiling fails, calls use ``fallback``,
    else the uncompiled Python function, with one :class:`RuntimeWarning`.

    Parameters
    ----------
    module : module or str
        The module holding the Python function, or its dotted name (imported when first
        needed).
    name : str
        The function's name in it.
    compiler : callable
        ``compiler(module)`` returns a compiled module holding ``name`` (for example with
        Pyccel's ``epyccel``), or the compiled function itself.
    fallback : callable, optional
        What runs when compiling fails (default: the Python function).

    Raises
    ------
    TypeError
        ``name`` is not a non-empty str, ``compiler`` or ``fallback`` is not callable, or
        ``module`` is neither a module nor a str.
    """

    def __init__(
        self,
        module: ModuleType | str,
        name: str,
        compiler: Callable[[ModuleType], ModuleType],
        fallback: Callable[..., Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"CompiledHostKernel: 'name' must be a non-empty str, not {name!r}")
        if not callable(compiler):
            raise TypeError(f"CompiledHostKernel {name!r}: 'compiler' must be callable, not {type(compiler).__name__}")
        if fallback is not None and not callable(fallback):
            raise TypeError(f"CompiledHostKernel {name!r}: 'fallback' must be callable or None")
        if not isinstance(module, str) and not hasattr(module, "__dict__"):
            raise TypeError(
                f"CompiledHostKernel {name!r}: 'module' must be a module or a dotted module name, "
                f"not {type(module).__name__}"
            )
        self._module = module
        self._name = name
        self._compiler = compiler
        self._fallback = fallback
        self._lock = threading.Lock()
        self._done = False
        self._function: Any = None  # the compiled function
        self._error: BaseException | None = None
        self._target: Any = None  # what calls run

    @property
    def name(self) -> str:
        """The function's name."""
        return self._name

    @property
    def fallback(self) -> Callable[..., Any] | None:
        """The fallback callable, or None."""
        return self._fallback

    __name__ = property(lambda self: self._name)

    @property
    def module(self) -> ModuleType:
        """The Python module (imported on first access when given by name)."""
        if isinstance(self._module, str):
            self._module = importlib.import_module(self._module)
        return self._module

    @property
    def python(self) -> Callable[..., Any]:
        """The uncompiled Python function."""
        return getattr(self.module, self._name)

    @property
    def error(self) -> BaseException | None:
        """The exception the compiler raised, or None."""
        return self._error

    @property
    def compiled(self) -> bool:
        """Whether compilation succeeded (compiles now if it has not been tried)."""
        return self.build() is not None

    def build(self) -> Callable[..., Any] | None:
        """Compile now if not yet tried; the compiled function, or None after a failure."""
        if not self._done:
            with self._lock:
                if not self._done:
                    self._compile()
        return self._function

    def _compile(self):
        try:
            result = self._compiler(self.module)
            function = getattr(result, self._name, None)
            if function is None:
                if not callable(result):
                    raise TypeError(f"the compiler returned {type(result).__name__} without a function {self._name!r}")
                function = result
            self._function = function
            self._target = function
        except Exception as exc:  # noqa: BLE001 - the compile error is kept, reported, and the fallback runs
            self._error = exc
            target = self._fallback
            what = "its fallback"
            if target is None:
                target = self.python
                what = "the uncompiled Python function"
            self._target = target
            warnings.warn(
                f"compiling host kernel {self._name!r} failed ({type(exc).__name__}: {exc}); using {what}",
                RuntimeWarning,
                stacklevel=4,
            )
        self._done = True

    def __call__(self, *args, **kwargs):
        target = self._target
        if target is None:
            self.build()
            target = self._target
        return target(*args, **kwargs)

    def __repr__(self):
        state = "not compiled yet" if not self._done else ("compiled" if self._function is not None else "fallback")
        return f"<CompiledHostKernel {self._name!r} ({state})>"
