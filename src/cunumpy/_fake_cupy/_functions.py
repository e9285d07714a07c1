"""Module functions of the fake CuPy, generated from NumPy by rule.

:func:`strict` turns a NumPy function into a CuPy-like one: fake arrays are unwrapped,
host arrays (``ndim > 0``) and lists passed as array arguments raise TypeError naming the
function and the argument, and NumPy results come back as fake arrays. Creation functions
and the array-like routines of :data:`_names.ARRAY_LIKE_ROUTINES` accept host data.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from . import _names
from ._convert import Call, kind_of, parameter_kinds
from ._errors import ListArgumentError
from ._ndarray import _index, host_data, ndarray

__all__ = ["asnumpy", "creation_functions", "get_array_module", "place", "put", "strict", "take", "ufunc", "vectorize"]


#: Keywords NumPy functions take that no CuPy 14.2 function accepts.
_NUMPY_ONLY_KEYWORDS = frozenset(("like", "device"))


def strict(
    func, name: str, *, module: str = "cupy", host_ok: bool = False, permissive: bool = False, device_bool: bool = False
):
    """A CuPy-rules wrapper of the NumPy function ``func``."""
    where = f"{module}.{name}()"
    kinds = parameter_kinds(func)
    host_params = _names.HOST_DATA_PARAMETERS.get(f"{module}.{name}", frozenset())
    refusal = {"ValueError": ValueError, "LinAlgError": np.linalg.LinAlgError, None: None}[
        _names.REFUSAL_EXCEPTIONS.get(f"{module}.{name}")
    ]
    delegating = module == "cupy" and name in _names.METHOD_DELEGATING

    def kind(param, variadic=False):
        if param in host_params:
            return "host_or_device"
        return kind_of(param, name, variadic=variadic)

    def converter(index=None, keyword=None):
        if kinds is None:
            param = "a" if index == 0 else keyword
            return kind(param), param or f"#{index}"
        positional, variadic = kinds
        if keyword is not None:
            return kind(keyword), keyword
        if index < len(positional):
            return kind(positional[index]), positional[index]
        return kind(variadic, variadic=True), variadic or f"#{index}"

    def convert_arguments(call, args, kwargs):
        new_args = []
        for i, v in enumerate(args):
            kind_name, param = converter(index=i)
            new_args.append(getattr(call, kind_name)(v, param))
        new_kwargs = {}
        for k, v in kwargs.items():
            kind_name, param = converter(keyword=k)
            new_kwargs[k] = getattr(call, kind_name)(v, param)
        return new_args, new_kwargs

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        for keyword in _NUMPY_ONLY_KEYWORDS.intersection(kwargs):
            raise TypeError(f"{name}() got an unexpected keyword argument {keyword!r} (CuPy has no {keyword}=)")
        call = Call(where, host_ok=host_ok)
        if delegating and args and isinstance(args[0], (list, tuple)):
            raise ListArgumentError(
                f"{where}: got a Python {type(args[0]).__name__} as its first argument; CuPy calls a method of "
                f"it ('{type(args[0]).__name__}' object has no such attribute): make a device array first "
                "with cupy.asarray()"
            )
        if permissive:
            new_args = [call.other(v, "") if type(v) is ndarray else v for v in args]
            new_kwargs = {k: call.other(v, k) if type(v) is ndarray else v for k, v in kwargs.items()}
        elif refusal is not None:
            try:
                new_args, new_kwargs = convert_arguments(call, args, kwargs)
            except TypeError as exc:  # CuPy checks this one explicitly, with ValueError
                raise refusal(str(exc)) from None
        else:
            new_args, new_kwargs = convert_arguments(call, args, kwargs)
        result = func(*new_args, **new_kwargs)
        if device_bool and isinstance(result, bool):
            result = np.bool_(result)
        return call.wrap(result)

    wrapper.__module__ = module
    wrapper.__qualname__ = name
    wrapper.__name__ = name
    wrapper.__doc__ = f"Fake CuPy ``{module}.{name}``: NumPy's ``{name}`` with CuPy's argument rules."
    wrapper.__wrapped__ = func
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        pass
    else:  # CuPy's signature: NumPy's without like=/device=
        parameters = [p for p in signature.parameters.values() if p.name not in _NUMPY_ONLY_KEYWORDS]
        wrapper.__signature__ = signature.replace(parameters=parameters)
    return wrapper


class ufunc:
    """``cupy.ufunc``: a NumPy ufunc whose inputs must be device arrays or scalars."""

    def __init__(self, numpy_ufunc, name=None, module="cupy"):
        self._ufunc = numpy_ufunc
        self._module = module
        self.__name__ = name or numpy_ufunc.__name__
        self.__doc__ = numpy_ufunc.__doc__

    def __repr__(self):
        return f"<ufunc '{self.__name__}'>"

    nin = property(lambda self: self._ufunc.nin)
    nout = property(lambda self: self._ufunc.nout)
    nargs = property(lambda self: self._ufunc.nargs)
    ntypes = property(lambda self: self._ufunc.ntypes)
    types = property(lambda self: self._ufunc.types)
    identity = property(lambda self: self._ufunc.identity)
    signature = property(lambda self: self._ufunc.signature)

    def _run(self, method, args, kwargs, n_arrays):
        call = Call(f"{self._module}.{self.__name__}{'' if method is None else '.' + method}()")
        new_args = [call.array(v, f"x{i + 1}") if i < n_arrays else call.other(v, f"#{i}") for i, v in enumerate(args)]
        new_kwargs = {}
        for k, v in kwargs.items():
            if k == "out" and isinstance(v, tuple):
                new_kwargs[k] = tuple(call.array(o, "out") for o in v)
            elif k in ("out", "where"):
                new_kwargs[k] = call.array(v, k)
            else:
                new_kwargs[k] = call.other(v, k)
        target = self._ufunc if method is None else getattr(self._ufunc, method)
        return call.wrap(target(*new_args, **new_kwargs))

    def __call__(self, *args, **kwargs):
        return self._run(None, args, kwargs, self._ufunc.nin)

    def reduce(self, array, *args, **kwargs):
        return self._run("reduce", (array, *args), kwargs, 1)

    def accumulate(self, array, *args, **kwargs):
        return self._run("accumulate", (array, *args), kwargs, 1)

    def reduceat(self, array, indices, *args, **kwargs):
        return self._run("reduceat", (array, indices, *args), kwargs, 2)

    def outer(self, A, B, **kwargs):
        return self._run("outer", (A, B), kwargs, 2)

    def at(self, a, indices, b=None):
        """``ufunc.at``: the indices follow indexing rules (lists and host index arrays are copied)."""
        call = Call(f"{self._module}.{self.__name__}.at()")
        host_a = call.array(a, "a")
        host_b = () if b is None else (call.array(b, "b"),)
        self._ufunc.at(host_a, _index(indices), *host_b)


class vectorize:
    """``cupy.vectorize``: NumPy's vectorize applied to the host buffers."""

    def __init__(self, pyfunc, otypes=None, doc=None, excluded=None, cache=False, signature=None):
        self._vectorized = np.vectorize(
            pyfunc, otypes=otypes, doc=doc, excluded=excluded, cache=cache, signature=signature
        )
        self.pyfunc = pyfunc
        self.__doc__ = self._vectorized.__doc__

    def __call__(self, *args, **kwargs):
        call = Call("cupy.vectorize()")
        args = [call.array(v, f"#{i}") for i, v in enumerate(args)]  # type: ignore[assignment]  # converted
        kwargs = {k: call.array(v, k) for k, v in kwargs.items()}
        return call.wrap(self._vectorized(*args, **kwargs))


class broadcast:
    """``cupy.broadcast(*arrays)``: the broadcast shape and device views of the arrays."""

    def __init__(self, *arrays):
        call = Call("cupy.broadcast()")
        hosts = [call.array(a, f"#{i}") for i, a in enumerate(arrays)]
        self.values = tuple(call.wrap(v) for v in np.broadcast_arrays(*hosts))
        self.shape = np.broadcast_shapes(*(np.shape(h) for h in hosts))
        self.nd = len(self.shape)
        self.size = int(np.prod(self.shape))


class _IndexHelper:
    """``cupy.mgrid``/``ogrid``/``r_``/``c_``: NumPy's index tricks returning device arrays."""

    def __init__(self, numpy_helper, name):
        self._helper = numpy_helper
        self._name = name

    def __getitem__(self, key):
        call = Call(f"cupy.{self._name}[]")
        key = call.other(key, "index") if not isinstance(key, tuple) else tuple(call.other(k, "index") for k in key)
        return call.wrap(self._helper[key])

    def __repr__(self):
        return f"<fake cupy.{self._name}>"


# --------------------------------------------------------------------------- creation


def _from_host(host, dtype, order, ndmin=0, copy=True):
    result = np.array(host, dtype=dtype, order=order, copy=copy, ndmin=ndmin)
    return ndarray._wrap(result)


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    """``cupy.array``: copies host data to the device; device input is copied unless ``copy=False``."""
    if type(obj) is ndarray:
        call = Call("cupy.array()")
        return call.wrap(
            np.array(call.array(obj, "obj"), dtype=dtype, copy=copy if copy else None, order=order, ndmin=ndmin)
        )
    return _from_host(host_data(obj), dtype, order, ndmin)


def asarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    """``cupy.asarray``: a device array of ``a``; the same object when nothing changes.

    ``copy`` follows NumPy 2 (and CuPy 14): None copies only when needed, True always,
    False raises ValueError when a copy cannot be avoided (host data always needs one).
    """
    if type(a) is ndarray:
        call = Call("cupy.asarray()")
        return call.wrap(np.asarray(call.array(a, "a"), dtype=dtype, order=order, copy=copy))
    host = host_data(a)
    if isinstance(host, np.ndarray) and not isinstance(a, np.ndarray):
        # memory described by __cuda_array_interface__: taken in place, no copy
        return ndarray._wrap(np.asarray(host, dtype=dtype, order=order, copy=copy))
    if copy is False:
        raise ValueError("Unable to avoid copy while creating an array as requested (host data is always copied).")
    return _from_host(host, dtype, order or "K")


def asanyarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    return asarray(a, dtype=dtype, order=order, copy=copy, blocking=blocking)


def ascontiguousarray(a, dtype=None):
    if type(a) is ndarray:
        call = Call("cupy.ascontiguousarray()")
        return call.wrap(np.ascontiguousarray(call.array(a, "a"), dtype=dtype))
    return ndarray._wrap(np.ascontiguousarray(np.array(host_data(a), dtype=dtype, copy=True)))


def asfortranarray(a, dtype=None):
    if type(a) is ndarray:
        call = Call("cupy.asfortranarray()")
        return call.wrap(np.asfortranarray(call.array(a, "a"), dtype=dtype))
    return ndarray._wrap(np.asfortranarray(np.array(host_data(a), dtype=dtype, copy=True)))


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """Calls ``function`` with device index arrays, as CuPy does."""
    return function(*creation_functions()["indices"](shape, dtype=dtype), **kwargs)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``cupy.apply_along_axis``: ``func1d`` sees device slices and may return device data."""
    call = Call("cupy.apply_along_axis()")
    host = call.array(arr, "arr")

    def on_host_slice(row, *a, **k):
        result = func1d(ndarray._wrap(row), *a, **k)
        return result._a if type(result) is ndarray else result

    extra = [call.other(v, "args") for v in args]
    return call.wrap(np.apply_along_axis(on_host_slice, axis, host, *extra, **kwargs))


def apply_over_axes(func, a, axes):
    """``cupy.apply_over_axes``: ``func(a, axis)`` on device arrays, axis by axis (NumPy's rule)."""
    Call("cupy.apply_over_axes()").array(a, "a")
    value = a
    axes = (axes,) if np.ndim(axes) == 0 else tuple(axes)
    for axis in axes:
        axis = int(axis) + a.ndim if int(axis) < 0 else int(axis)
        result = func(value, axis)
        if result.ndim != value.ndim:
            result = result.reshape((*result.shape[:axis], 1, *result.shape[axis:]))
            if result.ndim != value.ndim:
                raise ValueError("function is not returning an array of the correct shape")
        value = result
    return value


def piecewise(x, condlist, funclist):
    """``cupy.piecewise``: constants only (CuPy does not take callables here)."""
    if any(callable(f) for f in funclist):
        raise NotImplementedError("Callable functions are not supported currently")
    call = Call("cupy.piecewise()")
    return call.wrap(np.piecewise(call.array(x, "x"), call.sequence(condlist, "condlist"), list(funclist)))


def _method_target(a, where):
    """The first argument of a function CuPy implements as ``a.<method>()``.

    A host array would run NumPy's method on the host in CuPy; the fake refuses it like
    every device-only argument (see FIDELITY.md, method-delegating row).
    """
    if isinstance(a, np.ndarray) and a.ndim > 0:
        Call(where).array(a, "a")
    return a


def take(a, indices, axis=None, out=None):
    """``cupy.take``: calls ``a.take`` as CuPy does (indices may be a list or a host array)."""
    return _method_target(a, "cupy.take()").take(indices, axis, out)


def put(a, ind, v, mode="wrap"):
    """``cupy.put``: calls ``a.put`` as CuPy does (CuPy's default mode is "wrap")."""
    _method_target(a, "cupy.put()").put(ind, v, mode=mode)


def place(arr, mask, vals):
    """``cupy.place``: ``arr`` must be a device array; CuPy copies ``mask`` and ``vals`` with asarray."""
    call = Call("cupy.place()")
    host = call.array(arr, "arr")
    np.place(host, np.asarray(host_data(mask)), np.asarray(host_data(vals)))


def _histogram_bins(call, bins, where):
    """``bins`` of ``histogramdd``/``histogram2d``: a count, a 1-D device array, or a sequence
    of counts and 1-D device arrays (one per dimension), as CuPy takes them; host edges
    raise ValueError as in CuPy ("array-like bins not supported")."""
    if isinstance(bins, (list, tuple)):
        return [_histogram_bins(call, b, where) for b in bins]
    if type(bins) is ndarray:
        return call.array(bins, "bins")
    if isinstance(bins, np.ndarray) and bins.ndim > 0:
        raise ValueError(f"{where}: array-like bins not supported (host {bins.dtype} array): pass device arrays")
    return bins


def _histogram_sample(call, sample, name):
    """A device array, or a sequence of 1-D device arrays (CuPy stacks them)."""
    if isinstance(sample, (list, tuple)) and type(sample) is not ndarray:
        return [call.array(v, name) for v in sample]
    return call.array(sample, name)


def histogramdd(sample, bins=10, range=None, weights=None, density=False):
    """``cupy.histogramdd``: ``bins`` a count, or one count or 1-D device array of edges per
    dimension (a list or tuple); ``sample`` a device array or a sequence of them."""
    call = Call("cupy.histogramdd()")
    host_sample = _histogram_sample(call, sample, "sample")
    host_bins = _histogram_bins(call, bins, "cupy.histogramdd()")
    host_weights = None if weights is None else call.host_or_device(weights, "weights")
    return call.wrap(np.histogramdd(host_sample, host_bins, range=range, weights=host_weights, density=density))


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """``cupy.histogram2d``: ``bins`` a count, a device array of edges, or a pair of them."""
    call = Call("cupy.histogram2d()")
    host_x = call.array(x, "x")
    host_y = call.array(y, "y")
    if isinstance(bins, (list, tuple)) and len(bins) not in (1, 2):
        raise ValueError("cupy.histogram2d(): array-like bins not supported: pass a device array of edges")
    host_bins = _histogram_bins(call, bins, "cupy.histogram2d()")
    host_weights = None if weights is None else call.host_or_device(weights, "weights")
    return call.wrap(np.histogram2d(host_x, host_y, host_bins, range=range, weights=host_weights, density=density))


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    """A NumPy array of ``a`` (a copy for device arrays)."""
    if type(a) is ndarray:
        return a.get(stream=stream, order=order, out=out, blocking=blocking)
    host = np.asarray(a, order=order)
    if out is not None:
        out[...] = host
        return out
    return host


def get_array_module(*args):
    """The fake ``cupy`` module if any argument is a fake array, else ``numpy``."""
    import sys

    if any(type(a) is ndarray for a in args):
        return sys.modules["cupy"]
    return np


def from_dlpack(x, *, device=None, copy=None):
    if type(x) is ndarray:
        return x if not copy else x.copy()
    raise TypeError("the fake CuPy imports DLPack capsules only from its own device arrays")


def show_config(*, _full=False):
    print("cunumpy fake CuPy (host stand-in, no CUDA)")


@functools.cache
def creation_functions() -> dict:
    """Creation functions that accept host data (hand-written or generated)."""
    made = {
        "array": array,
        "asarray": asarray,
        "asanyarray": asanyarray,
        "ascontiguousarray": ascontiguousarray,
        "asfortranarray": asfortranarray,
        "fromfunction": fromfunction,
    }
    for name in _names.CREATION:
        if name not in made and hasattr(np, name):
            made[name] = strict(getattr(np, name), name, host_ok=True)
    return made


# ------------------------------------------------------------------ ndarray methods


def _method(name):
    numpy_method = getattr(np.ndarray, name)

    def method(self, *args, **kwargs):
        call = Call(f"cupy.ndarray.{name}()")
        call.inputs[id(self._a)] = self
        args = [call.other(v, f"#{i}") for i, v in enumerate(args)]  # type: ignore[assignment]  # converted
        kwargs = {k: call.other(v, k) for k, v in kwargs.items()}
        return call.wrap(numpy_method(self._a, *args, **kwargs))

    method.__name__ = name
    method.__qualname__ = f"ndarray.{name}"
    method.__doc__ = f"NumPy's ``ndarray.{name}`` on the host buffer, with CuPy's argument rules."
    return method


_FORWARDED_METHODS = [
    "all",
    "any",
    "argmax",
    "argmin",
    "argpartition",
    "argsort",
    "choose",
    "clip",
    "compress",
    "conj",
    "conjugate",
    "cumprod",
    "cumsum",
    "diagonal",
    "dot",
    "flatten",
    "max",
    "mean",
    "min",
    "nonzero",
    "partition",
    "prod",
    "repeat",
    "round",
    "sort",
    "squeeze",
    "std",
    "sum",
    "swapaxes",
    "trace",
    "var",
]

for _method_name in _FORWARDED_METHODS:
    setattr(ndarray, _method_name, _method(_method_name))
del _method_name
