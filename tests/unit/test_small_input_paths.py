"""The exact-NumPy fast paths of xp.algorithms and xp.rng (issue 15, small inputs) against the
general path they shortcut.

Every case runs twice on the same inputs: as users call it (plain NumPy arguments take the fast
paths) and with the fast paths switched off (``general``), and must give bit-identical results,
the same in-place changes, or the same exception type and message. The cases sit on the
boundaries of the fast paths: subclasses, byte-swapped, read-only, non-contiguous and empty
arrays, negative and 3-D axes, repeated and overlapping arrays, masks aliasing a payload, and
scalars and bounds of every kind. ``extents_disjoint`` (the C bounds test the fast paths use)
is checked against its twin and on crafted strides.
"""

from __future__ import annotations

import numpy as np
import pytest

from cunumpy import _reference, algorithms as al, rng as xrng
from cunumpy._algorithms import _common, compact, morton, segments, sort
from cunumpy._native import HAVE_C_CORE, core

pytestmark = pytest.mark.skipif(not HAVE_C_CORE, reason="the C core is not built")


def rand(*shape, seed=1515):
    """Uniform floats, the same on every call with the same arguments (a case's inputs must be
    rebuilt identically for its two runs)."""
    return np.random.default_rng([seed, *shape]).random(shape)


def randint(low, high, shape, dtype=np.int64, seed=1515):
    size = (shape,) if isinstance(shape, int) else tuple(shape)
    return np.random.default_rng([seed, low + 2**40, high + 2**40, *size]).integers(low, high, size, dtype=dtype)


class Sub(np.ndarray):
    """A trivial ndarray subclass: always the general path."""


class _NotAType:
    """Stands in for numpy.ndarray in the exact-type tests: nothing is exactly of it."""


@pytest.fixture
def general(monkeypatch):
    """A function that runs a callable with every fast path switched off."""

    class NoBoundsTest:
        def __getattr__(self, name):
            return getattr(core, name)

        @staticmethod
        def extents_disjoint(arrays):
            return False

    def run(fn):
        with monkeypatch.context() as mp:
            # Each part of cunumpy.algorithms looks these names up itself.
            for part in (_common, compact, morton, segments, sort):
                for name, value in (
                    ("_ndarray", _NotAType),
                    ("_plain_box", lambda *args: None),
                    ("core", NoBoundsTest()),
                ):
                    if hasattr(part, name):
                        mp.setattr(part, name, value)
            mp.setattr(xrng, "_philox_plain", lambda *args: None)
            return fn()

    return run


def outcome(fn, make):
    """('ok', result, arguments after the call) or ('error', (type, message), arguments after
    the call): a refused call must leave its arguments (an ``out`` too) as they were."""
    args, kwargs = make()
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return ("error", (type(exc), str(exc)), (args, kwargs))
    return ("ok", result, (args, kwargs))


def assert_identical(a, b, where="result"):
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        if not a.dtype.hasobject:
            assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), where
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_identical(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (int, float, str, bool, type(None))):
        assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"
    elif isinstance(a, type):
        assert a is b, where
    else:
        raise AssertionError(f"{where}: cannot compare {type(a)}")


def check_both_ways(general, fn, make, expect=None):
    """Same outcome with and without the fast paths; `expect` ('ok' or an exception type)
    pins what the case must do, so a case cannot silently test nothing."""
    fast = outcome(fn, make)
    slow = general(lambda: outcome(fn, make))
    assert fast[0] == slow[0], f"fast path: {fast[:2]}, general path: {slow[:2]}"
    if fast[0] == "error":
        assert fast[1] == slow[1]
    else:
        assert_identical(fast[1], slow[1])
    assert_identical(fast[2], slow[2], "arguments after the call")
    if expect == "ok":
        assert fast[0] == "ok", fast[:2]
    elif expect is not None:
        assert fast[0] == "error" and issubclass(fast[1][0], expect), fast[:2]
    return fast


def read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def swapped(a):
    return a.astype(a.dtype.newbyteorder())


# --------------------------------------------------------------------------- compact_by_mask

N = 37
MASK = rand(N, seed=7) < 0.6
F1, F3, I1, C3N = rand(N), rand(N, 3), randint(0, 9, N), rand(3, N)
F4D = rand(2, 3, N, 2)


def _shared_buffer():
    buf = rand(2 * N)
    return [MASK.copy(), buf[:N], buf[N:]]


def _interleaved():
    buf = rand(2 * N)
    return [MASK.copy(), buf[0::2], buf[1::2]]  # bounds overlap, memory does not


def _mask_in_payload():
    p = randint(0, 2, N, dtype=np.uint8)
    return [p.view(np.bool_), F1.copy(), p]


def _mask_as_payload():
    m = MASK.copy()
    return [m, F1.copy(), m]


def _repeat_object():
    a = F1.copy()
    return [MASK.copy(), a, F3.copy(), a]


def _repeat_view():
    a = F1.copy()
    return [MASK.copy(), a, a[:]]


def _reversed_view():
    a = F1.copy()
    return [MASK.copy(), a, a[::-1]]


def _reinterpreted():
    a = F1.copy()
    return [MASK.copy(), a, a.view(np.int64)]


COMPACT_CASES = {
    "four payloads": (lambda: [MASK.copy(), F1.copy(), F3.copy(), I1.copy(), F1.copy()], {}, "ok"),
    "no payload": (lambda: [MASK.copy()], {}, "ok"),
    "axis -1": (lambda: [MASK.copy(), C3N.copy(), F1.copy()], {"axis": -1}, "ok"),
    "axis 2 of 4-D": (lambda: [MASK.copy(), F4D.copy()], {"axis": 2}, "ok"),
    "axis -2 of 4-D": (lambda: [MASK.copy(), F4D.copy()], {"axis": -2}, "ok"),
    "axis numpy int": (lambda: [MASK.copy(), C3N.copy()], {"axis": np.int8(1)}, "ok"),
    "axis bool": (lambda: [MASK.copy(), F1.copy()], {"axis": False}, TypeError),
    "axis out of range": (lambda: [MASK.copy(), F1.copy(), F3.copy()], {"axis": 2}, ValueError),
    "axis too negative": (lambda: [MASK.copy(), F3.copy()], {"axis": -3}, ValueError),
    "wrong length": (lambda: [MASK.copy(), F1.copy(), F1[:-1].copy()], {}, ValueError),
    "subclass payload": (lambda: [MASK.copy(), F1.copy().view(Sub)], {}, "ok"),
    "subclass mask": (lambda: [MASK.copy().view(Sub), F1.copy()], {}, "ok"),
    "byte-swapped payload": (lambda: [MASK.copy(), swapped(F1), swapped(I1)], {}, "ok"),
    "read-only payload": (lambda: [MASK.copy(), F1.copy(), read_only(F3)], {}, ValueError),
    "read-only mask": (lambda: [read_only(MASK), F1.copy()], {}, "ok"),
    "object payload": (lambda: [MASK.copy(), F1.copy(), F1.astype(object)], {}, TypeError),
    "strided payload": (lambda: [MASK.copy(), rand(3 * N)[::3], rand(N, 4)[:, ::2]], {}, "ok"),
    "Fortran payload": (lambda: [MASK.copy(), np.asfortranarray(F3)], {}, "ok"),
    "misaligned payload": (lambda: [MASK.copy(), _misaligned_copy(F1), _misaligned_copy(I1)], {}, None),
    "zero-width payload": (lambda: [MASK.copy(), np.empty((N, 0)), F1.copy()], {}, "ok"),
    "empty mask": (lambda: [np.zeros(0, bool), np.empty(0), np.empty((0, 3))], {}, "ok"),
    "int mask": (lambda: [MASK.astype(np.int8), F1.copy()], {}, TypeError),
    "2-D mask": (lambda: [MASK.reshape(1, N).copy(), F1.copy()], {}, TypeError),
    "list mask": (lambda: [MASK.tolist(), F1.copy()], {}, "ok"),
    "list payload": (lambda: [MASK.copy(), F1.tolist()], {}, TypeError),
    "masked payload": (lambda: [MASK.copy(), np.ma.masked_array(F1.copy())], {}, TypeError),
    "halves of one buffer": (_shared_buffer, {}, "ok"),
    "interleaved views": (_interleaved, {}, "ok"),
    "mask inside a payload": (_mask_in_payload, {}, ValueError),
    "mask as a payload": (_mask_as_payload, {}, "ok"),
    "same object twice": (_repeat_object, {}, "ok"),
    "same view twice": (_repeat_view, {}, "ok"),
    "reversed view": (_reversed_view, {}, ValueError),
    "reinterpreted view": (_reinterpreted, {}, ValueError),
}


@pytest.mark.parametrize("case", list(COMPACT_CASES))
def test_compact_by_mask_fast_path_matches_general(general, case):
    make_args, kwargs, expect = COMPACT_CASES[case]
    check_both_ways(general, al.compact_by_mask, lambda: (make_args(), dict(kwargs)), expect)


def test_compact_by_mask_fast_path_results():
    """The fast path's results themselves (not only agreement): the kept rows, in order."""
    a, b = F1.copy(), C3N.copy()
    count = al.compact_by_mask(MASK, a, b, a, axis=-1)
    assert count == int(MASK.sum())
    np.testing.assert_array_equal(a[:count], F1[MASK])
    np.testing.assert_array_equal(b[:, :count], C3N[:, MASK])
    d = F4D.copy()
    al.compact_by_mask(MASK, d, axis=2)
    np.testing.assert_array_equal(d[:, :, :count], F4D[:, :, MASK])


# --------------------------------------------------------------------------- sort_by_key

K = randint(-50, 50, N)
SORT_CASES = {
    "int64 keys": (lambda: [K.copy()], {}, "ok"),
    "payloads": (lambda: [K.copy(), F1.copy(), F3.copy(), I1.copy()], {}, "ok"),
    "axis -1": (lambda: [K.copy(), C3N.copy(), F1.copy()], {"axis": -1}, "ok"),
    "axis numpy int": (lambda: [K.copy(), C3N.copy()], {"axis": np.int64(1)}, "ok"),
    "axis bool": (lambda: [K.copy()], {"axis": True}, TypeError),
    "axis float": (lambda: [K.copy()], {"axis": 1.0}, TypeError),
    "uint8 keys": (lambda: [K.astype(np.uint8), F1.copy()], {}, "ok"),
    "bool keys": (lambda: [K > 0, F1.copy()], {}, "ok"),
    "float keys": (lambda: [K.astype(float), F1.copy()], {}, "ok"),
    "byte-swapped keys": (lambda: [swapped(K.astype(np.int32)), swapped(F1)], {}, "ok"),
    "strided keys": (lambda: [randint(0, 5, 2 * N)[::2], rand(N, 6)[:, ::3]], {}, "ok"),
    "read-only inputs": (lambda: [read_only(K), read_only(F3)], {}, "ok"),
    "misaligned inputs": (lambda: [_misaligned_copy(K), _misaligned_copy(F1)], {}, None),
    "subclass keys": (lambda: [K.copy().view(Sub), F1.copy()], {}, "ok"),
    "subclass payload": (lambda: [K.copy(), F1.copy().view(Sub)], {}, "ok"),
    "list keys": (lambda: [K.tolist(), F1.copy()], {}, "ok"),
    "masked payload": (lambda: [K.copy(), np.ma.masked_array(F1)], {}, TypeError),
    "2-D keys": (lambda: [K.reshape(1, N).copy()], {}, ValueError),
    "wrong length": (lambda: [K.copy(), F1[1:].copy()], {}, ValueError),
    "no such axis": (lambda: [K.copy(), F1.copy()], {"axis": 1}, ValueError),
    "empty": (lambda: [np.zeros(0, np.int64), np.zeros((0, 2))], {}, "ok"),
    "object payload": (lambda: [K.copy(), F1.astype(object)], {}, "ok"),
}


@pytest.mark.parametrize("case", list(SORT_CASES))
def test_sort_by_key_fast_path_matches_general(general, case):
    make_args, kwargs, expect = SORT_CASES[case]
    check_both_ways(general, al.sort_by_key, lambda: (make_args(), dict(kwargs)), expect)


# --------------------------------------------------------------------------- segment sums

SEG = randint(-1, 8, N)


def _out_aliasing_values():
    v = rand(N + 8, 2)
    return [v[:N], SEG.copy(), 8], {"out": v[N - 4 :]}


def _misaligned(n):
    raw = np.zeros(8 * n + 1, np.uint8)
    return raw[1:].view(np.float64)


def _misaligned_copy(a):
    raw = np.zeros(a.nbytes + 1, np.uint8)
    out = raw[1:].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _values_over_keys():
    """Values reinterpreting the keys' bytes (allowed) with a separate out."""
    keys = np.abs(SEG)
    return [keys.view(np.float64), keys, 8], {"out": np.full(8, 7.0)}


def _out_aliasing_keys():
    k = np.zeros(N + 8, np.float64)
    keys = k[:N].view(np.int64)
    keys[:] = SEG
    return [F1.copy(), keys, 8], {"out": k[N - 4 : N + 4]}


SUM_CASES = {
    "(n,)": (lambda: ([F1.copy(), SEG.copy(), 8], {}), "ok"),
    "(n, 3)": (lambda: ([F3.copy(), SEG.copy(), 8], {}), "ok"),
    "(n, 2, 2)": (lambda: ([rand(N, 2, 2), SEG.copy(), 8], {}), "ok"),
    "(n, 0)": (lambda: ([np.empty((N, 0)), SEG.copy(), 8], {}), "ok"),
    "float32": (lambda: ([F3.astype(np.float32), SEG.copy(), 8], {}), "ok"),
    "float16": (lambda: ([F3.astype(np.float16), SEG.copy(), 8], {}), "ok"),
    "complex128": (lambda: ([F3 + 1j * F3[::-1], SEG.copy(), 8], {}), "ok"),
    "int32 values": (lambda: ([I1.astype(np.int32), SEG.copy(), 8], {}), "ok"),
    "bool values": (lambda: ([MASK.copy(), SEG.copy(), 8], {}), "ok"),
    "longdouble values": (lambda: ([F1.astype(np.longdouble), SEG.copy(), 8], {}), "ok"),
    "byte-swapped": (lambda: ([swapped(F3), swapped(SEG), 8], {}), "ok"),
    "strided": (lambda: ([rand(2 * N, 3)[::2], randint(0, 8, 2 * N)[::2], 8], {}), "ok"),
    "int8 keys": (lambda: ([F1.copy(), SEG.astype(np.int8), 8], {}), "ok"),
    "misaligned values": (lambda: ([_misaligned_copy(F3), SEG.copy(), 8], {}), None),
    "misaligned keys": (lambda: ([F1.copy(), _misaligned_copy(SEG), 8], {}), None),
    "subclass values": (lambda: ([F3.copy().view(Sub), SEG.copy(), 8], {}), "ok"),
    "list values": (lambda: ([F1.tolist(), SEG.copy(), 8], {}), "ok"),
    "numpy n_segments": (lambda: ([F1.copy(), SEG.copy(), np.int16(8)], {}), "ok"),
    "bool n_segments": (lambda: ([F1.copy(), SEG.copy(), True], {}), TypeError),
    "negative n_segments": (lambda: ([F1.copy(), SEG.copy(), -1], {}), ValueError),
    "huge n_segments": (lambda: ([F1.copy(), SEG.copy(), 2**63], {}), ValueError),
    "key out of range": (lambda: ([F1.copy(), SEG.copy(), 3], {}), ValueError),
    "float keys": (lambda: ([F1.copy(), SEG.astype(float), 8], {}), TypeError),
    "2-D keys": (lambda: ([F1.copy(), SEG.reshape(1, N).copy(), 8], {}), ValueError),
    "0-d values": (lambda: ([np.array(1.0), SEG[:1].copy(), 8], {}), ValueError),
    "numpy scalar values": (lambda: ([np.float64(1.0), SEG[:1].copy(), 8], {}), ValueError),
    "row mismatch": (lambda: ([F1[1:].copy(), SEG.copy(), 8], {}), ValueError),
    "object values": (lambda: ([F1.astype(object), SEG.copy(), 8], {}), TypeError),
    "out": (lambda: ([F3.copy(), SEG.copy(), 8], {"out": np.full((8, 3), 7.0)}), "ok"),
    "out wrong shape": (lambda: ([F3.copy(), SEG.copy(), 8], {"out": np.zeros((8, 2))}), ValueError),
    "out wrong dtype": (lambda: ([F3.copy(), SEG.copy(), 8], {"out": np.zeros((8, 3), np.float32)}), ValueError),
    "out strided": (lambda: ([F1.copy(), SEG.copy(), 8], {"out": np.zeros(16)[::2]}), ValueError),
    "out read-only": (lambda: ([F1.copy(), SEG.copy(), 8], {"out": read_only(np.zeros(8))}), ValueError),
    "out subclass": (lambda: ([F1.copy(), SEG.copy(), 8], {"out": np.zeros(8).view(Sub)}), "ok"),
    "out list": (lambda: ([F1.copy(), SEG.copy(), 8], {"out": [0.0] * 8}), TypeError),
    "out (n,)": (lambda: ([F1.copy(), SEG.copy(), 8], {"out": np.full(8, 7.0)}), "ok"),
    "out float32": (lambda: ([F3.astype(np.float32), SEG.copy(), 8], {"out": np.ones((8, 3), np.float32)}), "ok"),
    "out byte-swapped": (lambda: ([F1.copy(), SEG.copy(), 8], {"out": np.zeros(8, ">f8")}), ValueError),
    "out misaligned": (lambda: ([F1.copy(), SEG.copy(), 8], {"out": _misaligned(8)}), ValueError),
    "out, key out of range": (lambda: ([F1.copy(), SEG.copy(), 3], {"out": np.full(3, 7.0)}), ValueError),
    "out (n, 3), key out of range": (lambda: ([F3.copy(), SEG.copy(), 3], {"out": np.full((3, 3), 7.0)}), ValueError),
    "out, values over the keys": (_values_over_keys, "ok"),
    "out aliasing values": (_out_aliasing_values, ValueError),
    "out aliasing keys": (_out_aliasing_keys, ValueError),
}


@pytest.mark.parametrize("case", list(SUM_CASES))
def test_segment_sum_fast_path_matches_general(general, case):
    make, expect = SUM_CASES[case]
    check_both_ways(general, al.segment_sum, make, expect)


@pytest.mark.parametrize(
    "case",
    [
        "(n,)",
        "(n, 3)",
        "float16",
        "byte-swapped",
        "strided",
        "out",
        "out wrong shape",
        "out (n,)",
        "out float32",
        "out misaligned",
        "out, values over the keys",
        "out aliasing values",
        "row mismatch",
        "list values",
        "subclass values",
    ],
)
def test_segment_plan_sum_fast_path_matches_general(general, case):
    make, expect = SUM_CASES[case]

    def plan_sum(values, keys, n_segments, out=None):
        return al.SegmentPlan(keys, n_segments).sum(values, out=out)

    check_both_ways(general, plan_sum, make, expect)


def test_segment_plan_on_a_subclass_and_a_list():
    for keys in (SEG.copy().view(Sub), SEG.tolist()):
        plan = al.SegmentPlan(keys, 8)
        np.testing.assert_array_equal(plan.sum(F1), al.segment_sum(F1, SEG, 8))


# --------------------------------------------------------------------------- offsets and runs

CELLS = np.sort(randint(0, 9, N))
OFFSET_CASES = {
    "int64": (lambda: ([CELLS.copy(), 9], {}), "ok"),
    "uint8": (lambda: ([CELLS.astype(np.uint8), 9], {}), "ok"),
    "byte-swapped": (lambda: ([swapped(CELLS), 9], {}), "ok"),
    "strided": (lambda: ([np.repeat(CELLS, 2)[::2], 9], {}), "ok"),
    "subclass": (lambda: ([CELLS.copy().view(Sub), 9], {}), "ok"),
    "misaligned": (lambda: ([_misaligned_copy(CELLS), 9], {}), None),
    "list": (lambda: ([CELLS.tolist(), 9], {}), "ok"),
    "empty": (lambda: ([np.zeros(0, np.int32), 0], {}), "ok"),
    "numpy n_cells": (lambda: ([CELLS.copy(), np.uint8(9)], {}), "ok"),
    "bool n_cells": (lambda: ([CELLS.copy(), True], {}), TypeError),
    "negative n_cells": (lambda: ([CELLS.copy(), -1], {}), ValueError),
    "out of range": (lambda: ([CELLS.copy(), 4], {}), ValueError),
    "unsorted": (lambda: ([CELLS[::-1].copy(), 9], {}), ValueError),
    "float": (lambda: ([CELLS.astype(float), 9], {}), TypeError),
    "2-D": (lambda: ([CELLS.reshape(1, N).copy(), 9], {}), ValueError),
}


@pytest.mark.parametrize("case", list(OFFSET_CASES))
def test_cell_offsets_fast_path_matches_general(general, case):
    make, expect = OFFSET_CASES[case]
    check_both_ways(general, al.cell_offsets, make, expect)


RUN_CASES = {
    "int64": (lambda: ([CELLS.copy()], {}), "ok"),
    "uint64 high": (lambda: ([CELLS.astype(np.uint64) + np.uint64(2**63)], {}), "ok"),
    "int8 negative": (lambda: ([(CELLS - 5).astype(np.int8)], {}), "ok"),
    "byte-swapped": (lambda: ([swapped(CELLS.astype(np.int32))], {}), "ok"),
    "strided": (lambda: ([np.repeat(CELLS, 3)[::3]], {}), "ok"),
    "read-only": (lambda: ([read_only(CELLS)], {}), "ok"),
    "misaligned": (lambda: ([_misaligned_copy(CELLS)], {}), None),
    "subclass": (lambda: ([CELLS.copy().view(Sub)], {}), "ok"),
    "list": (lambda: ([CELLS.tolist()], {}), "ok"),
    "empty": (lambda: ([np.zeros(0, np.int16)], {}), "ok"),
    "unsorted": (lambda: ([CELLS[::-1].copy()], {}), ValueError),
    "float": (lambda: ([CELLS.astype(float)], {}), TypeError),
    "2-D": (lambda: ([CELLS.reshape(1, N).copy()], {}), ValueError),
}


@pytest.mark.parametrize("case", list(RUN_CASES))
def test_segment_boundaries_fast_path_matches_general(general, case):
    make, expect = RUN_CASES[case]
    check_both_ways(general, al.segment_boundaries, make, expect)


# --------------------------------------------------------------------------- Morton keys

POS3, POS2 = rand(N, 3) * 4 - 1, rand(N, 2) * 4 - 1
Z3, ONE3 = np.zeros(3), np.ones(3)
BOX_CASES = {
    "float64 arrays": (Z3, ONE3 * 3, 21, "ok"),
    "tuples of floats": ((0.0, -1.0, 0.5), (3.0, 2.0, 2.5), 10, "ok"),
    "lists of ints": ([0, -1, 0], [3, 2, 3], 21, "ok"),
    "2-D box": ((0.0, 0.0), (1.0, 3.0), 32, "ok"),
    "reversed axis": ((3.0, 0.0, 0.0), (0.0, 1.0, 1.0), 7, "ok"),
    "negative zero": ((-0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 5, "ok"),
    "ints past 2**53": ((0, 0, 0), (2**53 + 1, 1, 1), 4, "ok"),
    "huge ints": ((0, 0, 0), (2**80, 1, 1), 4, ValueError),
    "bool entries": ((False, 0.0, 0.0), (True, 1.0, 1.0), 4, "ok"),
    "numpy float entries": ((np.float64(0.0), 0.0, 0.0), (1.0, 1.0, 1.0), 4, "ok"),
    "float32 arrays": (Z3.astype(np.float32), ONE3.astype(np.float32), 21, "ok"),
    "int arrays": (np.zeros(3, np.int64), np.full(3, 2), 21, "ok"),
    "2-D arrays": (Z3.reshape(1, 3), ONE3.reshape(1, 3), 21, ValueError),
    "subclass bounds": (Z3.view(Sub), ONE3.view(Sub), 21, "ok"),
    "numpy levels": (Z3, ONE3, np.int32(12), "ok"),
    "bool levels": (Z3, ONE3, True, ValueError),
    "float levels": (Z3, ONE3, 3.0, ValueError),
    "levels 0": (Z3, ONE3, 0, ValueError),
    "levels too many": (Z3, ONE3, 22, ValueError),
    "2-D levels too many": ((0.0, 0.0), (1.0, 1.0), 33, ValueError),
    "zero width": ((0.0, 1.0, 0.0), (1.0, 1.0, 1.0), 5, ValueError),
    "infinite bound": ((0.0, 0.0, -np.inf), (1.0, 1.0, 1.0), 5, ValueError),
    "nan bound": ((0.0, 0.0, 0.0), (1.0, np.nan, 1.0), 5, ValueError),
    "width overflows": ((-1e308, 0.0, 0.0), (1e308, 1.0, 1.0), 5, ValueError),
    "scale overflows": ((0.0, 0.0, 0.0), (1e-320, 1.0, 1.0), 5, ValueError),
    "lengths differ": ((0.0, 0.0, 0.0), (1.0, 1.0), 5, ValueError),
    "4-D box": ((0.0,) * 4, (1.0,) * 4, 5, ValueError),
    "1-D box": ((0.0,), (1.0,), 5, ValueError),
    "strings": (("0", "0", "0"), ("1", "1", "1"), 5, ValueError),
}


@pytest.mark.parametrize("case", list(BOX_CASES))
def test_morton_scales_fast_path_matches_general(general, case):
    lower, upper, levels, expect = BOX_CASES[case]
    check_both_ways(general, al.morton_scales, lambda: ([lower, upper, levels], {}), expect)


@pytest.mark.parametrize("case", list(BOX_CASES))
def test_morton_keys_fast_path_matches_general(general, case):
    lower, upper, levels, expect = BOX_CASES[case]
    pos = POS2 if len(np.ravel(lower)) == 2 else POS3
    check_both_ways(general, al.morton_keys, lambda: ([pos.copy(), lower, upper, levels], {}), expect)


def test_morton_box_memo_follows_the_bounds(general):
    """Boxes of float64 arrays are remembered by their bytes: a bound changed in place, -0.0
    against 0.0, and more boxes than are kept all give what the general path gives."""
    lower, upper = Z3 - 1, ONE3 * 3
    for step in range(al._BOXES_KEPT + 5):
        lower[step % 3] = -1.0 - step / 7
        if step == 3:
            lower[1] = -0.0
        for fn, args in ((al.morton_keys, [POS3, lower, upper, 21]), (al.morton_scales, [lower, upper, 21])):
            check_both_ways(
                general,
                fn,
                lambda: ([a.copy() if isinstance(a, np.ndarray) else a for a in args], {}),  # noqa: B023 - called within the same iteration
                "ok",
            )
            check_both_ways(general, fn, lambda: (list(args), {}), "ok")  # the same arrays: memo hits  # noqa: B023 - called within the same iteration
    assert 0 < len(al._BOXES) <= al._BOXES_KEPT


POSITION_CASES = {
    "float64": (lambda: POS3.copy(), "ok"),
    "float32": (lambda: POS3.astype(np.float32), "ok"),
    "int": (lambda: (POS3 * 2).astype(np.int16), "ok"),
    "byte-swapped": (lambda: swapped(POS3), "ok"),
    "Fortran": (lambda: np.asfortranarray(POS3), "ok"),
    "strided": (lambda: rand(N, 6)[:, ::2], "ok"),
    "read-only": (lambda: read_only(POS3), "ok"),
    "misaligned": (lambda: _misaligned_copy(POS3), "ok"),
    "subclass": (lambda: POS3.copy().view(Sub), "ok"),
    "list": (lambda: POS3.tolist(), "ok"),
    "empty": (lambda: np.zeros((0, 3)), "ok"),
    "non-finite": (lambda: np.where(POS3 > 2.5, np.inf, POS3), ValueError),
    "wrong columns": (lambda: POS2.copy(), ValueError),
    "1-D": (lambda: POS3[:, 0].copy(), ValueError),
    "complex": (lambda: POS3.astype(complex), TypeError),
}


@pytest.mark.parametrize("case", list(POSITION_CASES))
def test_morton_keys_positions_fast_path_matches_general(general, case):
    make, expect = POSITION_CASES[case]
    check_both_ways(general, al.morton_keys, lambda: ([make(), Z3 - 1, ONE3 * 3, 21], {}), expect)


MKEYS = al.morton_keys(POS3, Z3 - 1, ONE3 * 3, 21)
DECODE_CASES = {
    "uint64 3-D": (lambda: MKEYS.copy(), 3, "ok"),
    "uint64 2-D": (lambda: MKEYS.copy(), 2, "ok"),
    "top bit 3-D": (lambda: MKEYS | np.uint64(2**63), 3, ValueError),
    "top bit 2-D": (lambda: MKEYS | np.uint64(2**63), 2, "ok"),
    "int64": (lambda: MKEYS.astype(np.int64), 3, "ok"),
    "negative": (lambda: -MKEYS.astype(np.int64) - 1, 3, ValueError),
    "uint8": (lambda: MKEYS.astype(np.uint8), 3, "ok"),
    "2-D keys": (lambda: MKEYS.reshape(1, N).copy(), 3, "ok"),
    "byte-swapped": (lambda: swapped(MKEYS), 3, "ok"),
    "strided": (lambda: np.repeat(MKEYS, 2)[::2], 3, "ok"),
    "read-only": (lambda: read_only(MKEYS), 3, "ok"),
    "misaligned": (lambda: _misaligned_copy(MKEYS), 3, None),
    "subclass": (lambda: MKEYS.copy().view(Sub), 3, "ok"),
    "list": (lambda: MKEYS.tolist(), 2, "ok"),
    "empty": (lambda: np.zeros(0, np.uint64), 3, "ok"),
    "0-d": (lambda: MKEYS[0].copy(), 3, "ok"),
    "float": (lambda: MKEYS.astype(float), 3, TypeError),
    "numpy ndim": (lambda: MKEYS.copy(), np.int8(3), "ok"),
    "bool ndim": (lambda: MKEYS.copy(), True, TypeError),
    "float ndim": (lambda: MKEYS.copy(), 3.0, TypeError),
    "ndim 4": (lambda: MKEYS.copy(), 4, ValueError),
}


@pytest.mark.parametrize("case", list(DECODE_CASES))
def test_morton_decode_fast_path_matches_general(general, case):
    make, ndim, expect = DECODE_CASES[case]
    check_both_ways(general, al.morton_decode, lambda: ([make(), ndim], {}), expect)


# --------------------------------------------------------------------------- Philox

COUNTER = np.arange(N, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
PHILOX_CASES = {
    "uint64 counter": (7, 3, lambda: COUNTER.copy(), "ok"),
    "2-D counter": (7, 3, lambda: COUNTER[:36].reshape(4, 9).copy(), "ok"),
    "int64 counter": (7, 3, lambda: COUNTER.view(np.int64).copy(), "ok"),
    "int32 counter": (7, 3, lambda: np.arange(-5, N - 5, dtype=np.int32), "ok"),
    "byte-swapped counter": (7, 3, lambda: swapped(COUNTER), "ok"),
    "strided counter": (7, 3, lambda: np.repeat(COUNTER, 2)[::2], "ok"),
    "read-only counter": (7, 3, lambda: read_only(COUNTER), "ok"),
    "misaligned uint64 counter": (7, 3, lambda: _misaligned_copy(COUNTER), None),
    "misaligned int64 counter": (7, 3, lambda: _misaligned_copy(COUNTER.view(np.int64)), None),
    "subclass counter": (7, 3, lambda: COUNTER.copy().view(Sub), "ok"),
    "one-element counter": (7, 3, lambda: COUNTER[:1].copy(), "ok"),
    "empty counter": (7, 3, lambda: COUNTER[:0].copy(), "ok"),
    "0-d counter": (7, 3, lambda: COUNTER[5].copy(), "ok"),
    "int counter": (7, 3, lambda: 12345, "ok"),
    "list counter": (7, 3, lambda: [1, 2, 3], "ok"),
    "float counter": (7, 3, lambda: COUNTER.astype(float), TypeError),
    "negative seed": (-7, -(2**63), lambda: COUNTER.copy(), "ok"),
    "largest seed": (2**64 - 1, 2**63, lambda: COUNTER.copy(), "ok"),
    "seed too large": (2**64, 3, lambda: COUNTER.copy(), OverflowError),
    "stream too negative": (7, -(2**63) - 1, lambda: COUNTER.copy(), OverflowError),
    "bool seed": (True, 3, lambda: COUNTER.copy(), TypeError),
    "numpy seed": (np.uint64(7), np.int8(3), lambda: COUNTER.copy(), "ok"),
    "array seed": (np.arange(N), 3, lambda: COUNTER.copy(), "ok"),
    "float seed": (7.0, 3, lambda: COUNTER.copy(), TypeError),
    "no broadcast": (np.arange(3), 3, lambda: COUNTER.copy(), ValueError),
}


@pytest.mark.parametrize("fn", ["philox_uniform", "philox_uniform2", "philox_normal", "philox_normal2"])
@pytest.mark.parametrize("case", list(PHILOX_CASES))
def test_philox_fast_path_matches_general(general, fn, case):
    seed, stream, counter, expect = PHILOX_CASES[case]
    check_both_ways(general, getattr(xrng, fn), lambda: ([seed, stream, counter()], {}), expect)


def test_philox_fast_path_values():
    """The fast path's values themselves: the twin's, and those of single Python-int calls."""
    for kind, fn in enumerate(("philox_uniform", "philox_uniform2", "philox_normal", "philox_normal2")):
        got = getattr(xrng, fn)(-7, 2**64 - 3, COUNTER.view(np.int64))
        got = got if isinstance(got, tuple) else (got,)
        twin = [np.empty(N) for _ in got]
        seed, stream = np.array([2**64 - 7], np.uint64), np.array([2**64 - 3], np.uint64)
        _reference.philox_fill(kind, seed, stream, COUNTER, twin[0], twin[1] if len(twin) > 1 else None)
        for g, t in zip(got, twin):
            np.testing.assert_array_equal(g, t)
    u = xrng.philox_uniform(7, 3, COUNTER)
    for i in (0, 1, N - 1):
        assert u[i] == xrng.philox_uniform(7, 3, int(COUNTER[i]))


# --------------------------------------------------------------------------- the bounds test


def _crafted(base, shape, strides):
    return np.lib.stride_tricks.as_strided(base, shape=shape, strides=strides)


def extents_cases():
    buf = np.zeros(64)
    other = np.zeros(8)
    return {
        "disjoint": (buf[:8], buf[8:16], other),
        "touching": (buf[:8], buf[7:9]),
        "adjacent": (buf[:8], buf[8:9]),
        "same": (buf, buf),
        "reversed": (buf[::-1], other),
        "reversed overlap": (buf[10::-1], buf[10:20]),
        "interleaved": (buf[0::2], buf[1::2]),
        "2-D negative strides": (buf.reshape(8, 8)[::-1, ::-2], other),
        "empty": (buf[:0], other),
        "zero-width": (buf.reshape(8, 8)[:, :0], other),
        "one array": (buf,),
        "none": (),
        "subclass": (buf[:8].view(Sub), other),
        "list": ([1.0], other),
        "scalar": (np.float64(1.0), other),
        "bytes view": (buf[:8].view(np.uint8), buf[8:16]),
        "structured": (np.zeros(4, dtype=[("a", "f8"), ("b", "i4")]), other),
        "zero stride": (_crafted(buf, (1000,), (0,)), other),
        "many": tuple(np.zeros(3) for _ in range(40)),
        "many with one overlap": (*(np.zeros(3) for _ in range(30)), buf[:4], buf[3:5]),
    }


@pytest.mark.parametrize("case", list(extents_cases()))
def test_extents_disjoint_matches_twin(case):
    arrays = extents_cases()[case]
    assert core.extents_disjoint(arrays) is _reference.extents_disjoint(arrays)


def test_extents_disjoint_refuses_what_it_cannot_bound():
    buf = np.zeros(4)
    huge = _crafted(buf, (2, 2), (2**62, 2**62))  # offsets past the address space
    wraps = _crafted(buf, (2,), (-(2**63) + 8,))
    for crafted in (huge, wraps):
        assert core.extents_disjoint((crafted, np.zeros(2))) is False
    with pytest.raises(TypeError, match="tuple"):
        core.extents_disjoint([buf])
    with pytest.raises(TypeError, match="tuple"):
        _reference.extents_disjoint([buf])


def test_compact_by_mask_with_crafted_strides_takes_the_exact_test():
    """A view whose extent the bounds test cannot compute goes to the exact overlap test, which
    refuses it with the general path's message (or finds no overlap) instead of crashing."""
    buf = np.zeros(8)
    zero_stride = _crafted(buf, (4,), (0,))
    with pytest.raises(ValueError, match="arrays 0 and 1 share memory"):
        al.compact_by_mask(np.ones(4, bool), buf[:4], zero_stride)


def test_memos_shared_by_threads(general):
    """Many threads drawing with more seeds and boxes than the memos keep (so they are
    cleared while others read them) get what the general path gives for each call."""
    import threading

    seeds = range(-100, 100, 3)
    boxes = [(Z3 - 1 - s / 64, ONE3 * 3 + s / 32) for s in range(80)]
    expected_u = general(lambda: {s: xrng.philox_uniform(s, s * 7, COUNTER) for s in seeds})
    expected_k = general(lambda: [al.morton_keys(POS3, lo, up, 21) for lo, up in boxes])
    failures = []

    def worker(offset):
        for _rep in range(3):
            for s in seeds:
                if not np.array_equal(xrng.philox_uniform(s, s * 7, COUNTER), expected_u[s]):
                    failures.append(("philox", s))
            for i in range(offset, offset + len(boxes)):
                lo, up = boxes[i % len(boxes)]
                if not np.array_equal(al.morton_keys(POS3, lo, up, 21), expected_k[i % len(boxes)]):
                    failures.append(("morton", i))

    threads = [threading.Thread(target=worker, args=(7 * t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]
