"""Argument unwrapping and result wrapping shared by every fake-CuPy function and method.

A call collects the fake arrays it unwraps; a NumPy result that *is* one of their host
buffers is answered with the original fake array (so ``ascontiguousarray`` of a
contiguous array or ``out=`` return the same object, as in CuPy), and a result that is a
view of one of them becomes a fake view with that array as its base.
"""

from __future__ import annotations

import numpy as np

from . import _names
from ._errors import _host_array_error, _list_error
from ._ndarray import host_data, ndarray


class Call:
    """Conversions of one call: remembers the fake arrays it unwrapped."""

    __slots__ = ("host_ok", "inputs", "where")

    def __init__(self, where: str, host_ok: bool = False):
        self.where = where
        self.host_ok = host_ok
        self.inputs: dict[int, object] = {}

    def _fake(self, value):
        self.inputs[id(value._a)] = value
        return value._a

    def array(self, value, name):
        """One array argument: fake → host buffer; host arrays and lists refused."""
        if type(value) is ndarray:
            return self._fake(value)
        if isinstance(value, np.ndarray):
            if value.ndim == 0 or self.host_ok:
                return value
            raise _host_array_error(f"{self.where}: argument {name!r}", value)
        if isinstance(value, (list, tuple)):
            if self.host_ok:
                return host_data(value)
            raise _list_error(f"{self.where}: argument {name!r}", value)
        return value

    def host_or_device(self, value, name):
        """A parameter CuPy converts with ``cupy.asarray``: device arrays and host data."""
        if type(value) is ndarray:
            return self._fake(value)
        return host_data(value)

    def sequence(self, value, name):
        """A sequence of arrays (``concatenate``, ``stack``, ``choose`` …)."""
        if isinstance(value, (list, tuple)):
            items = [self.sequence(v, name) if isinstance(v, (list, tuple)) else self.array(v, name) for v in value]
            return type(value)(items) if isinstance(value, tuple) else items
        return self.array(value, name)

    def array_or_sequence(self, value, name):
        """An array, or a sequence holding device arrays (``diags([d], [0])``, grids …)."""
        if isinstance(value, (list, tuple)) and any(
            type(v) is ndarray or (isinstance(v, (list, tuple)) and any(type(w) is ndarray for w in v)) for v in value
        ):
            return self.sequence(value, name)
        return self.array(value, name)

    def other(self, value, name):
        """Any other argument: fake arrays inside containers are unwrapped."""
        if type(value) is ndarray:
            return self._fake(value)
        if isinstance(value, np.ndarray):
            if value.ndim == 0 or self.host_ok:
                return value
            raise _host_array_error(f"{self.where}: argument {name!r}", value)
        if isinstance(value, (list, tuple)) and value:
            items = [self.other(v, name) for v in value]
            if isinstance(value, tuple):
                return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
            return items
        return value

    def wrap(self, result):
        """Fake arrays for every NumPy array or scalar in ``result``."""
        if isinstance(result, np.ndarray):
            same = self.inputs.get(id(result))
            if same is not None and same._a is result:
                return same
            return ndarray._derived(result, self.inputs.values())
        if isinstance(result, np.generic):
            return ndarray._wrap(np.asarray(result))
        if isinstance(result, tuple):
            items = [self.wrap(r) for r in result]
            return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
        if isinstance(result, list):
            return [self.wrap(r) for r in result]
        return result


def parameter_kinds(func):
    """(positional parameter names, ``*args`` name or None) of ``func``; None without a signature."""
    import inspect

    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = []
    variadic = None
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            variadic = p.name
    return positional, variadic


def kind_of(param: str | None, function_name: str, variadic: bool = False) -> str:
    """How an argument is converted: "array", "sequence" or "other" (see _names)."""
    if variadic:
        if param in _names.VARIADIC_ARRAY_PARAMETERS or function_name in _names.VARIADIC_ARRAY_FUNCTIONS:
            return "array"
        return "other"
    if param in _names.ARRAY_PARAMETERS:
        return "array"
    if param in _names.SEQUENCE_PARAMETERS:
        return "sequence"
    return "other"
