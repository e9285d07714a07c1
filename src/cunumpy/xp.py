"""Compatibility module for code written against earlier releases (API.md section 0.4a).

Earlier releases kept the backend layer in ``cunumpy.xp``; downstream code still does
``from cunumpy.xp import array_backend, to_numpy``. This module re-exports the top-level
backend-control, inspection and conversion functions unchanged and adds
:data:`array_backend`, an object view of the same global state. New code should use the
top level (``import cunumpy as xp``) instead.

``import cunumpy`` does not import this module, and importing it loads nothing beyond
cunumpy itself.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from . import _backend
from ._backend import (
    MIN_CUPY_VERSION,
    as_device_array,
    assert_same_backend,
    backend_info,
    cupy_available,
    cupy_version_supported,
    default_float_dtype,
    get_array_backend,
    get_array_module,
    get_backend,
    is_cpu,
    is_gpu,
    same_backend,
    set_backend,
    synchronize,
    to_cunumpy,
    to_cupy,
    to_numpy,
    use_backend,
)

if TYPE_CHECKING:
    from .memory import HostCopy

__all__ = [
    "MIN_CUPY_VERSION",
    "ArrayBackend",
    "array_backend",
    "as_device_array",
    "assert_same_backend",
    "backend_info",
    "cupy_available",
    "cupy_backend",  # noqa: F822 - created on first access by the module __getattr__
    "cupy_version_supported",
    "default_float_dtype",
    "get_array_backend",
    "get_array_module",
    "get_backend",
    "is_cpu",
    "is_gpu",
    "numpy_backend",  # noqa: F822 - created on first access by the module __getattr__
    "same_backend",
    "set_backend",
    "synchronize",
    "to_cunumpy",
    "to_cupy",
    "to_host_async",
    "to_numpy",
    "use_backend",
]


def to_host_async(a: Any) -> HostCopy:
    """Start a non-blocking copy to the host, as ``cunumpy.to_host_async``.

    Parameters
    ----------
    a : array_like
        A device array, or host data.

    Returns
    -------
    cunumpy.memory.HostCopy
        ``ready()`` never waits; ``result()`` waits and returns the NumPy value.
    """
    from . import memory

    return memory.HostCopy.start(a)


def __getattr__(name):
    # Evaluated on each access, like cunumpy.numpy_backend / cunumpy.cupy_backend.
    if name == "numpy_backend":
        return _backend.get_backend() == "numpy"
    if name == "cupy_backend":
        return _backend.get_backend() == "cupy"
    raise AttributeError(f"module 'cunumpy.xp' has no attribute {name!r}")


class ArrayBackend:
    """The global backend as an object: one instance, :data:`array_backend`.

    It holds no state of its own: every attribute reads cunumpy's process-wide backend,
    so it agrees with ``cunumpy.get_backend()`` whichever API made the switch.
    """

    __slots__ = ()

    @property
    def backend(self) -> str:
        """The active backend's name, ``"numpy"`` or ``"cupy"``."""
        return _backend.get_backend()

    @property
    def xp(self) -> ModuleType:
        """The namespace module names are forwarded from (``array_api_compat.numpy``/``.cupy``)."""
        return _backend._state.namespace

    def set(self, name: str, *, strict: bool = False) -> None:
        """``cunumpy.set_backend(name, strict=strict)``."""
        set_backend(name, strict=strict)

    def use_backend(self, name: str, *, strict: bool = False) -> _backend.use_backend:
        """``cunumpy.use_backend(name, strict=strict)``: a context manager."""
        return use_backend(name, strict=strict)

    def add_listener(self, callback: Callable[[ModuleType], object]) -> Callable[[ModuleType], object]:
        """Call ``callback(namespace)`` after every backend switch; returns ``callback``.

        Listeners run after each ``set_backend``/``set`` and on entry to and exit from each
        ``use_backend`` block, whichever module the switch was made through. The switch is
        complete before any listener runs; if one raises, the others still run and the
        first error propagates (``use_backend`` then restores the previous backend and its
        body does not run).
        """
        _backend.add_backend_listener(callback)
        return callback

    def remove_listener(self, callback: Callable[[ModuleType], object]) -> None:
        """Stop calling ``callback``; ValueError if it was never added."""
        _backend.remove_backend_listener(callback)

    def __repr__(self) -> str:
        return f"<cunumpy array backend {self.backend!r}>"


#: The global backend of cunumpy, as earlier releases exposed it.
array_backend = ArrayBackend()
