"""PyccelKernel: call a NumPy-only host function with CuPy arrays (API.md section 2.1).

The no-conversion path is the C base class (``_core.HostKernel``): a backend test and a type
check per argument, then the wrapped function is called with the very same arguments. The
conversion path below resolves the ``outputs`` declarations, lets the C traversal build the
host arguments and the copy-back plan, and does the copies through ``_backend`` so every one
is counted.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from .. import _backend, _transfers
from .._native import core

__all__ = ["PyccelKernel", "outputs_from_annotations"]

_SCALAR_NAMES = frozenset(
    {
        "int", "float", "bool", "complex", "str",
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float32", "float64", "complex64", "complex128",
    }
)  # fmt: skip
_FINAL = re.compile(r"^(?:[A-Za-z_][\w]*\.)*Final\b")
_CONST = re.compile(r"\bconst\b")


def _pyccel_stub_names(function):
    """Parameter names of a Pyccel-compiled function from the ``.pyi`` stub Pyccel writes
    (``__pyccel__/<module>.pyi`` beside the extension, or ``<module>.pyi``); None if absent."""
    module_name = getattr(function, "__module__", None)
    name = getattr(function, "__name__", None)
    # A function of an extension module carries the module itself: more reliable than a
    # sys.modules lookup by name, which another module of the same name may have replaced.
    module = getattr(function, "__self__", None)
    if not isinstance(module, types.ModuleType):
        module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    filename = getattr(module, "__file__", None) if module is not None else None
    if not isinstance(filename, str) or not isinstance(name, str):
        return None
    folder = Path(filename).parent
    stem = Path(filename).name.split(".")[0]
    short = module_name.rpartition(".")[2] if isinstance(module_name, str) else stem
    candidates = []
    for base in (stem, short):
        # Pyccel names its folder __pyccel__<worker> under pytest-xdist (PYTEST_XDIST_WORKER).
        candidates += [folder / "__pyccel__" / f"{base}.pyi", folder / f"{base}.pyi"]
        candidates += sorted(folder.glob(f"__pyccel__?*/{base}.pyi"))
    for path in candidates:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args))
    return None


class _Parameters:
    """What a kernel's parameter list tells about addressing arguments, computed once."""

    __slots__ = ("keyword_only", "positional", "varargs", "varkw")

    def __init__(self, positional=(), keyword_only=(), varargs=False, varkw=False):
        self.positional = tuple(positional)
        self.keyword_only = tuple(keyword_only)
        self.varargs = varargs
        self.varkw = varkw

    @classmethod
    def of(cls, kernel, parameters):
        if parameters is not None:
            if isinstance(parameters, str) or not hasattr(parameters, "__iter__"):
                raise TypeError(
                    f"PyccelKernel: 'parameters' must be a sequence of str, not {type(parameters).__name__}"
                )
            names = tuple(parameters)
            for name in names:
                if not isinstance(name, str):
                    raise TypeError(f"PyccelKernel: 'parameters' entries must be str, not {type(name).__name__}")
            if len(set(names)) != len(names):
                raise ValueError(f"PyccelKernel: 'parameters' repeats a name: {names}")
            return cls(names)
        try:
            signature = inspect.signature(kernel)
        except (TypeError, ValueError):
            # A Pyccel-compiled function has no Python signature, but Pyccel writes its
            # parameter names to a .pyi stub: with them, names in ``outputs`` resolve on the
            # device path as they do for the Python function.
            names = _pyccel_stub_names(kernel)
            return None if names is None else cls(names)
        positional, keyword_only, varargs, varkw = [], [], False, False
        for p in signature.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                positional.append(p.name)
            elif p.kind is p.KEYWORD_ONLY:
                keyword_only.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                varargs = True
            else:
                varkw = True
        return cls(positional, keyword_only, varargs, varkw)


def _check_outputs(outputs):
    if outputs is None:
        return None
    if isinstance(outputs, (int, str)):
        raise TypeError(
            f"PyccelKernel: 'outputs' must be a sequence of indices or names, not a bare "
            f"{type(outputs).__name__}; for one output write outputs=({outputs!r},)"
        )
    try:
        entries = tuple(outputs)
    except TypeError:
        raise TypeError(
            f"PyccelKernel: 'outputs' must be None or a sequence of int indices and str names, "
            f"not {type(outputs).__name__}"
        ) from None
    for entry in entries:
        if isinstance(entry, bool) or not isinstance(entry, (int, np.integer, str)):
            raise TypeError(
                f"PyccelKernel: each 'outputs' entry must be an int index or a str name, "
                f"got {entry!r} ({type(entry).__name__})"
            )
    return tuple(int(e) if not isinstance(e, str) else e for e in entries)


def _kernel_name(kernel) -> str:
    name = getattr(kernel, "__name__", None)
    return name if isinstance(name, str) else type(kernel).__name__


def _default_is_array(value) -> bool:
    return isinstance(value, np.ndarray)


def _copy_back(device, host, what):
    """Write a host result into the caller's device array in place; counted ``to_device``."""
    flags = device.flags
    if flags.c_contiguous or flags.f_contiguous:
        device.set(host)
    else:
        device[...] = sys.modules["cupy"].asarray(host)
    if _transfers.sinks:
        _transfers.record("to_device", f"{what} {_transfers.describe(host)}", int(host.nbytes))


def _extent(device):
    """The byte range [low, high) a device array can touch (any strides, negative too)."""
    low = high = int(device.data.ptr)
    if device.size == 0:
        return low, low
    for n, st in zip(device.shape, device.strides):
        span = (n - 1) * st
        if span < 0:
            low += span
        else:
            high += span
    return low, high + device.itemsize


def _overlap_groups(plan):
    """Indices of the copy-back plan grouped by overlapping device memory (sorted sweep);
    entries that share memory with no other come out as groups of one."""
    spans = sorted((*_extent(device), i) for i, (device, _) in enumerate(plan))
    groups: list = []
    current: list = []
    end = None
    for low, high, i in spans:
        if current and low < end:
            current.append(i)
            end = max(end, high)
        else:
            if current:
                groups.append(current)
            current, end = [i], high
    if current:
        groups.append(current)
    return groups


def _changed_elements(host, before):
    """Elements of `host` whose bytes differ from `before` (NaN payloads and -0.0 included)."""
    h = np.ascontiguousarray(host)
    b = np.ascontiguousarray(before)
    size = h.dtype.itemsize
    if h.size == 0 or size == 0:
        return np.zeros(h.shape, dtype=bool)
    hb = h.reshape(-1).view(np.uint8).reshape(h.size, size)
    bb = b.reshape(-1).view(np.uint8).reshape(b.size, size)
    return (hb != bb).any(axis=1).reshape(h.shape)


def _copy_back_all(plan, what):
    """Copy every host result back. Device arguments that share memory (x and x[::2], x and
    x[::-1], a view passed twice) are written element-wise where the function changed them, so
    an argument it did not write cannot undo the writes made through another one."""
    if len(plan) < 2:
        for device, host in plan:
            _copy_back(device, host, what)
        return
    for group in _overlap_groups(plan):
        if len(group) == 1:
            device, host = plan[group[0]]
            _copy_back(device, host, what)
            continue
        # The device memory still holds the values from before the call: read them first.
        before = [_backend.device_to_host(plan[i][0], f"{what} (overlapping arguments)") for i in group]
        changes = [_changed_elements(plan[i][1], b) for i, b in zip(group, before)]
        for i, changed in zip(group, changes):
            if changed.any():
                _copy_back_changed(plan[i][0], plan[i][1], changed, what)


def _copy_back_changed(device, host, changed, what):
    """Write only the changed elements of `host` into `device`; counted ``to_device``."""
    cupy = sys.modules["cupy"]
    values = np.ascontiguousarray(host[changed])
    device[cupy.asarray(changed)] = cupy.asarray(values)
    if _transfers.sinks:
        _transfers.record("to_device", f"{what} {_transfers.describe(values)}", int(values.nbytes))


def _convert_call(self, args, kwargs):
    """The conversion path (the C base calls it when conversion is needed)."""
    slots = self._resolve_outputs(args, kwargs)
    what = f"PyccelKernel {self._name}"

    def to_host(a):
        return _backend.device_to_host(a, what)

    host_args, host_kwargs, n_arrays, plan = core.host_arguments(args, kwargs, to_host, self._object_modules, slots)
    if _transfers.sinks:
        _transfers.record("kernel_conversion", f"{self._name}: {n_arrays} arrays")
    try:
        if host_kwargs is None:
            result = self._kernel(*host_args)
        else:
            result = self._kernel(*host_args, **host_kwargs)
    finally:
        # Writes made before an exception reach the device, as without the wrapper.
        _copy_back_all(plan, what)

    def to_device(a):
        return _backend.host_to_device(a, f"{what} result")

    return core.device_result(result, to_device, self._is_array)


class PyccelKernel(core.HostKernel):
    """Adapt a function that only accepts NumPy arrays so it can be called with CuPy arrays.

    Named after Pyccel, whose compiled functions accept only NumPy arrays, but it wraps any
    callable (Numba, a C extension, plain Python) and compiles nothing. Without a device
    argument on the NumPy backend the function is called directly with your own arguments.
    Otherwise every device array reachable from the arguments is copied to the host once
    (aliases stay aliases, F order is kept), the function runs, the declared ``outputs`` are
    copied back into the original device arrays, and NumPy arrays it returns (also in
    returned tuples and lists) come back as device arrays; each such call records one
    ``kernel_conversion`` event. Device arguments that share memory (``x`` and ``x[::2]``)
    are written back element by element where the function changed them.

    Parameters
    ----------
    kernel : callable
        The host function.
    use_cupy : bool or None, optional
        True always converts, False never does; None (default) converts when the CuPy
        backend is active or a CuPy array is reachable from the arguments.
    object_modules : sequence of str, optional
        Module prefixes of classes whose instances are traversed (shallow-copied, their
        array attributes replaced on the copy); objects of other classes pass unchanged.
    is_array : callable, optional
        ``is_array(value) -> bool`` decides what counts as a host array in the return value
        (default: ``numpy.ndarray`` instances).
    outputs : sequence of int or str, optional
        The arguments the function may write, by index (negative counts from the end) or
        parameter name: only those are copied back. None (default) copies every converted
        array back; ``()`` copies nothing. A written argument that is not declared keeps
        its stale device data, silently.
    parameters : sequence of str, optional
        The parameter names, for a function whose signature cannot be read (a compiled
        builtin without a Pyccel ``.pyi`` stub), so that names and indices in ``outputs``
        are interchangeable.

    Raises
    ------
    TypeError
        ``kernel`` is not callable, ``outputs`` is a bare int or str (use a one-element
        tuple) or has an entry that is neither int nor str, or another argument has the
        wrong type.
    ValueError
        ``parameters`` repeats a name.

    Notes
    -----
    Declarations are resolved at each converting call, before the function runs: a name
    declared for an argument passed positionally needs the parameter names (from the Python
    signature, Pyccel's ``.pyi`` stub, ``parameters=`` or, inside a :class:`Kernel`, its host
    function), else it is a :class:`KeyError`; an index declared for an argument passed by
    keyword is an :class:`IndexError` without them.
    """

    def __init__(
        self,
        kernel: Callable[..., Any],
        use_cupy: bool | None = None,
        object_modules: str | Iterable[str] = (),
        is_array: Callable[[Any], bool] | None = None,
        outputs: Iterable[int | str] | None = None,
        parameters: Iterable[str] | None = None,
    ) -> None:
        if not callable(kernel):
            raise TypeError(f"PyccelKernel: 'kernel' must be callable, not {type(kernel).__name__}")
        if use_cupy is not None and not isinstance(use_cupy, (bool, np.bool_)):
            raise TypeError(f"PyccelKernel: 'use_cupy' must be True, False or None, not {type(use_cupy).__name__}")
        if isinstance(object_modules, str):
            object_modules = (object_modules,)
        try:
            modules = tuple(object_modules)
        except TypeError:
            raise TypeError(
                f"PyccelKernel: 'object_modules' must be a sequence of str, not {type(object_modules).__name__}"
            ) from None
        for prefix in modules:
            if not isinstance(prefix, str):
                raise TypeError(f"PyccelKernel: 'object_modules' entries must be str, not {type(prefix).__name__}")
        if is_array is not None and not callable(is_array):
            raise TypeError(f"PyccelKernel: 'is_array' must be callable or None, not {type(is_array).__name__}")
        self._kernel = kernel
        self._name = _kernel_name(kernel)
        self._use_cupy = None if use_cupy is None else bool(use_cupy)
        self._object_modules = modules
        self._user_is_array = is_array
        self._is_array = np.ndarray if is_array is None else is_array
        self._outputs = _check_outputs(outputs)
        self._parameters = _Parameters.of(kernel, parameters)
        # The state's __dict__ is read directly: the backend switch rebinds its "backend" key.
        self._configure(kernel, self._use_cupy, modules, vars(_backend._state), _convert_call)

    # ------------------------------------------------------------------ outputs

    def _resolve_outputs(self, args, kwargs):
        """The declared outputs as argument slots of this call (positional indices and
        keyword names); raises KeyError/IndexError for declarations that cannot be resolved."""
        outputs = self._outputs
        if outputs is None:
            return None
        if not outputs:
            return ()
        kwargs = kwargs or {}
        params = self._parameters
        nargs = len(args)
        slots = []
        for entry in outputs:
            if isinstance(entry, str):
                slot = self._resolve_name(entry, params, nargs, kwargs)
            else:
                slot = self._resolve_index(entry, params, nargs, kwargs)
            if slot is not None and slot not in slots:
                slots.append(slot)
        return tuple(slots)

    def _resolve_name(self, name, params, nargs, kwargs):
        if name in kwargs:
            return name
        if params is None:
            raise KeyError(
                f"PyccelKernel {self._name}: output {name!r} was not passed by keyword and the "
                "parameter names are unknown; declare it by index (or pass parameters=[...])"
            )
        if name in params.positional:
            position = params.positional.index(name)
            return position if position < nargs else None
        if name in params.keyword_only or params.varkw:
            return None  # not passed in this call: nothing to copy back
        raise KeyError(
            f"PyccelKernel {self._name}: output {name!r} matches no parameter of the kernel "
            f"(parameters: {', '.join(params.positional + params.keyword_only) or 'none'})"
        )

    def _resolve_index(self, index, params, nargs, kwargs):
        if params is None or params.varargs:
            count = nargs if params is None else max(nargs, len(params.positional))
        else:
            count = len(params.positional)
        position = index + count if index < 0 else index
        if not 0 <= position < count:
            hint = (
                "; an argument passed by keyword must be declared by name when the parameter names are unknown"
                if params is None and kwargs
                else ""
            )
            raise IndexError(
                f"PyccelKernel {self._name}: output index {index} is out of range for "
                f"{count} positional argument(s){hint}"
            )
        if position < nargs:
            return position
        if params is not None and position < len(params.positional):
            name = params.positional[position]
            return name if name in kwargs else None
        return None

    # ------------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        """The wrapped function's ``__name__`` (else its type name)."""
        return self._name

    @property
    def kernel(self) -> Callable[..., Any]:
        """The wrapped function."""
        return self._kernel

    @property
    def use_cupy(self) -> bool:
        """True if a call made now converts regardless of its arguments."""
        if self._use_cupy is not None:
            return self._use_cupy
        return _backend.get_backend() == "cupy"

    @property
    def object_modules(self) -> tuple:
        """The module prefixes of traversed classes."""
        return self._object_modules

    @property
    def is_array(self) -> Callable[[Any], bool]:
        """What counts as a host array in the return value (the given callable, or None for the default)."""
        return self._user_is_array if self._user_is_array is not None else _default_is_array

    @property
    def outputs(self) -> tuple[int | str, ...] | None:
        """The declared outputs (None: all; ``()``: none)."""
        return self._outputs

    @property
    def parameters(self) -> tuple[str, ...] | None:
        """The parameter names known for resolving ``outputs`` (None when unknown)."""
        p = self._parameters
        return None if p is None else p.positional + p.keyword_only

    def __repr__(self) -> str:
        parts = [self._name]
        if self._use_cupy is not None:
            parts.append(f"use_cupy={self._use_cupy}")
        if self._object_modules:
            parts.append(f"object_modules={self._object_modules!r}")
        parts.append(f"outputs={self._outputs!r}")
        return f"PyccelKernel({', '.join(parts)})"


# CPython < 3.12 does not pass the base's fast call protocol on to Python subclasses.
core.enable_vectorcall(PyccelKernel)


def _annotation_is_output(annotation) -> bool:
    if annotation is inspect.Parameter.empty:
        return True
    if isinstance(annotation, str):
        text = annotation.strip().strip("'\"").strip()
        if _FINAL.match(text) or _CONST.search(text):
            return False
        return text not in _SCALAR_NAMES
    if typing.get_origin(annotation) is typing.Final or annotation is typing.Final:
        return False
    if typing.get_origin(annotation) is typing.Annotated:
        if any(isinstance(m, str) and _CONST.search(m) for m in annotation.__metadata__):
            return False
        return _annotation_is_output(typing.get_args(annotation)[0])
    return not (
        isinstance(annotation, type)
        and (annotation in (int, float, bool, complex, str) or issubclass(annotation, np.generic))
    )


def outputs_from_annotations(function: Callable[..., Any]) -> tuple[str, ...] | None:
    """Derive a kernel's outputs from its annotations.

    Every parameter whose annotation is not ``Final[...]``, contains no ``const`` and is
    not a scalar (``int``, ``float``, ``bool``, ``complex`` or their string forms) counts
    as written: array annotations (``"float[:, :]"``) and class names do.

    Parameters
    ----------
    function : callable
        A function annotated the Pyccel way (strings such as ``"float[:]"`` or typing
        objects).

    Returns
    -------
    tuple of str or None
        The parameter names, or None when the function has no annotations or no
        inspectable signature.
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    parameters = [p for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if not any(p.annotation is not inspect.Parameter.empty for p in parameters):
        return None
    return tuple(p.name for p in parameters if _annotation_is_output(p.annotation))
