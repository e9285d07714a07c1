"""Regressions of issue 9 (defects found by hostile testing of the public API), one group per
item of the issue; the race tests of the C kernels are in test_races.py."""

from __future__ import annotations

import sys
import threading
import tracemalloc

import numpy as np
import pytest
from test_c_robustness import run_isolated

import cunumpy as xp
from cunumpy import _reference, algorithms as al
from cunumpy._native import HAVE_C_CORE, core

needs_c = pytest.mark.skipif(not HAVE_C_CORE, reason="needs the C core")


def _fake_cupy():
    cupy = sys.modules.get("cupy")
    return cupy if cupy is not None and getattr(cupy, "__cunumpy_fake__", False) else None


def dev(a):
    """On the cupy backend (fake CuPy) a device copy, else the array itself."""
    if xp.get_backend() == "cupy":
        return xp.asarray(np.asarray(a))
    return a


# --------------------------------------------------------------------------- item 1


@needs_c
def test_compact_in_place_refuses_object_buffers_in_c():
    """Regression: the C compaction moved object pointers as raw bytes (a duplicated pointer
    was released twice: segfault at exit). The C entry point refuses them by itself."""
    out = run_isolated(
        """
        import numpy as np
        import cunumpy._core as core
        for dt in (object, np.dtype([("a", object), ("b", "f8")]), np.dtype([("O", "f8"), ("x", object)])):
            a = np.array([(1.5, 2.5)] * 6, dtype=[("p", "f8"), ("q", "f8")]).astype(dt) if dt is not object \
                else np.array([object() for _ in range(6)], dtype=object)
            try:
                core.compact_in_place(np.array([False, True] * 3), (a,))
            except TypeError as e:
                assert "array 0" in str(e) and "objects" in str(e), e
            else:
                raise SystemExit("accepted")
            del a
        import gc; gc.collect()
        print("clean")
        """
    )
    assert "clean" in out


@needs_c
def test_compact_in_place_accepts_a_struct_field_named_o():
    a = np.zeros(4, dtype=[("O", "f8"), ("x", "i4")])
    a["O"] = [1, 2, 3, 4]
    assert core.compact_in_place(np.array([False, True, False, True]), (a,)) == 2
    assert a["O"][:2].tolist() == [2.0, 4.0]


def test_compact_by_mask_refuses_object_arrays(on_backend):
    mask = np.array([False, True] * 3)
    objs = np.array([object() for _ in range(6)], dtype=object)
    if on_backend == "cupy":
        pytest.skip("device arrays hold no Python objects")
    with pytest.raises(TypeError, match=r"array 1 .*objects"):
        al.compact_by_mask(mask, np.zeros(6), objs)
    rec = np.zeros(6, dtype=[("a", object), ("b", "f8")])
    with pytest.raises(TypeError, match=r"array 0 .*objects"):
        al.compact_by_mask(mask, rec)
    # the twin agrees with the C entry point
    with pytest.raises(TypeError, match="objects"):
        _reference.compact_in_place(mask, (objs,))


# --------------------------------------------------------------------------- item 4


def test_one_cuda_kernel_packed_from_many_threads_keeps_each_threads_pointers():
    """Regression: a view slot's cache was checked, then the array's .shape was read (Python
    code, a thread switch), then the cached bytes copied; another thread could replace the
    cache in between, so a launch carried another thread's array pointer."""
    cupy = _fake_cupy()
    if cupy is None:
        pytest.skip("needs the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    from cunumpy.kernels import CudaKernel

    k = CudaKernel('extern "C" __global__ void k(const double* x, Array2D<float> v, CArray1D<int> c) {}', "k")
    off_v, _ = k._plan.layout[1]
    off_c, _ = k._plan.layout[2]
    n_threads, rounds = 6, 6000
    wrong = []
    barrier = threading.Barrier(n_threads)

    def work(t):
        x = cupy.zeros(3)
        # equal shapes in every thread: only the data pointers tell the entries apart
        v = cupy.zeros((2, 3), dtype=np.float32)
        c = cupy.zeros(4, dtype=np.int32)
        barrier.wait()
        for _ in range(rounds):
            packed = k._plan.pack(x, v, c)[0]
            pv = int.from_bytes(packed[off_v : off_v + 8], "little")
            rows = int.from_bytes(packed[off_v + 8 : off_v + 16], "little")
            pc = int.from_bytes(packed[off_c : off_c + 8], "little")
            if pv != v.data.ptr or rows != 2 or pc != c.data.ptr:
                wrong.append(t)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    assert wrong == []


# --------------------------------------------------------------------------- item 8


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.bool_])
@pytest.mark.parametrize("n", [0, 1, 5, 1000, 70_001])
def test_sort_by_key_narrow_keys(on_backend, dtype, n):
    rs = np.random.default_rng(n)
    if dtype is np.bool_:
        keys = rs.random(n) < 0.5
    else:
        info = np.iinfo(dtype)
        keys = rs.integers(info.min, int(info.max) + 1, n).astype(dtype)
    for k in (keys, keys[::-2]):
        sk, order = al.sort_by_key(dev(k))[:2]
        expect = np.argsort(k, kind="stable")
        np.testing.assert_array_equal(xp.to_numpy(order), expect)
        np.testing.assert_array_equal(xp.to_numpy(sk), k[expect])
        assert xp.to_numpy(sk).dtype == k.dtype


@needs_c
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, "?"])
def test_radix_argsort_narrow_keys_match_twin(dtype):
    rs = np.random.default_rng(2)
    keys = rs.integers(0, 256, 5000).astype(np.uint8).view(np.int8).astype(dtype)
    results = []
    for fn in (core.radix_argsort, _reference.radix_argsort):
        order, sk = np.empty(keys.size, np.int64), np.empty(keys.size, keys.dtype)
        fn(keys, order, sk)
        results.append((order, sk))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


@needs_c
def test_narrow_keys_are_not_widened():
    """Regression: int8/int16/bool keys were copied to int64 (8x the key memory)."""
    n = 1 << 20
    keys = np.random.default_rng(0).integers(-100, 100, n).astype(np.int8)
    vals = np.ones(n)
    tracemalloc.start()
    try:
        al.sort_by_key(keys)
        _, peak_sort = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        sk = np.sort(keys)
        tracemalloc.reset_peak()
        al.segment_boundaries(sk)
        _, peak_runs = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        pos = np.abs(keys)
        tracemalloc.reset_peak()
        al.segment_sum(vals, pos, 101)
        al.cell_offsets(np.sort(pos), 101)
        _, peak_sum = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # sort: an int64 order (8 MiB) and the sorted keys (1 MiB); a widened copy adds 8+ MiB
    assert peak_sort < 10 * n
    assert peak_runs < 4 * n
    assert peak_sum < 4 * n


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.uint32])
def test_segment_functions_with_narrow_keys(on_backend, dtype):
    rs = np.random.default_rng(5)
    n, nseg = 3000, 50
    keys = rs.integers(0, nseg, n).astype(dtype)
    if np.dtype(dtype).kind == "i":
        keys[::7] = -1
    vals = rs.standard_normal((n, 2))
    got = xp.to_numpy(al.segment_sum(dev(vals), dev(keys), nseg))
    want = np.zeros((nseg, 2))
    live = keys.astype(np.int64) >= 0
    np.add.at(want, keys[live].astype(np.int64), vals[live])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    sk = np.sort(keys[live])
    off = xp.to_numpy(al.cell_offsets(dev(sk), nseg))
    np.testing.assert_array_equal(off, np.searchsorted(sk, np.arange(nseg + 1)))
    u, s, _e = (xp.to_numpy(a) for a in al.segment_boundaries(dev(np.sort(keys))))
    ref_u, ref_s = np.unique(np.sort(keys), return_index=True)
    np.testing.assert_array_equal(u, ref_u)
    np.testing.assert_array_equal(s, ref_s)
    assert u.dtype == keys.dtype


def test_masked_arrays_are_refused(on_backend):
    if on_backend == "cupy":
        pytest.skip("numpy.ma arrays are host arrays")
    keys = np.ma.masked_array([3, 1, 2], mask=[False, True, False])
    with pytest.raises(TypeError, match="'keys' is a masked array"):
        al.sort_by_key(keys)
    with pytest.raises(TypeError, match="'values' is a masked array"):
        al.segment_sum(np.ma.masked_array(np.ones(3), mask=[0, 1, 0]), np.array([0, 1, 0]), 2)
    with pytest.raises(TypeError, match="'keys' is a masked array"):
        al.segment_sum(np.ones(3), keys, 4)
    with pytest.raises(TypeError, match="masked array"):
        al.SegmentPlan(keys, 4)
    with pytest.raises(TypeError, match="masked array"):
        al.segment_boundaries(keys)


# --------------------------------------------------------------------------- item 5


def _pk_case(make_args, body):
    from cunumpy.kernels import PyccelKernel

    return PyccelKernel(body)(*make_args())


@pytest.mark.parametrize(
    "views, body, expect",
    [
        # Regression: the unwritten view x[::2] was copied back last and undid the writes.
        (lambda x: (x, x[::2]), lambda a, b: a.__imul__(2), [0, 2, 4, 6, 8, 10]),
        (lambda x: (x[::2], x), lambda a, b: b.__imul__(2), [0, 2, 4, 6, 8, 10]),
        (lambda x: (x, x[::-1]), lambda a, b: a.__setitem__(slice(0, 3), -1), [-1, -1, -1, 3, 4, 5]),
        (lambda x: (x[::-1], x), lambda a, b: a.__setitem__(0, 50), [0, 1, 2, 3, 4, 50]),
        # both views write, different elements: every write survives
        (lambda x: (x[:4], x[2:]), lambda a, b: (a.__setitem__(0, 10), b.__setitem__(3, 20)), [10, 1, 2, 3, 4, 20]),
        # the same array twice, written through the second
        (lambda x: (x, x), lambda a, b: b.__setitem__(1, 7), [0, 7, 2, 3, 4, 5]),
        # NaN that is not written stays; a write through the other view survives it
        (lambda x: (x, x[1:]), lambda a, b: a.__setitem__(1, 9), [0, 9, 2, 3, 4, 5]),
    ],
)
def test_pyccel_kernel_default_outputs_preserve_writes_through_overlapping_views(views, body, expect, device_only):
    x = xp.asarray(np.arange(6, dtype=np.float64))
    _pk_case(lambda: views(x), body)
    np.testing.assert_array_equal(xp.to_numpy(x), expect)


def test_pyccel_kernel_overlapping_views_keep_unwritten_nans(device_only):
    x = xp.asarray(np.array([np.nan, 1.0, 2.0, 3.0]))

    def body(a, b):
        a[0] = 5.0  # b[0] (the same element) stays NaN on the host copy of b

    _pk_case(lambda: (x, x[::2]), body)
    np.testing.assert_array_equal(xp.to_numpy(x), [5.0, 1.0, 2.0, 3.0])


def test_pyccel_kernel_separate_arrays_still_copy_back_whole(device_only):
    x = xp.asarray(np.zeros(3))
    y = xp.asarray(np.zeros(3))

    def body(a, b):
        a[:] = 1
        b[:] = 2

    _pk_case(lambda: (x, y), body)
    assert xp.to_numpy(x).tolist() == [1, 1, 1] and xp.to_numpy(y).tolist() == [2, 2, 2]


# --------------------------------------------------------------------------- item 6


def _crafted_views(d=23):
    """Two views whose exact overlap test takes NumPy's shares_memory seconds (it doubles with
    every dimension); they do share memory."""
    from numpy.lib.stride_tricks import as_strided

    base = np.zeros(2 ** (d + 2), np.uint8)
    strides = tuple(2**k + 1 for k in range(d))
    a = as_strided(base, shape=(2,) * d, strides=strides)
    b = as_strided(base[1:], shape=(2,) * d, strides=strides[::-1])
    return a, b


def _recorded_overlap_work(monkeypatch):
    """The max_work of every exact overlap test (np.shares_memory) the library asks for."""
    asked = []
    exact = np.shares_memory

    def recording(a, b, max_work=None):
        asked.append(max_work)
        return exact(a, b, max_work=max_work)

    monkeypatch.setattr(np, "shares_memory", recording)
    return asked


def _bounded(asked):
    # None or -1 ask NumPy for an exact answer whatever it costs (seconds at 24 dimensions,
    # minutes at 28): the regression. A positive bound makes NumPy give up quickly.
    return asked and all(w is not None and 0 < w <= 10**6 for w in asked)


def test_compact_by_mask_overlap_check_is_bounded(monkeypatch):
    """Regression: 24 dimensions took 0.9 s and 28 took 20 s in the exact overlap test."""
    asked = _recorded_overlap_work(monkeypatch)
    a, b = _crafted_views()
    with pytest.raises(ValueError, match=r"share memory"):
        al.compact_by_mask(np.array([True, False]), a, b)
    assert _bounded(asked), asked


def test_segment_sum_out_overlap_check_is_bounded(monkeypatch):
    from numpy.lib.stride_tricks import as_strided

    asked = _recorded_overlap_work(monkeypatch)
    d = 23
    out = np.zeros((1,) + (2,) * (d - 1))  # float64, C-contiguous, the result's shape
    raw = out.view(np.uint8).reshape(-1)
    values = as_strided(raw[1:], shape=(2,) * d, strides=tuple(2**k + 1 for k in reversed(range(d))))
    with pytest.raises(ValueError, match="share memory"):
        al.segment_sum(values, np.zeros(2, np.int64), 1, out=out)
    assert _bounded(asked), asked


def test_bounded_overlap_check_still_finds_ordinary_overlaps():
    x = np.zeros((10, 3))
    with pytest.raises(ValueError, match="share memory"):
        al.compact_by_mask(np.ones(10, bool), x, x[::-1])
    v = np.zeros((4, 2))
    with pytest.raises(ValueError, match="share memory"):
        al.segment_sum(v, np.zeros(4, np.int64), 4, out=v)
    assert al.compact_by_mask(np.ones(10, bool), x[:, :1], x[:, 1:]) == 10  # interleaved, disjoint


# --------------------------------------------------------------------------- item 7


def _kernel_file_source(n):
    return "\n".join(f'extern "C" __global__ void k{i}(double* x, int n) {{ x[0] = n; }}' for i in range(n))


def test_cuda_kernel_names_of_a_large_file():
    """Regression: each name was looked up in the list of names found so far (quadratic: about
    40 s at 32 000 kernels). The scaling itself is measured by benchmarks/parsing.py (a timed
    assertion does not belong here); this checks the result at that size."""
    from cunumpy import cuda

    names = cuda.cuda_kernel_names(_kernel_file_source(32000))
    assert len(names) == 32000 and names[-1] == "k31999" and len(set(names)) == 32000


def test_all_from_file_of_a_large_file(tmp_path):
    """Regression: every kernel tokenized the whole file again (4000 kernels took 50 s); the
    scaling is measured by benchmarks/parsing.py."""
    from cunumpy.kernels import CudaKernel

    path = tmp_path / "k2000.cu"
    path.write_text(_kernel_file_source(2000))
    kernels = CudaKernel.all_from_file(path)
    assert list(kernels)[-1] == "k1999" and kernels["k7"].signature[1].name == "n"
    assert len(kernels) == 2000


def test_signature_memo_keeps_the_first_definition_and_per_source_results():
    from cunumpy.cuda import parse_cuda_signature

    src = (
        'extern "C" __global__ void k(float* a);\n'
        'extern "C" __global__ void k(float* a) {}\n'
        'extern "C" __global__ void k(double* b) {}\n'
    )
    assert parse_cuda_signature(src, "k")[0].name == "a"
    other = src.replace("float", "int")
    assert str(parse_cuda_signature(other, "k")[0].dtype) == "int32"
    assert str(parse_cuda_signature(src, "k")[0].dtype) == "float32"
    with pytest.raises(ValueError, match="no __global__ function named 'nope'"):
        parse_cuda_signature(src, "nope")


# --------------------------------------------------------------------------- item 10


def test_patching_pyccel_kernel_call_on_the_class_takes_effect():
    """Regression: on CPython 3.11 the instance's vectorcall bypassed a patched __call__."""
    from unittest import mock

    from cunumpy.kernels import PyccelKernel

    k = PyccelKernel(lambda x: x + 1)
    with mock.patch.object(PyccelKernel, "__call__", return_value="patched") as m:
        assert k(np.zeros(1)) == "patched"
        assert m.call_count == 1
    np.testing.assert_array_equal(xp.to_numpy(k(np.zeros(1))), [1.0])  # restored: the fast path again

    class Logged(PyccelKernel):
        def __call__(self, *args, **kwargs):
            return ("logged", super().__call__(*args, **kwargs))

    tag, value = Logged(lambda x, y=0: x + y)(np.ones(1), y=2)
    assert tag == "logged" and xp.to_numpy(value).tolist() == [3.0]


# --------------------------------------------------------------------------- item 9


def test_segment_sum_out_of_the_wrong_type_is_a_type_error(on_backend):
    # (on the device backend the list is caught first, as an argument of the wrong backend)
    with pytest.raises(TypeError, match="'out' must be|argument 2: numpy"):
        al.segment_sum(dev(np.ones(3)), dev(np.array([0, 1, 0])), 2, out=[[0.0], [0.0]])
    with pytest.raises(TypeError, match="'out' must be"):
        al.segment_sum(np.ones(3), np.array([0, 1, 0]), 2, out=[[0.0], [0.0]])


def test_segment_plan_huge_n_segments_names_the_argument(on_backend):
    with pytest.raises(ValueError, match="'n_segments' must be < 2\\*\\*63"):
        al.SegmentPlan(dev(np.array([0, 1])), 2**63)
    with pytest.raises(ValueError, match="'n_segments'"):
        al.segment_sum(dev(np.ones(2)), dev(np.array([0, 1])), 2**64)


def test_morton_decode_ndim_must_be_an_integer(on_backend):
    keys = dev(np.array([5, 9], dtype=np.uint64))
    with pytest.raises(TypeError, match="'ndim' must be an integer"):
        al.morton_decode(keys, 2.0)
    with pytest.raises(TypeError, match="'ndim'"):
        al.morton_decode(keys, True)
    with pytest.raises(ValueError, match="'ndim' must be 2 or 3"):
        al.morton_decode(keys, 4)
    assert len(al.morton_decode(keys, np.int64(3))) == 3


def test_segment_plan_keys_cannot_be_written(on_backend):
    plan = al.SegmentPlan(dev(np.array([0, 1, 1])), 2)
    if on_backend == "numpy" or _fake_cupy() is not None:
        with pytest.raises(ValueError, match="read-only"):
            plan.keys[0] = 99
    out = plan.sum(dev(np.ones(3)))
    assert xp.to_numpy(out).tolist() == [1.0, 2.0]


def test_cuda_kernel_float_parameters_out_of_range_name_kernel_and_parameter():
    cupy = _fake_cupy()
    if cupy is None:
        pytest.skip("needs the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    from cunumpy.kernels import CudaKernel

    k = CudaKernel('extern "C" __global__ void kf(double* x, float f, double d, complex<float> c) {}', "kf")
    x = cupy.zeros(2)
    for args, param in [
        ((x, 1e300, 1.0, 0j), "float f"),
        ((x, 10**400, 1.0, 0j), "float f"),
        ((x, 1.0, 10**400, 0j), "double d"),
        ((x, 1.0, 1.0, complex(0, 1e39)), "c"),
        ((x, -3.5e38, 1.0, 0j), "float f"),
    ]:
        with pytest.raises(OverflowError, match=rf"kernel 'kf'.*{param}"):
            k._plan.pack(*args)
    # in range, and explicit infinities, are accepted
    k._plan.pack(x, 3.4e38, 1e308, complex(1e38, -1e38))
    k._plan.pack(x, float("inf"), float("-inf"), complex(float("inf"), 0))


def test_pack_twin_agrees_on_float_overflow():
    from cunumpy.kernels import CudaKernel, _cuda_kernel as ck

    name = "kf"
    k = CudaKernel('extern "C" __global__ void kf(float f, double d, complex<float> c) {}', name)
    specs = tuple(ck._spec(i, p) for i, p in enumerate(k.signature))
    plans = (
        [m.launch_plan(name, specs, np.void, np.generic) for m in (core, _reference)]
        if HAVE_C_CORE
        else [_reference.launch_plan(name, specs, np.void, np.generic)]
    )
    for args in [(1e300, 1.0, 0j), (10**400, 1.0, 0j), (1.0, 10**400, 0j), (1.0, 1.0, complex(1e39, 0))]:
        messages = []
        for plan in plans:
            with pytest.raises(OverflowError) as info:
                plan.pack(*args)
            messages.append(str(info.value))
        assert len(set(messages)) == 1, messages
        assert "kernel 'kf'" in messages[0]


def test_device_mirror_to_host_into_a_read_only_array(device_only):
    from cunumpy.memory import DeviceMirror

    host = np.zeros(4)
    mirror = DeviceMirror(host)
    mirror.device  # noqa: B018 - the read allocates and uploads
    host.flags.writeable = False
    with pytest.raises(ValueError, match=r"DeviceMirror.to_host\(\): the host array is read-only"):
        mirror.to_host()


def test_nul_in_cuda_source_is_named_not_truncated():
    from cunumpy.cuda import parse_cuda_signature

    with pytest.raises(ValueError, match=r"'source' contains a NUL character \(line 2"):
        parse_cuda_signature('// kernel\nextern "C" __global__ void k(foo\0bar x) {}', "k")


@pytest.mark.parametrize(
    "update, match",
    [
        ({"mask": object()}, "masked"),
        ({"stream": 12345}, "producer stream"),
        ({"stream": 2}, "producer stream"),
        ({"shape": (-4,)}, "negative extent"),
        ({"data": "readonly"}, "read-only"),
    ],
)
def test_cuda_array_interface_fields_that_must_be_honoured_are_refused(update, match):
    cupy = _fake_cupy()
    if cupy is None:
        pytest.skip("needs the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    from cunumpy.kernels import CudaKernel, _cuda_kernel as ck

    x = cupy.zeros(4)

    class Exported:
        def __init__(self, **kw):
            self.d = dict(x.__cuda_array_interface__)
            if kw.get("data") == "readonly":
                kw["data"] = (x.__cuda_array_interface__["data"][0], True)
            self.d.update(kw)

        @property
        def __cuda_array_interface__(self):
            return self.d

    src = 'extern "C" __global__ void k(double* y, const double* c) {}'
    k = CudaKernel(src, "k")
    specs = tuple(ck._spec(i, p) for i, p in enumerate(k.signature))
    plans = [k._plan, _reference.launch_plan("k", specs, np.void, np.generic)]
    for plan in plans:
        with pytest.raises(TypeError, match=match):
            plan.pack(Exported(**update), x)
        with pytest.raises(TypeError, match=match):
            plan.pack(x, Exported(**update))
    # the usual exports stay accepted: no stream, the legacy default stream, writable data
    for plan in plans:
        plan.pack(Exported(stream=None), Exported(stream=1))


# --------------------------------------------------------------------------- item 9: containers

import collections  # noqa: E402

Pair = collections.namedtuple("Pair", "a b")


@pytest.mark.parametrize("impl", ["c", "twin"])
def test_traversal_converts_namedtuples_and_dict_subclasses_keeping_their_type(impl, device_only):
    """Regression: namedtuples and dict subclasses were passed through with device arrays in."""
    from cunumpy import _reference

    mod = core if impl == "c" else _reference
    if impl == "c" and not HAVE_C_CORE:
        pytest.skip("needs the C core")
    x = xp.asarray(np.arange(3.0))
    od = collections.OrderedDict([("z", x), ("a", 1)])
    dd = collections.defaultdict(list, {"k": x})
    args = (Pair(x, 2), od, dd)
    assert mod.reaches_device((Pair(x, 1),), None) is True
    assert mod.reaches_device(({"k": 1},), {"d": collections.OrderedDict(k=x)}) is True
    host_args, _, n, plan = mod.host_arguments(args, None, lambda a: a.get(), (), None)
    p, o, d = host_args
    assert type(p) is Pair and isinstance(p.a, np.ndarray) and p.b == 2
    assert type(o) is collections.OrderedDict and list(o) == ["z", "a"] and isinstance(o["z"], np.ndarray)
    assert type(d) is collections.defaultdict and d.default_factory is list and isinstance(d["k"], np.ndarray)
    assert p.a is o["z"] is d["k"] and n == 1 and len(plan) == 1
    assert type(od["z"]) is type(x)  # the caller's containers are untouched
    back = mod.device_result(Pair(np.zeros(2), (np.ones(1), 3)), xp.asarray, np.ndarray)
    assert type(back) is Pair and type(back.a) is type(x) and type(back.b[0]) is type(x)


def test_host_call_and_pyccel_kernel_see_inside_namedtuples_and_dict_subclasses(device_only):
    from cunumpy.kernels import PyccelKernel

    x = xp.asarray(np.arange(3.0))

    def total(p, d):
        assert isinstance(p, Pair) and isinstance(d, collections.OrderedDict)
        assert isinstance(p.a, np.ndarray) and isinstance(d["v"], np.ndarray)
        d["v"][0] = 100.0
        return Pair(p.a.sum() + d["v"].sum(), p.a)

    r = xp.host_call(total, Pair(x, 0), collections.OrderedDict(v=xp.asarray(np.ones(2))))
    assert type(r) is Pair and float(r.a) == 3.0 + 101.0 and type(r.b) is type(x)
    y = xp.asarray(np.ones(2))
    r = PyccelKernel(total)(Pair(x, 0), collections.OrderedDict(v=y))
    assert type(r) is Pair and xp.to_numpy(y).tolist() == [100.0, 1.0]  # written back
