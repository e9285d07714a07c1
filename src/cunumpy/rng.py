"""Reproducible random numbers (API.md section 8).

* :func:`get_rng` — a fresh generator of the active backend.
* :data:`random_streams` / :class:`RandomStreams` — process generators derived from one
  ``SeedSequence(entropy=seed, spawn_key=(rank,))``: the same seed and rank count give
  identical runs, ranks are independent.
* ``philox_*`` — stateless Philox4x32-10 numbers, pure functions of (seed, stream, counter),
  computed in C on the host and bit-identical to ``cunumpy/random.cuh`` on the device.
"""

from __future__ import annotations

import math
import operator
import sys
import threading
from typing import Any

import numpy as np

from . import _backend, threads as _threads
from ._algorithms._common import _host
from ._native import core
from ._reference import philox as _philox_ref

__all__ = [
    "BIT_GENERATORS",
    "RandomStreams",
    "get_rng",
    "philox4x32_10",
    "philox_normal",
    "philox_normal2",
    "philox_uniform",
    "philox_uniform2",
    "random_streams",
]

BIT_GENERATORS = ("MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64")

# Children of the stream: one per purpose, fixed so runs are reproducible.
_CHILD_NUMPY, _CHILD_CUPY, _CHILD_NUMPY_GLOBAL, _CHILD_CUPY_GLOBAL = 0, 1, 2, 3


def get_rng(seed: Any = None) -> Any:
    """Return a fresh generator of the active backend.

    The same seed gives different sequences on the two backends: for data that must agree,
    draw on the host and convert once, or use the ``philox_*`` functions.

    Parameters
    ----------
    seed : int or sequence of int, optional
        The seed (default: fresh entropy).

    Returns
    -------
    numpy.random.Generator or cupy.random.Generator
        ``numpy.random.default_rng(seed)`` on NumPy, ``cupy.random.default_rng(seed)`` on
        CuPy.
    """
    if _backend.get_backend() == "cupy":
        return sys.modules["cupy"].random.default_rng(seed)
    return np.random.default_rng(seed)


def _check_backend(backend):
    if backend is None:
        return _backend.get_backend()
    if backend not in _backend.BACKEND_NAMES:
        raise ValueError(f"backend must be 'numpy' or 'cupy', got {backend!r}")
    return backend


def _cupy_module():
    if not _backend.cupy_available():
        raise ImportError(f"a CuPy generator needs a functional CuPy: {_backend.cupy_unavailable_reason()}")
    return sys.modules["cupy"]


class RandomStreams:
    """Process random generators derived from one seed sequence per rank.

    ``seed(value, rank=0, bit_generator=None)`` starts the stream
    ``SeedSequence(entropy=value, spawn_key=(rank,))`` (``value=None``: OS entropy), drops
    cached generators and seeds NumPy's global ``np.random`` state (and CuPy's on the CuPy
    backend) from it. ``generator(backend)`` is the per-backend process generator.
    """

    def __init__(self):
        self._sequence: Any = None  # a SeedSequence once seeded
        self._bit_generator = "PCG64"
        self._generators: dict[str, object] = {}

    # ------------------------------------------------------------------ seeding

    def seed(self, value: int | None = None, rank: int = 0, bit_generator: str | None = None) -> RandomStreams:
        """Start the stream ``SeedSequence(entropy=value, spawn_key=(rank,))``.

        Drops cached generators and seeds NumPy's global ``np.random`` state (and CuPy's on the
        CuPy backend) from it.

        Parameters
        ----------
        value : int, optional
            The seed (None: OS entropy).
        rank : int, optional
            The MPI rank: each rank gets its own independent stream.
        bit_generator : str, optional
            One of ``BIT_GENERATORS`` (default ``"PCG64"``).

        Raises
        ------
        ValueError
            An unknown bit generator or a negative rank.
        """
        name = "PCG64" if bit_generator is None else bit_generator
        if name not in BIT_GENERATORS:
            raise ValueError(f"unknown bit generator {name!r}; choose one of {BIT_GENERATORS}")
        rank = operator.index(rank)
        if rank < 0:
            raise ValueError(f"'rank' must be >= 0, got {rank}")
        sequence = np.random.SeedSequence(entropy=value, spawn_key=(rank,))
        self._sequence = sequence
        self._bit_generator = name
        self._generators.clear()
        np.random.seed(self._child(_CHILD_NUMPY_GLOBAL).generate_state(4, np.uint32))
        if _backend.get_backend() == "cupy":
            cupy = sys.modules.get("cupy")
            seed_fn = getattr(getattr(cupy, "random", None), "seed", None)
            if seed_fn is not None:
                seed_fn(int(self._child(_CHILD_CUPY_GLOBAL).generate_state(1, np.uint32)[0]))
        return self

    def _child(self, index: int) -> np.random.SeedSequence:
        seq = self._sequence
        return np.random.SeedSequence(entropy=seq.entropy, spawn_key=(*seq.spawn_key, index))

    def _ensure_seeded(self):
        if self._sequence is None:
            self.seed(None)

    @property
    def seeded(self) -> bool:
        """Whether :meth:`seed` was called."""
        return self._sequence is not None

    # ------------------------------------------------------------------ generators

    def generator(self, backend: str | None = None) -> Any:
        """The process generator of ``backend`` (default: the active one), made on first use."""
        backend = _check_backend(backend)
        gen = self._generators.get(backend)
        if gen is None:
            self._ensure_seeded()
            if backend == "numpy":
                bit_generator = getattr(np.random, self._bit_generator)
                gen = np.random.Generator(bit_generator(self._child(_CHILD_NUMPY)))
            else:
                seed = int(self._child(_CHILD_CUPY).generate_state(1, np.uint64)[0])
                gen = _cupy_module().random.default_rng(seed)
            self._generators[backend] = gen
        return gen

    def make_generator(self, seed: Any = None, backend: str | None = None) -> Any:
        """A component's own generator when ``seed`` is given, else the process generator."""
        backend = _check_backend(backend)
        if seed is None:
            return self.generator(backend)
        if backend == "numpy":
            return np.random.default_rng(seed)
        return _cupy_module().random.default_rng(seed)

    # ------------------------------------------------------------------ draws
    # The draws are the generator's own values (NumPy or CuPy ``Generator`` methods): a
    # sequential state's next outputs. ``random`` and ``uniform`` take one raw draw per value,
    # so on the NumPy backend, for bit generators that can jump ahead (PCG64, PCG64DXSM),
    # large draws are split over the thread pool with one advanced copy of the state per
    # chunk: the same values, bit for bit, as the sequential draw, for any thread count.
    # ``normal`` consumes a varying number of raw draws per value (ziggurat), so it stays on
    # the calling thread; the counter-based ``philox_*`` functions are the parallel way to
    # draw many normals on the host.

    def _gen(self, rng):
        return self.generator() if rng is None else rng

    def normal(
        self, loc: Any = 0.0, scale: Any = 1.0, size: int | tuple[int, ...] | None = None, rng: Any = None
    ) -> Any:
        """Draw normal numbers from the process generator (or ``rng``).

        Parameters
        ----------
        loc, scale : float, optional
            Mean and standard deviation.
        size : int or tuple of int, optional
            The shape.
        rng : Generator, optional
            Draw from this generator instead.

        Returns
        -------
        numpy.ndarray or cupy.ndarray
            The draws, on the generator's backend.
        """
        gen = self._gen(rng)
        if hasattr(gen, "normal"):
            return gen.normal(loc, scale, size)
        return loc + scale * gen.standard_normal(size)

    def standard_normal(self, size: int | tuple[int, ...] | None = None, rng: Any = None) -> Any:
        """Draw standard normal numbers from the process generator (or ``rng``).

        Parameters
        ----------
        size : int or tuple of int, optional
            The shape.
        rng : Generator, optional
            Draw from this generator instead.

        Returns
        -------
        numpy.ndarray or cupy.ndarray
            The draws.
        """
        return self._gen(rng).standard_normal(size)

    def random(self, size: int | tuple[int, ...] | None = None, rng: Any = None) -> Any:
        """Draw uniform numbers in [0, 1) from the process generator (or ``rng``).

        Large draws from PCG64 and PCG64DXSM generators on the host run on the thread pool, with
        the same values as NumPy's sequential draw.

        Parameters
        ----------
        size : int or tuple of int, optional
            The shape.
        rng : Generator, optional
            Draw from this generator instead.

        Returns
        -------
        numpy.ndarray or cupy.ndarray
            The draws.
        """
        gen = self._gen(rng)
        out = _parallel_uniform(gen, size, 0.0, 1.0, plain=True)
        return gen.random(size) if out is None else out

    def uniform(
        self, low: Any = 0.0, high: Any = 1.0, size: int | tuple[int, ...] | None = None, rng: Any = None
    ) -> Any:
        """Draw uniform numbers in [low, high) from the process generator (or ``rng``).

        Large host draws run on the thread pool, as for :meth:`random`.

        Parameters
        ----------
        low, high : float, optional
            The interval.
        size : int or tuple of int, optional
            The shape.
        rng : Generator, optional
            Draw from this generator instead.

        Returns
        -------
        numpy.ndarray or cupy.ndarray
            The draws.
        """
        gen = self._gen(rng)
        out = _parallel_uniform(gen, size, low, high, plain=False)
        if out is not None:
            return out
        if hasattr(gen, "uniform"):
            return gen.uniform(low, high, size)
        return low + (high - low) * gen.random(size)

    def __repr__(self) -> str:
        if self._sequence is None:
            return "RandomStreams(not seeded)"
        seq = self._sequence
        return (
            f"RandomStreams(entropy={seq.entropy}, spawn_key={tuple(seq.spawn_key)}, "
            f"bit_generator={self._bit_generator!r})"
        )


random_streams = RandomStreams()

# Below this many values a draw stays on the calling thread (copying and advancing the state
# costs about 7 us per chunk; one thread draws about 200 values per microsecond; two threads
# paid from about 100 000 values in benchmarks/cutover.py).
_PARALLEL_DRAWS = 1 << 17
_MIN_CHUNK_DRAWS = 1 << 15  # a chunk per thread, none smaller than this
_JUMPABLE = (np.random.PCG64, np.random.PCG64DXSM)


class _NoSeed(np.random.bit_generator.ISeedSequence):
    """Seeds a bit generator whose state is set right after (PCG64(0) would hash a seed
    sequence first: 25 us against 7 us per copy)."""

    def generate_state(self, n_words, dtype=np.uint32):
        return np.zeros(n_words, dtype=dtype)


_NO_SEED = _NoSeed()


def _draw_shape(size):
    """``size`` as a shape of non-negative ints, or None when it is anything else."""
    try:
        if isinstance(size, (int, np.integer)):
            shape: tuple[int, ...] = (operator.index(size),)
        elif isinstance(size, tuple):
            shape = tuple(operator.index(d) for d in size)
        else:
            return None
    except TypeError:
        return None
    return shape if all(d >= 0 for d in shape) else None


def _parallel_uniform(gen, size, low, high, plain):
    """``gen.random(size)`` (``plain``) or ``gen.uniform(low, high, size)`` drawn on the pool,
    or None when this draw takes the generator's own path (small, unusual arguments, a bit
    generator without jumps, one thread). NumPy's own checks and errors stay NumPy's."""
    if type(gen) is not np.random.Generator or type(gen.bit_generator) not in _JUMPABLE:
        return None
    shape = _draw_shape(size)
    if shape is None:
        return None
    n = math.prod(shape)
    threads = _threads.get_num_threads()
    if n < _PARALLEL_DRAWS or threads < 2:
        return None
    span = 1.0
    if not plain:
        if not (
            isinstance(low, (int, float, np.integer, np.floating))
            and isinstance(high, (int, float, np.integer, np.floating))
        ):
            return None
        try:
            low, high = float(low), float(high)
        except OverflowError:
            return None
        span = high - low
        if not math.isfinite(span) or math.copysign(1.0, span) < 0:
            return None  # NumPy raises its OverflowError or ValueError ("high - low < 0")
    chunk = -(-n // max(1, min(threads, n // _MIN_CHUNK_DRAWS)))
    count = -(-n // chunk)
    out = np.empty(shape, dtype=np.float64)
    bit_generator = gen.bit_generator
    kind: Any = type(bit_generator)
    with bit_generator.lock:
        start = bit_generator.state
        copies = []
        for i in range(count):
            copy = kind(_NO_SEED)
            copy.state = start
            copy.advance(i * chunk)
            copies.append(copy)
        core.bitgen_fill(tuple(copies), chunk, out.reshape(-1), low, span, plain)
        # The last copy stands where the sequential draw ends; advance() dropped the buffered
        # 32-bit half-word, which draws of doubles leave alone.
        end: Any = copies[-1].state
        end["has_uint32"], end["uinteger"] = start["has_uint32"], start["uinteger"]
        bit_generator.state = end
    return out


# --------------------------------------------------------------------------- Philox

_UNIFORM, _UNIFORM2, _NORMAL, _NORMAL2 = 0, 1, 2, 3


def _words_in(value, name: str, side: str):
    """An integer array (or Python int) as uint64 modulo 2**64, on the host or device."""
    if side == "numpy":
        if isinstance(value, (bool, np.bool_)):
            raise TypeError(f"'{name}' must be an integer, not bool")
        if isinstance(value, int):
            if not -(2**63) <= value < 2**64:
                raise OverflowError(f"'{name}' = {value} does not fit in 64 bits")
            return np.asarray(value % 2**64, dtype=np.uint64)
        arr = np.asarray(value)
    else:
        arr = value
    if arr.dtype.kind not in "iu":
        raise TypeError(f"'{name}' must be an integer array, got dtype {arr.dtype}")
    return arr


_ndarray = np.ndarray
_UINT64 = np.dtype(np.uint64)
_INT64 = np.dtype(np.int64)
_FLOAT64 = np.dtype(np.float64)


# One-element uint64 arrays of the seeds and streams seen last (a simulation draws with the
# same few every step). Read-only, and only ever read by the C core.
_WORDS: dict = {}
_WORDS_KEPT = 64
_WORDS_LOCK = threading.Lock()


def _scalar_word(value):
    """A Python int (not bool) in [-2**63, 2**64) as the one-element uint64 array the general
    path makes of it, else None."""
    word = _WORDS.get(value) if type(value) is int else None
    if word is not None:
        return word
    if type(value) is int and -(2**63) <= value < 2**64:
        word = np.array((value % 2**64,), dtype=_UINT64)
        word.flags.writeable = False
        with _WORDS_LOCK:  # lookups need none: a dict read is atomic, the arrays read-only
            if len(_WORDS) >= _WORDS_KEPT:
                _WORDS.clear()
            _WORDS[value] = word
        return word
    return None


def _philox_plain(kind: int, seed, stream, counter):
    """The common call, Python-int seed and stream with an aligned C-contiguous 64-bit integer
    NumPy counter of at least one dimension, without the general broadcasting; None otherwise."""
    if type(counter) is not _ndarray or counter.ndim == 0:
        return None
    flags = counter.flags
    if not (flags.c_contiguous and flags.aligned):
        return None
    dt = counter.dtype
    if dt != _UINT64 and dt != _INT64:  # native only: a byte-swapped counter is converted
        return None
    s, t = _scalar_word(seed), _scalar_word(stream)
    if s is None or t is None:
        return None
    shape = counter.shape
    flat = counter if len(shape) == 1 else counter.reshape(-1)
    if dt != _UINT64:
        flat = flat.view(_UINT64)  # int64 to uint64 is modulo 2**64: the same bits, no copy
    out0 = np.empty(shape, dtype=_FLOAT64)
    flat0 = out0 if len(shape) == 1 else out0.reshape(-1)
    if kind in (_UNIFORM, _NORMAL):
        core.philox_fill(kind, s, t, flat, flat0, None)
        return out0
    out1 = np.empty(shape, dtype=_FLOAT64)
    core.philox_fill(kind, s, t, flat, flat0, out1 if len(shape) == 1 else out1.reshape(-1))
    return out0, out1


def _philox(kind: int, seed, stream, counter):
    fast = _philox_plain(kind, seed, stream, counter)
    if fast is not None:
        return fast
    inputs = (seed, stream, counter)
    names = ("seed", "stream", "counter")
    devices = [a for a in inputs if _backend.is_cupy_array(a)]
    if devices:
        _backend.assert_same_backend(*devices)
        # Python ints and NumPy scalars act as scalars next to device arrays; host arrays do not.
        for a, name in zip(inputs, names):
            if isinstance(a, np.ndarray) and a.ndim > 0:
                raise TypeError(f"'{name}' is a host array while another argument is a device array")
        cp = sys.modules["cupy"]
        fake = _backend.fake_cupy_active()
        arrays = []
        for a, name in zip(inputs, names):
            if _backend.is_cupy_array(a):
                arrays.append(_words_in(a, name, "cupy"))
            else:
                arrays.append(_words_in(a, name, "numpy"))
        if fake:
            hosts = [_host(a) if _backend.is_cupy_array(a) else a for a in arrays]
            shape, flat = _flatten(hosts)
            outs = [cp.empty(shape, dtype=cp.float64) for _ in range(2 if kind in (_UNIFORM2, _NORMAL2) else 1)]
            _fill(kind, flat, [_host(o).reshape(-1) for o in outs])
            return outs[0] if len(outs) == 1 else tuple(outs)
        return _philox_cupy(kind, cp, arrays)
    arrays = [_words_in(a, n, "numpy") for a, n in zip(inputs, names)]
    shape, flat = _flatten(arrays)
    outs = [np.empty(shape, dtype=np.float64) for _ in range(2 if kind in (_UNIFORM2, _NORMAL2) else 1)]
    _fill(kind, flat, [o.reshape(-1) for o in outs])
    if shape == ():
        outs = [o[()] for o in outs]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _flatten(arrays):
    try:
        shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    except ValueError as exc:
        raise ValueError(f"seed, stream and counter do not broadcast: {exc}") from None
    n = int(np.prod(shape, dtype=np.int64))
    flat = []
    for a in arrays:
        a = np.asarray(a)
        if a.size == 1:
            flat.append(np.ascontiguousarray(a.reshape(1).astype(np.uint64, copy=False)))
        else:
            flat.append(np.ascontiguousarray(np.broadcast_to(a, shape)).astype(np.uint64, copy=False).reshape(n))
    return shape, flat


def _fill(kind, flat, outs):
    core.philox_fill(kind, flat[0], flat[1], flat[2], outs[0], outs[1] if len(outs) > 1 else None)


def _philox_cupy(kind, cp, arrays):
    arrays = [cp.asarray(a).astype(cp.uint64) for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    arrays = [cp.broadcast_to(a, shape) for a in arrays]
    x0, x1, x2, x3 = _philox_ref._words(*arrays, xp=cp)  # type: ignore[misc]  # arrays: seed, stream, counter
    u0, u1 = _philox_ref._u53(x0, x1, xp=cp), _philox_ref._u53(x2, x3, xp=cp)
    if kind == _UNIFORM:
        return u0
    if kind == _UNIFORM2:
        return u0, u1
    r = cp.sqrt(-2.0 * cp.log(1.0 - u0))
    angle = 6.283185307179586476925286766559 * u1
    if kind == _NORMAL:
        return r * cp.cos(angle)
    return r * cp.cos(angle), r * cp.sin(angle)


def philox_uniform(seed: Any, stream: Any, counter: Any) -> Any:
    """Draw stateless uniform numbers in [0, 1) from Philox4x32-10 of (seed, stream, counter).

    The same arguments give the same number on every backend, thread count and rank, and in
    a CUDA kernel that calls ``cunumpy_uniform(seed, stream, counter)`` from
    ``<cunumpy/random.cuh>`` (bit-identical). The key is ``(seed_lo, seed_hi)``, the counter
    words ``(counter_lo, counter_hi, stream_lo, stream_hi)``; the result is the top 53 bits
    of ``word0 | word1 << 32`` times 2**-53. Large host inputs run on the thread pool.

    Parameters
    ----------
    seed : int or array of int
        The key: one per simulation (taken modulo 2**64).
    stream : int or array of int
        The stream, typically the particle id.
    counter : int or array of int
        The counter, typically the time step.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        float64 values of the broadcast shape, on the arguments' backend (NumPy for Python
        ints).
    """
    return _philox(_UNIFORM, seed, stream, counter)


def philox_uniform2(seed: Any, stream: Any, counter: Any) -> tuple[Any, Any]:
    """Draw two independent stateless uniforms ``(u0, u1)`` from one Philox block.

    ``u0`` equals :func:`philox_uniform`; ``u1`` comes from words 2 and 3.

    Parameters
    ----------
    seed : int or array of int
        The key: one per simulation (taken modulo 2**64).
    stream : int or array of int
        The stream, typically the particle id.
    counter : int or array of int
        The counter, typically the time step.

    Returns
    -------
    tuple of two arrays
        float64 values of the broadcast shape.
    """
    return _philox(_UNIFORM2, seed, stream, counter)


def philox_normal(seed: Any, stream: Any, counter: Any) -> Any:
    """Draw a stateless standard normal by Box-Muller: ``sqrt(-2 log(1 - u0)) * cos(2 pi u1)``.

    Parameters
    ----------
    seed : int or array of int
        The key: one per simulation (taken modulo 2**64).
    stream : int or array of int
        The stream, typically the particle id.
    counter : int or array of int
        The counter, typically the time step.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        float64 values of the broadcast shape.
    """
    return _philox(_NORMAL, seed, stream, counter)


def philox_normal2(seed: Any, stream: Any, counter: Any) -> tuple[Any, Any]:
    """Draw two independent stateless standard normals ``(z0, z1)`` (cos and sin of one Box-Muller pair).

    Parameters
    ----------
    seed : int or array of int
        The key: one per simulation (taken modulo 2**64).
    stream : int or array of int
        The stream, typically the particle id.
    counter : int or array of int
        The counter, typically the time step.

    Returns
    -------
    tuple of two arrays
        float64 values of the broadcast shape.
    """
    return _philox(_NORMAL2, seed, stream, counter)


def philox4x32_10(counter_words: Any, key0: Any, key1: Any) -> Any:
    """Apply the Philox4x32-10 block function.

    Parameters
    ----------
    counter_words : array of uint32
        Counters of shape ``(..., 4)``.
    key0, key1 : int or array
        The two 32-bit key words; they broadcast against ``counter_words[..., 0]``.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        uint32 words of shape ``(..., 4)``.

    Raises
    ------
    TypeError
        Non-integer inputs, or host and device arrays mixed.
    ValueError
        ``counter_words`` does not end in an axis of 4.
    OverflowError
        A word does not fit 32 bits.
    """
    inputs = (counter_words, key0, key1)
    devices = [a for a in inputs if _backend.is_cupy_array(a)]
    side = "numpy"
    if devices:
        _backend.assert_same_backend(*devices)
        side = "fake" if _backend.fake_cupy_active() else "cupy"
    if side == "cupy":
        cp = sys.modules["cupy"]
        c = cp.asarray(counter_words)
        _check_counter_words(c)
        k0, k1 = cp.asarray(key0), cp.asarray(key1)
        for k, name in ((k0, "key0"), (k1, "key1")):
            if k.dtype.kind not in "iu":
                raise TypeError(f"'{name}' must be integer, got dtype {k.dtype}")
            _check_words(k, name)
        ys = _philox_ref.philox_blocks(c[..., 0], c[..., 1], c[..., 2], c[..., 3], k0, k1, xp=cp)
        return cp.stack([y.astype(cp.uint32) for y in ys], axis=-1)
    if side == "fake":
        hosts = [_host(a) if _backend.is_cupy_array(a) else a for a in inputs]
    else:
        hosts = list(inputs)
    c = np.asarray(hosts[0])
    _check_counter_words(c)
    keys = []
    for k, name in ((hosts[1], "key0"), (hosts[2], "key1")):
        if isinstance(k, (bool, np.bool_)):
            raise TypeError(f"'{name}' must be an integer, not bool")
        if isinstance(k, int):
            if not 0 <= k < 2**32:
                raise OverflowError(f"'{name}' = {k} does not fit in 32 bits")
            k = np.asarray(k, dtype=np.uint32)
        k = np.asarray(k)
        if k.dtype.kind not in "iu":
            raise TypeError(f"'{name}' must be integer, got dtype {k.dtype}")
        _check_words(k, name)
        keys.append(k)
    try:
        shape = np.broadcast_shapes(c.shape[:-1], keys[0].shape, keys[1].shape)
    except ValueError as exc:
        raise ValueError(f"counter_words[..., 0] and the keys do not broadcast: {exc}") from None
    n = int(np.prod(shape, dtype=np.int64))
    words = np.ascontiguousarray(np.broadcast_to(c, (*shape, 4))).astype(np.uint32, copy=False).reshape(n * 4)
    flat_keys = []
    for k in keys:
        if k.size == 1:
            flat_keys.append(np.ascontiguousarray(k.reshape(1)).astype(np.uint32, copy=False))
        else:
            flat_keys.append(np.ascontiguousarray(np.broadcast_to(k, shape)).astype(np.uint32, copy=False).reshape(n))
    if side == "fake":
        result = sys.modules["cupy"].empty((*shape, 4), dtype=np.uint32)
        out = _host(result)
    else:
        result = out = np.empty((*shape, 4), dtype=np.uint32)
    if n:
        core.philox4x32_10_into(words, flat_keys[0], flat_keys[1], out.reshape(n * 4))
    return result


def _check_words(a, name):
    """OverflowError for integer words outside [0, 2**32): they would wrap silently."""
    if a.dtype != np.uint32 and a.size and (a.min() < 0 or a.max() > 0xFFFFFFFF):
        raise OverflowError(f"'{name}' holds values outside the 32-bit word range [0, 2**32)")


def _check_counter_words(c):
    if c.dtype.kind not in "iu":
        raise TypeError(f"'counter_words' must be integer (uint32 words), got dtype {c.dtype}")
    if c.ndim < 1 or c.shape[-1] != 4:
        raise ValueError(f"'counter_words' must have shape (..., 4), got {tuple(c.shape)}")
    _check_words(c, "counter_words")
