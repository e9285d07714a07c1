"""PyccelKernel (API.md section 2.1) and outputs_from_annotations (section 2.2)."""

import contextlib
import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest
from _events import Events
from _unsigned import Unsigned

import cunumpy as xp

PyccelKernel = xp.kernels.PyccelKernel
outputs_from_annotations = xp.kernels.outputs_from_annotations

KERNELS_SRC = Path(__file__).parent / "kernels_src"


# --------------------------------------------------------------------------- helpers


def cupy():
    return sys.modules["cupy"]


def device(x, order="C"):
    return cupy().array(np.asarray(x, dtype=float), order=order)


def is_device(a):
    return xp.is_gpu(a)


def host(a):
    return a.get() if is_device(a) else np.asarray(a)


def backend_array(x, backend, order="C"):
    return device(x, order) if backend == "cupy" else np.array(x, dtype=float, order=order)


class Particles:
    """A user object whose module matches object_modules."""

    def __init__(self, positions, velocities):
        self.positions = positions
        self.velocities = velocities
        self.n = len(positions.shape)


Particles.__module__ = "my_simulation.particles"


class Elsewhere:
    """A user object of a module that is not traversed."""


Elsewhere.__module__ = "other_package.things"


def add_into(x, y, out):
    out[...] = x + y


def scale_all(a, b, c):
    a *= 2
    b *= 2
    c *= 2


# --------------------------------------------------------------------------- construction


def test_bare_int_or_str_outputs_are_type_errors_hinting_a_tuple():
    with pytest.raises(TypeError, match=r"\(1,\)"):
        PyccelKernel(add_into, outputs=1)
    with pytest.raises(TypeError, match=r"\('out',\)"):
        PyccelKernel(add_into, outputs="out")


@pytest.mark.parametrize("entry", [True, 1.0, None, b"out", (0,)])
def test_bad_output_entries_are_type_errors(entry):
    with pytest.raises(TypeError, match="entry"):
        PyccelKernel(add_into, outputs=(entry,))


def test_other_bad_constructor_arguments():
    with pytest.raises(TypeError, match="callable"):
        PyccelKernel(3)
    with pytest.raises(TypeError, match="use_cupy"):
        PyccelKernel(add_into, use_cupy="yes")
    with pytest.raises(TypeError, match="object_modules"):
        PyccelKernel(add_into, object_modules=(1,))
    with pytest.raises(TypeError, match="is_array"):
        PyccelKernel(add_into, is_array=3)
    with pytest.raises(TypeError, match="parameters"):
        PyccelKernel(add_into, parameters=[1, 2])
    with pytest.raises(TypeError, match="outputs"):
        PyccelKernel(add_into, outputs=3.5)


def test_properties_and_repr():
    k = PyccelKernel(add_into, object_modules=["my_simulation."], outputs=[2])
    assert k.name == "add_into" and k.kernel is add_into
    assert k.object_modules == ("my_simulation.",) and k.outputs == (2,)
    assert k.is_array(np.zeros(1)) and not k.is_array([1])
    assert k.parameters == ("x", "y", "out")
    assert "add_into" in repr(k) and "outputs=(2,)" in repr(k)
    with xp.use_backend("numpy"):
        assert k.use_cupy is False
    assert PyccelKernel(add_into, use_cupy=True).use_cupy is True
    assert PyccelKernel(Unsigned(add_into)).parameters is None
    unnamed = object.__new__(type("Callable", (), {"__call__": lambda self: 1}))
    assert PyccelKernel(unnamed).name == "Callable"


# --------------------------------------------------------------------------- no conversion


def test_no_conversion_path_is_the_plain_call():
    a = np.zeros(3)
    d = {"k": a}

    def kernel(x, y=None, *, flag=False):
        x += 1
        return x if not flag else d

    with xp.use_backend("numpy"), Events() as ev:
        k = PyccelKernel(kernel, outputs=())
        assert k(a) is a
        assert k(a, flag=True) is d and d["k"] is a
        np.testing.assert_array_equal(a, [2, 2, 2])
        assert PyccelKernel(lambda: None)() is None
    assert ev.events == []


def test_no_conversion_exceptions_are_unchanged_and_earlier_writes_stay():
    error = ValueError("boom")
    a = np.zeros(2)

    def kernel(x):
        x[0] = 5
        raise error

    with xp.use_backend("numpy"), pytest.raises(ValueError) as info:
        PyccelKernel(kernel)(a)
    assert info.value is error and a[0] == 5


def test_no_conversion_with_containers_and_objects_of_host_arrays():
    a = np.zeros(2)
    p = Particles(a, a)
    seen = []

    def kernel(*args, **kwargs):
        seen.append((args, kwargs))

    args = ([a, {"x": a}], p, (1, 2))
    with xp.use_backend("numpy"):
        PyccelKernel(kernel, object_modules=("my_simulation.",))(*args, key=p)
    assert seen[0][0][0] is args[0] and seen[0][0][1] is p and seen[0][1]["key"] is p


def test_use_cupy_false_passes_device_arrays_through(device_only):
    d = device([1.0, 2.0])
    seen = []
    k = PyccelKernel(lambda a, b: seen.append((a, b)) or a, use_cupy=False)
    with Events() as ev:
        assert k(d, [d]) is d
    assert seen[0][0] is d and seen[0][1][0] is d and ev.events == []


# --------------------------------------------------------------------------- outputs resolution


@pytest.mark.parametrize(
    "outputs, call, error, match",
    [
        (("nope",), lambda k, a: k(a, a, a), KeyError, "matches no parameter"),
        ((3,), lambda k, a: k(a, a, a), IndexError, "out of range"),
        ((-4,), lambda k, a: k(a, a, out=a), IndexError, "out of range"),
    ],
)
def test_unresolvable_outputs_with_known_names(outputs, call, error, match, device_only):
    a = device([1.0])
    k = PyccelKernel(add_into, outputs=outputs)
    with Events() as ev, pytest.raises(error, match=match):
        call(k, a)
    assert ev.events == []  # raised before any copy


def test_without_names_a_name_needs_a_keyword_and_an_index_a_position(device_only):
    a = device([1.0])
    fn = Unsigned(add_into)
    with Events() as ev:
        with pytest.raises(KeyError, match="by index"):
            PyccelKernel(fn, outputs=("out",))(a, a, a)
        with pytest.raises(IndexError, match="by name"):
            PyccelKernel(fn, outputs=(2,))(a, a, out=a)
    assert ev.events == []
    out = device([0.0])
    PyccelKernel(fn, outputs=("out",))(a, a, out=out)
    PyccelKernel(fn, outputs=(-1,))(a, a, out)
    np.testing.assert_array_equal(host(out), [2.0])


def test_bad_declaration_raises_even_if_the_function_would_fail():
    def failing(a, b):
        raise AssertionError("must not be called")

    with xp.use_backend("numpy"), pytest.raises(KeyError):
        PyccelKernel(failing, use_cupy=True, outputs=("c",))(np.zeros(1), np.zeros(1))


def test_parameters_make_names_and_indices_interchangeable(device_only):
    fn = Unsigned(add_into)
    for outputs in (("out",), (2,), (-1,)):
        k = PyccelKernel(fn, outputs=outputs, parameters=["x", "y", "out"])
        for call in (lambda o: k(device([1.0]), device([2.0]), o), lambda o: k(device([1.0]), device([2.0]), out=o)):  # noqa: B023 - called within the same iteration
            o = device([0.0])
            call(o)
            np.testing.assert_array_equal(host(o), [3.0])


# --------------------------------------------------------------------------- conversion path


@pytest.mark.parametrize(
    "outputs, changed",
    [
        (None, (True, True, True)),
        ((), (False, False, False)),
        ((1,), (False, True, False)),
        ((0, -1), (True, False, True)),
        (("b",), (False, True, False)),
        (("a", "c"), (True, False, True)),
    ],
)
@pytest.mark.parametrize("as_keywords", [False, True])
def test_only_declared_outputs_are_copied_back(outputs, changed, as_keywords, device_only):
    arrays = [device([1.0, 2.0]) for _ in range(3)]
    k = PyccelKernel(scale_all, outputs=outputs)
    with Events() as ev:
        if as_keywords:
            k(arrays[0], b=arrays[1], c=arrays[2])
        else:
            k(*arrays)
    for a, was_changed in zip(arrays, changed):
        np.testing.assert_array_equal(host(a), [2.0, 4.0] if was_changed else [1.0, 2.0])
    assert len(ev.kinds("to_host")) == 3 and len(ev.kinds("to_device")) == sum(changed)
    (marker,) = ev.kinds("kernel_conversion")
    assert "scale_all" in marker.description and "3 arrays" in marker.description
    assert marker.where.startswith(__file__)


def test_copy_back_keeps_the_device_objects(device_only):
    out = device([0.0, 0.0])
    ident = id(out)
    PyccelKernel(add_into, outputs=("out",))(device([1.0, 2.0]), device([3.0, 4.0]), out)
    assert id(out) == ident and is_device(out)
    np.testing.assert_array_equal(host(out), [4.0, 6.0])


def test_aliasing_one_host_array_per_device_array(device_only):
    d = device([1.0, 2.0])
    seen = []

    def kernel(a, b, group, mapping):
        seen.append((a, b, group, mapping))
        a += 1

    with Events() as ev:
        PyccelKernel(kernel, outputs=(1,))(d, d, [d, (d,)], mapping={"v": d})
    a, b, group, mapping = seen[0]
    assert isinstance(a, np.ndarray) and a is b and group[0] is a and group[1][0] is a and mapping["v"] is a
    np.testing.assert_array_equal(host(d), [2.0, 3.0])
    assert len(ev.kinds("to_host")) == 1 and len(ev.kinds("to_device")) == 1
    assert "1 arrays" in ev.kinds("kernel_conversion")[0].description


def test_containers_declared_as_outputs_copy_back_every_array(device_only):
    xs = [device([1.0]), device([2.0])]
    store = {"u": device([3.0]), "w": (device([4.0]),)}

    def kernel(items, table):
        for v in items:
            v *= 10
        table["u"] *= 10
        table["w"][0][...] *= 10

    PyccelKernel(kernel, outputs=("items",))(xs, store)
    assert [host(x)[0] for x in xs] == [10.0, 20.0]
    assert host(store["u"])[0] == 3.0 and host(store["w"][0])[0] == 4.0
    PyccelKernel(kernel)(xs, store)
    assert host(store["u"])[0] == 30.0 and host(store["w"][0])[0] == 40.0


def test_array_reached_through_an_undeclared_path_is_copied_back_once(device_only):
    d = device([1.0])

    def kernel(readonly, out):
        out["o"][0] += 1

    with Events() as ev:
        PyccelKernel(kernel, outputs=(1,))([d], {"o": d})
    assert host(d)[0] == 2.0 and len(ev.kinds("to_device")) == 1


def test_objects_of_object_modules_are_copied_with_host_arrays(device_only):
    pos, vel = device([1.0, 2.0]), device([0.5, 0.5])
    particles = Particles(pos, vel)
    other = Elsewhere()
    other.array = pos
    seen = []

    def push(p, dt, untouched):
        seen.append((p, untouched))
        p.positions += dt * p.velocities

    k = PyccelKernel(push, object_modules=("my_simulation.",), outputs=(0,))
    k(particles, 2.0, other)
    p, untouched = seen[0]
    assert p is not particles and isinstance(p, Particles) and isinstance(p.positions, np.ndarray)
    assert particles.positions is pos and particles.velocities is vel and particles.n == p.n == 1
    np.testing.assert_array_equal(host(pos), [2.0, 3.0])
    assert untouched is other and other.array is pos and is_device(other.array)


def test_reference_cycles_terminate(device_only):
    d = device([1.0])
    loop = [d]
    loop.append(loop)
    p = Particles(d, d)
    p.me = p
    seen = []

    def kernel(a, b):
        seen.append((a, b))
        a[0][0] = 7

    PyccelKernel(kernel, object_modules=("my_simulation",))(loop, p)
    a, b = seen[0]
    assert a[1] is a and b.me is b and b.positions is a[0]
    assert host(d)[0] == 7 and loop[1] is loop and loop[0] is d and p.me is p


def test_f_order_is_preserved_on_the_way_to_the_host(device_only):
    m = device(np.arange(6.0).reshape(2, 3), order="F")
    seen = []
    PyccelKernel(lambda a: seen.append(a.flags.f_contiguous and not a.flags.c_contiguous), outputs=())(m)
    assert seen == [True]


def test_returned_host_arrays_become_device_arrays(device_only):
    a = device([1.0, 2.0])

    def kernel(x):
        y = x * 2
        return y, [y, 3], {"k": y}, x.sum()

    with Events() as ev:
        r = PyccelKernel(kernel, outputs=())(a)
    t, lst, dct, _s = r
    assert is_device(t) and lst[0] is t and lst[1] == 3
    assert isinstance(dct["k"], np.ndarray)  # dicts in results are not converted
    np.testing.assert_array_equal(host(t), [2.0, 4.0])
    assert len(ev.kinds("to_device")) == 1
    single = PyccelKernel(lambda x: x + 1, outputs=())(a)
    assert is_device(single)


def test_is_array_decides_what_is_converted(device_only):
    a = device([1.0, 2.0])

    def kernel(x):
        return x.copy(), np.full((), 3.0)

    k = PyccelKernel(kernel, outputs=(), is_array=lambda v: isinstance(v, np.ndarray) and v.ndim > 0)
    r = k(a)
    assert is_device(r[0]) and isinstance(r[1], np.ndarray)
    none = PyccelKernel(kernel, outputs=(), is_array=lambda v: False)(a)
    assert isinstance(none[0], np.ndarray)


def test_scalars_and_none_pass_through(device_only):
    assert PyccelKernel(lambda x, n: n)(device([1.0]), 3) == 3
    assert PyccelKernel(lambda x: None)(device([1.0])) is None


def test_exception_on_the_conversion_path_still_copies_outputs_back(device_only):
    d = device([1.0])

    def kernel(x):
        x[0] = 9
        raise KeyError("inner")

    with pytest.raises(KeyError, match="inner"):
        PyccelKernel(kernel, outputs=(0,))(d)
    assert host(d)[0] == 9


def test_cupy_backend_converts_without_device_arguments(device_only):
    with Events() as ev:
        r = PyccelKernel(lambda n: np.arange(n, dtype=float))(3)
    assert is_device(r) and len(ev.kinds("kernel_conversion")) == 1
    assert "0 arrays" in ev.kinds("kernel_conversion")[0].description


def test_use_cupy_true_converts_on_the_numpy_backend(device_only):
    d = device([1.0, 2.0])
    with xp.use_backend("numpy"), Events() as ev:
        r = PyccelKernel(lambda x: x + 1, use_cupy=True, outputs=())(d)
        r2 = PyccelKernel(lambda x: x + 1, outputs=())(d)  # a device argument decides alone
    assert is_device(r) and is_device(r2) and len(ev.kinds("kernel_conversion")) == 2


@pytest.mark.nosan  # AddressSanitizer's quarantine keeps freed memory on purpose
def test_conversion_path_does_not_leak(device_only):
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc/self/statm")
    from test_traverse import assert_memory_flat

    a, b = device(np.ones(500)), device(np.ones(500))
    p = Particles(a, b)

    def kernel(p, xs, out):
        out += p.positions
        return xs[0] * 2, [out]

    k = PyccelKernel(kernel, object_modules=("my_simulation.",), outputs=("out",))
    bad = PyccelKernel(kernel, outputs=("missing",))

    def run(n):
        for _ in range(n):
            k(p, [a, {"b": b}], out=b)
            with contextlib.suppress(KeyError):
                bad(p, [a], b)
        gc.collect()

    assert_memory_flat(run, a, b, p, k)


# --------------------------------------------------------------------------- outputs_from_annotations


def test_outputs_from_annotations_spec_example():
    def kernel(markers: "float[:, :]", weights: "Final[float[:]]", dt: "float", n: int, args: "MarkerArgs",  # noqa: F821 - a pyccel type annotation, not a Python name
               scratch: typing.Final[np.ndarray]):  # fmt: skip
        pass

    assert outputs_from_annotations(kernel) == ("markers", "args")


def test_outputs_from_annotations_pyccel_strings_and_typing():
    def kernel(a: "const float[:,:]", b: "float[:](order=F)", c: "complex", d: "typing.Final[int[:]]",  # noqa: F821,F722 - a pyccel type annotation, not a Python expression
               e: np.ndarray, f: float, g: np.float64, h: "int64", i: typing.Annotated[np.ndarray, "const"]):  # fmt: skip  # noqa: F821 - a pyccel type annotation, not a Python name
        pass

    assert outputs_from_annotations(kernel) == ("b", "e")


def test_outputs_from_annotations_without_annotations_or_signature():
    assert outputs_from_annotations(add_into) is None
    assert outputs_from_annotations(len) is None


def test_outputs_from_annotations_on_the_pyccel_source():
    spec = importlib.util.spec_from_file_location("cn_pyccel_kernels_py", KERNELS_SRC / "cn_pyccel_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert outputs_from_annotations(module.axpy) == ("y",)
    assert outputs_from_annotations(module.column_sums) == ("out",)
    assert outputs_from_annotations(module.dot) == ()
    k = PyccelKernel(module.axpy, outputs=outputs_from_annotations(module.axpy))
    assert k.outputs == ("y",)


# --------------------------------------------------------------------------- real host kernels


@pytest.fixture(scope="session")
def pyccel_module(tmp_path_factory):
    """The test kernels compiled by Pyccel to C, once per session."""
    pytest.importorskip("pyccel")
    exe = shutil.which("pyccel") or str(Path(sys.executable).parent / "pyccel")
    if not os.path.exists(exe):
        pytest.skip("the pyccel command is not installed")
    work = tmp_path_factory.mktemp("pyccel")
    shutil.copy(KERNELS_SRC / "cn_pyccel_kernels.py", work)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    # `pyccel compile` since Pyccel 2.1; the bare form is deprecated there but older releases need it.
    for command in (["compile", "--language", "c"], ["--language", "c"]):
        done = subprocess.run([exe, *command, "cn_pyccel_kernels.py"], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        built = list(work.glob("cn_pyccel_kernels*.so"))
        if done.returncode == 0 and built:
            break
    assert done.returncode == 0 and built, f"pyccel failed:\n{done.stdout}\n{done.stderr}"
    spec = importlib.util.spec_from_file_location("cn_pyccel_kernels", built[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.nosan
def test_pyccel_compiled_kernels(pyccel_module, on_backend):
    m = pyccel_module
    assert type(m.axpy).__name__ == "builtin_function_or_method"
    rng = np.random.default_rng(0)
    x_h, y_h = rng.random(50), rng.random(50)
    x, y = backend_array(x_h, on_backend), backend_array(y_h, on_backend)
    PyccelKernel(m.axpy, outputs=(2,))(1.5, x, y)
    np.testing.assert_allclose(host(y), y_h + 1.5 * x_h, rtol=1e-14)
    # Compiled: no Python signature, but the names come from Pyccel's .pyi stub.
    PyccelKernel(m.axpy, outputs=("y",))(1.5, x, y)
    np.testing.assert_allclose(host(y), y_h + 3.0 * x_h, rtol=1e-14)
    PyccelKernel(m.axpy, outputs=("y",), parameters=["alpha", "x", "y"])(1.5, x, y)
    np.testing.assert_allclose(host(y), y_h + 4.5 * x_h, rtol=1e-14)

    a_h = np.asfortranarray(rng.random((4, 7)))
    a, out = backend_array(a_h, on_backend, order="F"), backend_array(np.zeros(7), on_backend)
    PyccelKernel(m.column_sums, outputs=(1,))(a, out)  # the F order reaches the compiled kernel
    np.testing.assert_allclose(host(out), a_h.sum(axis=0), rtol=1e-13)

    result = PyccelKernel(m.dot, outputs=())(x, x)
    assert isinstance(result, float)
    np.testing.assert_allclose(result, np.dot(host(x), host(x)), rtol=1e-13)


@pytest.mark.nosan
def test_numba_kernel(on_backend):
    pytest.importorskip("numba")
    spec = importlib.util.spec_from_file_location("cn_numba_kernels", KERNELS_SRC / "numba_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    field_h = np.random.default_rng(1).random(64)
    expected = field_h.copy()
    expected[1:-1] = 0.25 * field_h[:-2] + 0.5 * field_h[1:-1] + 0.25 * field_h[2:]
    field, out = backend_array(field_h, on_backend), backend_array(np.zeros(64), on_backend)
    k = PyccelKernel(module.smooth, outputs=("out",))
    k(field, out)
    np.testing.assert_allclose(host(out), expected, rtol=1e-14)
    np.testing.assert_array_equal(host(field), field_h)
    out2 = backend_array(np.zeros(64), on_backend)
    k(field, out=out2)
    np.testing.assert_allclose(host(out2), expected, rtol=1e-14)


def test_count_transfers_reports_one_marker_per_converting_call(device_only):
    d, out = device([1.0, 2.0]), device([0.0, 0.0])
    k = PyccelKernel(add_into, outputs=("out",))
    with xp.profiling.count_transfers() as counter:
        k(d, d, out)
        k(d, d, out=out)
    assert counter.kernel_conversions == 2
    assert all(e.description == "add_into: 2 arrays" for e in counter.kernel_conversion_calls)
    assert counter.count("to_host") == 4 and counter.count("to_device") == 2
    assert counter.bytes_to_host == 4 * 16
    np.testing.assert_array_equal(host(out), [2.0, 4.0])
    with xp.use_backend("numpy"), xp.profiling.count_transfers() as counter:
        PyccelKernel(add_into)(np.ones(2), np.ones(2), np.zeros(2))
    assert counter.total == 0


def test_non_contiguous_device_outputs_are_written_in_place(device_only):
    base = device(np.zeros(6))
    view = base[::2]
    PyccelKernel(lambda v: v.__setitem__(slice(None), [1.0, 2.0, 3.0]), outputs=(0,))(view)
    np.testing.assert_array_equal(host(base), [1.0, 0.0, 2.0, 0.0, 3.0, 0.0])


@pytest.mark.parametrize("twin", [False, True])
def test_the_python_twin_base_decides_like_the_c_base(twin, on_backend):
    """Where the extension is missing (Pyodide) PyccelKernel rests on the twin's HostKernel."""
    from cunumpy import _backend, _reference
    from cunumpy._native import core
    from cunumpy.kernels import _pyccel_kernel

    base = _reference.HostKernel if twin else core.HostKernel
    calls = []

    class Kernel(base):
        pass

    def convert(self, args, kwargs):
        calls.append((args, kwargs))
        return "converted"

    def fn(*args, **kwargs):
        return "direct"

    k = Kernel()
    k._configure(fn, None, ("my_simulation.",), vars(_backend._state), convert)
    a = backend_array([1.0], on_backend)
    expected = "converted" if on_backend == "cupy" else "direct"
    assert k(a, key=[a]) == expected
    assert k(1, 2) == expected
    never = Kernel()
    never._configure(fn, False, (), vars(_backend._state), convert)
    assert never(a) == "direct"
    always = Kernel()
    always._configure(fn, True, (), vars(_backend._state), convert)
    assert always(1, x=2) == "converted" and calls[-1] == ((1,), {"x": 2})
    with pytest.raises(TypeError, match="not initialised"):
        Kernel()(1)
    with pytest.raises(TypeError, match="use_cupy"):
        Kernel()._configure(fn, 1, (), {}, convert)
    assert _pyccel_kernel.PyccelKernel.__mro__[1].__name__ == "HostKernel"


def test_subclasses_keep_both_paths(on_backend):
    class Mine(PyccelKernel):
        pass

    a, out = backend_array([1.0, 2.0], on_backend), backend_array([0.0, 0.0], on_backend)
    Mine(add_into, outputs=("out",))(a, y=a, out=out)
    np.testing.assert_array_equal(host(out), [2.0, 4.0])
    assert Mine(lambda **kw: kw)(x=1) == {"x": 1}


def test_star_args_kernels_take_indices_counted_on_the_call(device_only):
    def scale(*arrays, factor=2.0):
        for a in arrays:
            a *= factor

    xs = [device([1.0]) for _ in range(3)]
    PyccelKernel(scale, outputs=(-1,))(*xs)
    assert [host(x)[0] for x in xs] == [1.0, 1.0, 2.0]
    PyccelKernel(scale, outputs=iter([0]))(*xs, factor=3.0)
    assert [host(x)[0] for x in xs] == [3.0, 1.0, 2.0]
    with pytest.raises(KeyError, match="matches no parameter"):
        PyccelKernel(scale, outputs=("arrays",))(*xs)
    with pytest.raises(IndexError):
        PyccelKernel(scale, outputs=(3,))(*xs)
    assert PyccelKernel(scale).use_cupy is True  # the CuPy backend is active
