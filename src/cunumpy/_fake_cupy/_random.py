"""Fake ``cupy.random``: NumPy's generators producing fake device arrays.

Streams differ from CuPy's (as they do between CuPy's own bit generators); only the
interface and the device-array results are imitated.
"""

from __future__ import annotations

import numpy as np

from . import _names
from ._functions import strict
from ._ndarray import ndarray


def _as_device(result):
    """Random draws are device arrays, also without ``size`` (0-d, as CuPy)."""
    if isinstance(result, (bool, int, float, complex)):
        return ndarray._wrap(np.asarray(result))
    return result


def _bind(owner, numpy_object, names, module, prefix=""):
    for name in names:
        method = getattr(numpy_object, name, None)
        if method is None:
            continue
        wrapped = strict(method, name, module=module)
        setattr(owner, prefix + name, (lambda w: lambda *a, **k: _as_device(w(*a, **k)))(wrapped))


class BitGenerator:
    """Base of the fake bit generators; holds a NumPy bit generator."""

    _numpy_class: type[np.random.BitGenerator] = np.random.PCG64

    def __init__(self, seed=None, *, size=-1):
        # size: CuPy's number of cuRAND states (-1: its default); nothing to size here
        self._numpy = self._numpy_class(seed)

    def random_raw(self, size=None, out=False):
        return _as_device(strict(self._numpy.random_raw, "random_raw", module="cupy.random")(size))


class XORWOW(BitGenerator):
    """``cupy.random.XORWOW`` (NumPy PCG64 underneath)."""


class MRG32k3a(BitGenerator):
    """``cupy.random.MRG32k3a`` (NumPy PCG64 underneath)."""


class Philox4x3210(BitGenerator):
    """``cupy.random.Philox4x3210`` (NumPy Philox underneath)."""

    _numpy_class = np.random.Philox


class Generator:
    """``cupy.random.Generator``: methods return fake device arrays."""

    def __init__(self, bit_generator):
        if not isinstance(bit_generator, BitGenerator):
            raise TypeError("Generator() takes a cupy.random bit generator")
        self.bit_generator = bit_generator
        self._numpy = np.random.Generator(bit_generator._numpy)
        _bind(self, self._numpy, _names.GENERATOR_METHODS, "cupy.random.Generator")

    def __repr__(self):
        return f"Generator({type(self.bit_generator).__name__})"


def default_rng(seed=None) -> Generator:
    """A Generator over XORWOW, seeded like ``numpy.random.default_rng``."""
    if isinstance(seed, Generator):
        return seed
    if isinstance(seed, BitGenerator):
        return Generator(seed)
    return Generator(XORWOW(seed))


class RandomState:
    """``cupy.random.RandomState``: the legacy interface over NumPy's RandomState."""

    def __init__(self, seed=None, method=None):
        self._numpy = np.random.RandomState(seed)
        _bind(self, self._numpy, _names.RANDOM_STATE_METHODS, "cupy.random.RandomState")
        # module-level functions CuPy's RandomState has no method for (bytes, multinomial, ...)
        module_only = [n for n in _names.RANDOM_FUNCTIONS if n not in _names.RANDOM_STATE_METHODS]
        _bind(self, self._numpy, module_only, "cupy.random", prefix="_module_")

    def seed(self, seed=None):
        self._numpy.seed(seed)


_state: list = []


def get_random_state() -> RandomState:
    if not _state:
        _state.append(RandomState())
    return _state[0]


def set_random_state(rs: RandomState) -> None:
    if not isinstance(rs, RandomState):
        raise TypeError("set_random_state() takes a cupy.random.RandomState")
    _state[:] = [rs]


def reset_states() -> None:
    _state.clear()


def seed(seed=None) -> None:
    """Reseed the global RandomState."""
    get_random_state().seed(seed)


def legacy_functions() -> dict:
    """Module-level functions drawing from the global RandomState."""

    def forward(name):
        method = name if name in _names.RANDOM_STATE_METHODS else "_module_" + name

        def function(*args, **kwargs):
            return getattr(get_random_state(), method)(*args, **kwargs)

        function.__name__ = function.__qualname__ = name
        function.__module__ = "cupy.random"
        function.__doc__ = f"``cupy.random.{name}`` on the global RandomState."
        return function

    return {name: forward(name) for name in _names.RANDOM_FUNCTIONS}
