"""_core's PyccelKernel traversal (reaches_device, host_arguments, device_result) against its
pure-Python twin, over nested lists, tuples, dicts and objects with aliasing and cycles."""

import contextlib
import gc
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cunumpy import _reference
from cunumpy._native import HAVE_C_CORE, core

IMPLEMENTATIONS = [pytest.param(core, id="c"), pytest.param(_reference, id="twin")]


class Traversed:
    """A user object in a module matched by the object_modules prefix below."""


Traversed.__module__ = "simulation.particles"


class Foreign:
    """A user object of a module that is not traversed."""


Foreign.__module__ = "elsewhere"


class WithCopy:
    """Traversed, with its own copy protocol (goes through copy.copy)."""

    def __copy__(self):
        new = WithCopy.__new__(WithCopy)
        new.__dict__.update(self.__dict__)
        new.copied = True
        return new


WithCopy.__module__ = "simulation.copyable"

MODULES = ("simulation.",)


def cupy_module():
    return sys.modules["cupy"]


def to_host(a):
    return a.get(order="F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C")


def test_the_c_functions_exist():
    assert HAVE_C_CORE
    for name in ("reaches_device", "host_arguments", "device_result", "HostKernel"):
        assert hasattr(core, name) and hasattr(_reference, name)


# --------------------------------------------------------------------------- host data only


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_host_data_reaches_no_device(impl):
    t = Traversed()
    t.x = [np.zeros(2)]
    cyclic = [1]
    cyclic.append(cyclic)
    assert impl.reaches_device((np.zeros(2), [1, (2.0,)], {"a": t}, cyclic), {"k": [np.ones(1)]}, MODULES) is False


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_bad_input_names_the_argument(impl):
    with pytest.raises(TypeError, match="args"):
        impl.reaches_device([1])
    with pytest.raises(TypeError, match="kwargs"):
        impl.reaches_device((), [1])
    with pytest.raises(TypeError, match="object_modules"):
        impl.reaches_device((), None, ["x"])
    with pytest.raises(TypeError, match="object_modules"):
        impl.reaches_device((), None, (1,))
    with pytest.raises(TypeError, match="to_host"):
        impl.host_arguments((), None, 3)
    with pytest.raises(TypeError, match="outputs"):
        impl.host_arguments((), None, to_host, (), [0])
    with pytest.raises(TypeError, match="args"):
        impl.host_arguments({}, None, to_host)
    with pytest.raises(TypeError):
        impl.device_result(1, None, np.ndarray)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_host_arguments_without_device_arrays_copy_containers_only(impl):
    a = np.zeros(3)
    t = Traversed()
    t.a = a
    f = Foreign()
    args = ([a, (a,)], {"t": t}, f, 2.5)
    host_args, host_kwargs, n, plan = impl.host_arguments(args, None, to_host, MODULES)
    assert (n, plan, host_kwargs) == (0, [], None)
    assert host_args[0] == [a, (a,)] and host_args[0] is not args[0]
    assert host_args[0][0] is a and host_args[1]["t"] is not t and host_args[1]["t"].a is a
    assert host_args[2] is f and host_args[3] == 2.5


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_device_result_converts_lists_and_tuples_not_dicts(impl):
    a, b = np.zeros(2), np.ones(2)
    seen = []

    def to_device(x):
        seen.append(x)
        return ("device", len(seen))

    result = impl.device_result((a, [b, a], {"k": b}, 3), to_device, np.ndarray)
    assert result[0] == ("device", 1) and result[1] == [("device", 2), ("device", 1)]
    assert result[2]["k"] is b and result[3] == 3
    assert seen == [a, b]
    assert impl.device_result(None, to_device, np.ndarray) is None
    # A predicate decides what counts as an array.
    assert impl.device_result([1, 2], lambda x: ("d", x), lambda v: v == 2) == [1, ("d", 2)]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_device_result_cycle_through_tuple_raises(impl):
    cyc = []
    t = (cyc,)
    cyc.append(t)
    with pytest.raises(ValueError, match="cycle"):
        impl.device_result(t, lambda x: x, np.ndarray)
    cyc_list = [np.zeros(1)]
    cyc_list.append(cyc_list)
    out = impl.device_result(cyc_list, lambda x: "dev", np.ndarray)
    assert out[0] == "dev" and out[1] is out


# --------------------------------------------------------------------------- with device arrays


@pytest.fixture
def cupy(device_only):
    return cupy_module()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_aliasing_objects_and_cycles(impl, cupy):
    d = cupy.asarray(np.arange(3.0))
    e = cupy.array(np.arange(6.0).reshape(2, 3), order="F")
    obj = Traversed()
    obj.pos = d
    obj.more = [d, e]
    foreign = Foreign()
    foreign.pos = d
    cyclic = [d]
    cyclic.append(cyclic)
    calls = []

    def counting(a):
        calls.append(a)
        return to_host(a)

    args = (d, [d, e, {"k": e}], obj, cyclic, (d,), foreign)
    host_args, host_kwargs, n, plan = impl.host_arguments(args, {"z": e}, counting, MODULES, (1,))
    assert n == 2 and len(calls) == 2
    hd, he = host_args[0], host_args[1][1]
    assert isinstance(hd, np.ndarray) and isinstance(he, np.ndarray)
    assert host_args[1][0] is hd and host_args[1][2]["k"] is he and host_kwargs["z"] is he
    assert host_args[2] is not obj and host_args[2].pos is hd and host_args[2].more[1] is he
    assert obj.pos is d and obj.more[0] is d  # the caller's object keeps its device arrays
    assert host_args[3][0] is hd and host_args[3][1] is host_args[3]
    assert host_args[4] == (hd,)
    assert host_args[5] is foreign and foreign.pos is d
    assert he.flags.f_contiguous and not he.flags.c_contiguous
    np.testing.assert_array_equal(he, np.arange(6.0).reshape(2, 3))
    # Argument 1 reaches both arrays, so both are copied back, each once.
    assert [(p[0] is d, p[0] is e) for p in plan] == [(True, False), (False, True)]
    assert plan[0][1] is hd and plan[1][1] is he


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_objects_with_their_own_copy_protocol(impl, cupy):
    d = cupy.asarray(np.arange(3.0))
    w = WithCopy()
    w.a = d
    host_args, _, n, plan = impl.host_arguments((w,), None, to_host, MODULES, ())
    assert n == 1 and plan == []
    assert host_args[0].copied is True and isinstance(host_args[0].a, np.ndarray) and w.a is d
    assert not hasattr(w, "copied")


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_cycle_through_a_tuple_raises(impl, cupy):
    d = cupy.asarray(np.zeros(1))
    inner = [d]
    t = (inner,)
    inner.append(t)
    assert impl.reaches_device((t,), None) is True
    with pytest.raises(ValueError, match="tuple"):
        impl.host_arguments((t,), None, to_host)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_to_host_errors_propagate(impl, cupy):
    d = cupy.asarray(np.zeros(1))

    def failing(a):
        raise RuntimeError("copy failed")

    with pytest.raises(RuntimeError, match="copy failed"):
        impl.host_arguments(([1, {"a": d}],), None, failing)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_deep_nesting_is_a_recursion_error_not_a_crash(impl, cupy):
    d = cupy.asarray(np.zeros(1))
    deep = [d]
    for _ in range(100_000):
        deep = [deep]
    assert impl.reaches_device((deep,), None) is True
    if impl is core:
        with pytest.raises(RecursionError):
            impl.host_arguments((deep,), None, to_host)


# --------------------------------------------------------------------------- property test


def _canonical(value, hosts, devices):
    """A structure-and-identity description of a traversal result: shared objects and
    cycles appear as back references, arrays by the order of their conversion."""
    ids = {}

    def walk(v):
        if id(v) in hosts:
            return ("host", hosts[id(v)])
        if id(v) in devices:
            return ("device", devices[id(v)])
        if id(v) in ids:
            return ("ref", ids[id(v)])
        t = type(v)
        if isinstance(v, np.ndarray):
            ids[id(v)] = len(ids)
            return ("numpy", v.tolist())
        if isinstance(v, Foreign):
            ids[id(v)] = len(ids)
            return ("foreign", ids[id(v)])
        if t in (list, tuple, dict) or isinstance(v, Traversed):
            ids[id(v)] = len(ids)
            if t is dict:
                return ("dict", [(k, walk(x)) for k, x in v.items()])
            if t in (list, tuple):
                return (t.__name__, [walk(x) for x in v])
            return (t.__name__, [(k, walk(x)) for k, x in vars(v).items()])
        return ("leaf", repr(v))

    return walk(value)


def _reaches(args, kwargs, devices):
    """Independent oracle: a device array is reachable iff the canonical walk meets one."""
    index = {id(d): i for i, d in enumerate(devices)}
    return "'device'" in repr(_canonical((args, kwargs), {}, index))


@st.composite
def argument_sets(draw, cupy):
    """Nested arguments over a few device arrays, with shared containers and cycles."""
    n_devices = draw(st.integers(0, 4))
    devices = [cupy.asarray(np.full(2, float(i))) for i in range(n_devices)]
    made = []  # containers and objects, for aliasing and cycles

    def leaf():
        choices = ["int", "numpy", "str"] + (["device"] * 3 if devices else [])
        kind = draw(st.sampled_from(choices))
        if kind == "device":
            return devices[draw(st.integers(0, len(devices) - 1))]
        if kind == "numpy":
            return np.zeros(1)
        return 7 if kind == "int" else "s"

    def node(depth):
        if made and draw(st.integers(0, 4)) == 0:
            return made[draw(st.integers(0, len(made) - 1))]
        if depth == 0:
            return leaf()
        kind = draw(st.sampled_from(["leaf", "list", "tuple", "dict", "traversed", "foreign"]))
        if kind == "leaf":
            return leaf()
        children = [node(depth - 1) for _ in range(draw(st.integers(0, 3)))]
        if kind == "list":
            value = list(children)
        elif kind == "tuple":
            return tuple(children)
        elif kind == "dict":
            value = {f"k{i}": c for i, c in enumerate(children)}
        else:
            value = Traversed() if kind == "traversed" else Foreign()
            for i, c in enumerate(children):
                setattr(value, f"a{i}", c)
        made.append(value)
        return value

    args = tuple(node(3) for _ in range(draw(st.integers(0, 4))))
    kwargs = {f"kw{i}": node(2) for i in range(draw(st.integers(0, 2)))} or None
    # Cycles: put mutable containers into each other.
    for _ in range(draw(st.integers(0, 3))):
        if len(made) < 1:
            break
        a = made[draw(st.integers(0, len(made) - 1))]
        b = made[draw(st.integers(0, len(made) - 1))]
        if type(a) is list:
            a.append(b)
        elif type(a) is dict:
            a[f"cycle{len(a)}"] = b
        else:
            setattr(a, f"cycle{len(vars(a))}", b)
    slots = list(range(len(args))) + list(kwargs or ())
    outputs = draw(
        st.none() | st.lists(st.sampled_from(slots), unique=True).map(tuple) if slots else st.none() | st.just(())
    )
    return args, kwargs, outputs, devices


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=st.data())
def test_c_traversal_matches_twin(cupy, data):
    args, kwargs, outputs, devices = data.draw(argument_sets(cupy))
    device_index = {id(d): i for i, d in enumerate(devices)}
    before = _canonical((args, kwargs), {}, device_index)
    results = []
    for impl in (core, _reference):
        calls, host_of = [], {}

        def counting(a):
            calls.append(device_index[id(a)])  # noqa: B023 - called within the same iteration
            host_of[device_index[id(a)]] = h = to_host(a)  # noqa: B023 - called within the same iteration
            return h

        assert impl.reaches_device(args, kwargs, MODULES) == bool(devices and _reaches(args, kwargs, devices))
        host_args, host_kwargs, n, plan = impl.host_arguments(args, kwargs, counting, MODULES, outputs)
        assert n == len(calls) == len(set(calls))
        assert all(host is host_of[device_index[id(dev)]] for dev, host in plan)
        results.append((calls, n, [device_index[id(dev)] for dev, _ in plan], host_args, host_kwargs))
        # Nothing of the caller's changed, and no device array is left in the host version.
        assert _canonical((args, kwargs), {}, device_index) == before
        assert not _reference.reaches_device(host_args, host_kwargs, MODULES)
    (c_calls, c_n, c_plan, c_args, c_kw), (p_calls, p_n, p_plan, p_args, p_kw) = results
    assert (c_calls, c_n, c_plan) == (p_calls, p_n, p_plan)
    # Same structure, sharing and cycles; host arrays are compared by value.
    assert _canonical((c_args, c_kw), {}, {}) == _canonical((p_args, p_kw), {}, {})
    if outputs is None:
        assert sorted(c_plan) == sorted(c_calls)
    elif outputs == ():
        assert c_plan == []


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=st.data())
def test_reaches_device_matches_twin(cupy, data):
    args, kwargs, _, _ = data.draw(argument_sets(cupy))
    for modules in ((), MODULES, ("simulation.particles", "other")):
        assert core.reaches_device(args, kwargs, modules) == _reference.reaches_device(args, kwargs, modules)


# --------------------------------------------------------------------------- memory


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def assert_memory_flat(run, *watched):
    """Run ``run(n)`` long enough that a per-call leak would show: the process RSS stays
    flat, or, under AddressSanitizer (whose quarantine keeps freed memory resident), the
    Python allocations traced by tracemalloc; watched objects keep their reference counts."""
    import tracemalloc

    run(300)
    refs = [sys.getrefcount(w) for w in watched]
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            run(2000)
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert grown < 256 * 1024, f"{grown} bytes of Python allocations kept"
    else:
        start = _rss_bytes()
        run(5000)
        grown = _rss_bytes() - start
        assert grown < 4 * 1024 * 1024, f"RSS grew by {grown} bytes"
    assert [sys.getrefcount(w) for w in watched] == refs


@pytest.mark.nosan  # AddressSanitizer's quarantine keeps freed memory on purpose
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_traversal_does_not_leak(cupy):
    d = cupy.asarray(np.zeros(1000))
    obj = Traversed()
    obj.a = d
    cyclic = [d, obj]
    cyclic.append(cyclic)
    args = (d, [d, {"k": (d, obj)}], cyclic)
    h = np.zeros(3)

    def run(n):
        for _ in range(n):
            core.host_arguments(args, {"x": d}, to_host, MODULES, (0, "x"))
            core.reaches_device(args, {"x": d}, MODULES)
            core.device_result((h, [h]), lambda a: a, np.ndarray)
            with contextlib.suppress(RuntimeError):
                core.host_arguments(([d],), None, _failing, MODULES)
        gc.collect()

    assert_memory_flat(run, d, obj, h)


def _failing(a):
    raise RuntimeError("no copy")


def test_device_paths_under_the_fake_cupy_in_a_subprocess():
    """The plain run (and so the sanitizer run) also exercises the device paths of the
    traversal and of PyccelKernel, in a child process on the fake CuPy."""
    if "cupy" in sys.modules:
        pytest.skip("this process already runs on a CuPy")
    try:
        from cunumpy._fake_cupy import install_fake_cupy  # noqa: F401
    except ImportError:
        pytest.skip("the fake CuPy is not available")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, CUNUMPY_FAKE_CUPY="1", CUNUMPY_BACKEND="cupy")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not nosan", "-x",
         "-k", "not under_the_fake and not imported_after", os.path.join(here, "test_traverse.py"), os.path.join(here, "test_pyccel_kernel.py")],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1]


def test_cupy_imported_after_the_first_calls_is_noticed():
    """The per-call decision may reuse "CuPy is not imported" only while sys.modules is
    unchanged: a CuPy imported later must be seen by the very next call."""
    if "cupy" in sys.modules:
        pytest.skip("this process already runs on a CuPy")
    try:
        from cunumpy._fake_cupy import install_fake_cupy  # noqa: F401
    except ImportError:
        pytest.skip("the fake CuPy is not available")
    code = (
        "import numpy as np, sys, cunumpy as xp\n"
        "k = xp.kernels.PyccelKernel(lambda a: isinstance(a, np.ndarray), outputs=())\n"
        "for _ in range(3): assert k(np.zeros(2)) is True and 'cupy' not in sys.modules\n"
        "from cunumpy._fake_cupy import install_fake_cupy\n"
        "install_fake_cupy()\n"
        "import cupy\n"
        "d = cupy.asarray(np.zeros(2))\n"
        "assert k.kernel(d) is False and k(d) is True\n"
        "assert type(xp.kernels.PyccelKernel(lambda a: a, outputs=())(d)) is cupy.ndarray\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CUNUMPY_FAKE_CUPY", "CUNUMPY_BACKEND")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
