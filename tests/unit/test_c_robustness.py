"""Robustness of the C core (cunumpy._core) and the public APIs that reach it.

Project rule: nothing a user can pass in crashes the interpreter or silently corrupts data; bad
input gets a clear exception of the documented type naming the argument. Anything that could
crash runs in a subprocess first, so a crash is a failed test rather than a dead pytest. Under
`make check-c` the subprocesses inherit the sanitizer environment (LD_PRELOAD, PYTHONPATH).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import cunumpy as xp
from cunumpy import algorithms as al, rng
from cunumpy._native import HAVE_C_CORE, core

needs_c = pytest.mark.skipif(not HAVE_C_CORE, reason="needs the C core")


def run_isolated(code: str, *, env_drop=(), timeout=120, env_add=None) -> str:
    """Run `code` in a fresh interpreter; fail unless it exits cleanly. Returns stdout."""
    env = dict(os.environ)
    # Freed list/tuple storage goes back to malloc, so the sanitizer sees a use after free.
    env["PYTHONMALLOC"] = "malloc"
    env.update(env_add or {})
    for name in env_drop:
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == 0, (
        f"subprocess exited with {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    )
    return proc.stdout


# --------------------------------------------------------------------------- traversal


@needs_c
def test_host_arguments_keyword_hash_raising_on_second_lookup():
    """Regression: the keyword re-ordering looked a key up again with PyDict_GetItem; a key
    whose __hash__ raised there gave PyDict_SetItem a NULL value (segfault)."""
    out = run_isolated(
        """
        import cunumpy._core as c
        for limit in range(1, 8):
            class S(str):
                calls = 0
                def __hash__(self):
                    S.calls += 1
                    if S.calls == limit:
                        raise RuntimeError("hash")
                    return str.__hash__(self)
                __eq__ = str.__eq__
            try:
                c.host_arguments((), {S("x"): 1}, lambda a: a)
            except RuntimeError as e:
                assert str(e) == "hash"
        print("clean")
        """
    )
    assert "clean" in out


def test_pyccel_kernel_keyword_hash_raising(device_only):
    """The same through the public API: a str-subclass keyword name whose hash raises."""
    out = run_isolated(
        """
        import cunumpy, cupy
        from cunumpy.kernels import PyccelKernel
        def f(x=None):
            return None
        k = PyccelKernel(f)
        a = cupy.zeros(3)
        for limit in range(1, 10):
            class S(str):
                calls = 0
                def __hash__(self):
                    S.calls += 1
                    if S.calls == limit:
                        raise RuntimeError("hash")
                    return str.__hash__(self)
                __eq__ = str.__eq__
            try:
                k(**{S("x"): a})
            except RuntimeError as e:
                assert str(e) == "hash"
        print("clean")
        """
    )
    assert "clean" in out


@needs_c
def test_host_arguments_object_turning_into_device_array():
    """Regression: an object first traversed as a plain object (memo entry without an array
    index) and met again as a device array wrote arrays[-1] (segfault / heap corruption). Here
    copy.copy() of the object makes CuPy appear mid-traversal, so its type becomes a device
    array type."""
    out = run_isolated(
        """
        import sys, types
        import cunumpy._core as c
        from cunumpy._fake_cupy import _ndarray
        assert "cupy" not in sys.modules
        class Dev(_ndarray.ndarray):
            def __copy__(self):
                m = types.ModuleType("cupy")
                m.ndarray = _ndarray.ndarray
                sys.modules["cupy"] = m
                return object.__new__(Dev)
        o = object.__new__(Dev)
        o.x = 1
        r = c.host_arguments((o, o, [o]), None, lambda a: a, ("__main__",))
        assert r[2] == 0 and r[3] == [], r[2:]
        print("clean")
        """,
        env_drop=("CUNUMPY_FAKE_CUPY", "CUNUMPY_BACKEND"),
    )
    assert "clean" in out


@needs_c
def test_traversal_deep_nesting_does_not_crash():
    out = run_isolated(
        """
        import cunumpy._core as c
        import cunumpy
        deep = []
        cur = deep
        for _ in range(200000):
            nxt = []
            cur.append(nxt)
            cur = nxt
        deep_d = {}
        cur = deep_d
        for _ in range(200000):
            cur["a"] = {}
            cur = cur["a"]
        for obj in (deep, deep_d):
            assert c.reaches_device((obj,), None, ()) in (False,)
            try:
                c.host_arguments((obj,), None, lambda a: a)
            except (RecursionError, ValueError):
                pass
            try:
                c.device_result(obj, lambda a: a, lambda a: False)
            except (RecursionError, ValueError):
                pass
        print("clean")
        """
    )
    assert "clean" in out


@needs_c
def test_traversal_callbacks_that_raise_or_mutate():
    out = run_isolated(
        """
        import numpy as np
        import cunumpy._core as c

        class Boom:
            @property
            def __dict__(self):
                raise RuntimeError("dict")

        class BadEq:
            def __eq__(self, other):
                raise RuntimeError("eq")
            def __hash__(self):
                raise RuntimeError("hash")

        for args in [(Boom(),), (BadEq(),), ([BadEq()], {"k": BadEq()})]:
            try:
                c.host_arguments(args, None, lambda a: a, ("__main__",))
            except RuntimeError:
                pass
            c.reaches_device(args, None, ("__main__",))
        try:
            c.host_arguments((), {"a": 1}, lambda a: a, (), (BadEq(),))
        except RuntimeError:
            pass

        # device_result: a predicate that mutates the list it walks, or raises
        lst = [np.zeros(2) for _ in range(50)]
        def pred(x):
            if isinstance(x, np.ndarray):
                del lst[:]
            return isinstance(x, np.ndarray)
        c.device_result(lst, lambda a: a, pred)
        def bad(x):
            raise KeyError("pred")
        try:
            c.device_result([1, 2], lambda a: a, bad)
        except KeyError:
            pass
        # a to_device that returns the wrong type is passed through, not crashed on
        print(c.device_result((np.zeros(1), [np.zeros(1)]), lambda a: None, np.ndarray))
        print("clean")
        """
    )
    assert "clean" in out


def test_host_arguments_callbacks_mutating_containers(device_only):
    """to_host callbacks that empty the caller's list/dict or delete attributes mid-walk."""
    out = run_isolated(
        """
        import numpy as np, cunumpy, cupy
        import cunumpy._core as c
        arrays = [cupy.zeros(2) for _ in range(40)]
        lst = list(arrays)
        d = {i: a for i, a in enumerate(arrays)}
        class Holder:
            pass
        h = Holder()
        h.__dict__.update({f"a{i}": a for i, a in enumerate(arrays)})
        def to_host(a):
            del lst[:]
            d.clear()
            h.__dict__.clear()
            return np.zeros(2)
        for args in [(lst,), (d,), (h,), (lst, d, h)]:
            lst[:] = arrays
            d.update(enumerate(arrays))
            h.__dict__.update({f"a{i}": a for i, a in enumerate(arrays)})
            try:
                c.host_arguments(args, None, to_host, ("__main__",))
            except RuntimeError:
                pass  # "dictionary changed size during iteration" is fine too
        # to_host that raises, or returns a wrong type
        def raising(a):
            raise ValueError("to_host")
        try:
            c.host_arguments(([cupy.zeros(1)],), None, raising)
        except ValueError:
            pass
        r = c.host_arguments(([cupy.zeros(1)],), None, lambda a: "not an array")
        assert r[0] == (["not an array"],)
        print("clean")
        """
    )
    assert "clean" in out


def test_pyccel_kernel_that_raises_and_bad_arguments(on_backend):
    from cunumpy.kernels import PyccelKernel

    def kernel(x):
        raise ZeroDivisionError("inside")

    k = PyccelKernel(kernel)
    import cunumpy as xp

    a = xp.zeros(3)
    with pytest.raises(ZeroDivisionError):
        k(a)
    with pytest.raises(ZeroDivisionError):
        k([a, {"b": (a,)}])


# --------------------------------------------------------------------------- private _core fuzzing

_FUZZ_SKIP = {
    "launch",  # takes raw driver handles (CUfunction, CUstream) as integers by design
}


@needs_c
def test_core_functions_with_junk_arguments():
    """Every _core function with wrong argument counts and junk values: exceptions only."""
    out = run_isolated(
        f"""
        import random, numpy as np
        import cunumpy._core as c
        ro = np.zeros(4); ro.setflags(write=False)
        junk = [
            None, 0, -1, 2**63 - 1, 2**64, -2**70, 1.5, float("nan"), "x", b"abc", (), [], {{}},
            (np.zeros(3),), object(), np.zeros(0), np.zeros(3), np.zeros((2, 3)), np.zeros((), np.int64),
            np.arange(5, dtype=np.int32), np.arange(5, dtype=np.uint64), np.zeros(4, np.uint32),
            np.zeros(8, ">i8"), np.zeros(4, dtype=object), np.zeros(3, dtype=[("a", "f8")]),
            np.arange(10.)[::-3], ro, np.zeros(5, bool), memoryview(b"12345678"),
            np.zeros((4, 3))[:, 1], np.asfortranarray(np.zeros((3, 2))), np.zeros((4, 2), np.uint64),
            (np.zeros(3, np.uint64), np.zeros(3, np.uint64)),
        ]
        skip = {_FUZZ_SKIP!r}
        names = [n for n in dir(c) if not n.startswith("_") and callable(getattr(c, n))]
        rnd = random.Random(1234)
        calls = 0
        for name in names:
            if name in skip or name in ("HostKernel", "LaunchPlan"):
                continue
            f = getattr(c, name)
            for nargs in range(0, 12):
                for _ in range(60 if nargs else 1):
                    args = [rnd.choice(junk) for _ in range(nargs)]
                    try:
                        f(*args)
                    except (TypeError, ValueError, OverflowError, IndexError, KeyError,
                            MemoryError, AttributeError, RecursionError, NotImplementedError):
                        pass
                    calls += 1
        # The classes: construction and methods with junk.
        for cls in (c.HostKernel, c.LaunchPlan):
            for nargs in range(0, 6):
                for _ in range(40):
                    args = [rnd.choice(junk) for _ in range(nargs)]
                    try:
                        obj = cls(*args)
                    except (TypeError, ValueError, OverflowError, IndexError, KeyError):
                        continue
                    for meth in [m for m in dir(obj) if not m.startswith("__")]:
                        fn = getattr(obj, meth, None)
                        if not callable(fn):
                            continue
                        for n2 in range(0, 5):
                            try:
                                fn(*[rnd.choice(junk) for _ in range(n2)])
                            except (TypeError, ValueError, OverflowError, IndexError, KeyError,
                                    AttributeError, RuntimeError):
                                pass
                    try:
                        obj(*args)
                    except (TypeError, ValueError, OverflowError, IndexError, KeyError,
                            AttributeError, RuntimeError):
                        pass
        print("clean", calls)
        """,
        timeout=600,
    )
    assert "clean" in out


@needs_c
@pytest.mark.parametrize(
    "call, exc, word",
    [
        (lambda: core.radix_argsort(np.arange(10), np.empty(5, np.int64), np.empty(10, np.int64)), ValueError, "order"),
        (
            lambda: core.radix_argsort(np.arange(10), np.empty(10, np.int64), np.empty(9, np.int64)),
            ValueError,
            "sorted_keys",
        ),
        (lambda: core.radix_argsort(np.arange(10.0), np.empty(10, np.int64), np.empty(10)), TypeError, "keys"),
        (
            lambda: core.radix_argsort(np.arange(10), np.empty(10, np.int64)[::-1], np.empty(10, np.int64)),
            ValueError,
            "order",
        ),
        (
            lambda: core.segment_sum_into(np.ones((4, 2)), np.zeros(3, np.int64), np.zeros((2, 2)), True),
            ValueError,
            "keys",
        ),
        (
            lambda: core.segment_sum_into(np.ones((4, 2)), np.zeros(4, np.int64), np.zeros((2, 3)), True),
            ValueError,
            "out",
        ),
        (
            lambda: core.segment_sum_into(np.ones((4, 2)), np.zeros(4, np.float16), np.zeros((2, 2)), True),
            TypeError,
            "keys",
        ),
        (lambda: core.segment_check_keys(np.zeros(4, np.int64), -1), ValueError, "n_segments"),
        (lambda: core.segment_check_keys(np.zeros(4, np.int64), 2**64), OverflowError, None),
        (
            lambda: core.cell_offsets_into(np.zeros(4, np.int64), 2**63 - 1, np.zeros(1, np.int64)),
            ValueError,
            "n_cells",
        ),
        (lambda: core.cell_offsets_into(np.zeros(4, np.int64), 3, np.zeros(3, np.int64)), ValueError, "out"),
        (
            lambda: core.segment_runs(
                np.arange(4), np.empty(2, np.int64), np.empty(4, np.int64), np.empty(4, np.int64)
            ),
            ValueError,
            "unique",
        ),
        (lambda: core.morton_keys_into(np.zeros((4, 2)), (0, 0), (1, 1), 4, np.empty(3, np.uint64)), ValueError, "out"),
        (lambda: core.morton_keys_into(np.zeros((4, 2)), (0,), (1, 1), 4, np.empty(4, np.uint64)), ValueError, "lower"),
        (
            lambda: core.morton_keys_into(np.zeros((4, 2)), (0, 0), (1, 1), 33, np.empty(4, np.uint64)),
            ValueError,
            "levels",
        ),
        (
            lambda: core.morton_decode_into(np.zeros(4, np.uint64), (np.empty(4, np.uint64), np.empty(3, np.uint64))),
            ValueError,
            "outs",
        ),
        (
            lambda: core.morton_encode_into((np.zeros(4, np.uint64), np.zeros(3, np.uint64)), np.empty(4, np.uint64)),
            ValueError,
            "cell array",
        ),
        (
            lambda: core.philox4x32_10_into(
                np.zeros(8, np.uint32), np.zeros(1, np.uint32), np.zeros(1, np.uint32), np.zeros(4, np.uint32)
            ),
            ValueError,
            "out",
        ),
        (
            lambda: core.philox4x32_10_into(
                np.zeros(7, np.uint32), np.zeros(1, np.uint32), np.zeros(1, np.uint32), np.zeros(7, np.uint32)
            ),
            ValueError,
            "counters",
        ),
        (
            lambda: core.philox4x32_10_into(
                np.zeros(8, np.uint32), np.zeros(3, np.uint32), np.zeros(1, np.uint32), np.zeros(8, np.uint32)
            ),
            ValueError,
            "key0",
        ),
        (
            lambda: core.philox_fill(
                0, np.zeros(3, np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(4)
            ),
            ValueError,
            "seed",
        ),
        (
            lambda: core.philox_fill(
                1, np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(4), np.zeros(3)
            ),
            ValueError,
            "out1",
        ),
        (lambda: core.compact_in_place(np.zeros(4, bool), (np.zeros(3),)), ValueError, "array 0"),
    ],
)
def test_core_short_buffers_are_refused(call, exc, word):
    with pytest.raises(exc, match=word):
        call()


@needs_c
@pytest.mark.parametrize("n_cells", [2**63 - 1, 2**63 - 2])
def test_cell_offsets_into_huge_n_cells_twins(n_cells):
    """Regression: n_cells + 1 overflowed a signed integer (UBSan) in the C check."""
    from cunumpy._reference import segment as twin

    for fn in (core.cell_offsets_into, twin.cell_offsets_into):
        with pytest.raises(ValueError):
            fn(np.zeros(2, np.int64), n_cells, np.zeros(1, np.int64))


@needs_c
def test_core_read_only_outputs_are_refused():
    def ro(a):
        a.setflags(write=False)
        return a

    with pytest.raises(ValueError, match="order"):
        core.radix_argsort(np.arange(3), ro(np.empty(3, np.int64)), np.empty(3, np.int64))
    with pytest.raises(ValueError, match="out"):
        core.segment_sum_into(np.ones((3, 1)), np.zeros(3, np.int64), ro(np.zeros((1, 1))), True)
    with pytest.raises(ValueError, match="out"):
        core.morton_keys_into(np.zeros((1, 2)), (0, 0), (1, 1), 3, ro(np.empty(1, np.uint64)))
    with pytest.raises(ValueError, match="arrays"):
        core.compact_in_place(np.ones(3, bool), (ro(np.zeros(3)),))
    with pytest.raises(ValueError, match="out0"):
        core.philox_fill(0, np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint64), ro(np.zeros(2)))


# --------------------------------------------------------------------------- public algorithms


# 2**40 float64 is 8 TiB: a MemoryError normally, an abort in the sanitizer's allocator.
@pytest.mark.parametrize("n_segments", [2**62, 2**63 - 1, pytest.param(2**40, marks=pytest.mark.nosan)])
def test_segment_sum_huge_n_segments(on_backend, n_segments):
    import cunumpy as xp

    keys = xp.asarray(np.array([0, 1, 1]))
    values = xp.ones(3)
    with pytest.raises((ValueError, MemoryError)):
        al.segment_sum(values, keys, n_segments)
    with pytest.raises((ValueError, MemoryError)):
        al.cell_offsets(keys, n_segments)


def test_segment_sum_big_endian_values():
    """Regression: '>f8' values raised "'values' must be float32 or float64 here"."""
    keys = np.array([0, 1, 1, 2])
    for dt in (">f8", ">f4", ">c16", ">f2"):
        v = np.arange(4).astype(dt)
        got = al.segment_sum(v, keys.astype(">i8"), 3)
        assert got.dtype.isnative
        np.testing.assert_allclose(got, [0, 3, 3])
        np.testing.assert_allclose(al.SegmentPlan(keys, 3).sum(v), [0, 3, 3])
    out = np.empty(3)
    assert al.segment_sum(np.arange(4.0).astype(">f8"), keys, 3, out=out) is out


@pytest.mark.parametrize(
    "call, exc, word",
    [
        (lambda: al.segment_sum(np.ones(3, dtype=object), np.zeros(3, np.int64), 2), TypeError, "values"),
        (lambda: al.segment_sum(np.zeros(3, dtype=[("a", "f8")]), np.zeros(3, np.int64), 2), TypeError, "values"),
        (lambda: al.segment_sum(np.ones(3), np.zeros(3, bool), 2), TypeError, "keys"),
        (lambda: al.segment_sum(np.ones(3), np.zeros(3, float), 2), TypeError, "keys"),
        (lambda: al.segment_sum(np.ones(3), np.zeros(2, np.int64), 2), ValueError, "values"),
        (lambda: al.segment_sum(np.ones(3), np.zeros(3, np.int64), -1), ValueError, "n_segments"),
        (lambda: al.segment_sum(np.ones(3), np.zeros(3, np.int64), 2.0), TypeError, "n_segments"),
        (lambda: al.segment_sum(np.ones(3), np.zeros(3, np.int64), True), TypeError, "n_segments"),
        (lambda: al.segment_sum(np.ones(3), np.array([0, 0, 2**64 - 1], np.uint64), 2), ValueError, "keys"),
        (lambda: al.segment_sum(np.ones(3), np.array([0, 0, 127], np.int8), 2), ValueError, "keys"),
        (lambda: al.sort_by_key(np.int64(3)), ValueError, "keys"),
        (lambda: al.sort_by_key(np.arange(4), np.ones(3)), ValueError, "array 0"),
        (lambda: al.sort_by_key(np.arange(4), axis=1.5), TypeError, "axis"),
        (lambda: al.cell_offsets(np.array([2, 1]), 3), ValueError, "sorted_cells"),
        (lambda: al.cell_offsets(np.array([-1, 1], np.int8), 3), ValueError, "sorted_cells"),
        (lambda: al.cell_offsets(np.array([2**64 - 1], np.uint64), 3), ValueError, "sorted_cells"),
        (lambda: al.segment_boundaries(np.array([3, 1], ">i8")), ValueError, "sorted_keys"),
        (lambda: al.morton_keys(np.array([[np.nan, 0.0]]), [0, 0], [1, 1], 4), ValueError, "positions"),
        (lambda: al.morton_keys(np.zeros((1, 2)), [0, 0], [1, 1], 2**70), ValueError, "levels"),
        (lambda: al.morton_keys(np.zeros((1, 2), object), [0, 0], [1, 1], 4), TypeError, "positions"),
        (lambda: al.morton_encode(np.array([-1], np.int8), np.array([0])), ValueError, "cell array 0"),
        (lambda: al.morton_decode(np.array([1.5]), 2), TypeError, "keys"),
        (lambda: al.compact_by_mask(np.array([1, 0]), np.zeros(2)), TypeError, "mask"),
        (lambda: rng.philox_uniform(2**64, 0, 0), OverflowError, "seed"),
        (lambda: rng.philox_uniform(np.array([1.0]), 0, 0), TypeError, "seed"),
        (lambda: rng.philox4x32_10(np.zeros((1, 4), object), 0, 0), TypeError, "counter_words"),
    ],
)
def test_public_algorithms_bad_input(call, exc, word):
    with pytest.raises(exc, match=word):
        call()


def test_public_algorithms_read_only_and_aliasing_outputs():
    keys = np.array([0, 1, 1])
    ro = np.zeros(2)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="out"):
        al.segment_sum(np.ones(3), keys, 2, out=ro)
    v = np.ones((3, 1))
    with pytest.raises(ValueError, match="out"):
        al.segment_sum(v, keys, 3, out=v)
    arr = np.arange(3.0)
    arr.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        al.compact_by_mask(np.array([True, False, True]), arr)


def test_public_algorithms_odd_layouts_match_numpy():
    rs = np.random.default_rng(0)
    keys = rs.integers(-2, 5, 40)
    vals = rs.standard_normal((80, 3))[::-2, ::-1]  # negative strides, non-contiguous
    expect = np.zeros((5, 3))
    for k, row in zip(keys, vals):
        if k >= 0:
            expect[k] += row
    np.testing.assert_allclose(al.segment_sum(vals, keys[::-1][::-1], 5), expect)
    np.testing.assert_allclose(al.segment_sum(np.asfortranarray(vals), keys.astype(">i4"), 5), expect)
    for dt in (np.int8, np.uint8, np.int16, np.uint16, ">i8", ">u4", np.uint64, bool):
        k = rs.integers(0, 2 if dt is bool else 100, 50).astype(dt)
        sk, order, *_ = al.sort_by_key(k[::-1])
        np.testing.assert_array_equal(order, np.argsort(k[::-1], kind="stable"))
        np.testing.assert_array_equal(sk, np.sort(k[::-1], kind="stable"))
    k = np.array([2**64 - 1, 0, 2**63, 2**63 - 1, 1], np.uint64)
    np.testing.assert_array_equal(al.sort_by_key(k)[1], np.argsort(k, kind="stable"))
    k = np.array([-(2**63), 2**63 - 1, -1, 0], np.int64)
    np.testing.assert_array_equal(al.sort_by_key(k)[1], np.argsort(k, kind="stable"))
    # empty and 0-sized arrays
    assert al.sort_by_key(np.zeros(0, np.int64))[1].shape == (0,)
    assert al.segment_sum(np.zeros((0, 2)), np.zeros(0, np.int64), 3).shape == (3, 2)
    assert al.segment_boundaries(np.zeros(0, np.int32))[1].shape == (0,)
    assert al.compact_by_mask(np.zeros(0, bool), np.zeros((0, 3))) == 0


def test_compact_by_mask_with_the_mask_itself_and_negative_strides():
    m = np.array([True, False, True, True, False])
    a = np.arange(10.0)[::-2]
    expect = a[m].copy()
    mask_copy = m.copy()
    assert al.compact_by_mask(m, a, m) == 3
    np.testing.assert_array_equal(a[:3], expect)
    np.testing.assert_array_equal(m[:3], mask_copy[mask_copy])


# --------------------------------------------------------------------------- threads


@needs_c
def test_concurrent_sorts_are_correct():
    """sort.c keeps one scratch area, taken by one call at a time with the GIL released:
    concurrent sorts of different sizes and key types must all be right."""
    rs = np.random.default_rng(7)
    inputs = [rs.integers(-(2**62), 2**62, size=n) for n in (300_000, 1 << 17, 70_000, 200_000)]
    inputs += [rs.integers(0, 2**63, size=150_000).astype(np.uint64), rs.integers(0, 1000, 100_000).astype(np.int32)]
    expect = [np.argsort(k, kind="stable") for k in inputs]
    errors = []
    barrier = threading.Barrier(len(inputs))

    def work(i):
        try:
            barrier.wait()
            for _ in range(4):
                sk, order = al.sort_by_key(inputs[i])[:2]
                if not np.array_equal(order, expect[i]) or not np.array_equal(sk, inputs[i][expect[i]]):
                    errors.append(i)
        except Exception as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@needs_c
def test_concurrent_segment_sums_are_correct():
    rs = np.random.default_rng(3)
    n = 1 << 19  # large enough for the two-core split
    cases = []
    for i in range(4):
        keys = rs.integers(-1, 50 + i, n)
        vals = rs.standard_normal((n, 2))
        cases.append((vals, keys, 50 + i, al.segment_sum(vals, keys, 50 + i)))
    errors = []
    barrier = threading.Barrier(len(cases))

    def work(c):
        vals, keys, nseg, ref = c
        barrier.wait()
        for _ in range(3):
            got = al.segment_sum(vals, keys, nseg)
            if not np.array_equal(got, ref):
                errors.append(nseg)

    threads = [threading.Thread(target=work, args=(c,)) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_compact_by_mask_refuses_overlapping_arrays(on_backend):
    """Regression: two different views of the same memory (a and a.view(int64), a and a[::-1])
    were compacted one after the other, moving the same bytes twice (silent corruption)."""
    import cunumpy as xp

    m = xp.asarray(np.array([False, True, False, True]))
    a = xp.asarray(np.arange(4.0))
    with pytest.raises(ValueError, match="share memory"):
        al.compact_by_mask(m, a, a.view(np.int64))
    with pytest.raises(ValueError, match="share memory"):
        al.compact_by_mask(m, a, a[::-1])
    # the same array twice is still compacted once; disjoint column blocks of one array are fine
    assert al.compact_by_mask(m, a, a) == 2
    np.testing.assert_array_equal(xp.to_numpy(a)[:2], [1.0, 3.0])
    d = xp.asarray(np.arange(24.0).reshape(4, 6))
    assert al.compact_by_mask(m, d[:, :3], d[:, 3:]) == 2
    np.testing.assert_array_equal(xp.to_numpy(d)[:2], np.arange(24.0).reshape(4, 6)[[1, 3]])


def test_compact_by_mask_refuses_an_array_over_the_mask():
    m = np.array([False, True, False, True])
    with pytest.raises(ValueError, match="mask"):
        al.compact_by_mask(m, np.arange(4.0), m.view(np.uint8))


def test_compact_cupy_path_refuses_overlapping_arrays(device_only):
    """The CuPy implementation (run here on fake arrays) applies the same rules: an equal view
    is compacted once, other overlapping views and views over the mask are refused."""
    cupy = sys.modules["cupy"]
    m = cupy.asarray(np.array([False, True, False, True]))
    a = cupy.asarray(np.arange(4.0))
    for other in (a.view(np.int64), a[::-1], m.view(np.uint8)):
        with pytest.raises(ValueError, match="shares? memory"):
            al._compact_cupy(m, (a, other), 0)
    assert al._compact_cupy(m, (a, a[:]), 0) == 2
    np.testing.assert_array_equal(cupy.asnumpy(a)[:2], [1.0, 3.0])


def _unaligned(dtype, n):
    """A C-contiguous, writable, misaligned array (one byte into a buffer)."""
    dtype = np.dtype(dtype)
    return np.zeros(n * dtype.itemsize + 1, np.uint8)[1:].view(dtype)


@needs_c
@pytest.mark.parametrize(
    "call, word",
    [
        (
            lambda u: core.philox4x32_10_into(
                u(np.uint32, 8), np.zeros(1, np.uint32), np.zeros(1, np.uint32), np.zeros(8, np.uint32)
            ),
            "counters",
        ),
        (
            lambda u: core.philox4x32_10_into(
                np.zeros(8, np.uint32), np.zeros(1, np.uint32), np.zeros(1, np.uint32), u(np.uint32, 8)
            ),
            "out",
        ),
        (
            lambda u: core.philox_fill(0, u(np.uint64, 1), np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(4)),
            "seed",
        ),
        (
            lambda u: core.philox_fill(
                0, np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint64), u(np.float64, 4)
            ),
            "out0",
        ),
        (lambda u: core.morton_encode_into((u(np.uint64, 3), np.zeros(3, np.uint64)), np.empty(3, np.uint64)), "cells"),
        (lambda u: core.morton_decode_into(u(np.uint64, 3), (np.empty(3, np.uint64), np.empty(3, np.uint64))), "keys"),
        (lambda u: core.morton_keys_into(np.zeros((3, 2)), (0, 0), (1, 1), 3, u(np.uint64, 3)), "out"),
        (lambda u: core.radix_argsort(np.arange(5), u(np.int64, 5), np.empty(5, np.int64)), "order"),
        (lambda u: core.radix_argsort(np.arange(5), np.empty(5, np.int64), u(np.int64, 5)), "sorted_keys"),
        (lambda u: core.cell_offsets_into(np.arange(3), 3, u(np.int64, 4)), "out"),
        (
            lambda u: core.segment_runs(np.arange(3), u(np.int64, 3), np.empty(3, np.int64), np.empty(3, np.int64)),
            "unique",
        ),
        (
            lambda u: core.segment_sum_into(
                np.ones((3, 1)), np.zeros(3, np.int64), u(np.float64, 1).reshape(1, 1), True
            ),
            "out",
        ),
    ],
)
def test_core_misaligned_buffers_are_refused(call, word):
    """Regression: misaligned C-contiguous buffers were read/written as typed C arrays
    (undefined behaviour, reported by UBSan under `make check-c`)."""
    with pytest.raises(ValueError, match=f"'{word}' must be aligned"):
        call(_unaligned)


def test_segment_sum_misaligned_out_is_refused():
    out = _unaligned(np.float64, 3)
    with pytest.raises(ValueError, match="'out' must be aligned"):
        al.segment_sum(np.ones(4), np.array([0, 1, 1, 2]), 3, out=out)
    # misaligned inputs are copied, not refused
    vals = _unaligned(np.float64, 4)
    vals[...] = 1.0
    keys = _unaligned(np.int64, 4)
    keys[...] = [0, 1, 1, 2]
    np.testing.assert_array_equal(al.segment_sum(vals, keys, 3), [1.0, 2.0, 1.0])
    np.testing.assert_array_equal(al.sort_by_key(keys[::-1])[0], [0, 1, 1, 2])
    np.testing.assert_array_equal(al.segment_boundaries(keys)[1], [0, 1, 3])
    np.testing.assert_array_equal(al.cell_offsets(keys, 3), [0, 1, 3, 4])


# --------------------------------------------------------------------------- properties

from hypothesis import (  # noqa: E402
    given,
    settings,
    strategies as st,
)

_KEY_DTYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", ">i4", ">u8", ">i8"]


@st.composite
def _keyed_arrays(draw):
    dt = np.dtype(draw(st.sampled_from(_KEY_DTYPES)))
    n = draw(st.integers(0, 60))
    step = draw(st.sampled_from([1, 2, -1, -3]))
    info = np.iinfo(dt)
    raw = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=n, max_size=n))
    base = np.zeros(n * abs(step) + 1, dtype=dt)
    keys = base[::step][:n]
    keys[...] = np.array(raw, dtype=dt)
    if draw(st.booleans()):  # a misaligned copy of the same keys
        keys = _unaligned(dt, n)
        keys[...] = np.array(raw, dtype=dt)
    return keys


@settings(max_examples=150, deadline=None)
@given(_keyed_arrays(), st.integers(0, 5))
def test_sort_and_segment_properties(keys, n_extra):
    n = keys.shape[0]
    sk, order = al.sort_by_key(keys)[:2]
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(sk, keys[order])
    unique, starts, _stops = al.segment_boundaries(sk)
    ref_unique, ref_starts = np.unique(sk, return_index=True) if n else (sk[:0], np.zeros(0, int))
    np.testing.assert_array_equal(unique, ref_unique)
    np.testing.assert_array_equal(starts, ref_starts)
    vals = np.arange(n, dtype=np.float64)
    wide_unsigned = keys.dtype.kind == "u" and keys.dtype.itemsize == 8  # no int64 reference
    live = None if wide_unsigned else keys.astype(np.int64)
    if live is not None and (n == 0 or live.max() < 200):
        n_seg = max(int(live.max()) + 1 if n else 0, 0) + n_extra
        expect = np.zeros(n_seg)
        np.add.at(expect, live[live >= 0], vals[live >= 0])
        np.testing.assert_array_equal(al.segment_sum(vals, keys, n_seg), expect)
        if n and live.min() >= 0:
            np.testing.assert_array_equal(al.cell_offsets(sk, n_seg), np.searchsorted(sk, np.arange(n_seg + 1)))
    mask = (keys.astype(np.int64) % 2 == 0) if n else np.zeros(0, bool)
    data = np.stack([vals, -vals], axis=1)
    expect_rows = data[mask].copy()
    assert al.compact_by_mask(mask, data) == expect_rows.shape[0]
    np.testing.assert_array_equal(data[: expect_rows.shape[0]], expect_rows)


def test_public_traversal_deep_and_cyclic_arguments(device_only):
    """PyccelKernel and host_call with device arrays at the bottom of very deep lists and
    dicts, and in reference cycles: a result or RecursionError/ValueError, never a crash."""
    out = run_isolated(
        """
        import numpy as np, cunumpy, cupy
        from cunumpy.kernels import PyccelKernel
        a = cupy.zeros(2)
        deep = [a]
        for _ in range(100000):
            deep = [deep]
        deep_d = {"a": a}
        for _ in range(100000):
            deep_d = {"a": deep_d}
        cyc = [a]
        cyc.append(cyc)
        tcyc = [a]
        tcyc.append((tcyc,))
        k = PyccelKernel(lambda x: None)
        for arg in (deep, deep_d, cyc, tcyc):
            for call in (lambda: k(arg), lambda: cunumpy.host_call(lambda x: x, arg)):
                try:
                    call()
                except (RecursionError, ValueError):
                    pass
        # a host function returning a deeply nested or cyclic result
        r = [np.zeros(1)]
        r.append(r)
        out = cunumpy.host_call(lambda x: r, a)
        assert out[1] is out
        deep_np = [np.zeros(1)]
        for _ in range(100000):
            deep_np = [deep_np]
        try:
            cunumpy.host_call(lambda x: deep_np, a)
        except RecursionError:
            pass
        print("clean")
        """,
        timeout=300,
    )
    assert "clean" in out


@pytest.mark.parametrize(
    "lower, upper", [([0, 0], [1e-320, 1]), ([-1e308, 0], [1e308, 1]), ([0, 0, 0], [1, 5e-324, 1])]
)
def test_morton_box_with_unusable_scale(on_backend, lower, upper):
    """Regression: a width that overflows gave scale 0 (every key 0) and a subnormal width an
    infinite scale (keys 0 or the top cell), both silently."""
    import cunumpy as xp

    pos = xp.asarray(np.zeros((2, len(lower))))
    with pytest.raises(ValueError, match="box"):
        al.morton_scales(lower, upper, 10)
    with pytest.raises(ValueError, match="box"):
        al.morton_keys(pos, lower, upper, 10)


def test_cuda_kernel_array_interface_shape_mutated_while_read(device_only):
    """Regression: the packer read a list `shape`/`strides` of a __cuda_array_interface__
    through its item array while an item's __index__ could free it (heap-use-after-free)."""
    out = run_isolated(
        """
        import numpy as np, cunumpy, cupy
        from cunumpy.kernels import CudaKernel
        k = CudaKernel('extern "C" __global__ void k(double* y, Array1D<double> v, int n) {}', "k")
        x = cupy.zeros(4)
        for key in ("shape", "strides"):
            seq = []
            class Evil:
                def __index__(self):
                    seq.extend(range(1000))
                    del seq[:]
                    return 4 if key == "shape" else 8
            d = dict(x.__cuda_array_interface__)
            d[key] = seq
            if key == "strides":
                d["shape"] = (4, 1, 1, 1)
            class C:
                __cuda_array_interface__ = d
            for args in ((C(), x, 4), (x, C(), 4)):
                seq[:] = [Evil(), 1, 1, 1]
                try:
                    k(*args, n_threads=0)
                except (TypeError, ValueError):
                    pass
        # an item of the shape that clears the interface dict (strides and data were borrowed)
        d = {}
        class Clear:
            def __index__(self):
                d.clear()
                return 4
        class Same(str):
            # a key equal to "shape" whose comparison clears the dict during the lookups
            def __hash__(self):
                return hash("shape")
            def __eq__(self, other):
                d.clear()
                return False
        class C2:
            @property
            def __cuda_array_interface__(self):
                return d
        for extra in ({}, {Same("x"): 1}):
            d.clear()
            d.update(typestr="<f8", data=(x.data.ptr, False), version=3)
            d.update(extra)
            d["shape"] = (Clear(), 1)
            d["strides"] = [int(8), 8]
            try:
                k(C2(), x, 4, n_threads=0)
            except (TypeError, ValueError):
                pass
        print("clean")
        """
    )
    assert "clean" in out


@needs_c
def test_morton_keys_into_bounds_mutated_while_read():
    """Regression (same pattern in morton.c): a list `lower` whose item's __float__ empties it."""
    out = run_isolated(
        """
        import numpy as np, cunumpy._core as c
        lower = []
        class Evil:
            def __float__(self):
                lower.extend(range(1000))
                del lower[:]
                return 0.0
        lower[:] = [Evil(), 0.0]
        c.morton_keys_into(np.zeros((2, 2)), lower, (1.0, 1.0), 3, np.empty(2, np.uint64))
        for bad in (None, 3, {1: 2}):
            try:
                c.morton_keys_into(np.zeros((2, 2)), bad, (1.0, 1.0), 3, np.empty(2, np.uint64))
            except TypeError as e:
                assert "lower" in str(e)
        print("clean")
        """
    )
    assert "clean" in out


def test_cuda_kernel_array_interface_huge_shapes(device_only):
    """Regression: the contiguity check and the element strides of a view multiplied shapes of
    a hostile __cuda_array_interface__ in signed 64-bit arithmetic (overflow, UBSan)."""
    out = run_isolated(
        """
        import numpy as np, cunumpy, cupy
        from cunumpy.kernels import CudaKernel
        k = CudaKernel('extern "C" __global__ void k(double* y, Array2D<double> v, '
                       'CArray2D<double> c, void* r, int n) {}', "k")
        x = cupy.zeros(4)
        class C:
            def __init__(self, **kw):
                self.d = dict(x.__cuda_array_interface__)
                self.d.update(kw)
            @property
            def __cuda_array_interface__(self):
                return self.d
        cases = [dict(shape=(2, 2**62), strides=(0, 8)), dict(shape=(2**62, 2**62, 2**62), strides=(8, 8, 8)),
                 dict(shape=(3, -2**63), strides=(8, 8)), dict(shape=(2, 4), strides=(-2**63, 8)),
                 dict(shape=(2**62, 2**62), strides=None), dict(shape=(2, 2**63 - 1), strides=None),
                 dict(typestr="f", strides=(8,)), dict(typestr="", strides=(8,))]
        for pos in range(4):
            for kw in cases:
                args = [x, cupy.zeros((2, 2)), cupy.zeros((2, 2)), x, 1]
                args[pos] = C(**kw)
                try:
                    k(*args, n_threads=0)
                except (TypeError, ValueError):
                    pass
        print("clean")
        """
    )
    assert "clean" in out


@needs_c
def test_cuda_signature_parser_random_sources_match_the_twin():
    """Random token soups through the C parser: same outcome as the Python twin, no crash."""
    out = run_isolated(
        """
        import random
        import cunumpy._core as c
        from cunumpy._reference import cudasig as twin
        vocab = ["__global__", "void", "k", "(", ")", "{", "}", ",", "*", "&", "const", "int", "float",
                 "double", "unsigned", "long", "char", "struct", "S", "template", "<", ">", "typename",
                 "T", "extern", '"C"', "/*", "*/", "//", "\\n", "#define", "X", "__restrict__", "a", "[",
                 "]", "3", "::", "cunumpy", "View", "CArray1D<int>", "Array2D<float>", "int64_t",
                 "uint32_t", ";", "=", "\\0", "é", "\\\\", "'", '"', "size_t", "bool", "complex<float>",
                 "short", "signed", "volatile", "__device__", "static", "operator", "...", "auto"]
        rnd = random.Random(20261130)
        diffs = []
        for _ in range(3000):
            toks = ["__global__", "void", "k", "("] if rnd.random() < 0.7 else []
            toks += [rnd.choice(vocab) for _ in range(rnd.randint(0, 30))]
            if rnd.random() < 0.5:
                toks += [")", "{", "}"]
            src = " ".join(toks) if rnd.random() < 0.8 else "".join(toks)
            sn = tuple(rnd.choice(["S", "T", "", "\\0"]) for _ in range(rnd.randint(0, 2)))
            ta = None if rnd.random() < 0.6 else tuple(
                rnd.choice(["float", "int", "S", "T", "", "double*"]) for _ in range(rnd.randint(0, 2)))
            res = []
            for f, a in ((c.cuda_parse_signature, (src, "k", sn, ta)), (twin.cuda_parse_signature, (src, "k", sn, ta)),
                         (c.cuda_kernel_names, (src,)), (twin.cuda_kernel_names, (src,))):
                try:
                    res.append(("ok", f(*a)))
                except (ValueError, TypeError) as e:
                    res.append((type(e).__name__, str(e)))
            if res[0][0] != res[1][0] or (res[0][0] == "ok" and res[0] != res[1]) or res[2] != res[3]:
                diffs.append((src, sn, ta, res))
        assert not diffs, diffs[:3]
        print("clean")
        """,
        timeout=300,
    )
    assert "clean" in out


def test_lone_surrogates_in_cuda_source_name_the_argument():
    from cunumpy import _reference

    bad = 'extern "C" __global__ void k(double* x) {}\ud800'
    for parse in (core.cuda_parse_signature, _reference.cuda_parse_signature):
        with pytest.raises(ValueError, match="'source'"):
            parse(bad, "k")
        with pytest.raises(ValueError, match="'name'"):
            parse('extern "C" __global__ void k(double* x) {}', "k\udfff")
    for names in (core.cuda_kernel_names, _reference.cuda_kernel_names):
        with pytest.raises(ValueError, match="'source'"):
            names(bad)
    with pytest.raises(ValueError, match="source"):
        xp.cuda.parse_cuda_signature(bad, "k")


@pytest.mark.parametrize(
    "counter, key0, name",
    [
        (np.array([[0, 0, 0, -1]], dtype=np.int64), 0, "counter_words"),
        (np.array([[0, 0, 2**40, 0]], dtype=np.int64), 0, "counter_words"),
        (np.zeros((1, 4), np.uint32), np.array([2**33], dtype=np.int64), "key0"),
        (np.zeros((1, 4), np.uint32), np.array([-5], dtype=np.int32), "key0"),
    ],
)
def test_philox_words_outside_32_bits_are_refused_not_wrapped(counter, key0, name, on_backend):
    counter = xp.to_cunumpy(counter)
    if not isinstance(key0, int):
        key0 = xp.to_cunumpy(key0)
    with pytest.raises(OverflowError, match=name):
        xp.rng.philox4x32_10(counter, key0, 0)
    # The same words as uint32 in range are accepted.
    ok = xp.rng.philox4x32_10(xp.to_cunumpy(np.zeros((1, 4), np.uint32)), 0, 0)
    assert xp.to_numpy(ok).tolist() == [[0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]]
