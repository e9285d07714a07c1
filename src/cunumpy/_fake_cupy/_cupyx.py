"""Fake ``cupyx``: pinned-memory helpers and ``cupyx.scipy`` built on SciPy.

SciPy is imported only when a ``cupyx.scipy`` subpackage is imported (through a
meta-path finder) or accessed as an attribute, never when the fake is installed.
"""

from __future__ import annotations

import copy
import importlib
import importlib.abc
import importlib.util
import inspect
import sys
import types

import numpy as np

from . import _scipy_names
from ._convert import Call
from ._functions import strict, ufunc
from ._ndarray import ndarray

# --------------------------------------------------------------------------- cupyx top level


def empty_pinned(shape, dtype=float, order="C"):
    """A plain NumPy array (the fake has no pinned memory)."""
    return np.empty(shape, dtype=dtype, order=order)


def zeros_pinned(shape, dtype=float, order="C"):
    return np.zeros(shape, dtype=dtype, order=order)


def empty_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
    return np.empty(a.shape if shape is None else shape, dtype=a.dtype if dtype is None else dtype)


def zeros_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
    return np.zeros(a.shape if shape is None else shape, dtype=a.dtype if dtype is None else dtype)


def _scatter(numpy_ufunc, name):
    def scatter(a, slices, value):
        call = Call(f"cupyx.{name}()")
        numpy_ufunc.at(call.array(a, "a"), call.other(slices, "slices"), call.array(value, "value"))

    scatter.__name__ = scatter.__qualname__ = name
    scatter.__doc__ = f"``cupyx.{name}``: unbuffered in-place update of ``a[slices]``."
    return scatter


class errstate:
    """``cupyx.errstate``: accepted and ignored (NumPy's error state does not apply)."""

    def __init__(self, *, divide=None, over=None, under=None, invalid=None, linalg=None):
        self.linalg = linalg

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def seterr(*, divide=None, over=None, under=None, invalid=None, linalg=None):
    return {"linalg": "ignore"}


def geterr():
    return {"linalg": "ignore"}


# --------------------------------------------------------------------------- proxies


class HostObjectProxy:
    """A SciPy object behind CuPy's rules: its arrays are device arrays (sharing memory),
    its methods take device arrays; ``copy``/``deepcopy`` copy the wrapped object.

    Each SciPy class gets a subclass of its own (``proxy_class``), named and nested as in
    SciPy, so that ``isinstance(spline, cupyx.scipy.interpolate.UnivariateSpline)`` holds as
    it does on a GPU."""

    __slots__ = ("_obj", "_where")

    @classmethod
    def _wrap(cls, obj, where):
        proxy = object.__new__(cls)
        object.__setattr__(proxy, "_obj", obj)
        object.__setattr__(proxy, "_where", where)
        return proxy

    def __getattr__(self, name):
        return _device_value(getattr(self._obj, name), f"{self._where}.{name}")

    def __setattr__(self, name, value):
        setattr(self._obj, name, Call(f"{self._where}.{name}").other(value, name))

    def __call__(self, *args, **kwargs):
        return _call(self._obj, f"{self._where}()", args, kwargs)

    def __repr__(self):
        return f"<fake cupyx proxy of {self._obj!r}>"

    def __copy__(self):
        return type(self)._wrap(copy.copy(self._obj), self._where)

    def __deepcopy__(self, memo):
        return type(self)._wrap(copy.deepcopy(self._obj, memo), self._where)

    def __reduce__(self):
        return (_device_value, (self._obj, self._where))

    def __len__(self):
        return len(self._obj)

    def __getitem__(self, key):
        return _call(type(self._obj).__getitem__, f"{self._where}[]", (self._obj, key), {}, first_is_self=True)


class _ProxyClass(type):
    """The type of the per-class proxies: class-level names (``BSpline.basis_element``,
    ``PPoly.from_spline``, constants) come from the SciPy class, under CuPy's rules, and
    ``inspect.signature`` gives the SciPy constructor's parameters."""

    def __getattr__(cls, name):
        scipy_type = type.__getattribute__(cls, "_scipy_type")
        where = f"{cls.__module__}.{cls.__qualname__}.{name}"
        if name == "__signature__":
            try:
                return inspect.signature(scipy_type)
            except (TypeError, ValueError):
                raise AttributeError(name) from None
        if name.startswith("__"):
            raise AttributeError(f"type object {cls.__qualname__!r} has no attribute {name!r}")
        value = getattr(scipy_type, name)
        if callable(value) and not isinstance(value, type):

            def method(*args, **kwargs):
                return _call(value, f"{where}()", args, kwargs)

            method.__name__ = method.__qualname__ = name
            method.__wrapped__ = value
            return method
        return _device_value(value, where)


def _proxy_new(cls, *args, **kwargs):
    scipy_type = cls._scipy_type
    proxy = _call(scipy_type, f"{cls.__module__}.{cls.__qualname__}()", args, kwargs)
    if type(proxy) is not cls and isinstance(proxy, HostObjectProxy):  # a user's subclass
        proxy = cls._wrap(proxy._obj, proxy._where)
    return proxy


def _proxy_init(self, *args, **kwargs):
    """Construction happened in ``__new__`` (SciPy's constructor on the host buffers)."""


#: SciPy class -> its proxy class (one per class, shared by every subpackage naming it).
_proxy_classes: dict = {}


def _scipy_base(base) -> bool:
    return base is not object and (getattr(base, "__module__", None) or "").startswith("scipy.")


def proxy_class(scipy_type, module_name: str | None = None) -> type:
    """The fake CuPy class standing for the SciPy class ``scipy_type``.

    Its bases are the proxy classes of the SciPy bases (so ``InterpolatedUnivariateSpline``
    stays a ``UnivariateSpline``), else ``HostObjectProxy``. ``module_name`` is the fake
    module that exposes it first (``cupyx.scipy.interpolate``)."""
    fake = _proxy_classes.get(scipy_type)
    if fake is not None:
        return fake
    if module_name is None:
        sub = (scipy_type.__module__ or "").split(".")[1:2]
        module_name = f"cupyx.scipy.{sub[0]}" if sub else "cupyx.scipy"
    bases = tuple(proxy_class(b, module_name) for b in scipy_type.__bases__ if _scipy_base(b)) or (HostObjectProxy,)
    namespace = {
        "__slots__": (),
        "__module__": module_name,
        "__qualname__": scipy_type.__qualname__,
        "__doc__": f"Fake ``{module_name}.{scipy_type.__name__}``: SciPy's class on the host buffers, "
        "holding and taking device arrays.",
        "_scipy_type": scipy_type,
        "__new__": _proxy_new,
        "__init__": _proxy_init,
    }
    try:
        fake = _ProxyClass(scipy_type.__name__, bases, namespace)
    except TypeError:  # an order of bases the mirror cannot keep: no base proxies then
        fake = _ProxyClass(scipy_type.__name__, (HostObjectProxy,), namespace)
    return _proxy_classes.setdefault(scipy_type, fake)


def _proxy_operator(name):
    def method(self, *args):
        return _call(
            getattr(type(self._obj), name), f"{self._where} {name}", (self._obj, *args), {}, first_is_self=True
        )

    method.__name__ = name
    return method


for _op in (
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__matmul__",
    "__rmatmul__",
    "__truediv__",
    "__neg__",
    "__pow__",
):
    setattr(HostObjectProxy, _op, _proxy_operator(_op))


def _is_scipy_object(value) -> bool:
    module = type(value).__module__ or ""
    return module.startswith("scipy.") and not isinstance(value, (np.ndarray, np.generic, type))


def _device_value(value, where):
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OSUV":
            return value
        return ndarray._wrap(value)
    if isinstance(value, np.generic):
        return ndarray._wrap(np.asarray(value))
    if isinstance(value, tuple):
        items = [_device_value(v, where) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_device_value(v, where) for v in value]
    if callable(value) and not isinstance(value, type) and hasattr(value, "__self__"):
        return lambda *a, **k: _call(value, f"{where}()", a, k)
    if _is_scipy_object(value):
        return proxy_class(type(value))._wrap(value, where)
    return value


def _call(func, where, args, kwargs, first_is_self=False, host_first=False):
    call = Call(where)
    new_args = []
    for i, v in enumerate(args):
        if first_is_self and i == 0:
            new_args.append(v)
        elif isinstance(v, HostObjectProxy):
            new_args.append(v._obj)
        elif i == (1 if first_is_self else 0):
            new_args.append(call.host_or_device(v, "#0") if host_first else call.array_or_sequence(v, "#0"))
        else:
            new_args.append(call.other(v, f"#{i}"))
    new_kwargs = {k: v._obj if isinstance(v, HostObjectProxy) else call.other(v, k) for k, v in kwargs.items()}
    result = func(*new_args, **new_kwargs)
    wrapped = call.wrap(result)
    return _device_value(wrapped, where) if wrapped is result else wrapped


def _scipy_callable(obj, where, host_first=False):
    if isinstance(obj, np.ufunc):
        module, _, name = where.rpartition(".")
        return ufunc(obj, name, module=module)
    if isinstance(obj, type):
        return proxy_class(obj, where.rpartition(".")[0])

    def function(*args, **kwargs):
        return _call(obj, f"{where}()", args, kwargs, host_first=host_first)

    function.__name__ = function.__qualname__ = getattr(obj, "__name__", where)
    function.__module__ = where.rpartition(".")[0]
    function.__doc__ = f"Fake ``{where}``: SciPy's function with CuPy's argument rules."
    function.__wrapped__ = obj  # inspect.signature: SciPy's parameters, which it takes
    return function


def build_scipy_subpackage(sub: str) -> types.ModuleType:
    """``cupyx.scipy.<sub>`` from ``scipy.<sub>``, restricted to CuPy's names."""
    scipy_module = importlib.import_module(f"scipy.{sub}")
    name = f"cupyx.scipy.{sub}"
    module = types.ModuleType(name, f"Fake {name}: SciPy behind CuPy's rules (only CuPy's names).")
    module.__cunumpy_fake__ = True
    for attr in sorted(_scipy_names.CUPYX_SCIPY[sub]):
        obj = getattr(scipy_module, attr, None)
        if obj is None or isinstance(obj, types.ModuleType):
            continue  # SciPy lacks it, or a nested module (those are subpackages of their own)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            module.__dict__[attr] = obj  # warnings and errors stay classes (``except``, ``filterwarnings``)
        else:
            host_first = attr in _scipy_names.HOST_FIRST_ARGUMENT.get(sub, ())
            module.__dict__[attr] = _scipy_callable(obj, f"{name}.{attr}", host_first) if callable(obj) else obj
    nested = {child.rpartition(".")[2] for child in _scipy_names.CUPYX_SCIPY if child.startswith(f"{sub}.")}
    if nested:
        # CuPy imports its nested subpackages (sparse.linalg, spatial.distance) with the parent
        def nested_getattr(attr, _nested=frozenset(nested), _name=name):
            if attr in _nested:
                return importlib.import_module(f"{_name}.{attr}")
            raise AttributeError(f"module {_name!r} has no attribute {attr!r}")

        module.__getattr__ = nested_getattr
    return module


class _ScipyFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``cupyx.scipy.<sub>`` on demand (this is when SciPy gets imported)."""

    PREFIX = "cupyx.scipy."

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(self.PREFIX) and fullname[len(self.PREFIX) :] in _scipy_names.CUPYX_SCIPY:
            cupyx = sys.modules.get("cupyx")
            if cupyx is not None and getattr(cupyx, "__cunumpy_fake__", False):
                return importlib.util.spec_from_loader(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return build_scipy_subpackage(spec.name[len(self.PREFIX) :])

    def exec_module(self, module):
        parent, _, child = module.__name__.rpartition(".")
        setattr(sys.modules[parent], child, module)


_finder = _ScipyFinder()


def _scipy_getattr(name):
    if name in _scipy_names.CUPYX_SCIPY:
        return importlib.import_module(f"cupyx.scipy.{name}")
    raise AttributeError(f"module 'cupyx.scipy' has no attribute {name!r}")


def _scipy_get_array_module(*args):
    """``cupyx.scipy`` for device arguments, else ``scipy`` (imported here, on demand)."""
    if any(type(a) is ndarray for a in args):
        return sys.modules["cupyx.scipy"]
    return importlib.import_module("scipy")


def build() -> dict[str, types.ModuleType]:
    scipy = types.ModuleType("cupyx.scipy", "Fake cupyx.scipy: subpackages are built from SciPy on import.")
    scipy.__path__ = []  # a package, so that submodule imports reach the finder
    scipy.__getattr__ = _scipy_getattr
    scipy.__cunumpy_fake__ = True
    scipy.get_array_module = _scipy_get_array_module
    cupyx = types.ModuleType("cupyx", "Fake cupyx: pinned-memory helpers return NumPy arrays.")
    cupyx.__path__ = []
    cupyx.__cunumpy_fake__ = True
    cupyx.__dict__.update(
        empty_pinned=empty_pinned,
        zeros_pinned=zeros_pinned,
        empty_like_pinned=empty_like_pinned,
        zeros_like_pinned=zeros_like_pinned,
        scatter_add=_scatter(np.add, "scatter_add"),
        scatter_max=_scatter(np.maximum, "scatter_max"),
        scatter_min=_scatter(np.minimum, "scatter_min"),
        rsqrt=strict(lambda x: 1.0 / np.sqrt(x), "rsqrt", module="cupyx"),
        errstate=errstate,
        seterr=seterr,
        geterr=geterr,
        scipy=scipy,
    )
    if _finder not in sys.meta_path:
        sys.meta_path.append(_finder)
    return {"cupyx": cupyx, "cupyx.scipy": scipy}
