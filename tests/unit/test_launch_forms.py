"""Every launch form of CudaKernel in C (issue 24, "every launch form at C speed"): the C path
and the general Python path (``_call_slow``) give the same launches, the same values from
prepare_args and the same errors, with the same messages.

Tests named ``test_device_*`` need device arrays: they run against the fake CuPy
(CUNUMPY_FAKE_CUPY=1) and, in a plain run, in a subprocess against the stand-in of
``_cuda_standin.py``.
"""

import sys
import types

import numpy as np
import pytest
from _fake_support import run_device_tests_under_standin

from cunumpy import _reference
from cunumpy.arguments import CudaStruct
from cunumpy.kernel_testing import fake_cupy_active
from cunumpy.kernels import CudaKernel, _cuda_kernel as ck, _cuda_launch

SRC = 'extern "C" __global__ void k(const double* x, double* y, int n, Array2D<float> v, CArray1D<int> c, float f) {}'


@pytest.fixture(autouse=True, scope="module")
def _the_device_path():
    """These tests compare CudaKernel's two device paths, so the fake CuPy's automatic CPU
    emulation (which takes every launch) is off; emulated_launches() blocks still emulate."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUNUMPY_EMULATION", "0")
        yield


@pytest.mark.skipif(fake_cupy_active(), reason="device tests already run in this process")
def test_standin_runs_the_device_tests():
    """Plain run: the device tests against the CuPy stand-in, in a fresh interpreter."""
    run_device_tests_under_standin(__file__)


class Recorder:
    """Replaces CudaKernel._launch (the common end of both paths) and counts _call_slow."""

    def __init__(self, monkeypatch, kernel):
        self.launches = []
        self.slow = 0
        original = CudaKernel._call_slow

        def launch(k, cupy, dev, lim, args, packed, g, blk, shared_mem, stream):
            self.launches.append((bytes(packed)[8 * k._plan.n_params :], g, blk, shared_mem, stream))
            return "launched"

        def counted(*args, **kwargs):
            self.slow += 1
            return original(kernel, *args, **kwargs)

        monkeypatch.setattr(CudaKernel, "_launch", launch)
        kernel._call_slow = counted  # looked up on the instance by the C __call__
        self.original = original

    def general(self, kernel, *args, **kwargs):
        return self.original(kernel, *args, **kwargs)


def _outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the outcome is compared
        return (type(exc).__name__, str(exc))


def _arrays(dev, n):
    return (dev(np.zeros(n)), dev(np.zeros(n)), dev(np.zeros((n, 6), np.float32)), dev(np.zeros(3, np.int32)))


FORMS = [
    {},
    {"n_threads": 5},
    {"n_threads": (5, 2)},
    {"n_threads": [5, 2, 1]},
    {"grid": 3},
    {"grid": (3, 2), "block": (32, 2)},
    {"n_threads": 300, "block": 64},
    {"n_threads": (40, 3), "block": (16, 4)},
    {"shared_mem": 0},
    {"shared_mem": 4096},
    {"n_threads": 5, "shared_mem": 100, "block": 32},
    {"stream": None},
    {"stream": "stream0"},
    {"grid": (1, 1, 1), "block": (1, 1, 1), "shared_mem": 1, "stream": "stream0"},
    {"n_threads": None, "grid": None, "block": None, "shared_mem": 0, "stream": None},
    {"n_threads": 0},
    {"grid": (0, 4)},
]


def _stream_on(device_id):
    cupy = sys.modules["cupy"]
    external = getattr(getattr(cupy, "cuda", None), "ExternalStream", None)
    if external is not None:
        return external(0x1234, device_id)
    return types.SimpleNamespace(ptr=0x1234, device_id=device_id)


def _resolve(kw):
    return {k: (_stream_on(0) if v == "stream0" else v) for k, v in kw.items()}


@pytest.mark.parametrize("n", [0, 7])
@pytest.mark.parametrize("kw", FORMS, ids=[repr(f) for f in FORMS])
def test_device_every_launch_form_takes_the_c_path_and_launches_as_the_general_path(dev, monkeypatch, kw, n):
    k = CudaKernel(SRC, "k")
    rec = Recorder(monkeypatch, k)
    x, y, v, c = _arrays(dev, n)
    args = (x, y, n, v, c, 1.5)
    kw = _resolve(kw)
    general = _outcome(rec.general, k, *args, **kw)  # validates on the device: the C path is configured
    assert rec.slow == 0
    general_launches = list(rec.launches)
    rec.launches.clear()
    fast = _outcome(k, *args, **kw)
    assert rec.slow == 0, "the call went through the Python path"
    assert fast == general
    assert rec.launches == general_launches
    if general_launches:
        assert general[1] == "launched"


ERRORS = [
    ((), {"n_threads": -1}),
    ((), {"n_threads": (5, -2)}),
    ((), {"n_threads": 5, "grid": 1}),
    ((), {"grid": ()}),
    ((), {"grid": (1, 2, 3, 4)}),
    ((), {"n_threads": True}),
    ((), {"n_threads": 2.0}),
    ((), {"block": 0}),
    ((), {"block": (64, 64)}),
    ((), {"block": (1, 1, 128)}),
    ((), {"block": (2**31, 2**31, 2**31)}),
    ((), {"block": 2**70}),
    ((), {"n_threads": 2**70}),
    ((), {"n_threads": (2**62, 2**62, 2**62), "block": (1, 1, 1)}),
    ((), {"block": (8, 4), "n_threads": 10}),
    ((), {"block": (8, 4, 2), "n_threads": (10, 3)}),
    ((), {"grid": (2**31,)}),
    ((), {"grid": (1, 70000)}),
    ((), {"shared_mem": -1}),
    ((), {"shared_mem": 1.5}),
    ((), {"shared_mem": "0"}),
    ((), {"shared_mem": 10**9}),
    ((), {"shared_mem": 2**70}),
    ((), {"stream": "other"}),
    ((), {"stream": "other", "n_threads": 5}),
    ((), {"foo": 1}),
    (("wrong dtype",), {}),
    (("wrong dtype",), {"n_threads": 5}),
    (("too few",), {"grid": 1}),
    (("too many",), {"block": 32}),
    (("host array",), {"stream": "stream0"}),
    (("overflow",), {"n_threads": 1}),
]


@pytest.mark.parametrize("case", ERRORS, ids=[f"{a}-{kw!r}" for a, kw in ERRORS])
@pytest.mark.parametrize("n", [0, 7])
def test_device_errors_are_those_of_the_general_path(dev, monkeypatch, case, n):
    what, kw = case
    k = CudaKernel(SRC, "k")
    rec = Recorder(monkeypatch, k)
    x, y, v, c = _arrays(dev, n)
    args = [x, y, n, v, c, 1.5]
    if what == ("wrong dtype",):
        args[1] = dev(np.zeros(n, np.float32))
    elif what == ("too few",):
        args = args[:-1]
    elif what == ("too many",):
        args = [*args, 1]
    elif what == ("host array",):
        args[0] = np.zeros(n)
    elif what == ("overflow",):
        args[2] = 2**40
    kw = {key: (_stream_on(1) if value == "other" else value) for key, value in _resolve(kw).items()}
    assert k(x, y, n, v, c, 1.5) in (None, "launched")  # configures the C path
    rec.slow = 0
    general = _outcome(rec.general, k, *args, **kw)
    fast = _outcome(k, *args, **kw)
    assert fast == general
    assert fast[0] != "ok", fast


@pytest.mark.parametrize("rule", ["auto", "first_array", "last_axis", "callable", None])
@pytest.mark.parametrize("block", [128, (8, 4), (4, 2, 2)])
def test_device_inference_rules(dev, monkeypatch, rule, block):
    k = CudaKernel('extern "C" __global__ void k(Array3D<double> a, int n) {}', "k", block_size=block)
    if rule == "callable":
        k.n_threads_from = lambda args: (args[1], 2)
    else:
        k.n_threads_from = rule
    rec = Recorder(monkeypatch, k)
    for shape in [(9, 5, 3), (0, 5, 3), (9, 0, 2), (2, 2, 0)]:
        a = dev(np.zeros(shape))
        for kw in ({}, {"n_threads": 4}, {"block": 16}, {"block": (2, 2)}):
            general = _outcome(rec.general, k, a, 3, **kw)
            launches = list(rec.launches)
            rec.launches.clear()
            fast = _outcome(k, a, 3, **kw)
            assert fast == general, (shape, kw)
            assert rec.launches == launches
            rec.launches.clear()


def test_device_inference_behind_a_struct_value_and_argument_objects(dev, monkeypatch):
    Args = CudaStruct("Args", [("x", "double*"), ("n", "int")])
    src = Args.declaration + 'extern "C" __global__ void k(Args a, double* y) {}'
    k = CudaKernel(src, "k", structs=[Args])
    rec = Recorder(monkeypatch, k)
    x, y = dev(np.zeros(300)), dev(np.zeros(5))
    value = Args(x=x, n=300)
    general = _outcome(rec.general, k, value, y)
    launches = list(rec.launches)
    rec.launches.clear()
    assert _outcome(k, value, y) == general
    assert rec.launches == launches and launches[0][1] == (3,)  # from x, inside the struct


def test_device_nonzero_launches_reach_the_emulation_hook_alike(dev, monkeypatch):
    class Hook:
        def __init__(self):
            self.calls = []

        def launch(self, kernel, args, grid, block, shared_mem):
            self.calls.append((grid, block, shared_mem))

    k = CudaKernel(SRC, "k")
    Recorder(monkeypatch, k)
    x, y, v, c = _arrays(dev, 7)
    assert k(x, y, 7, v, c, 1.5, shared_mem=8) == "launched"  # configures the C path
    hook = Hook()
    monkeypatch.setattr(ck, "emulation_hook", hook)
    for kw in ({}, {"n_threads": (7, 2)}, {"grid": 2, "block": 16, "shared_mem": 64}):
        k(x, y, 7, v, c, 1.5, **kw)
        CudaKernel._call_slow(k, x, y, 7, v, c, 1.5, **kw)
        assert hook.calls[-1] == hook.calls[-2]
    assert hook.calls[0] == ((1,), (128,), 0)


def test_device_a_new_device_or_a_rule_change_goes_back_to_the_general_path(dev, monkeypatch):
    k = CudaKernel(SRC, "k")
    rec = Recorder(monkeypatch, k)
    x, y, v, c = _arrays(dev, 0)
    k(x, y, 0, v, c, 1.5)
    k(x, y, 0, v, c, 1.5, n_threads=3)
    assert rec.slow == 1
    k.n_threads_from = lambda args: 0
    k(x, y, 0, v, c, 1.5)
    assert rec.slow == 2  # a callable rule runs in Python
    k.n_threads_from = "auto"
    k(x, y, 0, v, c, 1.5)
    assert rec.slow == 2
    k._plan.configure_device(None)
    k(x, y, 0, v, c, 1.5)
    k(x, y, 0, v, c, 1.5)
    assert rec.slow == 3  # validated again, then in C


# ------------------------------------------------------------------ prepare_args


def _same_values(a, b):
    assert len(a) == len(b)
    for p, q in zip(a, b):
        if isinstance(p, np.void):
            assert type(q) is np.void and p.dtype == q.dtype and p.tobytes() == q.tobytes()
        elif isinstance(p, np.generic):
            assert type(p) is type(q) and p == q
        else:
            assert p is q


def test_device_prepare_args_in_c_equals_the_python_path_and_the_twin(dev):
    k = CudaKernel(SRC, "k")
    x, y, v, c = _arrays(dev, 4)
    cases = [
        (x, y, 4, v[:, ::2], c, 2.0),
        (x, y, np.int64(3), v, c, np.float32(0.5)),
        (x, y, True, v.T.T, c, 7),
    ]
    for args in cases:
        first = k.prepare_args(*args)  # configures the plan through the Python path
        again = k.prepare_args(*args)  # in C
        slow = k._prepare_slow(*args)
        _same_values(first, again)
        _same_values(again, slow)
        twin = _reference.launch_plan(
            "k", tuple(ck._spec(i, p) for i, p in enumerate(k.signature)), np.void, np.generic
        )
        twin.configure_prepare(np.empty, k._value_dtypes(), None, None)
        _same_values(again, twin.prepare(*args))
    values = k.prepare_args(x, y, 4, v[:, ::2], c, 2)
    assert values[0] is x and values[1] is y
    assert type(values[2]) is np.int32 and type(values[5]) is np.float32 and values[5] == 2.0
    assert values[3]["data"] == v.data.ptr and values[3]["shape"].tolist() == [4, 3]
    assert values[3]["strides"].tolist() == [6, 2] and values[4]["shape"].tolist() == [3]
    assert "strides" not in values[4].dtype.names
    # Each value is its own: later calls never change it.
    keep = [k.prepare_args(x, y, i, v, c, float(i)) for i in range(200)]
    assert [int(t[2]) for t in keep] == list(range(200)) and [float(t[5]) for t in keep] == list(range(200))
    assert len({id(t[3]) for t in keep}) == 200


def test_device_prepare_args_errors_are_those_of_a_call(dev):
    k = CudaKernel(SRC, "k")
    x, y, v, c = _arrays(dev, 4)
    k.prepare_args(x, y, 4, v, c, 2.0)
    for args in [
        (x, y, 4, v, c),
        (x, dev(np.zeros(4, np.float32)), 4, v, c, 2.0),
        (x, y, 2**40, v, c, 1.0),
        (np.zeros(4), y, 4, v, c, 1.0),
    ]:
        c_way = _outcome(k.prepare_args, *args)
        py_way = _outcome(k._prepare_slow, *args)
        call = _outcome(k, *args, n_threads=0)
        assert c_way == py_way == call and c_way[0] != "ok"
    with pytest.raises(TypeError):
        k.prepare_args(x, y, 4, v, c, 2.0, n_threads=4)


def test_prepare_args_without_a_signature_flattens():
    k = CudaKernel('extern "C" __global__ void k(double* x, int n) {}', "k", check_signature=False)

    class Args:
        def __cuda_args__(self):
            return (1, 2)

    assert k.prepare_args(Args(), 3) == (1, 2, 3)
    assert k.prepare_args(Args(), 3) == (1, 2, 3)


def test_prepare_args_follows_the_cupy_module_it_saw(monkeypatch):
    """The C prepare_args asks the device of the CuPy module it was configured with; another
    (or none) sends it back through the Python path, which configures it again."""
    k = CudaKernel('extern "C" __global__ void k(int n, float f) {}', "k")
    assert k.prepare_args(1, 2.0) == (1, 2.0)
    calls = []
    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: calls.append(1) or 0))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(_cuda_launch, "_getter_cache", [None, None])
    before = len(calls)
    assert k.prepare_args(3, 4.0) == (3, 4.0)
    assert k.prepare_args(3, 4.0) == (3, 4.0)
    assert len(calls) >= before + 2  # the new module's getter, in Python and then in C
