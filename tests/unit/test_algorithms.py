"""cunumpy.algorithms: the C core against its pure-Python twins, and the public API on both
backends (NumPy and, with CUNUMPY_FAKE_CUPY=1, the fake CuPy)."""

import contextlib
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import cunumpy as xp
from cunumpy import _reference
from cunumpy._native import HAVE_C_CORE, core

A = xp.algorithms
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

pytestmark = pytest.mark.skipif(not HAVE_C_CORE, reason="the C core is not built")


def dev(a):
    """A new array on the active backend holding a copy of host data."""
    return xp.to_cunumpy(np.array(a))


def host(a):
    return xp.to_numpy(a)


# --------------------------------------------------------------------------- key generators

DISTRIBUTIONS = ["uniform", "sorted", "equal", "sparse", "negative", "reversed"]


def make_keys(rng, n, dtype, dist, high=None):
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    if high is None:
        high = min(info.max, 2**62)
    low = 0
    if dist == "negative" and dtype.kind == "i":
        low = max(info.min, -high)
    if dist == "sparse":
        base = rng.integers(low, high, 7, dtype=dtype, endpoint=False) if high > low else np.zeros(7, dtype)
        k = base[rng.integers(0, 7, n)]
    elif dist == "equal":
        k = np.full(n, rng.integers(low, max(high, low + 1)), dtype=dtype)
    else:
        k = rng.integers(low, max(high, low + 1), n, dtype=dtype)
    if dist == "sorted":
        k = np.sort(k)
    if dist == "reversed":
        k = np.sort(k)[::-1].copy()
    return k.astype(dtype)


sizes = st.sampled_from([0, 1, 2, 3, 7, 31, 64, 255, 1000, 4097])
key_dtypes = st.sampled_from([np.int32, np.uint32, np.int64, np.uint64])
dists = st.sampled_from(DISTRIBUTIONS)


# --------------------------------------------------------------------------- C against twin


def test_the_c_core_is_built():
    assert HAVE_C_CORE


@SETTINGS
@given(
    n=sizes,
    dtype=key_dtypes,
    dist=dists,
    step=st.sampled_from([1, 2, -1]),
    seed=st.integers(0, 2**32 - 1),
    bits=st.sampled_from([None, 3, 30, 33, 63]),
)
def test_radix_argsort_matches_twin(n, dtype, dist, step, seed, bits):
    rng = np.random.default_rng(seed)
    high = None if bits is None else min(2**bits, np.iinfo(dtype).max)
    base = make_keys(rng, n * abs(step), dtype, dist, high)
    keys = base[::step]
    before = keys.copy()
    results = []
    for fn in (core.radix_argsort, _reference.radix_argsort):
        order = np.empty(keys.shape[0], np.int64)
        sk = np.empty(keys.shape[0], keys.dtype)
        fn(keys, order, sk)
        results.append((order, sk))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_array_equal(keys, before)


def test_radix_argsort_extreme_values():
    for dt in (np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(dt)
        keys = np.array([info.max, info.min, 0, 1, info.max, info.min, 5], dtype=dt)
        order = np.empty(7, np.int64)
        sk = np.empty(7, dt)
        core.radix_argsort(keys, order, sk)
        np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
        np.testing.assert_array_equal(sk, np.sort(keys))


@SETTINGS
@given(
    n=sizes,
    m=st.sampled_from([0, 1, 2, 3, 4, 5, 9]),
    nseg=st.sampled_from([0, 1, 3, 100]),
    vdtype=st.sampled_from([np.float32, np.float64]),
    kdtype=st.sampled_from([np.int32, np.int64, np.uint64]),
    dist=dists,
    order=st.sampled_from(["C", "F", "strided"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_segment_sum_into_matches_twin(n, m, nseg, vdtype, kdtype, dist, order, seed):
    rng = np.random.default_rng(seed)
    keys = make_keys(rng, n, kdtype, dist, max(nseg, 1))
    if nseg == 0 and np.dtype(kdtype).kind == "i":
        keys = -np.abs(keys) - 1
    elif nseg == 0:
        keys = keys[:0]
        n = 0
    if np.dtype(kdtype).kind == "i":
        keys[rng.random(n) < 0.2] = -3  # dropped rows
    vals = rng.integers(-50, 50, (n, m)).astype(vdtype)  # integers: sums are exact in any order
    if order == "F":
        vals = np.asfortranarray(vals)
    elif order == "strided":
        vals = np.repeat(vals, 2, axis=1)[:, ::2]
    outs = []
    for fn in (core.segment_sum_into, _reference.segment_sum_into):
        out = np.full((nseg, m), 7, dtype=vdtype)
        fn(vals, keys, out, True)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("vdtype", [np.float32, np.float64])
@pytest.mark.parametrize("kdtype", [np.int32, np.int64, np.uint64])
def test_segment_sum_into_large_inputs_match_twin(vdtype, kdtype):
    """Sizes where the sum is split over two threads (2**18 rows and more, small output)."""
    rng = np.random.default_rng(13)
    n = 300_001
    for nseg, m in ((1000, 1), (50, 3), (7, 5)):
        keys = rng.integers(0, nseg, n).astype(kdtype)
        if np.dtype(kdtype).kind == "i":
            keys[rng.random(n) < 0.1] = -1
        vals = rng.integers(-9, 9, (n, m)).astype(vdtype)
        got, ref = np.empty((nseg, m), vdtype), np.empty((nseg, m), vdtype)
        core.segment_sum_into(vals, keys, got, False)
        _reference.segment_sum_into(vals, keys, ref, False)
        np.testing.assert_array_equal(got, ref)
        bad = keys.copy()
        bad[n - 5] = nseg  # in the second half: the reported row is the absolute one
        with pytest.raises(ValueError, match=rf"keys\[{n - 5}\]"):
            core.segment_sum_into(vals, bad, got, False)


def test_segment_sum_into_out_of_range_writes_nothing_when_checked():
    keys = np.array([0, 1, 5])
    vals = np.ones((3, 1))
    for fn in (core.segment_sum_into, _reference.segment_sum_into):
        out = np.full((2, 1), 9.0)
        with pytest.raises(ValueError, match="keys"):
            fn(vals, keys, out, True)
        np.testing.assert_array_equal(out, 9.0)


@SETTINGS
@given(
    n=sizes,
    ncells=st.sampled_from([0, 1, 2, 50]),
    kdtype=st.sampled_from([np.int32, np.int64, np.uint64]),
    seed=st.integers(0, 2**32 - 1),
    broken=st.sampled_from([None, "unsorted", "range"]),
)
def test_cell_offsets_into_matches_twin(n, ncells, kdtype, seed, broken):
    rng = np.random.default_rng(seed)
    keys = np.sort(rng.integers(0, max(ncells, 1), n)).astype(kdtype)
    if ncells == 0:
        keys = keys[:0]
    if broken == "unsorted" and keys.size > 1 and keys[0] != keys[-1]:
        keys = keys[::-1].copy()
    elif broken == "range" and keys.size:
        keys[-1] = ncells
    else:
        broken = None
    results = []
    for fn in (core.cell_offsets_into, _reference.cell_offsets_into):
        out = np.empty(ncells + 1, np.int64)
        if broken:
            with pytest.raises(ValueError, match="sorted_cells"):
                fn(keys, ncells, out)
        else:
            fn(keys, ncells, out)
            results.append(out)
    if not broken:
        np.testing.assert_array_equal(results[0], results[1])


@SETTINGS
@given(
    n=sizes,
    dtype=st.sampled_from([np.int32, np.uint32, np.int64, np.uint64]),
    dist=dists,
    seed=st.integers(0, 2**32 - 1),
)
def test_segment_runs_matches_twin(n, dtype, dist, seed):
    rng = np.random.default_rng(seed)
    keys = make_keys(rng, n, dtype, dist)
    for k in (np.sort(keys), np.sort(keys)[::-1]):
        is_sorted = k.size < 2 or bool(np.all(k[1:] >= k[:-1]))
        if not is_sorted:
            for fn in (core.segment_runs, _reference.segment_runs):
                with pytest.raises(ValueError, match="sorted_keys"):
                    fn(k)
            continue
        runs = core.segment_runs(k)
        assert runs == _reference.segment_runs(k)
        got = [np.empty(runs, k.dtype), np.empty(runs, np.int64), np.empty(runs, np.int64)]
        ref = [np.empty(runs, k.dtype), np.empty(runs, np.int64), np.empty(runs, np.int64)]
        core.segment_runs(k, *got)
        _reference.segment_runs(k, *ref)
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("method", ["magic", "pdep"])
@SETTINGS
@given(
    n=sizes,
    ndim=st.sampled_from([2, 3]),
    levels=st.integers(1, 32),
    seed=st.integers(0, 2**32 - 1),
    order=st.sampled_from(["C", "F", "strided"]),
    flip=st.booleans(),
)
def test_morton_keys_into_matches_twin(method, n, ndim, levels, seed, order, flip):
    levels = min(levels, A.MAX_MORTON_LEVELS[ndim])
    if method == "pdep":
        try:
            core.morton_method("pdep")
        except ValueError:
            pytest.skip("no BMI2 on this processor")
    else:
        core.morton_method("magic")
    try:
        rng = np.random.default_rng(seed)
        lower, upper = np.full(ndim, -1.0), np.full(ndim, 2.0)
        if flip:
            lower[0], upper[0] = upper[0], lower[0]
        pos = rng.uniform(-1.5, 2.5, (n, ndim))  # some points outside the box
        if n > 2:
            pos[0] = upper  # upper boundary goes to the last cell
            pos[1] = lower
        if order == "F":
            pos = np.asfortranarray(pos)
        elif order == "strided":
            pos = np.repeat(pos, 2, axis=0)[::2]
        scale = A.morton_scales(lower, upper, levels)
        got = np.empty(n, np.uint64)
        ref = np.empty(n, np.uint64)
        core.morton_keys_into(pos, tuple(lower), tuple(scale), levels, got)
        _reference.morton_keys_into(pos, tuple(lower), tuple(scale), levels, ref)
        np.testing.assert_array_equal(got, ref)
        cells = [np.empty(n, np.uint64) for _ in range(ndim)]
        core.morton_decode_into(got, tuple(cells))
        assert all(int(c.max(initial=0)) < 2**levels for c in cells)
        again = np.empty(n, np.uint64)
        core.morton_encode_into(tuple(cells), again)
        np.testing.assert_array_equal(again, got)
        twin = [np.empty(n, np.uint64) for _ in range(ndim)]
        _reference.morton_decode_into(got, tuple(twin))
        for c, t in zip(cells, twin):
            np.testing.assert_array_equal(c, t)
    finally:
        core.morton_method("auto")


def test_morton_method_switch():
    assert core.morton_method() in ("pdep", "magic")
    assert core.morton_method("magic") == "magic"
    assert core.morton_method("auto") in ("pdep", "magic")
    with pytest.raises(ValueError, match="name"):
        core.morton_method("fast")


def test_morton_non_finite_names_the_row():
    pos = np.zeros((4, 3))
    pos[2, 1] = np.nan
    for fn in (core.morton_keys_into, _reference.morton_keys_into):
        with pytest.raises(ValueError, match="row 2"):
            fn(pos, (0.0,) * 3, (1.0,) * 3, 5, np.empty(4, np.uint64))


@SETTINGS
@given(
    n=sizes,
    narrays=st.integers(0, 4),
    seed=st.integers(0, 2**32 - 1),
    density=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]),
    prefix=st.integers(0, 40),
)
def test_compact_in_place_matches_twin(n, narrays, seed, density, prefix):
    rng = np.random.default_rng(seed)
    mask = rng.random(n) < density
    mask[: min(prefix, n)] = True
    shapes = [(n,), (n, 3), (n, 2, 2), (n, 5)]
    dtypes = [np.float64, np.int32, np.uint8, np.complex128]
    arrays = [rng.integers(0, 100, shapes[i % 4]).astype(dtypes[i % 4]) for i in range(narrays)]
    twins = [a.copy() for a in arrays]
    count = core.compact_in_place(mask, tuple(arrays))
    assert count == _reference.compact_in_place(mask, tuple(twins)) == int(mask.sum())
    for a, t in zip(arrays, twins):
        np.testing.assert_array_equal(a[:count], t[:count])


def test_compact_in_place_lanes_and_strided_mask():
    rng = np.random.default_rng(1)
    n = 1000
    base_mask = rng.random(2 * n) < 0.4
    mask = base_mask[::2]
    comp = rng.random((3, n))  # component-major, compacted along the last axis
    fort = np.asfortranarray(rng.random((n, 4)))
    expect_c = comp[:, mask].copy()
    expect_f = fort[mask].copy()
    count = core.compact_in_place(mask, (np.moveaxis(comp, 1, 0), fort))
    assert count == mask.sum()
    np.testing.assert_array_equal(comp[:, :count], expect_c)
    np.testing.assert_array_equal(fort[:count], expect_f)


@SETTINGS
@given(
    n=sizes,
    seed=st.integers(0, 2**64 - 1),
    stream=st.integers(0, 2**64 - 1),
    kind=st.integers(0, 3),
    scalar=st.booleans(),
)
def test_philox_fill_matches_twin(n, seed, stream, kind, scalar):
    counter = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    s = np.array([seed], np.uint64)
    st_ = np.array([stream], np.uint64) if scalar else np.full(n, stream, np.uint64)
    two = kind in (1, 3)
    got = [np.empty(n) for _ in range(1 + two)]
    ref = [np.empty(n) for _ in range(1 + two)]
    if n == 0 and not scalar:
        st_ = np.array([stream], np.uint64)
    core.philox_fill(kind, s, st_, counter, *got, *([None] if not two else []))
    _reference.philox_fill(kind, s, st_, counter, *ref)
    for g, r in zip(got, ref):
        if kind < 2:
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(g, r, rtol=1e-13, atol=1e-13)


def test_philox4x32_10_into_matches_twin():
    rng = np.random.default_rng(3)
    ctr = rng.integers(0, 2**32, (100, 4), dtype=np.uint64).astype(np.uint32)
    k0 = rng.integers(0, 2**32, 100, dtype=np.uint64).astype(np.uint32)
    k1 = np.array([12345], np.uint32)
    got, ref = np.empty((100, 4), np.uint32), np.empty((100, 4), np.uint32)
    core.philox4x32_10_into(ctr.reshape(-1), k0, k1, got.reshape(-1))
    _reference.philox4x32_10_into(ctr.reshape(-1), k0, k1, ref.reshape(-1))
    np.testing.assert_array_equal(got, ref)


def test_c_functions_reject_bad_buffers():
    with pytest.raises(TypeError, match="keys"):
        core.radix_argsort(np.zeros(3), np.empty(3, np.int64), np.empty(3))
    with pytest.raises(ValueError, match="order"):
        core.radix_argsort(np.zeros(3, np.int64), np.empty(2, np.int64), np.empty(3, np.int64))
    with pytest.raises(ValueError, match="out"):
        core.morton_keys_into(np.zeros((3, 2)), (0.0, 0.0), (1.0, 1.0), 4, np.empty(2, np.uint64))
    with pytest.raises(ValueError, match="writable"):
        ro = np.empty(3, np.uint64)
        ro.flags.writeable = False
        core.morton_keys_into(np.zeros((3, 2)), (0.0, 0.0), (1.0, 1.0), 4, ro)
    with pytest.raises(ValueError, match="levels"):
        core.morton_keys_into(np.zeros((3, 3)), (0.0,) * 3, (1.0,) * 3, 22, np.empty(3, np.uint64))
    with pytest.raises(TypeError, match="mask"):
        core.compact_in_place(np.ones(3, np.uint8), (np.zeros(3),))
    with pytest.raises(ValueError, match="array 0"):
        core.compact_in_place(np.ones(3, bool), (np.zeros(4),))
    with pytest.raises(ValueError, match="keys"):
        core.segment_sum_into(np.zeros((3, 1)), np.zeros(2, np.int64), np.zeros((1, 1)), True)
    with pytest.raises(TypeError, match="values"):
        core.segment_sum_into(np.zeros((3, 1), np.int64), np.zeros(3, np.int64), np.zeros((1, 1)), True)
    with pytest.raises(ValueError, match="seed"):
        core.philox_fill(0, np.zeros(2, np.uint64), np.zeros(1, np.uint64), np.zeros(3, np.uint64), np.empty(3))


def _rss_pages():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1])


@pytest.mark.nosan  # AddressSanitizer's quarantine keeps freed memory on purpose
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_c_functions_do_not_leak():
    rng = np.random.default_rng(0)
    keys = rng.integers(-5, 50, 500)
    vals = rng.random((500, 3))
    pos = rng.random((500, 3))
    mask = rng.random(500) < 0.5

    def calls():
        order, sk = np.empty(500, np.int64), np.empty(500, np.int64)
        core.radix_argsort(keys, order, sk)
        core.segment_sum_into(vals, keys, np.empty((50, 3)), True)
        core.morton_keys_into(pos, (0.0,) * 3, (8.0,) * 3, 3, np.empty(500, np.uint64))
        core.compact_in_place(mask, (vals.copy(), pos.copy()))
        core.philox_fill(
            2, np.ones(1, np.uint64), np.ones(1, np.uint64), np.arange(500, dtype=np.uint64), np.empty(500)
        )
        core.segment_runs(sk)
        with contextlib.suppress(ValueError):
            core.segment_sum_into(vals, keys, np.empty((10, 3)), True)

    for _ in range(200):
        calls()
    before = _rss_pages()
    for _ in range(2000):
        calls()
    grown_kib = (_rss_pages() - before) * os.sysconf("SC_PAGE_SIZE") / 1024
    assert grown_kib < 4096, f"process memory grew by {grown_kib:.0f} KiB over 2000 calls"


# --------------------------------------------------------------------------- public API, both backends


def test_spec_worked_example(on_backend):
    cells = dev([2, 0, 2, 4, 0])
    sk, order, moved = A.sort_by_key(cells, dev([10, 11, 12, 13, 14]))
    np.testing.assert_array_equal(host(sk), [0, 0, 2, 2, 4])
    np.testing.assert_array_equal(host(order), [1, 4, 0, 2, 3])
    assert host(order).dtype == np.int64
    np.testing.assert_array_equal(host(moved), [11, 14, 10, 12, 13])
    np.testing.assert_array_equal(host(A.cell_offsets(sk, 6)), [0, 2, 2, 4, 4, 5, 5])
    unique, starts, stops = A.segment_boundaries(sk)
    np.testing.assert_array_equal(host(unique), [0, 2, 4])
    np.testing.assert_array_equal(host(starts), [0, 2, 4])
    np.testing.assert_array_equal(host(stops), [2, 4, 5])
    for r in (sk, order, moved, unique, starts, stops):
        assert xp.get_array_backend(r) == on_backend


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float64, np.bool_])
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_sort_by_key_is_a_stable_argsort(on_backend, dtype, dist):
    rng = np.random.default_rng(5)
    if dtype is np.float64:
        keys = rng.normal(size=301).round(1)
    elif dtype is np.bool_:
        keys = rng.random(301) < 0.5
    else:
        keys = make_keys(rng, 301, dtype, dist)
    payload = rng.random((301, 2))
    comp = rng.random((3, 301))
    dk, dp, dc = dev(keys), dev(payload), dev(comp)
    sk, order, sp = A.sort_by_key(dk, dp)
    expect = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(host(order), expect)
    np.testing.assert_array_equal(host(sk), keys[expect])
    np.testing.assert_array_equal(host(sp), payload[expect])
    _, _, sc, s1 = A.sort_by_key(dk, dc, dev(keys), axis=-1)
    np.testing.assert_array_equal(host(sc), comp[:, expect])
    np.testing.assert_array_equal(host(s1), keys[expect])
    np.testing.assert_array_equal(host(dk), keys)  # inputs untouched
    np.testing.assert_array_equal(host(dp), payload)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_radix_argsort_large_inputs_match_twin(dtype, dist):
    """Sizes above the cut-over to the MSD-then-LSD path (64 Ki keys)."""
    rng = np.random.default_rng(11)
    for bits in (20, 30, 40, 62):
        keys = make_keys(rng, 70_001, dtype, dist, min(2**bits, np.iinfo(dtype).max))
        order, sk = np.empty(keys.size, np.int64), np.empty(keys.size, keys.dtype)
        core.radix_argsort(keys, order, sk)
        np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
        np.testing.assert_array_equal(sk, np.sort(keys, kind="stable"))


def test_sort_by_key_large_wide_keys(on_backend):
    rng = np.random.default_rng(9)
    keys = rng.integers(-(2**62), 2**62, 200_003)
    _sk, order = A.sort_by_key(dev(keys))
    np.testing.assert_array_equal(host(order), np.argsort(keys, kind="stable"))


def test_sort_by_key_errors(on_backend):
    with pytest.raises(ValueError, match="keys"):
        A.sort_by_key(dev(np.zeros((2, 2), np.int64)))
    with pytest.raises(ValueError, match=r"expected 3.*|3.*axis"):
        A.sort_by_key(dev([1, 2, 3]), dev(np.zeros(4)))
    with pytest.raises(ValueError, match="axis 2"):
        A.sort_by_key(dev([1, 2, 3]), dev(np.zeros((3, 2))), axis=2)
    with pytest.raises(ValueError, match="3"):
        A.sort_by_key(dev([1, 2, 3]), dev(np.zeros((3, 4))), axis=-1)


def test_mixed_backends_raise_type_error(device_only):
    d = xp.asarray([0, 1, 1])
    h = np.array([0, 1, 1])
    with pytest.raises(TypeError):
        A.sort_by_key(d, h)
    with pytest.raises(TypeError):
        A.segment_sum(h.astype(float), d, 2)
    with pytest.raises(TypeError):
        A.compact_by_mask(xp.asarray([True, False, True]), h)
    with pytest.raises(TypeError):
        A.segment_sum(xp.asarray([1.0, 2.0, 3.0]), d, 2, out=np.zeros(2))
    plan = A.SegmentPlan(h, 2)
    with pytest.raises(TypeError):
        plan.sum(xp.asarray([1.0, 2.0, 3.0]))


@pytest.mark.parametrize(
    "vdtype", [np.float16, np.float32, np.float64, np.complex64, np.complex128, np.int32, np.bool_]
)
@pytest.mark.parametrize("trailing", [(), (3,), (2, 2)])
def test_segment_sum(on_backend, vdtype, trailing):
    rng = np.random.default_rng(2)
    n, nseg = 500, 17
    keys = rng.integers(-3, nseg, n)
    vals = (rng.integers(-8, 8, (n, *trailing)) * (1 + 1j if np.dtype(vdtype).kind == "c" else 1)).astype(vdtype)
    expect_dtype = np.dtype(vdtype) if np.dtype(vdtype).kind in "fc" else np.dtype(np.float64)
    expect = np.zeros((nseg, *trailing), dtype=np.complex128 if expect_dtype.kind == "c" else np.float64)
    live = keys >= 0
    np.add.at(expect, keys[live], vals[live].astype(expect.dtype))
    got = A.segment_sum(dev(vals), dev(keys), nseg)
    assert got.dtype == expect_dtype and got.shape == (nseg, *trailing)
    np.testing.assert_array_equal(host(got), expect.astype(expect_dtype))
    out = dev(np.full((nseg, *trailing), 99, dtype=expect_dtype))
    assert A.segment_sum(dev(vals), dev(keys), nseg, out=out) is out
    np.testing.assert_array_equal(host(out), expect.astype(expect_dtype))  # overwritten, not accumulated
    if np.dtype(vdtype).kind in "fc" or on_backend == "numpy":  # CUDA plans sum floats only
        plan = A.SegmentPlan(dev(keys), nseg)
        np.testing.assert_array_equal(host(plan.sum(dev(vals))), expect.astype(expect_dtype))


def test_segment_sum_float16_accumulates_in_float32(on_backend):
    vals = np.full(4096, 0.5, dtype=np.float16)  # float16 alone stalls at 1024 + ...
    got = A.segment_sum(dev(vals), dev(np.zeros(4096, np.int64)), 1)
    assert got.dtype == np.float16
    assert float(host(got)[0]) == 2048.0


def test_segment_sum_edge_cases(on_backend):
    assert host(A.segment_sum(dev(np.zeros((0, 2))), dev(np.zeros(0, np.int64)), 3)).tolist() == [[0, 0]] * 3
    assert A.segment_sum(dev(np.ones(3)), dev([-1, -1, -2]), 0).shape == (0,)
    strided = np.arange(20.0).reshape(10, 2)[::2, 1]
    keys = np.array([0, 1, 0, 1, 0])
    np.testing.assert_array_equal(host(A.segment_sum(dev(strided), dev(keys), 2)), [1 + 9 + 17, 5 + 13])
    keys_u = np.array([0, 1, 2], np.uint64)
    np.testing.assert_array_equal(host(A.segment_sum(dev(np.ones(3)), dev(keys_u), 3)), [1, 1, 1])


def test_segment_sum_errors_write_nothing(on_backend):
    vals = dev(np.ones((4, 2)))
    keys = dev(np.array([0, 1, 2, 3]))
    out = dev(np.full((3, 2), 5.0))
    with pytest.raises(ValueError, match="keys"):
        A.segment_sum(vals, keys, 3, out=out)
    np.testing.assert_array_equal(host(out), 5.0)
    with pytest.raises(TypeError, match="keys"):
        A.segment_sum(vals, dev(np.zeros(4)), 3)
    with pytest.raises(ValueError, match="keys"):
        A.segment_sum(vals, dev(np.zeros((4, 1), np.int64)), 3)
    with pytest.raises(ValueError, match="row"):
        A.segment_sum(vals, dev(np.zeros(5, np.int64)), 3)
    with pytest.raises(ValueError, match="n_segments"):
        A.segment_sum(vals, keys, -1)
    with pytest.raises(TypeError, match="n_segments"):
        A.segment_sum(vals, keys, 2.5)
    if on_backend == "numpy":  # CuPy has no string arrays
        with pytest.raises(TypeError, match="values"):
            A.segment_sum(np.array(["a", "b", "c", "d"]), keys, 4)
    good_keys = dev(np.array([0, 1, 2, 2]))
    for bad_out, what in [
        (np.zeros((3, 3)), "shape"),
        (np.zeros((3, 2), np.float32), "dtype"),
        (np.zeros((2, 3)).T, "contiguous"),
    ]:
        with pytest.raises(ValueError, match=what):
            A.segment_sum(vals, good_keys, 3, out=dev(bad_out))
    big = dev(np.ones((8, 2)))
    with pytest.raises(ValueError, match="share memory"):
        A.segment_sum(big[:4], good_keys, 3, out=big[1:4])
    if on_backend == "numpy":
        ro = np.zeros((3, 2))
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="writable"):
            A.segment_sum(vals, good_keys, 3, out=ro)


def test_segment_plan(on_backend):
    keys = np.array([0, 2, -1, 2, 1])
    dk = dev(keys)
    plan = A.SegmentPlan(dk, 3)
    assert plan.n_segments == 3
    with pytest.raises(AttributeError):
        plan.n_segments = 4
    dk[0] = 2  # the plan copied the keys
    vals = dev(np.arange(5.0))
    np.testing.assert_array_equal(host(plan.sum(vals)), [0, 4, 4])
    out = dev(np.full(3, -1.0))
    assert plan.sum(vals, out=out) is out
    assert plan.sum(vals, out=out) is out  # still overwritten, not accumulated
    np.testing.assert_array_equal(host(out), [0, 4, 4])
    with pytest.raises(ValueError):
        plan.sum(dev(np.arange(4.0)))
    with pytest.raises(ValueError, match="n_segments"):
        A.SegmentPlan(dev(keys), 2)
    with pytest.raises(TypeError):
        A.SegmentPlan(dev(keys.astype(float)), 3)
    with pytest.raises(ValueError):
        A.SegmentPlan(dev(keys.reshape(5, 1)), 3)
    with pytest.raises(ValueError):
        A.SegmentPlan(dev(keys), -1)


def test_segment_plan_device_rules(device_only):
    plan = A.SegmentPlan(xp.asarray([0, 1, 1]), 2)
    with pytest.raises(TypeError):
        plan.sum(xp.asarray(np.array([1, 2, 3], np.int64)))  # CUDA sums floating/complex only
    np.testing.assert_array_equal(host(plan.sum(xp.asarray([1.0, 2.0, 3.0]))), [1, 5])


RUN_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def _runs_keys(dtype, n, seed):
    """Sorted keys over the dtype's whole range (negative, and above INT64_MAX for uint64) with
    random run lengths: runs start anywhere in the 64-row blocks and across 64K-row chunks."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    lengths = rng.geometric(1 / 40, size=n)
    values = np.sort(rng.integers(info.min, info.max, size=lengths.size, dtype=dtype, endpoint=True))
    values[0], values[-1] = info.min, info.max
    return np.repeat(values, lengths)[:n]


def _expected_runs(k):
    first = np.concatenate(([0], np.flatnonzero(k[1:] != k[:-1]) + 1)).astype(np.int64)
    return k[first], first, np.append(first[1:], k.size).astype(np.int64)


@pytest.mark.parametrize("dtype", RUN_DTYPES)
@pytest.mark.parametrize("n", [1, 63, 64, 65, 129, 1000, 65_536 + 200, 140_001])
def test_segment_boundaries_every_key_type(on_backend, dtype, n):
    k = _runs_keys(dtype, n, n)
    got = A.segment_boundaries(dev(k))
    for g, e in zip(got, _expected_runs(k)):
        assert host(g).dtype == e.dtype
        np.testing.assert_array_equal(host(g), e)


@pytest.mark.parametrize("dtype", RUN_DTYPES)
def test_segment_runs_strided_keys_match_contiguous_and_twin(dtype):
    k = _runs_keys(dtype, 70_001, 3)
    table = np.zeros((k.size, 3), dtype)
    table[:, 1] = k
    for view in (table[:, 1], np.repeat(k, 2)[::2]):
        assert not view.flags.c_contiguous
        runs = core.segment_runs(view)
        assert runs == _reference.segment_runs(view) == core.segment_runs(k)
        got = [np.empty(runs, dtype), np.empty(runs, np.int64), np.empty(runs, np.int64)]
        core.segment_runs(view, *got)
        for g, e in zip(got, _expected_runs(k)):
            np.testing.assert_array_equal(g, e)
        for g, e in zip(A.segment_boundaries(view), _expected_runs(k)):
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("dtype", RUN_DTYPES)
@pytest.mark.parametrize("where", [1, 64, 100, 127, 32_777, 65_536 + 3_000])
@pytest.mark.parametrize("strided", [False, True])
def test_segment_runs_report_an_unsorted_row_inside_a_block(dtype, where, strided):
    k = np.sort(_runs_keys(dtype, 70_000, 5))
    info = np.iinfo(dtype)
    k[where - 1], k[where] = info.max, info.min  # the first row smaller than its predecessor
    k[where + 6], k[where + 7] = info.max, info.min  # a later one in the same block: not reported
    view = np.repeat(k, 2)[::2] if strided else k
    for fn in (core.segment_runs, lambda keys: A.segment_boundaries(keys)):
        with pytest.raises(ValueError, match=rf"sorted_keys\[{where}\] < sorted_keys\[{where - 1}\]"):
            fn(view)
    with pytest.raises(ValueError, match="sorted_keys"):
        _reference.segment_runs(view)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint8])
def test_segment_runs_fill_with_forged_counts_never_writes_past_them(dtype):
    """A fill trusts chunk_runs for the sizes: unsorted keys, or more runs than the counts say
    (what a writer between the two passes gives), must raise, and write only what was sized."""
    k = _runs_keys(dtype, 70_000, 9)
    counts = np.empty(2, np.int64)
    runs = core.segment_runs(k, counts)
    short = counts.copy()
    short[0] -= 3
    outs = [np.empty(runs - 3, dtype), np.empty(runs - 3, np.int64), np.empty(runs - 3, np.int64)]
    with pytest.raises(ValueError, match="changed"):
        core.segment_runs(k, *outs, short)
    broken = k.copy()
    broken[4_999], broken[5_000] = np.iinfo(dtype).max, np.iinfo(dtype).min
    outs = [np.empty(runs, dtype), np.empty(runs, np.int64), np.empty(runs, np.int64)]
    with pytest.raises(ValueError, match="changed"):
        core.segment_runs(broken, *outs, counts)


def test_cell_offsets_and_boundaries(on_backend):
    np.testing.assert_array_equal(host(A.cell_offsets(dev(np.zeros(0, np.int64)), 3)), [0, 0, 0, 0])
    np.testing.assert_array_equal(host(A.cell_offsets(dev(np.zeros(0, np.int64)), 0)), [0])
    with pytest.raises(ValueError, match="sorted"):
        A.cell_offsets(dev([1, 0]), 3)
    with pytest.raises(ValueError, match="n_cells"):
        A.cell_offsets(dev([0, 3]), 3)
    with pytest.raises(ValueError):
        A.cell_offsets(dev([-1, 0]), 3)
    with pytest.raises(TypeError):
        A.cell_offsets(dev([0.0, 1.0]), 3)
    big = np.array([0, 2**63, 2**63, 2**64 - 1], np.uint64)
    u, s, e = A.segment_boundaries(dev(big))
    assert host(u).dtype == np.uint64
    np.testing.assert_array_equal(host(u), [0, 2**63, 2**64 - 1])
    np.testing.assert_array_equal(host(s), [0, 1, 3])
    np.testing.assert_array_equal(host(e), [1, 3, 4])
    u, s, e = A.segment_boundaries(dev(np.array([-5, -5, 3], np.int16)))
    np.testing.assert_array_equal(host(u), [-5, 3])
    assert host(u).dtype == np.int16
    for r in A.segment_boundaries(dev(np.zeros(0, np.int64))):
        assert r.shape == (0,)
    with pytest.raises(ValueError, match="sorted"):
        A.segment_boundaries(dev([3, 1]))
    with pytest.raises(TypeError):
        A.segment_boundaries(dev([0.5]))
    with pytest.raises(ValueError):
        A.segment_boundaries(dev(np.zeros((2, 2), np.int64)))


@pytest.mark.parametrize("ndim", [2, 3])
def test_morton_keys_public(on_backend, ndim):
    rng = np.random.default_rng(4)
    lower, upper = [-1.0] * ndim, [1.0] * ndim
    levels = A.MAX_MORTON_LEVELS[ndim]
    pos = rng.uniform(-1.2, 1.2, (257, ndim))
    pos[0] = upper
    keys = A.morton_keys(dev(pos), lower, upper, levels)
    assert keys.dtype == np.uint64 and xp.get_array_backend(keys) == on_backend
    scale = A.morton_scales(lower, upper, levels)
    np.testing.assert_array_equal(host(keys), _reference.keys_from_positions(pos, np.array(lower), scale, levels))
    cells = A.morton_decode(keys, ndim)
    assert host(cells[0])[0] == 2**levels - 1  # the upper boundary is in the last cell
    np.testing.assert_array_equal(host(A.morton_encode(*cells)), host(keys))
    # node index at level L: the key shifted; after sorting every node is contiguous
    sk = np.sort(host(keys))
    node = sk >> np.uint64(ndim * (levels - 2))
    assert np.all(np.diff(node.astype(np.int64)) >= 0)


def test_morton_reversed_axis_and_encode_bits(on_backend):
    k1 = host(A.morton_keys(dev([[0.1, 0.2]]), [0, 0], [1, 1], 4))
    k2 = host(A.morton_keys(dev([[0.9, 0.2]]), [1, 0], [0, 1], 4))
    np.testing.assert_array_equal(k1, k2)
    key = host(A.morton_encode(dev([1]), dev([0]), dev([1])))
    assert key.tolist() == [0b101]
    key = host(A.morton_encode(dev([[3], [1]]), dev([0, 2])))  # broadcasting
    assert key.shape == (2, 2)
    assert key[0, 1] == 0b1101  # x = 3, y = 2


def test_morton_errors(on_backend):
    with pytest.raises(ValueError):
        A.morton_scales([0, 0], [1, 1, 1], 4)
    with pytest.raises(ValueError):
        A.morton_scales([0, 0, 0, 0], [1, 1, 1, 1], 4)
    with pytest.raises(ValueError):
        A.morton_scales([0, 0], [1, 0], 4)
    with pytest.raises(ValueError):
        A.morton_scales([0, 0, 0], [1, 1, 1], 22)
    with pytest.raises(ValueError):
        A.morton_scales([0, 0], [1, 1], 0)
    with pytest.raises(ValueError):
        A.morton_keys(dev(np.zeros((3, 4))), [0, 0], [1, 1], 4)
    with pytest.raises(ValueError):
        A.morton_keys(dev(np.zeros((3, 3))), [0, 0], [1, 1], 4)
    with pytest.raises(ValueError, match="finite"):
        A.morton_keys(dev([[0.0, np.inf]]), [0, 0], [1, 1], 4)
    with pytest.raises(ValueError):
        A.morton_encode(dev([1]))
    with pytest.raises(TypeError):
        A.morton_encode(dev([1.0]), dev([1]))
    with pytest.raises(ValueError):
        A.morton_encode(dev([-1]), dev([1]))
    with pytest.raises(ValueError):
        A.morton_encode(dev([2**21]), dev([1]), dev([1]))
    with pytest.raises(ValueError):
        A.morton_decode(dev(np.zeros(2, np.uint64)), 4)
    assert isinstance(A.morton_scales([0, 0], [2, 4], 3), np.ndarray)
    np.testing.assert_array_equal(A.morton_scales([0, 0], [2, 4], 3), [4.0, 2.0])


@pytest.mark.parametrize("axis", [0, -1])
def test_compact_by_mask(on_backend, axis):
    rng = np.random.default_rng(6)
    n = 1001
    mask = rng.random(n) < 0.3
    a = rng.random(n)
    b = rng.random((n, 3)) if axis == 0 else rng.random((3, n))
    c = rng.integers(0, 9, n).astype(np.int32)
    da, db, dc = dev(a), dev(b), dev(c)
    count = A.compact_by_mask(dev(mask), da, db, dc, axis=axis)
    assert isinstance(count, int) and count == mask.sum()
    np.testing.assert_array_equal(host(da)[:count], a[mask])
    np.testing.assert_array_equal(host(dc)[:count], c[mask])
    if axis == 0:
        np.testing.assert_array_equal(host(db)[:count], b[mask])
    else:
        np.testing.assert_array_equal(host(db)[:, :count], b[:, mask])


def test_compact_by_mask_views_stay_inside(on_backend):
    base = np.arange(20.0)
    dbase = dev(base)
    view = dbase[2:12:2]  # 5 entries
    count = A.compact_by_mask(dev(np.array([False, True, False, True, True])), view)
    assert count == 3
    got = host(dbase)
    np.testing.assert_array_equal(got[2:8:2], [4.0, 8.0, 10.0])
    untouched = np.ones(20, bool)
    untouched[2:12:2] = False
    np.testing.assert_array_equal(got[untouched], base[untouched])


def test_compact_by_mask_same_array_twice(on_backend):
    a = dev(np.arange(6.0))
    assert A.compact_by_mask(dev(np.array([False, True, True, False, True, True])), a, a) == 4
    np.testing.assert_array_equal(host(a)[:4], [1.0, 2.0, 4.0, 5.0])


def test_compact_by_mask_errors(on_backend):
    a = dev(np.arange(4.0))
    with pytest.raises(TypeError, match="mask"):
        A.compact_by_mask(dev([1, 0, 1, 0]), a)
    with pytest.raises(ValueError, match="4"):
        A.compact_by_mask(dev(np.ones(3, bool)), a)
    with pytest.raises(ValueError):
        A.compact_by_mask(dev(np.ones(4, bool)), dev(np.zeros((4, 2))), axis=2)
    np.testing.assert_array_equal(host(a), np.arange(4.0))  # nothing written
    assert A.compact_by_mask(dev(np.zeros(0, bool))) == 0
    # a second array with a bad length: the first stays untouched
    b = dev(np.arange(4.0))
    with pytest.raises(ValueError):
        A.compact_by_mask(dev(np.array([False, True, True, False])), b, dev(np.zeros(5)))
    np.testing.assert_array_equal(host(b), np.arange(4.0))


def test_cupy_code_paths_on_the_fake(device_only, monkeypatch):
    """The real-GPU code paths (CuPy calls, no host buffers) run on the strict fake CuPy too."""
    from cunumpy import algorithms
    from cunumpy._algorithms import compact, morton, segments, sort
    from cunumpy._backend import fake_cupy_active

    if not fake_cupy_active():
        pytest.skip("on a real GPU these paths run in every other test")
    real_side = algorithms._side
    for part in (compact, morton, segments, sort):  # each part of cunumpy.algorithms looks _side up itself
        monkeypatch.setattr(part, "_side", lambda *a: "cupy" if real_side(*a) != "numpy" else "numpy")
    rng = np.random.default_rng(12)
    keys = rng.integers(-2, 10, 200)
    vals = rng.random((200, 3))
    expect = np.zeros((10, 3))
    np.add.at(expect, keys[keys >= 0], vals[keys >= 0])
    dk, dv = xp.asarray(keys), xp.asarray(vals)
    np.testing.assert_allclose(host(A.segment_sum(dv, dk, 10)), expect)
    np.testing.assert_allclose(host(A.segment_sum(xp.asarray(vals * 1j), dk, 10)), expect * 1j)
    assert A.segment_sum(xp.asarray(vals.astype(np.float16)), dk, 10).dtype == np.float16
    plan = A.SegmentPlan(dk, 10)
    out = xp.zeros((10, 3))
    assert plan.sum(dv, out=out) is out
    np.testing.assert_allclose(host(out), expect)
    with pytest.raises(ValueError, match="keys"):
        A.segment_sum(dv, dk, 5)
    _sk, order, moved = A.sort_by_key(dk, dv)
    np.testing.assert_array_equal(host(order), np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(host(moved), vals[np.argsort(keys, kind="stable")])
    cells = np.sort(rng.integers(0, 5, 50))
    np.testing.assert_array_equal(host(A.cell_offsets(xp.asarray(cells), 6)), np.searchsorted(cells, np.arange(7)))
    u, st_, sp = A.segment_boundaries(xp.asarray(cells))
    np.testing.assert_array_equal(host(u), np.unique(cells))
    np.testing.assert_array_equal(host(sp) - host(st_), np.unique(cells, return_counts=True)[1])
    mask = rng.random(200) < 0.5
    comp = xp.asarray(vals.T.copy())
    assert A.compact_by_mask(xp.asarray(mask), comp, axis=-1) == mask.sum()
    np.testing.assert_array_equal(host(comp)[:, : mask.sum()], vals.T[:, mask])
    pos = rng.random((50, 3))
    k = A.morton_keys(xp.asarray(pos), [0, 0, 0], [1, 1, 1], 21)
    np.testing.assert_array_equal(
        host(k), _reference.keys_from_positions(pos, np.zeros(3), A.morton_scales([0] * 3, [1] * 3, 21), 21)
    )
    np.testing.assert_array_equal(host(A.morton_encode(*A.morton_decode(k, 3))), host(k))


# --------------------------------------------------------------------------- CUDA headers

HEADERS = os.path.join(os.path.dirname(xp.__file__), "cuda", "include")

HOST_SHIM = r"""
#include <cunumpy/random.cuh>
#include <cunumpy/morton.cuh>
extern "C" {
void uniforms(long n, const unsigned long long* s, const unsigned long long* st,
              const unsigned long long* c, double* u, double* z0, double* z1) {
    for (long i = 0; i < n; ++i) {
        u[i] = cunumpy_uniform(s[i], st[i], c[i]);
        cunumpy_normal2(s[i], st[i], c[i], &z0[i], &z1[i]);
    }
}
void keys3(long n, const double* p, const double* lo, const double* sc, int levels,
           unsigned long long* out) {
    for (long i = 0; i < n; ++i)
        out[i] = cunumpy_morton_key3(p[3*i], p[3*i+1], p[3*i+2], lo[0], lo[1], lo[2],
                                     sc[0], sc[1], sc[2], levels);
}
void keys2(long n, const double* p, const double* lo, const double* sc, int levels,
           unsigned long long* out) {
    for (long i = 0; i < n; ++i)
        out[i] = cunumpy_morton_key2(p[2*i], p[2*i+1], lo[0], lo[1], sc[0], sc[1], levels);
}
}
"""


@pytest.fixture(scope="module")
def header_library(tmp_path_factory):
    cxx = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    d = tmp_path_factory.mktemp("headers")
    src, lib = d / "shim.cpp", d / "libshim.so"
    src.write_text(HOST_SHIM)
    subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-I", HEADERS, str(src), "-o", str(lib)], check=True)
    return ctypes.CDLL(str(lib))


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


@pytest.mark.nosan
def test_random_header_matches_host(header_library):
    rng = np.random.default_rng(8)
    n = 5000
    s, st_, c = (rng.integers(0, 2**64, n, dtype=np.uint64) for _ in range(3))
    u, z0, z1 = np.empty(n), np.empty(n), np.empty(n)
    header_library.uniforms(ctypes.c_long(n), _ptr(s), _ptr(st_), _ptr(c), _ptr(u), _ptr(z0), _ptr(z1))
    np.testing.assert_array_equal(u, xp.rng.philox_uniform(s, st_, c))  # bit-identical
    h0, h1 = xp.rng.philox_normal2(s, st_, c)
    np.testing.assert_allclose(z0, h0, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(z1, h1, rtol=1e-14, atol=1e-14)


@pytest.mark.nosan
@pytest.mark.parametrize("ndim", [2, 3])
def test_morton_header_matches_host(header_library, ndim):
    rng = np.random.default_rng(9)
    n = 5000
    lower, upper = np.array([-1.0, 0.5, 2.0][:ndim]), np.array([3.0, -0.5, 2.5][:ndim])
    pos = np.ascontiguousarray(rng.uniform(-2, 4, (n, ndim)))
    for levels in (1, 7, A.MAX_MORTON_LEVELS[ndim]):
        scale = A.morton_scales(lower, upper, levels)
        out = np.empty(n, np.uint64)
        fn = header_library.keys3 if ndim == 3 else header_library.keys2
        fn(ctypes.c_long(n), _ptr(pos), _ptr(lower), _ptr(scale), ctypes.c_int(levels), _ptr(out))
        np.testing.assert_array_equal(out, A.morton_keys(pos, lower, upper, levels))


NVCC_TEST = r"""
#include <cunumpy/random.cuh>
#include <cunumpy/morton.cuh>
extern "C" __global__ void draw(const double* p, double* u, double* z, unsigned long long* k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u[i] = cunumpy_uniform(42ull, (unsigned long long)i, 7ull);
    double z1;
    cunumpy_normal2(42ull, (unsigned long long)i, 8ull, &z[i], &z1);
    z[i] += cunumpy_normal(1ull, 2ull, 3ull);
    double u0, u1;
    cunumpy_uniform2(1ull, 2ull, 3ull, &u0, &u1);
    cunumpy_u32x4 c = {1u, 2u, 3u, 4u};
    cunumpy_u32x4 r = cunumpy_philox4x32_10(c, 5u, 6u);
    k[i] = cunumpy_morton_key3(p[3*i], p[3*i+1], p[3*i+2], 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 21)
         ^ cunumpy_morton_key2(p[0], p[1], 0.0, 0.0, 1.0, 1.0, 32)
         ^ cunumpy_morton_encode2(r.x, r.y) ^ cunumpy_morton_encode3(1ull, 2ull, 3ull)
         ^ cunumpy_morton_compact2(5ull) ^ cunumpy_morton_compact3(9ull)
         ^ cunumpy_morton_spread2(3ull) ^ cunumpy_morton_spread3(3ull)
         ^ cunumpy_morton_cell(p[0], 0.0, 2.0, 4) ^ (unsigned long long)(u0 + u1);
}
"""


def _nvcc():
    return shutil.which("nvcc") or (os.path.exists("/usr/local/cuda/bin/nvcc") and "/usr/local/cuda/bin/nvcc") or None


@pytest.mark.nosan
@pytest.mark.skipif(_nvcc() is None, reason="nvcc not found")
def test_headers_compile_with_nvcc(tmp_path):
    src = tmp_path / "headers.cu"
    src.write_text(NVCC_TEST)
    result = subprocess.run(
        [_nvcc(), "-arch=sm_90", "-c", "-I", HEADERS, str(src), "-o", str(tmp_path / "headers.o")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
