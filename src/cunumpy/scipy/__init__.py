"""SciPy on either backend (API.md section 10): ``scipy`` on NumPy, ``cupyx.scipy`` on CuPy.

``xp.scipy.special.erf`` is looked up on the active backend at every access, so a backend
switch takes effect at once. Nothing is imported until a name is used, and SciPy is
optional. Every level (``xp.scipy``, ``xp.scipy.sparse``, ``xp.scipy.sparse.linalg``, …)
has ``available(name)`` (never raises) and ``resolve()`` (the real module).
``xp.scipy.linalg.solve_circulant`` is cunumpy's own FFT solve on both backends, since
CuPy lacks it. ``optimize`` and ``integrate`` are not forwarded: use ``xp.optimize`` and
``xp.integrate``.
"""

import importlib as _importlib
import sys as _sys
import types as _types
from typing import ClassVar as _ClassVar

from .. import _backend

__all__ = ["available", "resolve"]

#: Subpackages forwarded to ``scipy.<name>`` / ``cupyx.scipy.<name>``.
_SUBPACKAGES = (
    "fft",
    "fftpack",
    "interpolate",
    "linalg",
    "ndimage",
    "signal",
    "sparse",
    "sparse.csgraph",
    "sparse.linalg",
    "spatial",
    "special",
    "stats",
)

_NOT_FORWARDED = {
    "optimize": "xp.optimize (SciPy on the host, callbacks and results on x0's backend)",
    "integrate": "xp.integrate (SciPy on the host, callbacks and results on y0's backend)",
}

_BACKEND_LABEL = {"numpy": "NumPy", "cupy": "CuPy"}

# (backend, dotted path) -> (imported module, the dotted names it hangs from); failures are
# not cached, and an entry counts only while none of those names is None in sys.modules.
_modules: dict = {}


def _fill_ins(path: str) -> dict:
    """cunumpy's own names of a subpackage, present on both backends."""
    if path == "linalg":
        from ._circulant import solve_circulant

        return {"solve_circulant": solve_circulant}
    return {}


_FILL_IN_NAMES = {"linalg": frozenset({"solve_circulant"})}


def _real_name(backend: str, path: str) -> str:
    root = "scipy" if backend == "numpy" else "cupyx.scipy"
    return f"{root}.{path}" if path else root


def _label(path: str) -> str:
    return f"xp.scipy.{path}" if path else "xp.scipy"


def _chain(real: str) -> tuple:
    """``"scipy.sparse.linalg"`` -> ``("scipy", "scipy.sparse", "scipy.sparse.linalg")``."""
    parts = real.split(".")
    return tuple(".".join(parts[: i + 1]) for i in range(len(parts)))


def _halted(chain: tuple):
    """The first name of ``chain`` that ``sys.modules`` maps to None, else None.

    ``sys.modules["scipy"] = None`` (how tests make SciPy unimportable) must stop
    ``scipy.special`` too, although Python would still hand out an already imported
    ``sys.modules["scipy.special"]``, and so must the cache here."""
    modules = _sys.modules
    for name in chain:
        if name in modules and modules[name] is None:
            return name
    return None


def _import(real: str, chain: tuple) -> _types.ModuleType:
    halted = _halted(chain)
    if halted is not None:
        raise ModuleNotFoundError(f"import of {halted} halted; None in sys.modules", name=halted)
    return _importlib.import_module(real)


def _module(path: str) -> _types.ModuleType:
    """The active backend's module for ``path``; ImportError naming it and the backend."""
    backend = _backend.get_backend()
    entry = _modules.get((backend, path))
    if entry is not None and _halted(entry[1]) is None:
        return entry[0]
    real = _real_name(backend, path)
    chain = _chain(real)
    try:
        module = _import(real, chain)
    except ImportError as exc:
        needs = "SciPy" if backend == "numpy" else "CuPy's cupyx.scipy"
        raise ImportError(
            f"{_label(path)} needs {needs} on the {_BACKEND_LABEL[backend]} backend: "
            f"{real} could not be imported ({type(exc).__name__}: {exc})"
        ) from exc
    _modules[(backend, path)] = (module, chain)
    return module


def _scipy_has(path: str, name: str) -> bool:
    """Whether SciPy itself defines ``name`` (for error hints; never raises)."""
    real = _real_name("numpy", path)
    try:
        return hasattr(_import(real, _chain(real)), name)
    except Exception:  # noqa: BLE001 - documented never to raise
        return False


def _missing(path: str, name: str) -> AttributeError:
    backend = _backend.get_backend()
    real = _real_name(backend, path)
    message = f"{_label(path)}.{name} does not exist on the {_BACKEND_LABEL[backend]} backend ({real} has no {name!r})"
    if backend == "cupy" and _scipy_has(path, name):
        message += (
            f"; it exists in {_real_name('numpy', path)} (SciPy on the host): call it on host data, "
            f"e.g. xp.host_call(scipy.{path + '.' if path else ''}{name}, ...), or under the NumPy backend"
        )
    elif backend == "numpy" and not _scipy_has(path, name):
        message += "; SciPy does not define it either"
    return AttributeError(message)


class _Subpackages:
    """Proxies are made once per dotted path and shared: they hold no backend state."""

    proxies: _ClassVar[dict[str, "_ForwardedSubpackage"]] = {}

    @classmethod
    def get(cls, path: str) -> "_ForwardedSubpackage":
        proxy = cls.proxies.get(path)
        if proxy is None:
            # setdefault: threads racing here all get the first proxy stored
            proxy = cls.proxies.setdefault(path, _ForwardedSubpackage(path))
        return proxy


def _lookup(path: str, name: str, hint: bool = True):
    """``name`` of the subpackage ``path`` ("" = the top level) on the active backend.

    ``hint=False`` skips looking SciPy up for the error message (``available``)."""
    if name.startswith("__"):
        raise AttributeError(f"{_label(path)} has no attribute {name!r}")
    child = f"{path}.{name}" if path else name
    if not path and name in _NOT_FORWARDED:
        raise AttributeError(f"xp.scipy.{name} is not forwarded: use {_NOT_FORWARDED[name]}")
    if child in _SUBPACKAGES:
        return _Subpackages.get(child)
    if name in _FILL_IN_NAMES.get(path, ()):
        return _fill_ins(path)[name]
    module = _module(path)
    try:
        value = getattr(module, name)
    except AttributeError:
        # A nested module not imported by its parent (e.g. scipy.signal.windows).
        try:
            value = _importlib.import_module(f"{module.__name__}.{name}")
        except ImportError:
            if not hint:
                raise AttributeError(name) from None
            raise _missing(path, name) from None
    if isinstance(value, _types.ModuleType):
        return _Subpackages.get(child)
    return value


def _available(path: str, name) -> bool:
    if not isinstance(name, str) or not name or name.startswith("__"):
        return False
    try:
        value = _lookup(path, name, hint=False)
        if isinstance(value, _ForwardedSubpackage):
            value.resolve()
    except Exception:  # noqa: BLE001 - documented never to raise
        return False
    return True


def _names(path: str) -> list[str]:
    names = {"available", "resolve"} | _FILL_IN_NAMES.get(path, frozenset())
    prefix = f"{path}." if path else ""
    names |= {s[len(prefix) :] for s in _SUBPACKAGES if s.startswith(prefix) and "." not in s[len(prefix) :]}
    try:
        module = _module(path)
    except ImportError:
        return sorted(names)
    names |= {n for n in dir(module) if not n.startswith("_")}
    if not path:
        names -= set(_NOT_FORWARDED)
    return sorted(names)


class _ForwardedSubpackage:
    """``xp.scipy.<path>``: ``scipy.<path>`` or ``cupyx.scipy.<path>``, chosen at every access."""

    __slots__ = ("_path",)

    def __init__(self, path: str):
        self._path = path

    def __getattr__(self, name: str):
        return _lookup(self._path, name)

    def available(self, name) -> bool:
        """True if ``name`` exists on the active backend; never raises."""
        return _available(self._path, name)

    def resolve(self) -> _types.ModuleType:
        """The active backend's real module; ImportError naming it and the backend."""
        return _module(self._path)

    def __dir__(self):
        return _names(self._path)

    def __repr__(self) -> str:
        return f"<cunumpy forwarding module {_label(self._path)} -> {_real_name(_backend.get_backend(), self._path)}>"

    def __reduce__(self):
        return (_Subpackages.get, (self._path,))


def __getattr__(name: str):
    return _lookup("", name)


def __dir__():
    return _names("")


def available(name: str) -> bool:
    """Tell whether ``xp.scipy.<name>`` exists on the active backend; never raises.

    Parameters
    ----------
    name : str
        A dotted name below ``xp.scipy`` (``"special.jv"``).

    Returns
    -------
    bool
        False also when SciPy or CuPy is missing.
    """
    return _available("", name)


def resolve() -> _types.ModuleType:
    """Return the real module behind ``xp.scipy``.

    Returns
    -------
    module
        ``scipy`` on the NumPy backend, ``cupyx.scipy`` on CuPy.

    Raises
    ------
    ImportError
        The module is missing; the message names the module and the backend.
    """
    return _module("")
