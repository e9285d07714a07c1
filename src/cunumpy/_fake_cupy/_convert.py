"""Argument unwrapping and result wrapping shared by every fake-CuPy function and method.

A call collects the fake arrays it unwraps; a NumPy result that *is* one of their host
buffers is answered with the original fake array (so ``ascontiguousarray`` of a
contiguous array or ``out=`` return the same object, as in CuPy), and a result that is a
view of one of them becomes a fake view with that array as its base.
"""

from __future__ import annotations

import ctypes

import numpy as np

from . import _names

_SCALARS = (bool, int, float, complex, np.generic)


def _host_array_error(where: str, value) -> TypeError:
    return TypeError(
        f"{where} got a host numpy.ndarray (shape {value.shape}, {value.dtype}); CuPy functions "
        "take device arrays: copy it explicitly with cupy.asarray() or xp.to_cupy()"
    )


def _list_error(where: str, value) -> TypeError:
    kind = type(value).__name__
    return TypeError(
        f"{where} got a Python {kind}; CuPy does not accept {kind}s here: "
        "make a device array first with cupy.asarray()"
    )


class ListArgumentError(TypeError, AttributeError):
    """A list where a CuPy function calls a method of its argument: CuPy raises
    AttributeError (``'list' object has no attribute ...``), the fake's usual refusal is
    TypeError; this is both, so either ``except`` clause matches."""


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
        from ._ndarray import ndarray

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
        from ._ndarray import ndarray

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
        from ._ndarray import ndarray

        if isinstance(value, (list, tuple)) and any(
            type(v) is ndarray or (isinstance(v, (list, tuple)) and any(type(w) is ndarray for w in v))
            for v in value
        ):
            return self.sequence(value, name)
        return self.array(value, name)

    def other(self, value, name):
        """Any other argument: fake arrays inside containers are unwrapped."""
        from ._ndarray import ndarray

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
        from ._ndarray import ndarray

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


def host_data(value):
    """Host data for creation functions: fake arrays unwrapped, also inside lists."""
    from ._ndarray import ndarray

    if type(value) is ndarray:
        return value._a
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, (list, tuple, ndarray)) for v in value):
            return [host_data(v) for v in value]
        return value
    if hasattr(value, "__cuda_array_interface__") and not isinstance(value, _SCALARS):
        return host_view_of_interface(value)
    return value


def host_view_of_interface(obj) -> np.ndarray:
    """A NumPy view of memory described by ``__cuda_array_interface__``.

    Under the fake CuPy every device pointer is a host address, so the memory can be
    read in place; the view keeps ``obj`` alive.
    """
    interface = obj.__cuda_array_interface__
    shape = tuple(int(n) for n in interface["shape"])
    dtype = np.dtype(interface["typestr"])
    ptr = int(interface["data"][0])
    strides = interface.get("strides")
    count = int(np.prod(shape)) if shape else 1
    if count == 0 or ptr == 0:
        return np.empty(shape, dtype=dtype)
    strides = tuple(int(s) for s in (strides or _c_strides(shape, dtype.itemsize)))
    extent = sum((n - 1) * abs(s) for n, s in zip(shape, strides)) + dtype.itemsize
    low = ptr + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    raw = (ctypes.c_char * extent).from_address(low)
    raw._owner = obj  # the view keeps the exporting object alive
    flat = np.frombuffer(raw, dtype=np.uint8)
    view = np.ndarray(shape, dtype, buffer=flat, offset=ptr - low, strides=strides)
    if interface["data"][1]:
        view.flags.writeable = False
    return view


def _c_strides(shape, itemsize):
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


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
