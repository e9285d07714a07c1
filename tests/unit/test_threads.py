"""The thread pool of the C core (cunumpy.threads) and the parallel host algorithms.

Results must be bit-identical for every thread count: each parallel algorithm is run with 1,
2, 3 and 8 threads on odd sizes that cut its fixed chunks unevenly, and compared with the
one-thread result and with a plain NumPy oracle."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import cunumpy as xp
from cunumpy import algorithms as A, rng as R, threads as T
from cunumpy._native import core as _core

COUNTS = (1, 2, 3, 8)
# Past one chunk of the element-wise loops (16384) and of compaction blocks (32768), uneven.
SIZES = (1, 63, 16385, 3 * 32768 + 4097, 200_003)


@pytest.fixture(autouse=True)
def restore_threads():
    """Every test starts with the cut-overs ignored, so the sizes here (small, to keep the suite
    quick) run the parallel paths; the cut-over test turns them back on."""
    before = T.get_num_threads()
    _core._pool_ignore_cutover(True)
    yield
    _core._pool_ignore_cutover(False)
    T.set_num_threads(before)


def each_count(fn):
    """fn() under every thread count; all results (tuples of arrays) must be bit-identical."""
    results = []
    for count in COUNTS:
        with T.num_threads(count):
            assert T.get_num_threads() == count
            results.append(fn())
    first = results[0]
    for count, other in zip(COUNTS[1:], results[1:]):
        for a, b in zip(first, other):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), f"{count} threads differ"
    return first


def run_python(code, env_extra=None, timeout=120):
    env = dict(os.environ)
    env.pop("CUNUMPY_NUM_THREADS", None)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=timeout
    )


# ---- controls --------------------------------------------------------------------------------


def test_set_get_and_context_manager():
    T.set_num_threads(3)
    assert T.get_num_threads() == 3
    with T.num_threads(2):
        assert T.get_num_threads() == 2
        assert _core._pool_workers() == 1
    assert T.get_num_threads() == 3
    with pytest.raises(RuntimeError), T.num_threads(1):
        raise RuntimeError("inside")
    assert T.get_num_threads() == 3
    T.set_num_threads(np.int64(2))  # __index__
    assert T.get_num_threads() == 2


@pytest.mark.parametrize(
    "bad, exc",
    [
        (0, ValueError),
        (-1, ValueError),
        (1025, ValueError),
        (2**80, ValueError),
        (2.0, TypeError),
        ("2", TypeError),
        (True, TypeError),
        (None, TypeError),
    ],
)
def test_set_num_threads_rejects(bad, exc):
    before = T.get_num_threads()
    with pytest.raises(exc, match="'n'"):
        T.set_num_threads(bad)
    with pytest.raises(exc, match="'n'"):
        _core.set_num_threads(bad)
    assert T.get_num_threads() == before


def test_default_is_the_cpus_this_process_may_use():
    out = run_python("import cunumpy as xp; print(xp.threads.get_num_threads())")
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("value, expected", [("3", 3), (" 2 ", 2), ("1", 1)])
def test_environment_variable(value, expected):
    out = run_python("import cunumpy as xp; print(xp.threads.get_num_threads())", {"CUNUMPY_NUM_THREADS": value})
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == expected


@pytest.mark.parametrize("value", ["0", "-2", "two", "4x", "2.5", "99999999999999999999", "1025"])
def test_invalid_environment_variable_warns_and_uses_one_thread(value):
    code = """
        import warnings
        import numpy as np
        import cunumpy as xp
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            n = xp.threads.get_num_threads()
        assert n == 1, n
        assert any("CUNUMPY_NUM_THREADS" in str(w.message) for w in caught), caught
        mask = np.arange(100_001) % 3 == 0
        a = np.arange(100_001.0)
        assert xp.algorithms.compact_by_mask(mask, a) == 33_334
        print("ok")
    """
    out = run_python(code, {"CUNUMPY_NUM_THREADS": value})
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_thread_creation_failure_falls_back_to_one_thread_with_a_warning():
    T.set_num_threads(1)
    _core._pool_fail_next_start()
    with pytest.warns(RuntimeWarning, match="worker threads"):
        T.set_num_threads(4)
    assert T.get_num_threads() == 1
    assert _core._pool_workers() == 0
    mask = np.arange(200_003) % 2 == 0
    a = np.arange(200_003.0)
    assert A.compact_by_mask(mask, a) == 100_002
    np.testing.assert_array_equal(a[:100_002], np.arange(0, 200_003, 2.0))
    T.set_num_threads(2)  # a later resize tries again
    assert T.get_num_threads() == 2 and _core._pool_workers() == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_child_starts_a_fresh_pool():
    code = """
        import os, sys
        import numpy as np
        import cunumpy as xp
        xp.threads.set_num_threads(3)
        mask = np.arange(300_001) % 5 != 0
        a = np.arange(300_001.0)
        xp.algorithms.compact_by_mask(mask, a.copy())   # workers running in the parent
        pid = os.fork()
        if pid == 0:
            b = np.arange(300_001.0)
            n = xp.algorithms.compact_by_mask(mask, b)
            ok = n == 240_000 and np.array_equal(b[:n], np.arange(300_001.0)[mask])
            ok = ok and xp.threads.get_num_threads() == 3
            ok = ok and xp._core._pool_workers() == 2
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        assert xp.algorithms.compact_by_mask(mask, a) == 240_000
        print("ok")
    """
    out = run_python(code, timeout=60)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_threadpoolctl_controls_the_pool():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    assert T.register_threadpoolctl()
    T.set_num_threads(3)
    info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "cunumpy"]
    assert len(info) == 1 and info[0]["num_threads"] == 3
    with threadpoolctl.threadpool_limits(limits=1, user_api="cunumpy"):
        assert T.get_num_threads() == 1
    assert T.get_num_threads() == 3
    with threadpoolctl.threadpool_limits(limits=2):
        assert T.get_num_threads() == 2
    assert T.get_num_threads() == 3


def test_threadpoolctl_limit_above_the_maximum_is_clamped_and_reaches_every_library():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    assert T.register_threadpoolctl()
    T.set_num_threads(3)

    def counts():
        return {i["user_api"]: i["num_threads"] for i in threadpoolctl.threadpool_info()}

    with threadpoolctl.threadpool_limits(limits=1):
        others = {api: n for api, n in counts().items() if api != "cunumpy"}
        assert set(others.values()) <= {1}
        with threadpoolctl.threadpool_limits(limits=2000):  # raised ValueError (1024 at most)
            inside = counts()
            assert inside["cunumpy"] == 1024
            # every other library got the limit too (its own maximum; more than 1 with 2+ CPUs)
            if (os.cpu_count() or 1) > 1:
                assert all(inside[api] > 1 for api in others)
        assert counts()["cunumpy"] == 1
    assert T.get_num_threads() == 3


def test_import_does_not_import_threadpoolctl():
    out = run_python("import sys, cunumpy; print('threadpoolctl' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ---- compaction --------------------------------------------------------------------------


def compact_oracle(mask, arrays, axis=0):
    return [np.compress(mask, a, axis=axis) for a in arrays]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("density", [0.0, 0.03, 0.5, 0.97, 1.0])
def test_compact_bit_identical_for_every_thread_count(n, density):
    gen = np.random.default_rng(n)
    mask = gen.random(n) < density
    payloads = [
        gen.random(n),
        gen.random((n, 3)),
        gen.random((n, 2)),
        gen.integers(0, 9, n).astype(np.int8),
        gen.integers(0, 2**31, n).astype(np.uint32),
        gen.random((n, 5)).astype(np.float32),
    ]  # 20-byte lanes: the generic move

    def run():
        arrays = [p.copy() for p in payloads]
        live = A.compact_by_mask(mask, *arrays)
        return (np.int64(live), *tuple(a[:live] for a in arrays))

    first = each_count(run)
    assert first[0] == np.count_nonzero(mask)
    for got, want in zip(first[1:], compact_oracle(mask, payloads)):
        np.testing.assert_array_equal(got, want)


def test_compact_live_prefix_then_sparse_tail():
    # Blocks whose destination overlaps many earlier blocks' sources (the waiting path).
    n = 10 * 32768 + 123
    mask = np.zeros(n, bool)
    mask[: 4 * 32768 + 7] = True
    mask[4 * 32768 + 7 :: 3] = True
    a = np.arange(n, dtype=np.int64)
    b = np.arange(3 * n, dtype=np.float64).reshape(3, n)  # component-major, axis=-1
    want_a, want_b = a[mask], b[:, mask]

    def run():
        x, y = a.copy(), b.copy()
        live = A.compact_by_mask(mask, x, y, axis=-1)
        return np.int64(live), x[:live], y[:, :live]

    _live, got_a, got_b = each_count(run)
    np.testing.assert_array_equal(got_a, want_a)
    np.testing.assert_array_equal(got_b, want_b)


def test_compact_strided_mask_and_non_bool_bytes():
    n = 3 * 32768 + 5
    base = np.random.default_rng(1).random(2 * n) < 0.4
    mask = base[::2]
    raw = np.random.default_rng(2).integers(0, 4, n).astype(np.uint8)  # bytes 2 and 3 count as live
    nb_mask = raw.view(np.bool_)
    a = np.arange(n, dtype=np.float64)
    for m in (mask, nb_mask):

        def run(m=m):
            x = a.copy()
            live = A.compact_by_mask(m, x)
            return np.int64(live), x[:live]

        _live, got = each_count(run)
        np.testing.assert_array_equal(got, a[np.asarray(m).view(np.uint8) != 0])


def test_compact_from_many_python_threads_at_once():
    T.set_num_threads(2)
    n = 100_003
    mask = np.arange(n) % 7 != 3
    want = np.arange(n, dtype=np.float64)[mask]
    errors = []

    def work():
        try:
            for _ in range(5):
                x = np.arange(n, dtype=np.float64)
                live = A.compact_by_mask(mask, x)
                if not np.array_equal(x[:live], want):
                    errors.append("wrong")
        except Exception as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_compact_with_a_concurrent_mask_writer_never_crashes():
    T.set_num_threads(3)
    n = 200_003
    mask = np.ones(n, bool)
    stop = threading.Event()

    def writer():
        flip = np.random.default_rng(3)
        while not stop.is_set():
            mask[flip.integers(0, n, 1000)] = flip.random() < 0.5

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(20):
            x = np.arange(n, dtype=np.float64)
            live = A.compact_by_mask(mask, x)
            assert 0 <= live <= n
            # Whatever the mask said, every moved value is one of the originals, in order.
            assert np.all(np.diff(x[:live]) > 0)
    finally:
        stop.set()
        t.join()


# ---- Morton and Philox -------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("ndim", [2, 3])
def test_morton_bit_identical_for_every_thread_count(n, ndim):
    gen = np.random.default_rng(n + ndim)
    pos = gen.random((n, ndim))
    lower, upper = np.zeros(ndim), np.ones(ndim)
    levels = 16
    keys = each_count(lambda: (A.morton_keys(pos, lower, upper, levels),))[0]
    cells = np.minimum((pos * 2**levels).astype(np.uint64), 2**levels - 1)
    np.testing.assert_array_equal(keys, A.morton_encode(*[cells[:, d] for d in range(ndim)]))
    enc = each_count(lambda: (A.morton_encode(*[cells[:, d] for d in range(ndim)]),))[0]
    np.testing.assert_array_equal(enc, keys)
    dec = each_count(lambda: tuple(A.morton_decode(keys, ndim)))
    for d in range(ndim):
        np.testing.assert_array_equal(dec[d], cells[:, d])


def test_morton_reports_the_first_non_finite_row_for_every_thread_count():
    n = 5 * 16384 + 11
    pos = np.random.default_rng(4).random((n, 3))
    pos[4 * 16384 + 3, 1] = np.nan
    pos[2 * 16384 + 9, 0] = np.inf
    for count in COUNTS:
        with T.num_threads(count), pytest.raises(ValueError, match=f"row {2 * 16384 + 9} "):
            A.morton_keys(pos, np.zeros(3), np.ones(3), 10)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("fn", ["philox_uniform", "philox_uniform2", "philox_normal", "philox_normal2"])
def test_philox_bit_identical_for_every_thread_count(n, fn):
    counter = np.arange(n, dtype=np.uint64) * np.uint64(7919)
    draw = getattr(R, fn)

    def run():
        out = draw(12345, np.uint64(3), counter)
        return tuple(out) if isinstance(out, tuple) else (out,)

    first = each_count(run)
    # A scalar draw of the same counter is the same number (no chunk effect at the edges).
    for i in {0, n // 2, n - 1}:
        single = draw(12345, 3, int(counter[i]))
        single = single if isinstance(single, tuple) else (single,)
        for arr, one in zip(first, single):
            assert np.asarray(arr)[i].tobytes() == np.asarray(one).reshape(()).tobytes()


@pytest.mark.parametrize("n", [1, 16385, 50_001])
def test_philox4x32_bit_identical_for_every_thread_count(n):
    words = np.arange(4 * n, dtype=np.uint32).reshape(n, 4)
    first = each_count(lambda: (R.philox4x32_10(words, np.uint32(5), np.uint32(9)),))[0]
    one = R.philox4x32_10(words[n - 1 : n], np.uint32(5), np.uint32(9))
    np.testing.assert_array_equal(first[n - 1 : n], one)


# ---- segment sums ------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2**18 + 3, 2**20 + 12345])
@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_segment_sum_bit_identical_for_every_thread_count(n, m, dtype):
    gen = np.random.default_rng(n + m)
    n_segments = 1000
    keys = gen.integers(0, n_segments, n)
    values = gen.random((n, m)).astype(dtype)
    plan = A.SegmentPlan(keys, n_segments)
    first = each_count(lambda: (A.segment_sum(values, keys, n_segments), plan.sum(values)))
    want = np.zeros((n_segments, m))
    np.add.at(want, keys, values.astype(np.float64))
    tol = 1e-9 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(first[0].reshape(n_segments, m), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(first[1].reshape(n_segments, m), want, rtol=tol, atol=tol)


def test_segment_sum_reports_the_first_bad_key_for_every_thread_count():
    n = 2**20 + 5
    keys = np.zeros(n, np.int64)
    keys[700_001] = 10
    keys[900_000] = 11
    values = np.ones(n)
    for count in COUNTS:
        with T.num_threads(count), pytest.raises(ValueError, match="keys\\[700001\\]"):
            A.segment_sum(values, keys, 10)


# ---- sort_by_key -------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 1001, 65_537, 300_007, 2**21 + 3])
@pytest.mark.parametrize("bits, dtype", [(30, np.int64), (63, np.int64), (12, np.int32), (40, np.uint64), (7, np.int8)])
def test_sort_by_key_bit_identical_for_every_thread_count(n, bits, dtype):
    if n == 2**21 + 3 and bits not in (30, 63):
        pytest.skip("the largest size only for the two main key widths")
    gen = np.random.default_rng(n + bits)
    high = min(2**bits, np.iinfo(dtype).max)
    keys = gen.integers(0, high, n, dtype=np.int64 if dtype != np.uint64 else np.uint64).astype(dtype)
    payload = gen.random(n)
    first = each_count(lambda: tuple(A.sort_by_key(keys, payload)))
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(first[0], keys[order])
    np.testing.assert_array_equal(first[1], order)
    np.testing.assert_array_equal(first[2], payload[order])


@pytest.mark.parametrize("n", [65_537, 300_007])
@pytest.mark.parametrize("pattern", ["sorted", "reversed", "equal", "few", "sorted but one", "negative", "strided"])
def test_sort_by_key_patterns_bit_identical_for_every_thread_count(n, pattern):
    """Key patterns that take the other paths of the parallel passes: the sortedness scan over
    chunks (a single unsorted pair in the last chunk), equal keys, buckets left empty."""
    gen = np.random.default_rng(n)
    keys = {
        "sorted": np.arange(n) * 3,
        "reversed": np.arange(n)[::-1].copy(),
        "equal": np.full(n, -7),
        "few": gen.integers(0, 3, n),
        "sorted but one": np.arange(n),
        "negative": gen.integers(-(2**62), 2**62, n),
        "strided": gen.integers(0, 2**33, 2 * n)[::2],
    }[pattern]
    if pattern == "sorted but one":
        keys[n - 2], keys[n - 1] = keys[n - 1], keys[n - 2]
    payload = gen.random((n, 2))
    first = each_count(lambda: tuple(A.sort_by_key(keys, payload)))
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(first[1], order)
    np.testing.assert_array_equal(first[0], keys[order])
    np.testing.assert_array_equal(first[2], payload[order])


@pytest.mark.parametrize("n", [65_537, 2**21 + 3])
def test_sort_by_key_63_bit_keys_with_payloads_for_every_thread_count(n):
    gen = np.random.default_rng(63)
    keys = gen.integers(0, 2**63 - 1, n, dtype=np.int64)
    keys[::5] = keys[1::5][: keys[::5].size]  # repeated keys: stability matters
    p1, p2 = gen.random(n), gen.integers(0, 2**40, (n, 3))
    first = each_count(lambda: tuple(A.sort_by_key(keys, p1, p2)))
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(first[1], order)
    np.testing.assert_array_equal(first[2], p1[order])
    np.testing.assert_array_equal(first[3], p2[order])


@pytest.mark.parametrize("n", [0, 1, 16_385, 70_001, 300_007])
def test_sort_by_key_payload_gathers_for_every_thread_count(n):
    """Payloads of every row size move through take_rows on the pool (C-contiguous, first
    axis); Fortran-ordered payloads and axis=-1 go through np.take."""
    gen = np.random.default_rng(n + 5)
    keys = gen.integers(0, 2**63 - 1, n)
    payloads = [
        gen.random(n),
        gen.random((n, 3)),
        gen.integers(0, 9, n).astype(np.int8),
        gen.random((n, 2)).astype(np.float32),
        gen.random((n, 5, 3)).astype(np.float16),
        gen.integers(0, 9, n).astype(np.int16),
        np.asfortranarray(gen.random((n, 3))),
        gen.random(2 * n)[::2],
        np.array(gen.integers(0, 9, (n, 3)), dtype="V24"),
    ]
    component_major = gen.random((3, n))
    first = each_count(
        lambda: tuple(A.sort_by_key(keys, *payloads)) + tuple(A.sort_by_key(keys, component_major, axis=-1)[2:])
    )
    order = np.argsort(keys, kind="stable")
    for got, p in zip(first[2:], payloads):
        assert got.tobytes() == p[order].tobytes()
    np.testing.assert_array_equal(first[-1], component_major[:, order])


@pytest.mark.parametrize("fn_name", ["core", "twin"])
def test_take_rows_rejects_bad_input(fn_name):
    from cunumpy import _reference

    fn = _core.take_rows if fn_name == "core" else _reference.take_rows
    src = np.arange(6.0)
    for bad, where in (([0, 1, 2, 3, 4, 6], 5), ([-1, 0, 0, 0, 0, 0], 0), ([0, 2**63 - 1, 0, 0, 0, 0], 1)):
        with pytest.raises(ValueError, match=rf"order\[{where}\]"):
            fn(src, np.array(bad, np.int64), np.empty(6))
    with pytest.raises(TypeError, match="objects"):
        fn(np.array([object()] * 2), np.zeros(2, np.int64), np.empty(2, object))
    with pytest.raises(ValueError, match="shape|dst"):
        fn(src, np.zeros(6, np.int64), np.empty(5))


# ---- cut-overs: small inputs stay on the calling thread, large ones use the pool ------------------


def _pool_cases(n):
    gen = np.random.default_rng(n)
    cells = np.sort(gen.integers(0, max(n // 8, 1), n))
    pos = gen.random((n, 3))
    mask = gen.random(n) < 0.5
    return {
        "sort_by_key": lambda: A.sort_by_key(gen.integers(0, 2**30, n)),
        "segment_boundaries": lambda: A.segment_boundaries(cells),
        "cell_offsets": lambda: A.cell_offsets(cells, max(n // 8, 1)),
        "segment_sum": lambda: A.segment_sum(gen.random((n, 3)), gen.integers(0, 64, n), 64),
        "morton_keys": lambda: A.morton_keys(pos, np.zeros(3), np.ones(3), 21),
        "philox_uniform": lambda: R.philox_uniform(7, 3, np.arange(n, dtype=np.uint64)),
        "compact_by_mask": lambda: A.compact_by_mask(mask, gen.random(n)),
    }


# One less than the cut-overs of src/cunumpy/_core/cutovers.h (segment_sum has none: its parts
# decide).
JUST_BELOW_CUTOVER = {
    "sort_by_key": 2**17 - 1,
    "segment_boundaries": 2**17 - 1,
    "cell_offsets": 2**17 - 1,
    "morton_keys": 2**15 - 1,
    "philox_uniform": 2**15 - 1,
    "compact_by_mask": 2**18 - 1,
}


@pytest.mark.skipif(
    not hasattr(_core, "_pool_jobs") or _core._pool_jobs.__module__ == "cunumpy._reference.threads",
    reason="needs the C core's pool",
)
@pytest.mark.parametrize("name", sorted(_pool_cases(1)))
def test_small_inputs_stay_on_the_calling_thread_and_large_ones_use_the_pool(name):
    _core._pool_ignore_cutover(False)
    T.set_num_threads(2)
    small, large = _pool_cases(1000)[name], _pool_cases(1_500_007)[name]
    before = _core._pool_jobs()
    small()
    assert _core._pool_jobs() == before, f"{name} of 1000 elements handed work to the pool"
    large()
    assert _core._pool_jobs() > before, f"{name} of 1.5M elements did not use the pool"
    below = JUST_BELOW_CUTOVER.get(name)
    if below is not None:  # several chunks, yet below the cut-over: the calling thread
        before = _core._pool_jobs()
        _pool_cases(below)[name]()
        assert _core._pool_jobs() == before, f"{name} used the pool below its cut-over"
    before = _core._pool_jobs()
    _core._pool_ignore_cutover(True)
    _pool_cases(600_001)[name]()  # two parts of segment_sum: pool whatever the cut-over
    assert _core._pool_jobs() > before


# ---- segment_boundaries ------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 65_536, 65_537, 300_007])
@pytest.mark.parametrize("distinct", [1, 3, 1000, None])
@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.int32, np.uint64])
def test_segment_boundaries_bit_identical_for_every_thread_count(n, distinct, dtype):
    gen = np.random.default_rng(n + (distinct or 0))
    high = min(distinct or 2**31, np.iinfo(dtype).max)
    keys = np.sort(gen.integers(0, high, n)).astype(dtype)
    first = each_count(lambda: A.segment_boundaries(keys))
    start = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    np.testing.assert_array_equal(first[0], keys[start])
    np.testing.assert_array_equal(first[1], start)
    np.testing.assert_array_equal(first[2], np.append(start[1:], n))


def test_segment_boundaries_run_across_every_chunk():
    """One run that covers whole chunks, then runs that start exactly at chunk boundaries."""
    chunk = _core.SEGMENT_RUNS_CHUNK
    keys = np.concatenate((np.zeros(2 * chunk + 5), np.repeat([1, 2, 3], chunk))).astype(np.int64)
    keys = np.concatenate((keys, [9])) if keys.size % chunk == 0 else keys
    first = each_count(lambda: A.segment_boundaries(keys))
    start = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    np.testing.assert_array_equal(first[1], start)
    np.testing.assert_array_equal(first[2], np.append(start[1:], keys.size))


@pytest.mark.parametrize("where", [5, 65_535, 65_536, 65_537, 200_000])
def test_segment_boundaries_report_the_first_unsorted_row_for_every_thread_count(where):
    keys = np.arange(300_007, dtype=np.int64)
    keys[where] = -1
    keys[where + 1000] = -5  # a later bad row must not be the one reported
    for count in COUNTS:
        with (
            T.num_threads(count),
            pytest.raises(ValueError, match=rf"sorted_keys\[{where}\] < sorted_keys\[{where - 1}\]"),
        ):
            A.segment_boundaries(keys)


@pytest.mark.parametrize("fn_name", ["core", "twin"])
def test_segment_runs_chunk_counts_are_checked(fn_name):
    from cunumpy import _reference

    fn = _core.segment_runs if fn_name == "core" else _reference.segment_runs
    chunk = _core.SEGMENT_RUNS_CHUNK
    keys = np.repeat(np.arange(5), chunk // 2)  # 2.5 chunks
    counts = np.empty(3, np.int64)
    assert fn(keys, counts) == 5
    np.testing.assert_array_equal(counts, [2, 2, 1])
    u, s, e = np.empty(5, np.int64), np.empty(5, np.int64), np.empty(5, np.int64)
    assert fn(keys, u, s, e, counts) == 5
    np.testing.assert_array_equal(s, np.arange(5) * (chunk // 2))
    with pytest.raises(ValueError, match="chunk_runs"):
        fn(keys, np.empty(2, np.int64))  # one entry per chunk
    for bad in ([2, 2, -1], [2, 2, 10**6], [3, 1, 1]):
        with pytest.raises(ValueError, match="chunk_runs|unique|changed"):
            fn(keys, u, s, e, np.array(bad, np.int64))


# ---- the pure-Python twin of the controls ----------------------------------------------------


def test_twin_controls_match_the_c_core(monkeypatch):
    from cunumpy._reference import threads as twin

    for bad, exc in [(0, ValueError), (1025, ValueError), (2.0, TypeError), (True, TypeError)]:
        with pytest.raises(exc, match="'n'"):
            twin.set_num_threads(bad)
    monkeypatch.setattr(twin, "_wanted", 0)
    monkeypatch.setenv("CUNUMPY_NUM_THREADS", " 5 ")
    assert twin.get_num_threads() == 5
    twin.set_num_threads(2)
    assert twin.get_num_threads() == 2 and twin._pool_workers() == 0
    for value in ("0", "4x", "two", "2.5", "1025"):
        monkeypatch.setattr(twin, "_wanted", 0)
        monkeypatch.setenv("CUNUMPY_NUM_THREADS", value)
        with pytest.warns(RuntimeWarning, match="CUNUMPY_NUM_THREADS"):
            assert twin.get_num_threads() == 1
    monkeypatch.setattr(twin, "_wanted", 0)
    monkeypatch.delenv("CUNUMPY_NUM_THREADS")
    assert twin.get_num_threads() == len(os.sched_getaffinity(0))


def test_threads_module_without_the_c_core():
    out = run_python("""
        import sys
        sys.modules["cunumpy._core"] = None
        import cunumpy as xp
        xp.threads.set_num_threads(3)
        with xp.threads.num_threads(1):
            assert xp.threads.get_num_threads() == 1
        assert xp.threads.get_num_threads() == 3
        print("ok")
    """)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


# ---- cell_offsets ------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 65_536, 65_537, 300_007])
@pytest.mark.parametrize("n_cells", [1, 7, 100_000])
def test_cell_offsets_bit_identical_for_every_thread_count(n, n_cells):
    gen = np.random.default_rng(n + n_cells)
    cells = np.sort(gen.integers(0, n_cells, n))
    first = each_count(lambda: (A.cell_offsets(cells, n_cells),))[0]
    want = np.searchsorted(cells, np.arange(n_cells + 1), side="left")
    np.testing.assert_array_equal(first, want)


@pytest.mark.parametrize("where", [5, 65_535, 65_536, 65_537, 200_000])
@pytest.mark.parametrize("kind", ["unsorted", "too large", "negative"])
def test_cell_offsets_reports_the_first_bad_row_for_every_thread_count(where, kind):
    n, n_cells = 300_007, 1000
    cells = np.sort(np.random.default_rng(where).integers(0, n_cells, n))
    cells[where] = {
        "unsorted": cells[where] - 1 if cells[where] > cells[where - 1] else -1,
        "too large": n_cells,
        "negative": -3,
    }[kind]
    if kind == "unsorted" and cells[where] >= cells[where - 1]:
        cells[where] = -1
    cells[where + 1000] = n_cells + 5  # a later bad row must not be the one reported
    for count in COUNTS:
        with T.num_threads(count), pytest.raises(ValueError, match=rf"sorted_cells\[{where}\]"):
            A.cell_offsets(cells, n_cells)


# ---- random_streams draws ---------------------------------------------------------------------

DRAW_SIZES = (1, R._PARALLEL_DRAWS - 1, R._PARALLEL_DRAWS, 400_001, (301, 1001))


def _pair(kind, seed=42):
    """Two generators in the same state, with a buffered 32-bit half-word (from a float32
    draw), which draws of doubles must leave in place."""
    gens = [np.random.Generator(kind(seed)) for _ in range(2)]
    for g in gens:
        g.random(3, dtype=np.float32)
    return gens


@pytest.mark.parametrize("kind", [np.random.PCG64, np.random.PCG64DXSM])
@pytest.mark.parametrize("size", DRAW_SIZES)
def test_random_streams_draws_equal_the_sequential_draws_for_every_thread_count(kind, size):
    streams = R.RandomStreams()
    for count in COUNTS:
        ours, plain = _pair(kind)
        with T.num_threads(count):
            got = (
                streams.random(size, rng=ours),
                streams.uniform(-2.5, 7, size, rng=ours),
                streams.uniform(np.float32(1.5), 3, size, rng=ours),
            )
        want = (plain.random(size), plain.uniform(-2.5, 7, size), plain.uniform(np.float32(1.5), 3, size))
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), f"{count} threads"
        # The generator stands where the sequential draw left it, half-word included.
        assert ours.bit_generator.state == plain.bit_generator.state
        assert ours.random(7, dtype=np.float32).tobytes() == plain.random(7, dtype=np.float32).tobytes()


def test_random_streams_large_draws_use_the_pool_and_the_process_generator_continues():
    T.set_num_threads(2)
    streams = R.RandomStreams().seed(7)
    with xp.use_backend("numpy"):
        _draw_from_process_generator(streams)


def _draw_from_process_generator(streams):
    reference = np.random.Generator(np.random.PCG64(streams._child(R._CHILD_NUMPY)))
    before = _core._pool_jobs() if hasattr(_core, "_pool_jobs") else None
    got = streams.random(300_001)
    if before is not None and R.core.__name__ == "cunumpy._core":
        assert _core._pool_jobs() > before
    assert got.tobytes() == reference.random(300_001).tobytes()
    assert streams.uniform(1, 2, 5).tobytes() == reference.uniform(1, 2, 5).tobytes()


@pytest.mark.parametrize("name", ["MT19937", "Philox", "SFC64"])
def test_random_streams_draws_of_other_bit_generators_stay_sequential(name):
    kind = getattr(np.random, name)
    ours, plain = (np.random.Generator(kind(5)) for _ in range(2))
    with T.num_threads(3):
        assert (
            R.random_streams.random(R._PARALLEL_DRAWS + 3, rng=ours).tobytes()
            == plain.random(R._PARALLEL_DRAWS + 3).tobytes()
        )
    assert ours.random(5).tobytes() == plain.random(5).tobytes()


@pytest.mark.parametrize(
    "low, high, size, exc",
    [
        (0.0, np.inf, 300_000, OverflowError),  # NumPy's own range check
        (-1e308, 1e308, 300_000, OverflowError),
        (1.0, 0.0, 300_000, ValueError),  # high - low < 0
        (0.0, -0.0, 300_000, ValueError),
        (10**400, 1.0, 300_000, OverflowError),
        (0.0, 1.0, -300_000, ValueError),  # NumPy's own size check
        (0.0, 1.0, (300_000, -1), ValueError),
        (0.0, 1.0, 300_000.0, TypeError),
    ],
)
def test_random_streams_draw_errors_are_numpys(low, high, size, exc):
    with T.num_threads(2):
        gen = np.random.Generator(np.random.PCG64(1))
        with pytest.raises(exc) as ours:
            R.random_streams.uniform(low, high, size, rng=gen)
        with pytest.raises(exc) as numpys:
            np.random.Generator(np.random.PCG64(1)).uniform(low, high, size)
        assert str(ours.value) == str(numpys.value)


def test_random_streams_array_bounds_take_numpys_path():
    low = np.array([0.0, 10.0, 20.0])
    ours, plain = (np.random.Generator(np.random.PCG64(3)) for _ in range(2))
    with T.num_threads(2):
        got = R.random_streams.uniform(low, low + 1, (200_000, 3), rng=ours)
    assert got.tobytes() == plain.uniform(low, low + 1, (200_000, 3)).tobytes()


def test_random_streams_one_generator_from_many_python_threads():
    """The bit generator's lock covers the whole parallel draw: draws from several Python
    threads at once are each a contiguous run of the sequential stream, none repeated."""
    gen = np.random.Generator(np.random.PCG64(11))
    n, per_thread = 150_001, 3
    results, errors = [], []

    def worker():
        try:
            for _ in range(per_thread):
                results.append(R.random_streams.random(n, rng=gen))
        except Exception as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(exc)

    T.set_num_threads(2)
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stream = np.random.Generator(np.random.PCG64(11)).random(n * per_thread * 4)
    starts = sorted(int(np.flatnonzero(stream == r[0])[0]) for r in results)
    assert starts == [i * n for i in range(per_thread * 4)]
    for r in results:
        i = int(np.flatnonzero(stream == r[0])[0])
        assert r.tobytes() == stream[i : i + n].tobytes()


@pytest.mark.parametrize("fill", [_core.bitgen_fill, __import__("cunumpy._reference", fromlist=["x"]).bitgen_fill])
def test_bitgen_fill_rejects_bad_input(fill):
    bg = np.random.PCG64(1)
    out = np.empty(10)
    with pytest.raises(TypeError, match="bit_generators"):
        fill([bg], 10, out, 0.0, 1.0, True)
    with pytest.raises(TypeError, match="bit generator 0"):
        fill((object(),), 10, out, 0.0, 1.0, True)
    with pytest.raises(ValueError, match="share one state"):
        fill((bg, bg), 5, out, 0.0, 1.0, True)
    with pytest.raises(ValueError, match="do not cover"):
        fill((bg,), 5, out, 0.0, 1.0, True)
    with pytest.raises(ValueError, match="do not cover"):
        fill((bg, np.random.PCG64(2)), 10, out, 0.0, 1.0, True)
    with pytest.raises(ValueError, match="positive"):
        fill((bg,), 0, out, 0.0, 1.0, True)
    with pytest.raises(TypeError, match="out"):
        fill((bg,), 10, np.empty(10, np.float32), 0.0, 1.0, True)
    with pytest.raises((TypeError, ValueError), match="out"):
        fill((bg,), 10, np.empty(20)[::2], 0.0, 1.0, True)
    ro = np.empty(10)
    ro.flags.writeable = False
    with pytest.raises((TypeError, ValueError), match="out"):
        fill((bg,), 10, ro, 0.0, 1.0, True)
    fill((bg,), 10, out, 0.0, 1.0, True)
    assert out.tobytes() == np.random.Generator(np.random.PCG64(1)).random(10).tobytes()
