"""Twin of _core/traverse.c: the conversion decision and argument traversal of PyccelKernel.

Same names, arguments, results and exceptions as the C functions; the oracle of the
property tests and the fallback where the extension is unavailable (Pyodide, where only the
no-conversion path is reached).
"""

from __future__ import annotations

import copy as _copy
import sys
from typing import Any

__all__ = ["HostKernel", "device_result", "enable_vectorcall", "host_arguments", "reaches_device"]


def _device_type():
    cupy = sys.modules.get("cupy")
    t = getattr(cupy, "ndarray", None) if cupy is not None else None
    return t if isinstance(t, type) else None


def _check_modules(modules, fname):
    if type(modules) is not tuple:
        raise TypeError(f"{fname}(): 'object_modules' must be a tuple of str, not {type(modules).__name__}")
    for i, prefix in enumerate(modules):
        if not isinstance(prefix, str):
            raise TypeError(f"{fname}(): 'object_modules' must be a tuple of str, item {i} is {type(prefix).__name__}")


def _check_call_args(args, kwargs, fname):
    if not isinstance(args, tuple):
        raise TypeError(f"{fname}(): 'args' must be a tuple, not {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"{fname}(): 'kwargs' must be a dict or None, not {type(kwargs).__name__}")


def _traversed_object(obj, modules) -> bool:
    """Instances with a ``__dict__`` of a Python class whose module matches a prefix."""
    if not modules:
        return False
    cls = type(obj)
    module = cls.__dict__.get("__module__")
    if not isinstance(module, str) or not hasattr(obj, "__dict__") or cls.__flags__ & (1 << 9) == 0:
        return False
    return module.startswith(modules)


def _tuple_like(obj) -> bool:
    """Exact tuples and namedtuples (tuple subclasses with a callable _make), as traverse.c."""
    t = type(obj)
    return t is tuple or (isinstance(obj, tuple) and callable(getattr(t, "_make", None)))


def _container(obj) -> bool:
    return type(obj) is list or isinstance(obj, dict) or _tuple_like(obj)


def _rebuild_tuple(proto, items: tuple):
    return items if type(proto) is tuple else type(proto)._make(items)


def reaches_device(args, kwargs=None, object_modules=()):
    """True if a device array is reachable from the arguments (see the C docstring)."""
    _check_call_args(args, kwargs, "reaches_device")
    _check_modules(object_modules, "reaches_device")
    device = _device_type()
    if device is None:
        return False
    seen: set[int] = set()
    keep = []
    stack = list(args) + (list(kwargs.values()) if kwargs else [])
    stack.reverse()
    while stack:
        obj = stack.pop()
        if isinstance(obj, device):
            return True
        container = _container(obj)
        if not container and not _traversed_object(obj, object_modules):
            continue
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        keep.append(obj)
        if isinstance(obj, dict):
            children = list(obj.values())
        elif container:
            children = list(tuple.__iter__(obj) if isinstance(obj, tuple) else obj)
        else:
            children = list(vars(obj).values())
        children.reverse()
        stack.extend(children)
    return False


_BUILDING = object()  # memo value of a tuple whose items are being converted


class _Traversal:
    def __init__(self, to_host, modules, device):
        self.to_host = to_host
        self.modules = modules
        self.device = device
        self.memo: dict[int, object] = {}
        self.keep: list = []  # originals stay alive while their ids are memo keys
        self.arrays: list[list] = []  # [device, host, output]
        self.array_index: dict[int, int] = {}

    def visit(self, obj, output):
        if self.device is not None and isinstance(obj, self.device):
            i = self.array_index.get(id(obj))
            if i is not None:
                entry = self.arrays[i]
                if output:
                    entry[2] = True
                return entry[1]
            host = self.to_host(obj)
            self.keep.append(obj)
            self.array_index[id(obj)] = len(self.arrays)
            self.arrays.append([obj, host, bool(output)])
            return host
        t = type(obj)
        if not _container(obj) and not _traversed_object(obj, self.modules):
            return obj
        found = self.memo.get(id(obj), None)
        if found is not None or id(obj) in self.memo:
            if found is _BUILDING:
                raise ValueError("a reference cycle through a tuple cannot be converted (use a list in the cycle)")
            return found
        self.keep.append(obj)
        if t is list:
            new: Any = []
            self.memo[id(obj)] = new
            i = 0
            while i < len(obj):
                new.append(self.visit(obj[i], output))
                i += 1
            return new
        if isinstance(obj, dict):
            items = list(dict.items(obj))
            new = {} if t is dict else _copy.copy(obj)  # a subclass keeps its type and state
            if not isinstance(new, dict):
                raise TypeError(f"copy.copy() of a {t.__name__} argument did not return a dict")
            self.memo[id(obj)] = new
            for key, value in items:
                dict.__setitem__(new, key, self.visit(value, output))
            return new
        if isinstance(obj, tuple):
            self.memo[id(obj)] = _BUILDING
            new = _rebuild_tuple(obj, tuple([self.visit(item, output) for item in tuple.__iter__(obj)]))
            self.memo[id(obj)] = new
            return new
        items = list(vars(obj).items())
        new = _copy.copy(obj)
        if new is obj:
            raise TypeError(
                f"copy.copy() of a {t.__name__} object returned the object itself; it cannot be "
                "converted without modifying the caller's object"
            )
        self.memo[id(obj)] = new
        target = vars(new)
        for key, value in items:
            target[key] = self.visit(value, output)
        return new


def host_arguments(args, kwargs, to_host, object_modules=(), outputs=None):
    """Host versions of a call's arguments (see the C docstring)."""
    _check_call_args(args, kwargs, "host_arguments")
    _check_modules(object_modules, "host_arguments")
    if not callable(to_host):
        raise TypeError(f"host_arguments(): 'to_host' must be callable, not {type(to_host).__name__}")
    if outputs is not None and not isinstance(outputs, tuple):
        raise TypeError(f"host_arguments(): 'outputs' must be a tuple or None, not {type(outputs).__name__}")
    walk = _Traversal(to_host, object_modules, _device_type())
    slots = [(i, i, v) for i, v in enumerate(args)]
    if kwargs is not None:
        slots += [(len(args) + j, key, value) for j, (key, value) in enumerate(kwargs.items())]
    done: list = [None] * len(slots)
    # Declared outputs first: every array they reach is flagged, whichever path reaches it later.
    for phase in (True, False):
        for n, key, value in slots:
            if (outputs is None or key in outputs) == phase:
                done[n] = walk.visit(value, phase)
    host_args = tuple(done[: len(args)])
    host_kwargs = None if kwargs is None else dict(zip(kwargs, done[len(args) :]))
    plan = [(dev, host) for dev, host, out in walk.arrays if out]
    return host_args, host_kwargs, len(walk.arrays), plan


def device_result(result, to_device, is_array):
    """The result with host arrays replaced by device copies (see the C docstring)."""
    if not callable(to_device) or not callable(is_array):
        raise TypeError("device_result(): 'to_device' and 'is_array' must be callable")
    check = (lambda v: isinstance(v, is_array)) if isinstance(is_array, type) else is_array
    memo: dict[int, object] = {}
    keep: list = []

    def visit(obj):
        hit = bool(check(obj))
        t = type(obj)
        if not hit and t is not list and not _tuple_like(obj):
            return obj
        if id(obj) in memo:
            found = memo[id(obj)]
            if found is _BUILDING:
                raise ValueError("a reference cycle through a returned tuple cannot be converted")
            return found
        keep.append(obj)
        if hit:
            memo[id(obj)] = new = to_device(obj)
            return new
        if t is list:
            memo[id(obj)] = new = []
            i = 0
            while i < len(obj):
                new.append(visit(obj[i]))
                i += 1
            return new
        memo[id(obj)] = _BUILDING
        memo[id(obj)] = new = _rebuild_tuple(obj, tuple([visit(item) for item in tuple.__iter__(obj)]))
        return new

    return visit(result)


class HostKernel:
    """Twin of the C base of PyccelKernel: direct call unless conversion is needed."""

    __slots__ = (
        "__dict__",
        "__weakref__",
        "_hk_convert",
        "_hk_flags",
        "_hk_kernel",
        "_hk_modules",
        "_hk_state",
        "_hk_use_cupy",
    )  # fmt: skip

    def _configure(self, kernel, use_cupy, object_modules, state, convert, flags=0):
        if not callable(kernel):
            raise TypeError(f"kernel must be callable, not {type(kernel).__name__}")
        if use_cupy is not None and use_cupy is not True and use_cupy is not False:
            raise TypeError(f"use_cupy must be True, False or None, not {type(use_cupy).__name__}")
        _check_modules(object_modules, "_configure")
        if not callable(convert):
            raise TypeError("convert must be callable")
        if type(flags) is not int:
            raise TypeError(f"flags must be an int, not {type(flags).__name__}")
        if flags < 0 or flags & ~3:
            raise ValueError(f"flags must combine 1 and 2, got {flags}")
        self._hk_flags = flags
        self._hk_kernel = kernel
        self._hk_use_cupy = use_cupy
        self._hk_modules = object_modules
        self._hk_state = state
        self._hk_convert = convert

    def __call__(self, *args, **kwargs):
        try:
            kernel = self._hk_kernel
        except AttributeError:
            raise TypeError(f"{type(self).__name__} object is not initialised") from None
        convert = self._hk_use_cupy
        flags = getattr(self, "_hk_flags", 0)
        if flags & 1 and kwargs:
            return self._hk_convert(self, args, kwargs)
        if (
            flags & 2
            and convert is None
            and any(type(a) not in (float, int, bool) and hasattr(type(a), "__cuda_args__") for a in args)
        ):
            return self._hk_convert(self, args, kwargs if kwargs else None)
        if convert is None:
            state = self._hk_state
            backend = state.get("backend") if isinstance(state, dict) else state.backend
            convert = backend == "cupy" or reaches_device(args, kwargs, self._hk_modules)
        if not convert:
            return kernel(*args, **kwargs)
        return self._hk_convert(self, args, kwargs if kwargs else None)


def enable_vectorcall(cls):
    """Nothing to enable in pure Python; False like the C function when it cannot."""
    if not isinstance(cls, type) or not issubclass(cls, HostKernel):
        raise TypeError("enable_vectorcall(): expected a subclass of HostKernel")
    return False
