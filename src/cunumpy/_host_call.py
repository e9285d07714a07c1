"""Run host-only code (SciPy, file readers, NumPy kernels) with arguments of either backend."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from . import _backend
from ._native import core

__all__ = ["evaluate_on_host", "host_call", "setup_on_host"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _to_host(a):
    return _backend.device_to_host(a, "host_call argument")


def _to_device(a):
    return _backend.host_to_device(a, "host_call result")


def host_call(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a host-only function with arguments of either backend.

    Device arrays among the arguments (also inside tuple, list and dict arguments, at any
    depth) are copied to the host, one copy per array; ``fun`` runs under the NumPy
    backend; NumPy arrays in its result (also inside returned tuples and lists) are copied
    to the device. Without device arguments on the NumPy backend this is a plain call.
    Nothing is copied back into the arguments.

    Parameters
    ----------
    fun : callable
        The host function (SciPy, a file reader, a NumPy-only kernel).
    *args : object
        Its positional arguments.
    **kwargs : object
        Its keyword arguments.

    Returns
    -------
    object
        What ``fun`` returns, with NumPy arrays moved to the device when device arguments
        were given.

    Raises
    ------
    TypeError
        ``fun`` is not callable.
    """
    if not callable(fun):
        raise TypeError(f"host_call(): 'fun' must be callable, not {type(fun).__name__}")
    if not core.reaches_device(args, kwargs):
        if _backend.get_backend() == "numpy":
            return fun(*args, **kwargs)
        with _backend.use_backend("numpy"):
            return fun(*args, **kwargs)
    host_args, host_kwargs, _, _ = core.host_arguments(args, kwargs, _to_host, (), ())
    with _backend.use_backend("numpy"):
        result = fun(*host_args, **host_kwargs)
    return core.device_result(result, _to_device, np.ndarray)


def evaluate_on_host(method: _F) -> _F:
    """Decorate a method so that it runs like :func:`host_call`.

    ``self`` is passed unchanged; the other arguments and the result move as in
    :func:`host_call`.

    Parameters
    ----------
    method : callable
        The method to wrap.

    Returns
    -------
    callable
        The wrapped method.

    Raises
    ------
    TypeError
        ``method`` is not callable.
    """
    if not callable(method):
        raise TypeError(f"evaluate_on_host(): 'method' must be callable, not {type(method).__name__}")

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        return host_call(functools.partial(method, self), *args, **kwargs)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature


def setup_on_host(init: _F) -> _F:
    """Decorate an ``__init__`` so that it runs under the NumPy backend.

    Arrays made there with ``xp.*`` are NumPy arrays, whatever the active backend.

    Parameters
    ----------
    init : callable
        The ``__init__`` to wrap.

    Returns
    -------
    callable
        The wrapped ``__init__``.

    Raises
    ------
    TypeError
        ``init`` is not callable.
    """
    if not callable(init):
        raise TypeError(f"setup_on_host(): 'init' must be callable, not {type(init).__name__}")

    @functools.wraps(init)
    def wrapper(*args, **kwargs):
        with _backend.use_backend("numpy"):
            return init(*args, **kwargs)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature
