"""The fake CuPy (API.md section 14): strictness, views, transfers, cupy.cuda, kernels,
random/linalg/fft and cupyx.scipy.

Most tests need the fake active (``CUNUMPY_FAKE_CUPY=1``); in a plain run they skip and
``test_fake_suite_in_subprocess`` runs this file once in a fake-CuPy child instead.
"""

import copy
import pickle
import sys

import numpy as np
import pytest
from _fake_support import rerun_under_fake_cupy

import cunumpy as xp
from cunumpy import _transfers
from cunumpy.kernel_testing import fake_cupy_active, host_buffer, run_in_fake_cupy_subprocess


@pytest.fixture
def cp(device_only):
    if not fake_cupy_active():
        pytest.skip("needs the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    import cupy

    return cupy


class _Sink:
    def __init__(self):
        self.events = []

    def _receive(self, event):
        self.events.append(event)


@pytest.fixture
def sink():
    s = _Sink()
    _transfers.sinks.append(s)
    try:
        yield s
    finally:
        _transfers.sinks.remove(s)


def test_fake_suite_in_subprocess():
    rerun_under_fake_cupy(__file__, "not in_subprocess")


# --------------------------------------------------------------------------- the module


def test_module_identity(cp):
    assert cp.__cunumpy_fake__ is True
    assert cp.is_available() is True
    assert xp.cupy_version_supported(cp.__version__)
    for name in (
        "cupy.cuda",
        "cupy.cuda.runtime",
        "cupy.cuda.memory",
        "cupy.linalg",
        "cupy.fft",
        "cupy.random",
        "cupyx",
        "cupyx.scipy",
    ):
        assert name in sys.modules
    assert xp.get_backend() == "cupy"


def test_install_is_idempotent(cp):
    from cunumpy.kernel_testing import install_fake_cupy

    assert install_fake_cupy() is cp
    assert sys.modules["cupy"] is cp


def test_array_api_compat_recognises_fake_arrays(cp):
    import array_api_compat
    import array_api_compat.cupy as compat

    a = xp.zeros((2, 3))
    assert type(a) is cp.ndarray
    assert array_api_compat.is_cupy_array(a)
    assert array_api_compat.array_namespace(a) is compat
    assert not isinstance(a, np.ndarray)
    assert xp.get_array_backend(a) == "cupy"
    assert float(xp.sum(xp.asarray([1.0, 2.0]))) == 3.0


def test_only_cupy_names(cp):
    # CuPy 14.2 re-exports NumPy's printing helpers (set_printoptions …) but has no insert/geomspace.
    for absent in ("busday_count", "matrix", "fromregex", "ma", "datetime64", "nditer", "insert", "geomspace"):
        assert not hasattr(cp, absent), absent
    for present in (
        "asnumpy",
        "get_array_module",
        "fuse",
        "RawKernel",
        "ElementwiseKernel",
        "float64",
        "newaxis",
        "pi",
        "issubdtype",
        "integer",
        "finfo",
        "result_type",
        "bool_",
        "arccos",
    ):
        assert hasattr(cp, present), present


# --------------------------------------------------------------------------- strictness


def test_no_implicit_conversion_to_numpy(cp):
    a = cp.arange(3.0)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        np.asarray(a)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        a.__array__()
    with pytest.raises(TypeError):
        np.add(np.ones(3), a)
    with pytest.raises(TypeError):
        np.ones(3) + a


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<", "<=", "==", "!=", ">", ">="])
def test_operators_refuse_host_arrays_and_lists(cp, op):
    a = cp.arange(1, 4)  # noqa: F841 - read by the eval below
    host = np.arange(1, 4)
    for other in (host, [1, 2, 3]):  # noqa: B007 - read by the eval below
        with pytest.raises(TypeError):
            eval(f"a {op} other")
        with pytest.raises(TypeError):
            eval(f"other {op} a")
    expected = eval(f"host {op} host")
    for other in (cp.arange(1, 4), 2, np.int64(2), np.array(2)):
        r = eval(f"a {op} other")
        assert type(r) is cp.ndarray
        h = other.get() if isinstance(other, cp.ndarray) else other  # noqa: F841 - read by the eval below
        np.testing.assert_array_equal(r.get(), eval(f"host {op} h"))
    assert eval(f"a {op} a").get().tolist() == expected.tolist()


def test_inplace_unary_matmul_divmod(cp):
    a = cp.arange(4.0)
    b = a
    a += 1
    a *= cp.full(4, 2.0)
    assert b is a
    assert a.get().tolist() == [2.0, 4.0, 6.0, 8.0]
    with pytest.raises(TypeError):
        a += np.ones(4)
    with pytest.raises(TypeError):
        a -= [1, 1, 1, 1]
    assert (-a).get().tolist() == [-2.0, -4.0, -6.0, -8.0]
    assert abs(-a).get().tolist() == a.get().tolist()
    assert (~cp.array([0, 1])).get().tolist() == [-1, -2]
    m = cp.eye(2)
    assert type(m @ m) is cp.ndarray
    with pytest.raises(TypeError):
        m @ np.eye(2)
    q, r = divmod(cp.arange(5), 2)
    assert q.get().tolist() == [0, 0, 1, 1, 2] and r.get().tolist() == [0, 1, 0, 1, 0]
    assert (1 - cp.arange(2)).get().tolist() == [1, 0]


def test_functions_refuse_host_arrays_and_lists(cp):
    with pytest.raises(TypeError, match=r"cupy\.sum\(\).*'a'"):
        cp.sum(np.ones(3))
    with pytest.raises(TypeError, match=r"cupy\.sum\(\).*list"):
        cp.sum([1, 2])
    with pytest.raises(TypeError, match="concatenate"):
        cp.concatenate([cp.ones(2), np.ones(2)])
    with pytest.raises(TypeError, match="'b'"):
        cp.dot(cp.ones(2), np.ones(2))
    with pytest.raises(TypeError):
        cp.sin(np.ones(2))
    with pytest.raises(TypeError, match="out"):
        cp.add(cp.ones(2), 1, out=np.ones(2))
    with pytest.raises(TypeError):
        cp.linalg.norm(np.ones(2))
    with pytest.raises(TypeError):
        cp.fft.fft(np.ones(4))
    # scalars and 0-d host arrays act as scalars
    assert float(cp.maximum(cp.ones(2), np.array(3.0)).sum()) == 6.0
    assert float(cp.sin(0.0)) == 0.0


def test_creation_and_array_like_routines_accept_host_data(cp):
    host = np.arange(6.0).reshape(2, 3)
    for make in (cp.array, cp.asarray, cp.ascontiguousarray, cp.asfortranarray):
        d = make(host)
        assert type(d) is cp.ndarray and d.get().tolist() == host.tolist()
        assert not np.shares_memory(host_buffer(d), host)
    assert cp.asfortranarray(host).flags.f_contiguous
    assert cp.array([[1, 2], [3, 4]]).shape == (2, 2)
    assert cp.zeros_like(host).shape == (2, 3)
    assert cp.diff(np.array([1, 4, 9])).get().tolist() == [3, 5]
    assert cp.unique([3, 1, 3]).get().tolist() == [1, 3]
    assert cp.roll(np.arange(3), 1).get().tolist() == [2, 0, 1]
    assert cp.cumsum([1, 2, 3]).get().tolist() == [1, 3, 6]
    stacked = cp.array([cp.ones(2), cp.zeros(2)])
    assert stacked.get().tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert cp.fromfunction(lambda i, j: i + j, (2, 2)).get().tolist() == [[0, 1], [1, 2]]
    assert type(cp.fromfunction(lambda i: i, (3,))) is cp.ndarray


def test_functions_that_copy_nothing_return_the_same_object(cp):
    a = cp.arange(6.0)
    assert cp.asarray(a) is a
    assert cp.ascontiguousarray(a) is a
    assert cp.array(a, copy=False) is a
    assert a.astype(a.dtype, copy=False) is a
    assert cp.asarray(a, dtype=np.float32) is not a
    out = cp.empty(6)
    assert cp.add(a, 1, out=out) is out
    t = cp.arange(6.0).reshape(2, 3).T
    c = cp.ascontiguousarray(t)
    assert c is not t and c.flags.c_contiguous
    assert cp.array(a) is not a


def test_numpy_functions_dispatch_to_the_fake(cp):
    a = cp.arange(4.0)
    s = np.sum(a)
    assert type(s) is cp.ndarray and s.ndim == 0 and float(s) == 6.0
    assert type(np.concatenate([a, a])) is cp.ndarray
    with pytest.raises(TypeError):
        np.concatenate([a, np.ones(2)])


# --------------------------------------------------------------------------- indexing and views


def test_views_share_memory_with_the_base(cp):
    a = cp.zeros((3, 4))
    row = a[1]
    row[:] = 5.0
    a[:, 0][...] = 7.0
    a.reshape(12)[3] = 9.0
    a.T[3, 2] = 4.0
    a.ravel()[11] += 1.0
    expected = np.zeros((3, 4))
    expected[1] = 5.0
    expected[:, 0] = 7.0
    expected[0, 3] = 9.0
    expected[2, 3] = 5.0
    assert a.get().tolist() == expected.tolist()
    assert row.base is a and a[1:, ::2].base is a and cp.reshape(a, (12,)).base is a
    assert a.base is None and a.flags.owndata and not row.flags.owndata
    assert np.shares_memory(host_buffer(row), host_buffer(a))
    assert row.data.ptr == a.data.ptr + 4 * 8


def test_scalar_indexing_gives_0d_views(cp):
    a = cp.arange(6).reshape(2, 3)
    x = a[1, 2]
    assert type(x) is cp.ndarray and x.shape == ()
    x[...] = 42
    assert int(a[1, 2]) == 42
    assert type(a.sum()) is cp.ndarray and a.sum().ndim == 0
    assert type(cp.max(a)) is cp.ndarray and a.argmax().shape == ()
    assert type(a.mean(axis=0)) is cp.ndarray


def test_setitem_rules(cp):
    a = cp.zeros(4)
    a[0] = 1
    a[1] = np.float32(2)
    a[2] = np.array(3.0)
    a[cp.array([3])] = cp.array([4.0])
    assert a.get().tolist() == [1.0, 2.0, 3.0, 4.0]
    a[a > 2] = 0
    assert a.get().tolist() == [1.0, 2.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):  # CuPy's fill() refusal
        a[:2] = np.ones(2)
    with pytest.raises(TypeError, match="list"):
        a[:2] = [1.0, 2.0]
    assert a[cp.array([0, 1])].get().tolist() == [1.0, 2.0]


def test_array_attributes(cp):
    a = cp.ones((2, 3), dtype=np.float32, order="F")
    assert a.shape == (2, 3) and a.dtype == np.float32 and a.ndim == 2 and a.size == 6
    assert a.nbytes == 24 and a.itemsize == 4 and a.strides == (4, 8)
    assert a.flags.f_contiguous and not a.flags.c_contiguous and a.flags["F_CONTIGUOUS"]
    assert a.T.flags.c_contiguous and a.mT.shape == (3, 2)
    assert a.device == cp.cuda.Device(0) and a.device.id == 0
    z = cp.array([1 + 2j])
    assert z.real.get().tolist() == [1.0] and z.imag.get().tolist() == [2.0]
    z.imag = 5.0
    assert z.get().tolist() == [1 + 5j]
    b = cp.arange(6)
    b.shape = (3, 2)
    assert b.shape == (3, 2) and len(b) == 3
    assert [r.get().tolist() for r in b] == [[0, 1], [2, 3], [4, 5]]
    assert all(type(r) is cp.ndarray for r in b)
    with pytest.raises(TypeError):
        iter(cp.array(1.0))
    assert repr(cp.arange(2)) == "array([0, 1])"
    assert f"{cp.array(1.5):.2f}" == "1.50"
    b.fill(3)
    assert b.get().tolist() == [[3, 3]] * 3
    assert b.view(np.uint64).base is b


def test_unsupported_dtypes(cp):
    with pytest.raises(ValueError, match="dtype"):
        cp.array(["a", "b"])


# --------------------------------------------------------------------------- transfers


@pytest.mark.parametrize(
    "read, what",
    [
        (float, "float()"),
        (int, "int()"),
        (bool, "bool()"),
        (complex, "complex()"),
        (lambda a: a.item(), "item()"),
        (lambda a: a.tolist(), "tolist()"),
    ],
)
def test_scalar_reads_record_implicit_copies_and_syncs(cp, sink, read, what):
    """CuPy copies the value to the host (get()) for each scalar read: a to_host event of its
    bytes and a sync (issue 33 item 9; a sync alone before)."""
    a = cp.array([2.0]).sum()
    b = a + 1  # device work records nothing
    assert sink.events == []
    read(b)
    assert [(e.kind, e.nbytes, e.implicit) for e in sink.events] == [("to_host", 8, True), ("sync", None, True)]
    for event in sink.events:
        assert what in event.description and "float64" in event.description
        assert event.where.startswith(__file__)


@pytest.mark.parametrize(
    "convert, what",
    [
        (repr, "repr()"),
        (str, "str()"),
        (lambda a: print(a), "str()"),
        (lambda a: f"{a}", "format()"),
        (lambda a: repr([a]), "repr()"),
    ],
    ids=["repr", "str", "print", "f-string", "repr-of-list"],
)
def test_text_conversions_are_implicit_copies_and_syncs(cp, sink, convert, what, capsys):
    """CuPy's __repr__/__str__/__format__ are repr/str/format(self.get()): a copy of the whole
    array to the host and a wait (issue 27 item 12)."""
    a = cp.arange(6.0).reshape(2, 3)
    convert(a)
    assert [(e.kind, e.nbytes, e.implicit, e.blocking) for e in sink.events] == [
        ("to_host", 48, True, True),
        ("sync", None, True, True),
    ]
    assert all(e.description == f"{what} of (2, 3) float64" for e in sink.events)
    assert all(e.where.startswith(__file__) for e in sink.events)


def test_text_conversions_follow_cupy(cp, capsys):
    a = cp.arange(3.0)
    assert repr(a) == "array([0., 1., 2.])" and str(a) == "[0. 1. 2.]"
    assert f"{a.sum():.2f}" == "3.00" and f"{a}" == str(a)
    with pytest.raises(TypeError):  # NumPy's rule on CuPy's host copy: no spec for ndim > 0
        f"{a:.2f}"
    print(a.sum())
    assert capsys.readouterr().out == "3.0\n"


def test_a_debug_print_fails_assert_no_transfers(cp, capsys):
    """The point of item 12: a print left in a loop is caught with the default syncs=False;
    so are scalar reads, which CuPy makes with a copy to the host (issue 33 item 9)."""
    from cunumpy.profiling import assert_no_transfers, count_transfers

    residual = cp.ones(4).sum()
    with pytest.raises(AssertionError, match=r"(?s)to_host \(1\):.*str\(\) of \(\) float64"), assert_no_transfers():
        print("residual", residual)
    with count_transfers() as counter:
        assert float(residual) == 4.0 and bool(residual) and residual.item() == 4.0
    assert counter.syncs == 3 and counter.to_host == 3
    with pytest.raises(AssertionError, match="to_host"), assert_no_transfers():
        float(residual)


def test_scalar_reads_without_sinks_record_nothing(cp):
    assert not _transfers.sinks
    assert float(cp.ones(1).sum()) == 1.0


def test_get_set_and_asnumpy(cp):
    a = cp.arange(6.0).reshape(2, 3)
    h = a.get()
    assert type(h) is np.ndarray and h.tolist() == [[0, 1, 2], [3, 4, 5]]
    h[0, 0] = 99
    assert float(a[0, 0]) == 0.0
    assert a.get(order="F").flags.f_contiguous
    assert a.T.get(order="A").flags.f_contiguous
    out = np.empty((2, 3))
    assert a.get(out=out) is out and out.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert cp.asnumpy(a, order="F").flags.f_contiguous
    assert cp.asnumpy(np.ones(2)).tolist() == [1.0, 1.0]
    a.set(np.ones((2, 3)))
    assert a.get().tolist() == [[1.0] * 3] * 2
    with pytest.raises(TypeError):
        a.set(np.ones((2, 3), dtype=np.float32))
    with pytest.raises(ValueError):
        a.set(np.ones(6))
    with pytest.raises(TypeError):
        a.set(cp.ones((2, 3)))


def test_data_pointer_and_cuda_array_interface(cp):
    a = cp.arange(12.0).reshape(3, 4)
    assert a.data.ptr == host_buffer(a).ctypes.data
    assert a.data.device_id == 0 and a.data.mem.ptr == a.data.ptr
    cai = a.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (3, 4) and cai["typestr"] == "<f8"
    assert cai["strides"] is None and cai["data"] == (a.data.ptr, False)
    t = a.T
    assert t.__cuda_array_interface__["strides"] == (8, 32)
    assert a[:, 1].__cuda_array_interface__["data"][0] == a.data.ptr + 8

    class Exporter:  # a foreign "device" buffer (mpi4py-style)
        __cuda_array_interface__ = a[1].__cuda_array_interface__

    view = cp.asarray(Exporter())
    assert view.data.ptr == a[1].data.ptr
    view[0] = -1
    assert float(a[1, 0]) == -1.0
    assert xp.to_cupy(Exporter()).data.ptr == a[1].data.ptr


def test_memptr_constructor_shares_memory(cp):
    a = cp.arange(4.0)
    b = cp.ndarray((2,), dtype=np.float64, memptr=a.data + 16)
    assert b.get().tolist() == [2.0, 3.0]
    b[0] = 7
    assert float(a[2]) == 7.0
    assert cp.ndarray((2, 2)).shape == (2, 2)


def test_pickling_and_copies_copy_the_data(cp):
    a = cp.arange(6.0).reshape(2, 3)
    for clone in (pickle.loads(pickle.dumps(a)), copy.copy(a), copy.deepcopy(a), a.copy()):
        assert type(clone) is cp.ndarray and clone.get().tolist() == a.get().tolist()
        assert not np.shares_memory(host_buffer(clone), host_buffer(a))
    f = cp.asfortranarray(a)
    assert pickle.loads(pickle.dumps(f)).flags.f_contiguous
    assert a.copy(order="F").flags.f_contiguous


def test_backend_conversions(cp, sink):
    host = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    d = xp.to_cupy(host)
    assert type(d) is cp.ndarray and d.flags.f_contiguous
    back = xp.to_numpy(d)
    assert type(back) is np.ndarray and back.flags.f_contiguous and back.tolist() == host.tolist()
    assert [e.kind for e in sink.events] == ["to_device", "to_host"]
    c = cp.ones(3)
    assert xp.as_device_array(c) is c
    assert xp.as_device_array([1, 2], dtype=np.float32).dtype == np.float32
    info = xp.backend_info()
    assert info["fake_cupy"] is True and info["device"]["compute_capability"] == "90"
    xp.synchronize()


# --------------------------------------------------------------------------- cupy.cuda


def test_device(cp):
    d = cp.cuda.Device()
    assert d.id == 0 and int(d) == 0 and d.compute_capability == "90"
    attrs = d.attributes
    assert attrs["MaxSharedMemoryPerBlock"] == 49152 and attrs["MaxThreadsPerBlock"] == 1024
    assert attrs["WarpSize"] == 32
    for key in (
        "MaxBlockDimX",
        "MaxBlockDimY",
        "MaxBlockDimZ",
        "MaxGridDimX",
        "MaxGridDimY",
        "MaxGridDimZ",
        "MultiProcessorCount",
        "MaxSharedMemoryPerBlockOptin",
    ):
        assert attrs[key] > 0
    with cp.cuda.Device(0) as entered:
        assert entered.id == 0
    d.use()
    d.synchronize()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError):
        cp.cuda.Device(1).use()


def test_runtime(cp):
    rt = cp.cuda.runtime
    assert rt.getDevice() == 0 and rt.getDeviceCount() == 1
    assert rt.memGetInfo() == (16 << 30, 16 << 30)
    props = rt.getDeviceProperties(0)
    assert isinstance(props["name"], bytes) and (props["major"], props["minor"]) == (9, 0)
    assert props["sharedMemPerBlock"] == 49152
    assert rt.driverGetVersion() > 0 and rt.runtimeGetVersion() > 0
    assert (
        rt.deviceGetAttribute(rt.cudaDevAttrMaxSharedMemoryPerBlockOptin, 0)
        == cp.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
    )
    assert rt.deviceGetAttribute(rt.cudaDevAttrWarpSize, 0) == 32
    rt.setDevice(0)
    rt.deviceSynchronize()
    with pytest.raises(rt.CUDARuntimeError):
        rt.setDevice(3)


def test_streams_and_events(cp):
    null = cp.cuda.Stream.null
    assert null.ptr == 0 and cp.cuda.get_current_stream() == null
    s = cp.cuda.Stream(non_blocking=True)
    assert s.ptr != 0 and s.done
    with s:
        assert cp.cuda.get_current_stream() is s
        with cp.cuda.Stream() as inner:
            assert cp.cuda.get_current_stream() is inner
        assert cp.cuda.get_current_stream() is s
    assert cp.cuda.get_current_stream() == null
    start = s.record()
    end = cp.cuda.Event()
    end.record(s)
    s.wait_event(end)
    end.synchronize()
    s.synchronize()
    assert start.done and end.done
    assert not hasattr(end, "query") and not hasattr(s, "query")  # CuPy events/streams have ``done`` only
    assert cp.cuda.get_elapsed_time(start, end) >= 0.0
    with pytest.raises(TypeError):
        s.wait_event(s)
    s.use()
    assert cp.cuda.get_current_stream() is s
    null.use()


def test_memory_pools_and_pinned_memory(cp):
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    assert pool.used_bytes() >= 0 and pool.total_bytes() >= 0 and pool.n_free_blocks() >= 0
    assert not hasattr(cp.get_default_pinned_memory_pool(), "used_bytes")  # as in CuPy 14.2
    pinned = cp.get_default_pinned_memory_pool()
    pinned.free_all_blocks()
    assert pinned.n_free_blocks() == 0
    with pytest.raises(NotImplementedError):
        cp.cuda.alloc_pinned_memory(16)
    assert cp.cuda.alloc(16).ptr != 0
    cp.cuda.nvtx.RangePush("x")
    cp.cuda.nvtx.RangePop()


# --------------------------------------------------------------------------- kernels


def test_kernels_construct_but_refuse_to_run(cp, monkeypatch):
    # With the automatic CPU emulation turned off (tests/unit/test_auto_emulation.py has it on).
    monkeypatch.setenv("CUNUMPY_EMULATION", "0")
    raw = cp.RawKernel('extern "C" __global__ void k(float* x) {}', "k")
    assert raw.name == "k" and raw.max_threads_per_block == 1024
    module = cp.RawModule(code='extern "C" __global__ void k() {}')
    elementwise = cp.ElementwiseKernel("float64 x", "float64 y", "y = x", "copy")
    reduction = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
    for call in (
        lambda: raw((1,), (1,), (cp.ones(1),)),
        lambda: raw.compile(),
        lambda: module.get_function("k")((1,), (1,), ()),
        lambda: elementwise(cp.ones(2)),
        lambda: reduction(cp.ones(2)),
    ):
        with pytest.raises(NotImplementedError, match="CUNUMPY_EMULATION=0.*emulated_launches"):
            call()


def test_launch_hook_takes_over(cp, monkeypatch):
    from cunumpy._fake_cupy import _kernels

    seen = []
    monkeypatch.setattr(
        _kernels,
        "_launch_hook",
        lambda action, kernel, args, kwargs: seen.append((action, kernel.name, kwargs)) or "done",
    )
    raw = cp.RawKernel("", "k")
    assert raw((2,), (32,), (), shared_mem=8) == "done"
    assert seen == [("launch", "k", {"shared_mem": 8})]


def test_fuse_is_a_plain_decorator(cp):
    @cp.fuse
    def f(x):
        return x * 2

    @cp.fuse(kernel_name="g")
    def g(x):
        return x + 1

    assert f(cp.arange(2)).get().tolist() == [0, 2] and g(cp.arange(2)).get().tolist() == [1, 2]
    assert f.__name__ == "f"


def test_get_array_module(cp):
    assert cp.get_array_module(cp.ones(1), 1) is cp
    assert cp.get_array_module(np.ones(1)) is np


# --------------------------------------------------------------------------- random, linalg, fft


def test_random(cp):
    g = cp.random.default_rng(1)
    draws = [g.random(3), g.standard_normal((2, 2)), g.exponential(1.0, 4), g.uniform(0, 1, 2), g.integers(0, 5, 3)]
    for missing in ("normal", "choice", "permutation", "shuffle"):  # not Generator methods in CuPy 14.2
        assert not hasattr(g, missing), missing
    assert all(type(d) is cp.ndarray for d in draws)
    assert cp.random.default_rng(1).random(3).get().tolist() == draws[0].get().tolist()
    cp.random.seed(3)
    first = cp.random.rand(2).get()
    cp.random.seed(3)
    assert cp.random.rand(2).get().tolist() == first.tolist()
    for d in (
        cp.random.randn(2),
        cp.random.random((2,)),
        cp.random.uniform(size=2),
        cp.random.normal(size=2),
        cp.random.randint(0, 3, 2),
        cp.random.random(),
    ):
        assert type(d) is cp.ndarray
    a = cp.arange(5)
    cp.random.shuffle(a)
    assert sorted(a.get().tolist()) == [0, 1, 2, 3, 4]


def test_linalg_and_fft(cp):
    m = cp.array([[2.0, 0.0], [0.0, 4.0]])
    assert cp.linalg.inv(m).get().tolist() == [[0.5, 0.0], [0.0, 0.25]]
    assert type(cp.linalg.norm(m)) is cp.ndarray
    u, s, vt = cp.linalg.svd(m)
    assert all(type(x) is cp.ndarray for x in (u, s, vt))
    assert type(cp.fft.rfft(cp.ones(8))) is cp.ndarray
    assert cp.fft.fftfreq(4).shape == (4,)
    assert xp.linalg.solve(m, cp.ones(2)).get().tolist() == [0.5, 0.25]
    assert not hasattr(cp.fft, "fftpack")


# --------------------------------------------------------------------------- cupyx


def test_cupyx_pinned_and_scatter(cp):
    import cupyx

    assert type(cupyx.empty_pinned((2,))) is np.ndarray
    assert cupyx.zeros_pinned(3).tolist() == [0.0] * 3
    a = cp.zeros(3)
    cupyx.scatter_add(a, cp.array([0, 0, 2]), 1.0)
    assert a.get().tolist() == [2.0, 0.0, 1.0]


def test_cupyx_scipy_names(cp):
    pytest.importorskip("scipy")
    import cupyx.scipy.interpolate
    import cupyx.scipy.linalg
    import cupyx.scipy.special

    special, linalg, interpolate = cupyx.scipy.special, cupyx.scipy.linalg, cupyx.scipy.interpolate
    assert hasattr(special, "erf") and hasattr(special, "gammaln") and not hasattr(special, "jv")
    assert hasattr(linalg, "lu_factor") and not hasattr(linalg, "inv")
    assert hasattr(interpolate, "CubicSpline") and not hasattr(interpolate, "RectBivariateSpline")
    with pytest.raises(ImportError):
        from cupyx.scipy.special import jv  # noqa: F401


def test_cupyx_scipy_rules(cp):
    pytest.importorskip("scipy")
    import cupyx.scipy.interpolate as interpolate
    import cupyx.scipy.linalg as linalg
    import cupyx.scipy.ndimage as ndimage
    import cupyx.scipy.special as special

    x = cp.linspace(0.0, 1.0, 5)
    e = special.erf(x)
    assert type(e) is cp.ndarray
    with pytest.raises(TypeError):
        special.erf(np.ones(2))
    lu, piv = linalg.lu_factor(cp.eye(3) * 2)
    assert type(lu) is cp.ndarray and type(piv) is cp.ndarray
    with pytest.raises(TypeError):
        linalg.lu_factor(np.eye(3))
    spline = interpolate.CubicSpline(x, x**2)
    assert type(spline(cp.array([0.5]))) is cp.ndarray
    assert type(spline.c) is cp.ndarray
    with pytest.raises(TypeError):
        spline(np.array([0.5]))
    clone = copy.deepcopy(spline)
    assert float(clone(cp.array([0.5]))[0]) == pytest.approx(0.25)
    assert type(ndimage.gaussian_filter(cp.ones((4, 4)), 1.0)) is cp.ndarray


def test_scipy_is_imported_lazily_in_subprocess():
    code = (
        "import sys\n"
        "import cunumpy as xp\n"
        "xp.set_backend('cupy', strict=True)\n"
        "import cupy, cupyx, cupyx.scipy\n"
        "assert 'scipy' not in sys.modules, 'scipy imported too early'\n"
        "assert 'pytest' not in sys.modules\n"
        "import importlib.util\n"
        "if importlib.util.find_spec('scipy') is None:\n"
        "    raise SystemExit(0)\n"
        "import cupyx.scipy.special\n"
        "assert 'scipy.special' in sys.modules\n"
        "assert cupyx.scipy.special.erf(cupy.zeros(1)).get()[0] == 0.0\n"
    )
    run_in_fake_cupy_subprocess(code)


def test_every_generated_function_takes_fake_arrays_where_numpy_takes_host_ones(cp):
    import types
    import warnings

    failures = []
    inputs = (np.linspace(0.5, 2.0, 6).reshape(2, 3), np.arange(6).reshape(2, 3))
    for name in sorted(n for n in dir(cp) if not n.startswith("_")):
        fake, real = getattr(cp, name), getattr(np, name, None)
        if real is None or isinstance(fake, (type, types.ModuleType)) or not callable(fake):
            continue
        for host in inputs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    real(host)
                except Exception:  # noqa: BLE001 - a case the real NumPy rejects is not compared
                    continue
                try:
                    fake(cp.asarray(host))
                except Exception as exc:  # noqa: BLE001 - every failure of the fake is reported
                    failures.append(f"{name}: {type(exc).__name__}: {exc}")
            break
    assert failures == []


def test_callables_see_device_data(cp):
    rows = []

    def first(row):
        rows.append(type(row))
        return row[0]

    r = cp.apply_along_axis(first, 1, cp.arange(6).reshape(2, 3))
    assert type(r) is cp.ndarray and r.get().tolist() == [0, 3]
    assert rows and all(t is cp.ndarray for t in rows)
    with pytest.raises(NotImplementedError):
        cp.piecewise(cp.arange(3), [cp.arange(3) > 0], [lambda v: v])
    assert cp.piecewise(cp.arange(3), [cp.arange(3) > 0], [1]).get().tolist() == [0, 1, 1]


def test_cupy_testing_takes_device_arrays(cp):
    cp.testing.assert_allclose(cp.ones(2), np.ones(2))
    cp.testing.assert_array_equal(cp.arange(2), cp.arange(2))
    with pytest.raises(AssertionError):
        cp.testing.assert_array_equal(cp.arange(2), cp.ones(2))


def test_cupyx_scipy_proxies(cp):
    pytest.importorskip("scipy")
    import cupyx.scipy.interpolate as interpolate
    import cupyx.scipy.sparse as sparse
    import cupyx.scipy.sparse.linalg as sparse_linalg
    import cupyx.scipy.spatial as spatial
    import cupyx.scipy.special as special

    A = sparse.csr_matrix(cp.eye(3) * 2)
    assert type(A @ cp.ones(3)) is cp.ndarray and type(A.data) is cp.ndarray
    assert sparse.issparse(A) and type(A.toarray()) is cp.ndarray
    x, info = sparse_linalg.cg(A, cp.ones(3))
    assert type(x) is cp.ndarray and info == 0
    assert sparse.diags([cp.ones(3)], [0]).toarray().get().tolist() == np.eye(3).tolist()
    with pytest.raises(TypeError):
        sparse.diags([np.ones(3)], [0])
    grid = interpolate.RegularGridInterpolator((cp.arange(3.0), cp.arange(3.0)), cp.ones((3, 3)))
    assert float(grid(cp.asarray([[0.5, 0.5]]))[0]) == pytest.approx(1.0)
    distances, indices = spatial.KDTree(cp.eye(3)).query(cp.zeros((1, 3)))
    assert type(distances) is cp.ndarray and type(indices) is cp.ndarray
    with pytest.raises(TypeError, match=r"cupyx\.scipy\.special\.erf\(\)"):
        special.erf([1.0])
    with pytest.raises(TypeError, match=r"cupyx\.scipy\.signal"):
        import cupyx.scipy.signal as signal

        signal.convolve([1.0, 2.0], cp.ones(2))


def test_membership_is_an_implicit_copy_and_sync(cp, sink):
    a = cp.arange(3)
    assert 2 in a and 5 not in a
    assert [e.description.split(" of ")[0] for e in sink.events] == ["in"] * 4
    assert [(e.kind, e.nbytes) for e in sink.events] == [("to_host", 1), ("sync", None)] * 2
    with pytest.raises(TypeError):
        np.ones(2) in a  # noqa: B015 - the containment test must raise


def test_memory_pointer_copies(cp):
    a = cp.zeros(4)
    host = np.arange(4.0)
    a.data.copy_from_host(host.ctypes.data, host.nbytes)
    assert a.get().tolist() == host.tolist()
    out = np.empty(4)
    a.data.copy_to_host(out.ctypes.data, out.nbytes)
    assert out.tolist() == host.tolist()
    b = cp.empty(4)
    b.data.copy_from_device(a.data, a.nbytes)
    assert b.get().tolist() == host.tolist()
    b.data.memset(0, b.nbytes)
    assert b.get().tolist() == [0.0] * 4


def test_stride_tricks_view_shares_memory(cp):
    a = cp.arange(6.0)
    w = cp.lib.stride_tricks.as_strided(a, shape=(2, 2), strides=(16, 8))
    assert type(w) is cp.ndarray and w.get().tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert w.base is a
    with pytest.raises(TypeError):
        cp.lib.stride_tricks.as_strided(np.arange(6.0), shape=(2,), strides=(8,))


def test_forwarded_namespace_uses_the_fake(cp):
    assert xp.random is cp.random and xp.linalg.norm is not None
    assert type(xp.random.default_rng(0).random(2)) is cp.ndarray
    with xp.use_backend("numpy"):
        assert type(xp.zeros(2)) is np.ndarray
    assert type(xp.zeros(2)) is cp.ndarray
    with pytest.raises(TypeError):
        xp.sum(np.ones(3))


def test_broadcast(cp):
    b = cp.broadcast(cp.ones((2, 1)), cp.arange(3))
    assert b.shape == (2, 3) and b.nd == 2 and b.size == 6
    assert all(type(v) is cp.ndarray and v.shape == (2, 3) for v in b.values)
    with pytest.raises(TypeError):
        cp.broadcast(cp.ones(3), np.ones(3))
