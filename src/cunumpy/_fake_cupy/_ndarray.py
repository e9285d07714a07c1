"""The fake ``cupy.ndarray``: a NumPy array behind CuPy's rules.

The host buffer (``_a``) plays the part of device memory. Nothing converts the array to
NumPy implicitly: ``numpy.asarray`` raises, operators refuse host arrays, and every scalar
read is reported as an implicit ``to_host`` copy and ``sync``, like the ``get()`` it
stands for in CuPy.
"""

from __future__ import annotations

import operator
import types
from typing import Any, ClassVar

import numpy as np

from .. import _transfers
from ._cuda import Device, MemoryPointer, host_array_at, host_view_of_interface
from ._errors import _host_array_error, _list_error

__all__ = ["flatiter", "ndarray", "record_implicit_copy"]

_UNSUPPORTED_KINDS = "OSUVMm"
_SCALARS = (bool, int, float, complex, np.generic)


def record_implicit_copy(what: str, a, nbytes: int | None = None) -> None:
    """A read of device memory by the host: scalar conversions (``float``, ``int``,
    ``bool``, ``complex``, ``operator.index``, ``item()``), ``tolist()``, ``tobytes()``,
    membership and text conversions (``repr``, ``str``, ``print``, ``format``). CuPy copies
    the array to the host for each (``self.get()``) and waits for it, so one implicit
    ``to_host`` event of ``a.nbytes`` (``nbytes`` when given) and one implicit ``sync``:
    ``assert_no_transfers()`` catches them."""
    if _transfers.sinks:
        description = f"{what} of {tuple(a.shape)} {a.dtype}"
        _transfers.record("to_host", description, int(a._a.nbytes if nbytes is None else nbytes), implicit=True)
        _transfers.record("sync", description, implicit=True)


def _operand(other, op: str):
    """The host value an operator may combine with a fake array, or NotImplemented."""
    if type(other) is ndarray:
        return other._a
    if isinstance(other, (bool, int, float, complex, np.generic)):
        return other
    if isinstance(other, np.ndarray):
        if other.ndim == 0:
            return other
        raise _host_array_error(f"cupy.ndarray {op}", other)
    if isinstance(other, (list, tuple)):
        raise _list_error(f"cupy.ndarray {op}", other)
    return NotImplemented


def _scalar_result(value):
    """Operator results: NumPy scalars become 0-d device arrays, as in CuPy."""
    return ndarray._wrap(value if isinstance(value, np.ndarray) else np.asarray(value))


def _cupy_ufunc(numpy_ufunc):
    """The fake-CuPy ufunc standing for a NumPy or SciPy ufunc, or None.

    ``cupy.<name>`` first; a ufunc of ``scipy.special`` (an imported SciPy's) falls back to
    the fake ``cupyx.scipy.special.<name>``, as CuPy's ``__array_ufunc__`` does.
    """
    import importlib
    import sys

    name = getattr(numpy_ufunc, "__name__", "")
    target = getattr(sys.modules.get("cupy"), name, None)
    if target is not None and hasattr(target, "reduce"):
        return target
    special = sys.modules.get("scipy.special")
    if special is None or getattr(special, name, None) is not numpy_ufunc:
        return None
    fake_special = importlib.import_module("cupyx.scipy.special")
    if not getattr(fake_special, "__cunumpy_fake__", False):
        return None
    target = getattr(fake_special, name, None)
    return target if target is not None and hasattr(target, "reduce") else None


def _binary(op, symbol):
    def forward(self, other):
        o = _operand(other, symbol)
        if o is NotImplemented:
            return NotImplemented
        return _scalar_result(op(self._a, o))

    def reflected(self, other):
        o = _operand(other, symbol)
        if o is NotImplemented:
            return NotImplemented
        return _scalar_result(op(o, self._a))

    return forward, reflected


def _inplace(op, symbol):
    def method(self, other):
        o = _operand(other, symbol)
        if o is NotImplemented:
            return NotImplemented
        op(self._a, o)
        return self

    return method


def _index(key):
    """An index for the host buffer: fake arrays inside it are unwrapped."""
    if type(key) is ndarray:
        return key._a
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    if isinstance(key, list):
        return [_index(k) for k in key]
    return key


class _Flags:
    """``ndarray.flags``: the three flags CuPy reports."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, c_contiguous, f_contiguous, owndata):
        self.c_contiguous = c_contiguous
        self.f_contiguous = f_contiguous
        self.owndata = owndata

    _KEYS: ClassVar[dict[str, str]] = {
        "C_CONTIGUOUS": "c_contiguous",
        "F_CONTIGUOUS": "f_contiguous",
        "OWNDATA": "owndata",
    }

    def __getitem__(self, key):
        try:
            return getattr(self, self._KEYS[key])
        except KeyError:
            raise KeyError(key) from None

    def __repr__(self):
        return "\n".join(f"  {k} : {getattr(self, v)}" for k, v in self._KEYS.items())


# NumPy module name -> fake module, for ndarray.__array_function__; _modules fills it in when
# it builds the modules (it sits above this one).
_counterparts: dict[str, types.ModuleType] = {}


def numpy_counterpart(func):
    """The fake-CuPy function standing for the NumPy function ``func``, or None."""
    module = _counterparts.get(getattr(func, "__module__", None) or "")
    if module is None:
        return None
    target = getattr(module, getattr(func, "__name__", ""), None)
    return target if callable(target) else None


class ndarray:
    """A device array of the fake CuPy (host memory standing in for device memory)."""

    __module__ = "cupy"  # as real CuPy reports it: user code and libraries test it by name
    __slots__ = ("__weakref__", "_a", "_base")
    __array_priority__ = 1000.0

    # ------------------------------------------------------------------ construction

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        dtype = np.dtype(dtype)
        _check_dtype(dtype)
        if memptr is None:
            host = np.empty(shape, dtype=dtype, order=order)
            if strides is not None:
                host = np.lib.stride_tricks.as_strided(host, strides=strides)
            self._a = host
            self._base = None
            return
        self._a = host_array_at(memptr, shape, dtype, strides, order)
        self._base = None

    @classmethod
    def _wrap(cls, host: np.ndarray, base=None):
        _check_dtype(host.dtype)
        self = object.__new__(cls)
        self._a = host
        self._base = base
        return self

    @classmethod
    def _derived(cls, host: np.ndarray, candidates=()):
        """Wrap ``host``; when it views one of ``candidates``, that array becomes the base."""
        if host.base is not None:
            for fake in candidates:
                if np.may_share_memory(host, fake._a):
                    return cls._wrap(host, fake._base if fake._base is not None else fake)
        return cls._wrap(host)

    def _view(self, host: np.ndarray):
        if np.may_share_memory(host, self._a):
            return ndarray._wrap(host, self._base if self._base is not None else self)
        return ndarray._wrap(host)

    # ------------------------------------------------------------------ strictness

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed (fake CuPy, as CuPy). "
            "Please use `.get()` to construct a NumPy array explicitly."
        )

    def __array_ufunc__(self, numpy_ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs on device arrays run the CuPy ufunc of the same name, as in CuPy.

        A SciPy ufunc (``scipy.special.erfinv``) runs the ``cupyx.scipy.special`` ufunc of
        the same name, as CuPy dispatches it. The CuPy ufunc then applies CuPy's argument
        rules (a host array among the inputs or as ``out`` raises TypeError); a ufunc CuPy
        lacks is declined (NotImplemented, so NumPy raises TypeError).
        """
        target = _cupy_ufunc(numpy_ufunc)
        if target is None:
            return NotImplemented
        out = kwargs.get("out")
        if isinstance(out, tuple):  # NumPy always passes out= as a tuple; CuPy takes one array
            if len(out) != 1:
                raise ValueError("The 'out' parameter must have exactly one array value")
            kwargs["out"] = out[0]
        if method == "__call__":
            return target(*inputs, **kwargs)
        if method in _UFUNC_METHODS:
            return getattr(target, method)(*inputs, **kwargs)
        return NotImplemented

    def __array_function__(self, func, types, args, kwargs):
        target = numpy_counterpart(func)
        if target is None:
            return NotImplemented
        return target(*args, **kwargs)

    # ------------------------------------------------------------------ attributes

    @property
    def shape(self):
        return self._a.shape

    @shape.setter
    def shape(self, value):
        self._a = np.reshape(self._a, value, copy=False)

    @property
    def dtype(self):
        return self._a.dtype

    @property
    def ndim(self):
        return self._a.ndim

    @property
    def size(self):
        return self._a.size

    @property
    def nbytes(self):
        return self._a.nbytes

    @property
    def itemsize(self):
        return self._a.itemsize

    @property
    def strides(self):
        return self._a.strides

    @property
    def flags(self):
        f = self._a.flags
        return _Flags(f.c_contiguous, f.f_contiguous, self._base is None)

    @property
    def base(self):
        return self._base

    @property
    def T(self):
        return self._view(self._a.T)

    @property
    def mT(self):
        if self.ndim < 2:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        return self._view(np.swapaxes(self._a, -1, -2))

    @property
    def real(self):
        return self._view(self._a.real)

    @real.setter
    def real(self, value):
        self._a.real = _value(value, "real")

    @property
    def imag(self):
        return self._view(self._a.imag)

    @imag.setter
    def imag(self, value):
        self._a.imag = _value(value, "imag")

    @property
    def device(self):
        return Device(0)

    @property
    def data(self):
        return MemoryPointer._for_array(self)

    @property
    def __cuda_array_interface__(self):
        a = self._a
        ptr = a.ctypes.data if a.size else 0
        return {
            "shape": a.shape,
            "typestr": a.dtype.str,
            "descr": [("", a.dtype.str)],
            "data": (ptr, False),
            "strides": None if a.flags.c_contiguous else a.strides,
            "version": 3,
            "stream": None,
        }

    # ------------------------------------------------------------------ transfers

    def get(self, stream=None, order="C", out=None, blocking=True):
        """A NumPy copy of the array (``order`` "C", "F" or "A")."""
        if order not in ("C", "F", "A", "c", "f", "a"):
            raise ValueError(f"unsupported order {order!r}")
        order = order.upper()
        if order == "A":
            order = "F" if self._a.flags.f_contiguous and not self._a.flags.c_contiguous else "C"
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError("Only numpy.ndarray can be obtained from cupy.ndarray")
            if out.dtype != self.dtype:
                raise TypeError(f"{out.dtype} array cannot be obtained from {self.dtype} array")
            if out.shape != self.shape:
                raise ValueError("Shape mismatch")
            if not (out.flags.c_contiguous or out.flags.f_contiguous):  # as CuPy 14.2
                raise RuntimeError("`out` cannot be specified when copying to non-contiguous ndarray")
            out[...] = self._a
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None):
        """Copy a NumPy array of the same shape and dtype into this array."""
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if arr.dtype != self.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
        if arr.shape != self.shape:
            raise ValueError("Shape mismatch")
        if not (self._a.flags.c_contiguous or self._a.flags.f_contiguous):  # as CuPy 14.2
            raise RuntimeError("Cannot set to non-contiguous array")
        self._a[...] = arr

    # ------------------------------------------------------------------ scalar reads

    def item(self, *args):
        value = self._a.item(*args)
        record_implicit_copy("item()", self)
        return value

    def tolist(self):
        value = self._a.tolist()
        record_implicit_copy("tolist()", self)
        return value

    def tobytes(self, order="C"):
        value = self._a.tobytes(order)
        record_implicit_copy("tobytes()", self)
        return value

    def __bool__(self):
        value = bool(self._a)
        record_implicit_copy("bool()", self)
        return value

    def __float__(self):
        value = float(self._a)
        record_implicit_copy("float()", self)
        return value

    def __int__(self):
        value = int(self._a)
        record_implicit_copy("int()", self)
        return value

    def __complex__(self):
        value = complex(self._a)
        record_implicit_copy("complex()", self)
        return value

    def __index__(self):
        value = operator.index(self._a)
        record_implicit_copy("index()", self)
        return value

    def __format__(self, spec):
        # CuPy: format(self.get(), format_spec), NumPy's rules on the host copy
        record_implicit_copy("format()", self)
        return format(self._a, spec)

    # ------------------------------------------------------------------ container protocol

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self._a.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._a.shape[0]))

    def __getitem__(self, key):
        key = _index(key)
        result = self._a[key]
        if not isinstance(result, np.ndarray):
            # Scalar indexing gives a 0-d view in CuPy; ask NumPy for one.
            try:
                result = self._a[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]
            except IndexError:
                result = np.asarray(result)
        return self._view(result)

    def __setitem__(self, key, value):
        key = _index(key)
        if _is_advanced(key):
            # CuPy converts the values of an advanced-index assignment with cupy.array
            value = _advanced_value(value, self.dtype)
        else:
            value = _value(value, "__setitem__")
        self._a[key] = value

    def __contains__(self, value):
        o = _operand(value, "in")
        found = False if o is NotImplemented else bool(o in self._a)
        record_implicit_copy("in", self, 1)  # CuPy: bool((self == value).any())
        return found

    def __repr__(self):
        record_implicit_copy("repr()", self)  # CuPy: repr(self.get())
        return repr(self._a)

    def __str__(self):
        record_implicit_copy("str()", self)  # CuPy: str(self.get()), so print(a) too
        return str(self._a)

    # ------------------------------------------------------------------ copies and pickling

    def copy(self, order="C"):
        return ndarray._wrap(self._a.copy(order=order))

    def __copy__(self):
        return ndarray._wrap(self._a.copy(order="K"))

    def __deepcopy__(self, memo):
        return ndarray._wrap(self._a.copy(order="K"))

    def __reduce__(self):
        return _rebuild, (np.array(self._a, order="K", copy=True),)

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        dtype = np.dtype(dtype)
        if not copy and dtype == self.dtype and (order in ("K", "A") or self._a.flags[f"{order}_CONTIGUOUS"]):  # type: ignore[index]
            return self
        kwargs = {} if casting is None else {"casting": casting}
        return ndarray._wrap(self._a.astype(dtype, order=order, copy=True, **kwargs))

    def view(self, dtype=None, type=None):
        if type is not None:
            raise TypeError("cupy.ndarray.view() does not support the 'type' argument")
        return self._view(self._a.view() if dtype is None else self._a.view(dtype))

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return self._view(self._a.reshape(shape, order=order))

    def transpose(self, *axes):
        if (len(axes) == 1 and isinstance(axes[0], (tuple, list))) or axes == (None,):
            axes = axes[0]  # type: ignore[assignment]  # a tuple, a list or None given as one argument
        return self._view(self._a.transpose(axes) if axes else self._a.transpose())

    def ravel(self, order="C"):
        return self._view(self._a.ravel(order))

    def fill(self, value):
        self._a.fill(_value(value, "fill"))

    @property
    def flat(self):
        """A :class:`flatiter` over the array (CuPy's ``cupy.flatiter``)."""
        return flatiter(self)


class flatiter:
    """``cupy.flatiter``: the flat view of ``a.flat``, as CuPy has it.

    Indexes with an integer (a 0-d device array), a slice (a 1-D device copy) or ``...``;
    assigns through the same indices. Other indices (tuples, arrays, booleans) raise
    IndexError, as in CuPy. Iteration yields 0-d device arrays.
    """

    __module__ = "cupy"
    __slots__ = ("_base", "_index")

    def __init__(self, a):
        if type(a) is not ndarray:
            raise TypeError(f"cupy.flatiter takes a cupy.ndarray, not {type(a).__name__}")
        self._base = a
        self._index = 0

    @property
    def base(self):
        return self._base

    @property
    def index(self):
        return self._index

    @property
    def coords(self):
        raise NotImplementedError("cupy.flatiter.coords is not supported (as in CuPy)")

    def copy(self):
        """A flattened copy of the base array."""
        return ndarray._wrap(self._base._a.flatten())

    def __len__(self):
        return self._base.size

    def __iter__(self):
        return self

    def __next__(self):
        base = self._base
        if self._index >= base.size:
            raise StopIteration
        value = self._item(self._index)
        self._index += 1
        return value

    def _position(self, ind):
        size = self._base.size
        i = operator.index(ind)
        if i < -size or i >= size:
            raise IndexError(f"index {i} is out of bounds for size {size}")
        return np.unravel_index(i % size if size else 0, self._base.shape)

    def _item(self, ind):
        base = self._base
        return base._view(base._a[self._position(ind) + (Ellipsis,)])  # noqa: RUF005 - a[*t, ...] needs Python 3.11

    @staticmethod
    def _check(ind):
        if ind is Ellipsis:
            return slice(None)
        if isinstance(ind, (bool, np.bool_, tuple)) or not isinstance(ind, (slice, int, np.integer)):
            raise IndexError("unsupported iterator index")
        return ind

    def __getitem__(self, ind):
        ind = self._check(ind)
        if isinstance(ind, slice):
            return ndarray._wrap(self._base._a.reshape(-1, order="C")[ind].copy())
        return self._item(ind)

    def __setitem__(self, ind, value):
        ind = self._check(ind)
        base = self._base
        if isinstance(ind, slice):
            flat_positions = np.arange(base.size)[ind]
            host = _value(value, "flat")
            if isinstance(host, np.ndarray) and host.ndim > 0:
                # CuPy repeats a shorter value over the slice, as NumPy's flat assignment does
                host = np.resize(host.reshape(-1), flat_positions.size)
            base._a[np.unravel_index(flat_positions, base.shape)] = host
            return
        base._a[self._position(ind)] = _value(value, "flat")


def _value(value, what):
    """A value stored into a fake array: scalars, 0-d host arrays or fake arrays.

    A host array with ``ndim > 0`` raises ValueError, as CuPy's ``fill`` (which a basic
    slice assignment of a non-device value goes through) does; lists raise TypeError.
    """
    if type(value) is ndarray:
        return value._a
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return value
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value
        raise ValueError(
            f"cupy.ndarray.{what}: non-scalar numpy.ndarray cannot be used for fill (shape {value.shape}); "
            "copy it explicitly with cupy.asarray() or xp.to_cupy()"
        )
    if isinstance(value, (list, tuple)):
        raise _list_error(f"cupy.ndarray.{what}", value)
    raise TypeError(f"cupy.ndarray.{what}: unsupported value of type {type(value).__name__}")


def _is_advanced(key) -> bool:
    """True for an advanced (integer- or boolean-array) index, after :func:`_index`."""
    if isinstance(key, tuple):
        return any(_is_advanced(k) for k in key)
    if isinstance(key, list):
        return True
    if isinstance(key, np.ndarray):
        return key.ndim > 0 or key.dtype == np.bool_
    return isinstance(key, (bool, np.bool_))


def host_data(value):
    """Host data for creation functions: fake arrays unwrapped, also inside lists."""
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


def _advanced_value(value, dtype):
    """Values of an advanced-index assignment: device arrays, scalars, or host data."""
    if type(value) is ndarray:
        return value._a
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return value
    return np.asarray(host_data(value), dtype=dtype)


def _host_indices(indices):
    """Index arrays for ``take``/``put``: CuPy copies lists and host arrays to the device."""
    if type(indices) is ndarray:
        return indices._a
    if isinstance(indices, (int, np.integer)):
        return indices
    return np.asarray(host_data(indices))


def _take(self, indices, axis=None, out=None):
    """``a.take(indices, axis=None, out=None)``: indices may be a list or a host array."""
    if out is not None and type(out) is not ndarray:
        raise TypeError(f"cupy.ndarray.take(): 'out' must be a cupy.ndarray, not {type(out).__name__}")
    host_out = None if out is None else out._a
    result = self._a.take(_host_indices(indices), axis=axis, out=host_out)
    return out if out is not None else self._view(result if isinstance(result, np.ndarray) else np.asarray(result))


def _put(self, indices, values, mode="wrap"):
    """``a.put(indices, values, mode="wrap")``: CuPy's default mode; host indices/values copied."""
    if mode not in ("raise", "wrap", "clip"):
        raise TypeError(f"cupy.ndarray.put(): 'mode' must be 'raise', 'wrap' or 'clip', got {mode!r}")
    self._a.put(_host_indices(indices), _advanced_value(values, self.dtype), mode=mode)


ndarray.take = _take
ndarray.put = _put
_take.__qualname__ = "ndarray.take"
_put.__qualname__ = "ndarray.put"


def _check_dtype(dtype):
    if dtype.kind in _UNSUPPORTED_KINDS:
        raise ValueError(f"Unsupported dtype {dtype}")


def _rebuild(host):
    return ndarray._wrap(host)


_OPERATORS = {
    "add": (operator.add, operator.iadd, "+"),
    "sub": (operator.sub, operator.isub, "-"),
    "mul": (operator.mul, operator.imul, "*"),
    "truediv": (operator.truediv, operator.itruediv, "/"),
    "floordiv": (operator.floordiv, operator.ifloordiv, "//"),
    "mod": (operator.mod, operator.imod, "%"),
    "pow": (operator.pow, operator.ipow, "**"),
    "matmul": (operator.matmul, operator.imatmul, "@"),
    "and": (operator.and_, operator.iand, "&"),
    "or": (operator.or_, operator.ior, "|"),
    "xor": (operator.xor, operator.ixor, "^"),
    "lshift": (operator.lshift, operator.ilshift, "<<"),
    "rshift": (operator.rshift, operator.irshift, ">>"),
}

for _name, (_op, _iop, _symbol) in _OPERATORS.items():
    _fwd, _rev = _binary(_op, _symbol)
    setattr(ndarray, f"__{_name}__", _fwd)
    setattr(ndarray, f"__r{_name}__", _rev)
    setattr(ndarray, f"__i{_name}__", _inplace(_iop, _symbol))

for _name, _op in {
    "lt": operator.lt,
    "le": operator.le,
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "ge": operator.ge,
}.items():
    setattr(ndarray, f"__{_name}__", _binary(_op, _name)[0])


def _divmod(self, other):
    o = _operand(other, "divmod")
    if o is NotImplemented:
        return NotImplemented
    q, m = divmod(self._a, o)
    return _scalar_result(q), _scalar_result(m)


def _rdivmod(self, other):
    o = _operand(other, "divmod")
    if o is NotImplemented:
        return NotImplemented
    q, m = divmod(o, self._a)
    return _scalar_result(q), _scalar_result(m)


ndarray.__divmod__ = _divmod  # type: ignore[operator]
ndarray.__module__ = "cupy"  # as type(cupy_array).__module__ on CuPy
ndarray.__rdivmod__ = _rdivmod
ndarray.__hash__ = None  # type: ignore[assignment]  # unhashable, as NumPy and CuPy arrays are

_unary: dict[str, Any] = {"neg": operator.neg, "pos": operator.pos, "abs": operator.abs, "invert": operator.invert}
for _name, _op in _unary.items():
    setattr(ndarray, f"__{_name}__", (lambda op: lambda self: _scalar_result(op(self._a)))(_op))


#: ufunc methods ``__array_ufunc__`` forwards (CuPy's ufuncs provide these).
_UFUNC_METHODS = frozenset(("reduce", "accumulate", "reduceat", "outer", "at"))

del _name, _op, _iop, _symbol, _fwd, _rev, _unary


def _register_with_the_packer():
    # Kernel and struct packing read the host array of the "_a" slot directly (its address,
    # shape, strides and dtype) rather than through the properties, as for a real CuPy array's
    # C fields; the packed values are the same (an empty array's address is 0, as data.ptr).
    from .._native import core

    core.register_fake_device_type(ndarray, "_a")


_register_with_the_packer()
