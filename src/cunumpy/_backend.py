"""Backend state, switching, name forwarding and host/device conversions.

The active backend's public names are stored as real attributes of the ``cunumpy`` module
and swapped on every switch, so ``xp.zeros`` costs a plain module attribute lookup. The
package's own names are never overwritten.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import re
import sys
import warnings
from types import ModuleType
from typing import Any

import array_api_compat.numpy as _np_namespace
import numpy as np
from numpy.typing import DTypeLike

from . import _transfers
from ._transfers import describe, record

__all__ = [
    "BACKEND_NAMES",
    "MIN_CUPY_VERSION",
    "as_device_array",
    "assert_same_backend",
    "backend_info",
    "cupy_available",
    "cupy_version_supported",
    "default_float_dtype",
    "get_array_backend",
    "get_array_module",
    "get_backend",
    "is_cpu",
    "is_cupy_array",
    "is_gpu",
    "require_version",
    "same_backend",
    "set_backend",
    "synchronize",
    "to_cunumpy",
    "to_cupy",
    "to_numpy",
    "use_backend",
]

BACKEND_NAMES = ("numpy", "cupy")
MIN_CUPY_VERSION = "14.0.0"

# Names of the backend namespace that are forwarded although they start with "_".
_FORWARDED_DUNDERS = ("__array_api_version__", "__array_namespace_info__")


class _State:
    backend = "numpy"
    namespace = _np_namespace
    package_globals: dict | None = None  # the cunumpy module's __dict__
    own_names: frozenset = frozenset()  # names cunumpy defines itself
    forwarded: frozenset = frozenset()  # names currently forwarded from the backend
    cupy_ok: bool | None = None  # cached answer of cupy_available()
    cupy_reason: str | None = None  # why CuPy is unusable (None when usable or unknown)
    version_warned = False


_state = _State()

# --------------------------------------------------------------------------- device types


def _device_type():
    """``cupy.ndarray`` if CuPy (real or fake) is imported, else None. Never imports CuPy."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    return getattr(cupy, "ndarray", None)


def is_cupy_array(a) -> bool:
    """True iff ``a`` is a CuPy (or fake CuPy) array; a type check, never an import."""
    t = _device_type()
    return t is not None and isinstance(a, t)


def fake_cupy_active() -> bool:
    """True when the imported ``cupy`` is cunumpy's host stand-in."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and getattr(cupy, "__cunumpy_fake__", False) is True


# --------------------------------------------------------------------------- CuPy probing


_RELEASE = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$")


def _parse_release(version: str):
    match = _RELEASE.match(str(version))
    if match is None:
        raise ValueError(f"cupy_version_supported(): cannot parse version {version!r}")
    release = tuple(int(part or 0) for part in match.group(1, 2, 3))
    rest = match.group(4).lower().lstrip(".-_+")
    prerelease = bool(re.match(r"(a|b|c|rc|alpha|beta|pre|preview|dev)\d*", rest))
    return release, prerelease


def cupy_version_supported(version: str) -> bool:
    """Tell whether a CuPy version is at least :data:`MIN_CUPY_VERSION`.

    A pre-release of the minimum itself is not enough (``"14.0.0rc1"`` is False), a
    pre-release of a later version is (``"15.0.0a1"`` is True).

    Parameters
    ----------
    version : str
        A version string such as ``"14.0.1"``.

    Returns
    -------
    bool
        True for a release at or above the minimum.

    Raises
    ------
    TypeError
        ``version`` is not a str.
    ValueError
        ``version`` cannot be parsed.
    """
    if not isinstance(version, str):
        raise TypeError(f"cupy_version_supported(): 'version' must be a str, not {type(version).__name__}")
    release, prerelease = _parse_release(version)
    minimum, _ = _parse_release(MIN_CUPY_VERSION)
    if release != minimum:
        return release > minimum
    return not prerelease


def _probe_cupy() -> tuple[bool, str | None]:
    try:
        import cupy
    except Exception as exc:  # noqa: BLE001 - ImportError, CUDA library errors, anything
        return False, f"{type(exc).__name__}: {exc}"
    try:
        if getattr(cupy, "__cunumpy_fake__", False):
            return True, None
        version = getattr(cupy, "__version__", "0")
        if not cupy_version_supported(version) and not _state.version_warned:
            _state.version_warned = True
            warnings.warn(
                f"CuPy {version} is older than the minimum supported version {MIN_CUPY_VERSION}",
                RuntimeWarning,
                stacklevel=4,
            )
        count = cupy.cuda.runtime.getDeviceCount()
        if count < 1:
            return False, "no usable CUDA device was found (device count is 0)"
        # A tiny allocation proves the driver and runtime work together.
        cupy.zeros(1).sum().item()
    except Exception as exc:  # noqa: BLE001 - any driver or runtime failure is the reason CuPy is not usable
        return False, f"{type(exc).__name__}: {exc}"
    return True, None


def cupy_available() -> bool:
    """Tell whether CuPy imports and reports a usable CUDA device.

    The first call imports CuPy and allocates a tiny array; the answer is cached for the
    process, and the reason for a False is in :func:`backend_info`
    (``"cuda_unavailable_reason"``). The fake CuPy counts as available.

    Returns
    -------
    bool
        True when the CuPy backend can be used.
    """
    if _state.cupy_ok is None:
        _state.cupy_ok, _state.cupy_reason = _probe_cupy()
    return _state.cupy_ok


def cupy_unavailable_reason() -> str | None:
    """Why CuPy is unusable (None if it is usable)."""
    cupy_available()
    return _state.cupy_reason


def _require_cupy(what: str):
    if not cupy_available():
        raise ImportError(f"{what} needs a functional CuPy: {_state.cupy_reason}")
    return sys.modules["cupy"]


# --------------------------------------------------------------------------- namespace forwarding

_namespace_names: dict[int, dict] = {}


def _public_names(namespace) -> dict:
    cached = _namespace_names.get(id(namespace))
    if cached is None:
        names = [n for n in dir(namespace) if not n.startswith("_")]
        names += [n for n in _FORWARDED_DUNDERS if hasattr(namespace, n)]
        cached = {}
        for name in names:
            try:
                cached[name] = getattr(namespace, name)
            except AttributeError:
                continue
        _namespace_names[id(namespace)] = cached
    return cached


def bind_package(package_globals: dict) -> None:
    """Called once by ``cunumpy/__init__``: remember its namespace and its own names."""
    _state.package_globals = package_globals
    _state.own_names = frozenset(package_globals)
    _install(_state.backend, _state.namespace)


def _install(backend: str, namespace) -> None:
    g = _state.package_globals
    _state.backend = backend
    _state.namespace = namespace
    if g is None:
        return
    names = {k: v for k, v in _public_names(namespace).items() if k not in _state.own_names}
    for stale in _state.forwarded - names.keys():
        g.pop(stale, None)
    g.update(names)
    _state.forwarded = frozenset(names)
    g["numpy_backend"] = backend == "numpy"
    g["cupy_backend"] = backend == "cupy"
    g["__all__"] = sorted({n for n in _state.own_names if not n.startswith("_")} | set(names) - set(_FORWARDED_DUNDERS))


# --------------------------------------------------------------------------- backend selection


def _check_backend_name(backend) -> str:
    if not isinstance(backend, str) or backend not in BACKEND_NAMES:
        raise ValueError(f"backend must be 'numpy' or 'cupy', got {backend!r}")
    return backend


def _resolve(backend: str, strict: bool):
    """(effective backend, namespace) for a request; raises before any state change."""
    if backend == "numpy":
        return "numpy", _np_namespace
    if not cupy_available():
        if strict:
            raise RuntimeError(f"the CuPy backend is unusable: {_state.cupy_reason}")
        return "numpy", _np_namespace
    try:
        namespace = importlib.import_module("array_api_compat.cupy")
    except Exception as exc:
        if strict:
            raise RuntimeError(f"the CuPy backend is unusable: {type(exc).__name__}: {exc}") from exc
        return "numpy", _np_namespace
    return "cupy", namespace


# Callbacks run after every switch (cunumpy.xp.array_backend.add_listener); each gets the
# namespace module that became active.
_listeners: list = []


def add_backend_listener(callback) -> None:
    """Call ``callback(namespace)`` after every backend switch (set_backend, use_backend)."""
    if not callable(callback):
        raise TypeError(f"add_listener(): 'callback' must be callable, not {type(callback).__name__}")
    _listeners.append(callback)


def remove_backend_listener(callback) -> None:
    """Forget a callback added with :func:`add_backend_listener` (ValueError if unknown)."""
    try:
        _listeners.remove(callback)
    except ValueError:
        raise ValueError("remove_listener(): 'callback' was not added") from None


def _notify_listeners() -> None:
    """Every listener runs, after the switch is complete; the first failure is re-raised.

    The switch itself is never undone here, so a raising listener cannot leave the
    package half-switched (names of one backend, state of the other).
    """
    failure = None
    namespace = _state.namespace
    for callback in tuple(_listeners):
        try:
            callback(namespace)
        except Exception as exc:  # noqa: BLE001 - re-raised below, after the others ran
            failure = failure or exc
    if failure is not None:
        raise failure


def set_backend(backend: str, *, strict: bool = False) -> None:
    """Activate ``"numpy"`` or ``"cupy"`` for the whole process.

    Select once, at the program entry point; library code never calls this (use
    :class:`use_backend` for a scoped switch). Existing arrays never move.

    Parameters
    ----------
    backend : {"numpy", "cupy"}
        The backend to activate.
    strict : bool, optional
        With the default False, ``"cupy"`` falls back to NumPy silently when CuPy is
        unusable (check :func:`get_backend` afterwards); True raises instead.

    Raises
    ------
    ValueError
        ``backend`` is neither ``"numpy"`` nor ``"cupy"`` (the state is unchanged).
    RuntimeError
        ``strict=True`` and CuPy is unusable; the message gives the reason and the
        previous backend stays active.
    """
    _check_backend_name(backend)
    _install(*_resolve(backend, bool(strict)))
    if _listeners:
        _notify_listeners()


def get_backend() -> str:
    """Return the active backend after any fallback.

    Returns
    -------
    str
        ``"numpy"`` or ``"cupy"``.
    """
    return _state.backend


class use_backend(contextlib.ContextDecorator):
    """Activate a backend for a ``with`` block (or a decorated function).

    The previous backend comes back on exit, also when the block raises. Nestable. The
    ``with`` statement binds the effective backend's name.

    Parameters
    ----------
    backend : {"numpy", "cupy"}
        The backend to activate in the block.
    strict : bool, optional
        As for :func:`set_backend`: True raises :class:`RuntimeError` at entry when CuPy
        is unusable, instead of running the block on NumPy.

    Raises
    ------
    ValueError
        ``backend`` is neither ``"numpy"`` nor ``"cupy"``.
    """

    def __init__(self, backend: str, *, strict: bool = False):
        self._backend = _check_backend_name(backend)
        self._strict = bool(strict)
        self._saved: list = []

    def __enter__(self) -> str:
        resolved = _resolve(self._backend, self._strict)
        self._saved.append((_state.backend, _state.namespace))
        _install(*resolved)
        if _listeners:
            try:
                _notify_listeners()
            except BaseException:
                # The body will not run and __exit__ will not be called: put the previous
                # backend back (telling the listeners again) before the error propagates.
                _install(*self._saved.pop())
                with contextlib.suppress(Exception):
                    _notify_listeners()
                raise
        return _state.backend

    def __exit__(self, *exc) -> None:
        _install(*self._saved.pop())
        if _listeners:
            _notify_listeners()


# --------------------------------------------------------------------------- inspection


def get_array_backend(a: Any) -> str:
    """Return the backend an array lives on.

    Parameters
    ----------
    a : object
        An array or any other object.

    Returns
    -------
    str
        ``"cupy"`` for a CuPy array (a type check, CuPy is never imported), else ``"numpy"``.
    """
    return "cupy" if is_cupy_array(a) else "numpy"


def get_array_module(a: Any) -> ModuleType:
    """Return the array namespace of an argument, whatever the active backend.

    Parameters
    ----------
    a : object
        An array or any other object.

    Returns
    -------
    module
        ``array_api_compat.cupy`` for a CuPy array, else ``array_api_compat.numpy``.
    """
    if is_cupy_array(a):
        return importlib.import_module("array_api_compat.cupy")
    return _np_namespace


def is_gpu(a: Any) -> bool:
    """Tell whether ``a`` is a CuPy (device) array.

    Parameters
    ----------
    a : object
        An array or any other object.

    Returns
    -------
    bool
        True for a CuPy array.
    """
    return is_cupy_array(a)


def is_cpu(a: Any) -> bool:
    """Tell whether ``a`` is not a CuPy array (host data, scalars and other objects).

    Parameters
    ----------
    a : object
        An array or any other object.

    Returns
    -------
    bool
        True unless ``a`` is a CuPy array.
    """
    return not is_cupy_array(a)


def same_backend(*arrays: Any) -> bool:
    """Tell whether every argument lives on the same backend.

    Parameters
    ----------
    *arrays : object
        Arrays or other objects (non-arrays count as host data).

    Returns
    -------
    bool
        True when all are CuPy arrays or none is (also for zero or one argument).
    """
    if len(arrays) < 2:
        return True
    first = is_cupy_array(arrays[0])
    return all(is_cupy_array(a) == first for a in arrays[1:])


def assert_same_backend(*arrays: Any) -> None:
    """Refuse arguments that live on different backends.

    Parameters
    ----------
    *arrays : object
        Arrays or other objects.

    Raises
    ------
    TypeError
        Host and device arrays are mixed; the message names the backend of each argument.
    """
    if not same_backend(*arrays):
        found = sorted({get_array_backend(a) for a in arrays})
        kinds = ", ".join(f"argument {i}: {get_array_backend(a)}" for i, a in enumerate(arrays))
        raise TypeError(f"arrays live on different backends ({' and '.join(found)}): {kinds}")


def default_float_dtype() -> Any:
    """Return the active backend's ``float64``.

    Returns
    -------
    dtype
        ``xp.float64`` of the active backend.
    """
    return _state.namespace.float64


# --------------------------------------------------------------------------- conversions


def _host_order(a) -> str:
    """``"F"`` for F-contiguous (and not C-contiguous) arrays, else ``"C"``."""
    flags = a.flags
    return "F" if flags.f_contiguous and not flags.c_contiguous else "C"


def device_to_host(a, what: str = "to_numpy"):
    """Copy a device array to a new host array keeping F order; counted ``to_host``."""
    host = a.get(order=_host_order(a))
    if _transfers.sinks:
        record("to_host", f"{what} {describe(a)}", int(a.nbytes))
    return host


def host_to_device(a, what: str = "to_cupy"):
    """Copy host data to a new device array keeping C/F order; counted ``to_device``."""
    cupy = _require_cupy(f"{what}()")
    host = np.asarray(a)
    device = cupy.array(host, order=_host_order(host) if host.ndim > 1 else "C")
    if _transfers.sinks:
        record("to_device", f"{what} {describe(host)}", int(host.nbytes))
    return device


def to_numpy(a: Any) -> np.ndarray:
    """Return a NumPy array of ``a``, copying from the device where needed.

    Parameters
    ----------
    a : array_like
        A NumPy array, a CuPy array, or anything ``numpy.asarray`` accepts.

    Returns
    -------
    numpy.ndarray
        The same object for a NumPy array or view (no copy); for a CuPy array a new host
        array (F order kept for F-contiguous input, otherwise C), counted as ``to_host``;
        otherwise ``numpy.asarray(a)``.

    Notes
    -----
    Copying a device array waits for the work that produces it.
    """
    if type(a) is np.ndarray:
        return a
    if is_cupy_array(a):
        return device_to_host(a, "to_numpy")
    if isinstance(a, np.ndarray):
        return a
    return np.asarray(a)


def to_cupy(a: Any) -> Any:
    """Return a CuPy array of ``a``, copying host data to the device.

    Parameters
    ----------
    a : array_like
        A CuPy array, host data, or an object with ``__cuda_array_interface__``.

    Returns
    -------
    cupy.ndarray
        The same object for a CuPy array; a device array without a trip through the host
        for a ``__cuda_array_interface__`` object; otherwise a new device array (C or F order
        of contiguous input kept), counted as ``to_device``.

    Raises
    ------
    ImportError
        CuPy is not installed or not usable (the message gives the reason).
    """
    if is_cupy_array(a):
        return a
    cupy = _require_cupy("to_cupy()")
    if not isinstance(a, np.ndarray) and hasattr(a, "__cuda_array_interface__"):
        interface = a.__cuda_array_interface__
        device = cupy.asarray(a)
        if device.data.ptr != interface["data"][0] and _transfers.sinks:
            record("device_copy", f"to_cupy {describe(device)}", int(device.nbytes))
        return device
    return host_to_device(a, "to_cupy")


def to_cunumpy(a: Any) -> Any:
    """Return an array of the active backend.

    :func:`to_cupy` on the CuPy backend, :func:`to_numpy` on NumPy (where a NumPy array or
    view is returned as is). Use it once, where data enters the program.

    Parameters
    ----------
    a : array_like
        Host or device data.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        ``a`` on the active backend.

    Raises
    ------
    ImportError
        The CuPy backend is active but CuPy became unusable (see :func:`to_cupy`).
    """
    if _state.backend == "cupy":
        return to_cupy(a)
    return to_numpy(a)


def as_device_array(
    value: Any, dtype: DTypeLike | None = None, ndim: int | None = None, *, name: str | None = None
) -> Any:
    """Return a C-contiguous device array of one dtype, copying at most once.

    Meant for arguments of CUDA kernels, whose pointer parameters need exactly this.

    Parameters
    ----------
    value : array_like
        A CuPy array or host data.
    dtype : dtype, optional
        The wanted dtype; by default the one of ``value``.
    ndim : int, optional
        The required number of dimensions.
    name : str, optional
        The argument's name, used in error messages.

    Returns
    -------
    cupy.ndarray
        ``value`` itself when it is already a C-contiguous device array of ``dtype``;
        otherwise one device copy (counted as ``device_copy`` or ``to_device``).

    Raises
    ------
    RuntimeError
        The NumPy backend is active: host data is never moved to the device implicitly.
    TypeError
        ``ndim`` is not an int.
    ValueError
        ``value`` does not have ``ndim`` dimensions; the message names ``name``.
    """
    label = repr(name) if name is not None else "value"
    if _state.backend != "cupy":
        raise RuntimeError(
            f"as_device_array({label}): the active backend is NumPy; host data is never "
            "moved to the device implicitly (activate the CuPy backend first)"
        )
    if ndim is not None:
        if isinstance(ndim, bool) or not isinstance(ndim, (int, np.integer)):
            raise TypeError(f"as_device_array({label}): 'ndim' must be an int, not {type(ndim).__name__}")
        actual = value.ndim if hasattr(value, "ndim") else np.ndim(value)
        if actual != ndim:
            raise ValueError(f"as_device_array: {label} must have {ndim} dimension(s), got {actual}")
    cupy = sys.modules["cupy"]
    if is_cupy_array(value):
        wanted = value.dtype if dtype is None else np.dtype(dtype)
        if value.dtype == wanted and value.flags.c_contiguous:
            return value
        converted = cupy.ascontiguousarray(value, dtype=wanted)
        if _transfers.sinks:
            record("device_copy", f"as_device_array {describe(value)} -> {wanted}", int(converted.nbytes))
        return converted
    host = np.ascontiguousarray(to_numpy(value), dtype=dtype)
    return host_to_device(host, "as_device_array")


def synchronize() -> None:
    """Wait until the current CUDA device has finished all queued work.

    A no-op on the NumPy backend. On CuPy it is one host wait, recorded as a ``sync``
    event by :func:`cunumpy.profiling.count_transfers`; a CuPy too old for it gives one
    :class:`RuntimeWarning` and returns.
    """
    if _state.backend != "cupy":
        return
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return
    try:
        cupy.cuda.Device().synchronize()
    except AttributeError as exc:
        warnings.warn(f"synchronize(): incompatible CuPy ({exc})", RuntimeWarning, stacklevel=2)
        return
    if _transfers.sinks:
        record("sync", "synchronize()")


# --------------------------------------------------------------------------- versions


def _numeric_release(version: str) -> tuple[int, int, int]:
    parts = re.findall(r"\d+", str(version).split("+")[0])[:3]
    major, minor, micro = (*(int(p) for p in parts), 0, 0, 0)[:3]
    return major, minor, micro


@functools.cache
def installed_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return "0.0.0+unknown"
    try:
        return version("cunumpy")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def require_version(minimum: str) -> None:
    """Refuse to run with a cunumpy older than ``minimum``.

    Compares the first three numbers of the installed version with ``minimum``; a
    development install without metadata passes.

    Parameters
    ----------
    minimum : str
        The oldest acceptable version, such as ``"0.8.0"`` (which also refuses the earlier
        release 0.7.1 of the package index).

    Raises
    ------
    TypeError
        ``minimum`` is not a str.
    ValueError
        ``minimum`` is not a version.
    ImportError
        The installed cunumpy is older; the message says how to upgrade.
    """
    if not isinstance(minimum, str):
        raise TypeError(f"require_version(): 'minimum' must be a str, not {type(minimum).__name__}")
    if not re.match(r"^\s*v?\d+", minimum):
        raise ValueError(f"require_version(): 'minimum' is not a version: {minimum!r}")
    current = installed_version()
    if current.endswith("+unknown"):
        return
    if _numeric_release(current) < _numeric_release(minimum):
        # `pip install --upgrade cunumpy` would not help: the package index's cunumpy is the
        # earlier implementation (0.7.1), numbered below this one (0.8.0 and later).
        raise ImportError(
            f"cunumpy {minimum} or newer is required, but {current} is installed; upgrade with `make install` "
            "in a checkout of this cunumpy, or `pip install` of the wheel `make wheel` builds (the cunumpy on "
            "the package index is the earlier release 0.7.1); `python -m cunumpy info` shows which is installed"
        )


def _distribution_version(*names: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def backend_info() -> dict:
    """Collect diagnostics about the backends, for bug reports.

    Never changes the backend, never imports MPI and never raises.

    Returns
    -------
    dict
        JSON-serialisable: ``backend``, ``cupy_available``, ``cuda_unavailable_reason``,
        ``versions`` (cunumpy, numpy, cupy, array-api-compat), ``min_cupy_version``,
        ``fake_cupy``, ``cuda_visible_devices`` and ``device`` (id, name, compute capability,
        driver and runtime versions; None without a usable GPU).
    """
    info: dict = {"backend": _state.backend}
    try:
        available = cupy_available()
    except Exception as exc:  # noqa: BLE001  # pragma: no cover - cupy_available itself never raises
        available, _state.cupy_reason = False, f"{type(exc).__name__}: {exc}"
    info["cupy_available"] = bool(available)
    info["cuda_unavailable_reason"] = None if available else _state.cupy_reason
    cupy = sys.modules.get("cupy")
    cupy_version = getattr(cupy, "__version__", None) if cupy is not None else None
    if cupy_version is None:
        try:
            cupy_version = _distribution_version("cupy-cuda13x", "cupy-cuda12x", "cupy")
        except Exception:  # noqa: BLE001 - a report shows a broken package's version as unknown, it does not stop
            cupy_version = None
    versions = {"cunumpy": installed_version(), "numpy": np.__version__, "cupy": cupy_version}
    try:
        versions["array-api-compat"] = _distribution_version("array-api-compat", "array_api_compat")
    except Exception:  # noqa: BLE001 - a report shows a broken package's version as unknown, it does not stop
        versions["array-api-compat"] = None
    info["versions"] = {k: (str(v) if v is not None else None) for k, v in versions.items()}
    info["min_cupy_version"] = MIN_CUPY_VERSION
    info["fake_cupy"] = fake_cupy_active()
    info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    info["device"] = None
    if available:
        try:
            info["device"] = _device_info(cupy)
        except Exception as exc:  # noqa: BLE001 - a report records the driver's failure, whatever its type
            info["cuda_inspection_error"] = f"{type(exc).__name__}: {exc}"
    return info


def _device_info(cupy) -> dict:
    runtime = cupy.cuda.runtime
    device_id = int(runtime.getDevice())
    props = runtime.getDeviceProperties(device_id)
    name = props.get("name", b"")
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    return {
        "id": device_id,
        "name": str(name),
        "compute_capability": f"{props.get('major', 0)}{props.get('minor', 0)}",
        "visible_devices": int(runtime.getDeviceCount()),
        "driver_version": int(runtime.driverGetVersion()),
        "runtime_version": int(runtime.runtimeGetVersion()),
    }


# --------------------------------------------------------------------------- start-up


def initial_backend() -> None:
    """Apply ``CUNUMPY_BACKEND`` (read once, at first import)."""
    if os.environ.get("CUNUMPY_BACKEND", "").lower() == "cupy":
        set_backend("cupy")
