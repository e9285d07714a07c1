"""Run host-only code (SciPy, file readers, NumPy kernels) with arguments of either backend."""

from __future__ import annotations

import functools

import numpy as np

from . import _backend
from ._native import core

__all__ = ["host_call", "evaluate_on_host", "setup_on_host"]


def _to_host(value, memo: dict):
    """Device arrays, also directly inside tuples/lists, become host copies (one per array)."""
    if _backend.is_cupy_array(value):
        host = memo.get(id(value))
        if host is None:
            host = _backend.device_to_host(value, "host_call argument")
            memo[id(value)] = host
        return host
    if type(value) in (tuple, list):
        items = [_to_host(item, memo) if _backend.is_cupy_array(item) else item for item in value]
        return type(value)(items)
    return value


def _to_device(value):
    if isinstance(value, np.ndarray):
        return _backend.host_to_device(value, "host_call result")
    if type(value) in (tuple, list):
        return type(value)(_to_device(item) for item in value)
    return value


def host_call(fun, *args, **kwargs):
    """Call ``fun`` on the host.

    Device arrays among the arguments (also items of tuple/list arguments) are copied to
    the host, ``fun`` runs under the NumPy backend and NumPy arrays in its result (also
    inside returned tuples/lists) are copied back to the device. Without device arguments
    on the NumPy backend this is a plain call.
    """
    if not callable(fun):
        raise TypeError(f"host_call(): 'fun' must be callable, not {type(fun).__name__}")
    has_device = core.any_device(args, kwargs, 1)
    if not has_device:
        if _backend.get_backend() == "numpy":
            return fun(*args, **kwargs)
        with _backend.use_backend("numpy"):
            return fun(*args, **kwargs)
    memo: dict = {}
    host_args = [_to_host(a, memo) for a in args]
    host_kwargs = {k: _to_host(v, memo) for k, v in kwargs.items()}
    with _backend.use_backend("numpy"):
        result = fun(*host_args, **host_kwargs)
    return _to_device(result)


def evaluate_on_host(method):
    """Method decorator with :func:`host_call` semantics; ``self`` is passed unchanged."""
    if not callable(method):
        raise TypeError(f"evaluate_on_host(): 'method' must be callable, not {type(method).__name__}")

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        return host_call(functools.partial(method, self), *args, **kwargs)

    return wrapper


def setup_on_host(init):
    """Decorator for ``__init__``: it runs under the NumPy backend, so ``xp.*`` arrays made
    there are NumPy arrays."""
    if not callable(init):
        raise TypeError(f"setup_on_host(): 'init' must be callable, not {type(init).__name__}")

    @functools.wraps(init)
    def wrapper(*args, **kwargs):
        with _backend.use_backend("numpy"):
            return init(*args, **kwargs)

    return wrapper
