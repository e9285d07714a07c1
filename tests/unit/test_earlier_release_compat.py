"""What code written for earlier releases relies on (issue 27 items 1, 2, 3, 5, 7, 10, 11) and
the CudaStructArguments field names that collide with the class (issue 22 item 2).

Tests named ``test_device_*`` need device arrays: they run against the fake CuPy
(CUNUMPY_FAKE_CUPY=1) and, in a plain run, in a subprocess against the stand-in of
``_cuda_standin.py``.
"""

import gc
import subprocess
import sys
import textwrap
import time
import types
import typing
from pathlib import Path

import numpy as np
import pytest

import cunumpy as xp
from cunumpy import _reference
from cunumpy._native import core
from cunumpy.arguments import CudaStruct, CudaStructArguments, CudaStructValue
from cunumpy.cuda import CudaParameter
from cunumpy.kernels import CudaKernel, CudaKernelVariants, Kernel

HERE = Path(__file__).resolve().parent


def _standin_active():
    cupy = sys.modules.get("cupy")
    return cupy is not None and getattr(cupy, "__cunumpy_standin__", False)


# ------------------------------------------------------------------ item 7: attributes per kind

S_FIELDS = [
    ("x", "const double*"),
    ("raw", "void*"),
    ("n", "int"),
    ("a", "Array2D<float>"),
    ("c", "CArray3D<int>"),
    ("z", "complex<double>"),
]
S = CudaStruct("S", S_FIELDS)
KERNEL_SRC = S.declaration + (
    'extern "C" __global__ void k(const double* x, void* raw, int n, Array2D<float> a, '
    "CArray3D<int> c, complex<double> z, S s) {}"
)

# name -> (ctype, dtype, pointer, view_ndim, contiguous, declaration), as API.md 4.4 documents them
EXPECTED = {
    "x": ("double", np.dtype(np.float64), True, None, False, "double* x"),
    "raw": ("void", None, True, None, False, "void* raw"),
    "n": ("int", np.dtype(np.int32), False, None, False, "int n"),
    "a": ("Array2D<float>", np.dtype(np.float32), False, 2, False, "Array2D<float> a"),
    "c": ("CArray3D<int>", np.dtype(np.int32), False, 3, True, "CArray3D<int> c"),
    "z": ("complex<double>", np.dtype(np.complex128), False, None, False, "complex<double> z"),
}


def _check_parameter(p, name):
    ctype, dtype, pointer, view_ndim, contiguous, declaration = EXPECTED[name]
    assert isinstance(p, CudaParameter)
    assert p.name == name and p.ctype == ctype and p.declaration == declaration
    assert p.dtype == dtype if dtype is not None else p.dtype is None
    assert p.pointer is pointer and p.contiguous is contiguous
    # None, never 0, for everything that is not a view: code decides "view" by `is not None`.
    assert p.view_ndim == view_ndim and (view_ndim is not None or p.view_ndim is None)
    assert p.struct is None


@pytest.mark.parametrize("name", list(EXPECTED))
def test_kernel_parameter_attributes_per_kind(name):
    k = CudaKernel(KERNEL_SRC, "k", structs=[S])
    by_name = {p.name: p for p in k.signature}
    _check_parameter(by_name[name], name)
    parsed = {p.name: p for p in xp.cuda.parse_cuda_signature(KERNEL_SRC, "k", structs=[S])}
    assert parsed[name] == by_name[name]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_struct_field_attributes_per_kind(name):
    by_name = {p.name: p for p in S.fields}
    _check_parameter(by_name[name], name)


def test_struct_parameter_attributes():
    k = CudaKernel(KERNEL_SRC, "k", structs=[S])
    p = k.signature[-1]
    assert p.name == "s" and p.ctype == "S" and p.struct is S and p.dtype == S.dtype
    assert p.pointer is False and p.view_ndim is None and p.contiguous is False and p.declaration == "S s"


def test_struct_members_read_from_a_source_have_view_ndim_none():
    from cunumpy._struct_layout import find_struct_members

    members = find_struct_members("struct T { double* x; int n; Array1D<double> v; };", "T")
    assert [m.view_ndim for m in members] == [None, None, 1]


def _kernel_file(tmp_path):
    path = tmp_path / "k_cuda.cu"
    path.write_text('extern "C" __global__ void k(double* x) {}\nextern "C" __global__ void j(int n) {}\n')
    (tmp_path / "inc").mkdir()
    return path


def _assert_paths(k, source_dir, first_include):
    assert isinstance(k.source_dir, Path) and k.source_dir == source_dir
    assert all(isinstance(d, Path) for d in k.include_dirs)
    assert k.include_dirs[0] == first_include
    assert f"-I{first_include}" in k.options


def test_paths_from_init(tmp_path):
    k = CudaKernel(
        'extern "C" __global__ void k(double* x) {}', "k", include_dirs=[str(tmp_path)], source_dir=str(tmp_path)
    )
    _assert_paths(k, tmp_path, tmp_path)
    bare = CudaKernel('extern "C" __global__ void k(double* x) {}', "k")
    assert bare.source_dir is None and bare.include_dirs == ()


def test_paths_from_file(tmp_path):
    path = _kernel_file(tmp_path)
    k = CudaKernel.from_file(path, include_dirs=[str(tmp_path / "inc")])
    _assert_paths(k, tmp_path.resolve(), tmp_path.resolve())
    assert k.include_dirs[1] == tmp_path / "inc"


def test_paths_from_all_from_file(tmp_path):
    path = _kernel_file(tmp_path)
    kernels = CudaKernel.all_from_file(str(path), include_dirs=(tmp_path / "inc",))
    assert list(kernels) == ["k", "j"]
    for k in kernels.values():
        _assert_paths(k, tmp_path.resolve(), tmp_path.resolve())


def test_paths_from_folder():
    sys.path.insert(0, str(HERE))
    try:
        kernel = Kernel.from_folder("kernel_pkg.axpy")
    finally:
        sys.path.remove(str(HERE))
    cuda = kernel.cuda_kernel
    folder = (HERE / "kernel_pkg" / "axpy").resolve()
    _assert_paths(cuda, folder, folder)
    assert HERE.resolve() in cuda.include_dirs


def test_paths_from_variants(tmp_path):
    path = _kernel_file(tmp_path)
    variants = CudaKernelVariants(lambda block: CudaKernel.from_file(path, block_size=block))
    _assert_paths(variants.get(64), tmp_path.resolve(), tmp_path.resolve())
    plain = CudaKernelVariants(
        lambda d: CudaKernel('extern "C" __global__ void k(double* x) {}', "k", source_dir=d, include_dirs=(d,))
    )
    _assert_paths(plain.get(str(tmp_path)), tmp_path, tmp_path)


# ------------------------------------------------------------------ item 2: n_threads_from


def test_n_threads_from_reads_as_a_callable_rule():
    src = 'extern "C" __global__ void k(double* x, int n) {}'
    k = CudaKernel(src, "k")
    rule = k.n_threads_from
    assert callable(rule) and rule.name == "auto" and rule == "auto"
    assert k.n_threads_from_setting == "auto"
    assert rule((np.zeros((300, 2)), 3)) == 300
    k2 = CudaKernel(src, "k", block_size=(8, 4))
    assert k2.n_threads_from((np.zeros((35, 19)), 3)) == (35, 19)
    with pytest.raises(ValueError, match="too few dimensions"):
        k2.n_threads_from((np.zeros(5), 3))
    with pytest.raises(TypeError, match="infer"):
        k.n_threads_from((1.0, 3))
    k.n_threads_from = "last_axis"
    assert k.n_threads_from.name == "last_axis" and k.n_threads_from((np.zeros((3, 7)), 1)) == 7
    k.n_threads_from = "first_array"
    assert k.n_threads_from((np.zeros((3, 7)), 1)) == 3
    k.n_threads_from = None
    assert k.n_threads_from is None and k.n_threads_from_setting is None

    def rows(args):
        return args[1]

    k.n_threads_from = rows
    assert k.n_threads_from is rows and k.n_threads_from_setting is rows
    # A rule read from one kernel sets the same rule on another (for that kernel's block).
    k2.n_threads_from = CudaKernel(src, "k").n_threads_from
    assert k2.n_threads_from_setting == "auto" and k2.n_threads_from((np.zeros((3, 7)), 1)) == (3, 7)
    with pytest.raises(TypeError, match="n_threads_from must be"):
        k2.n_threads_from = "rows"
    assert k2.n_threads_from_setting == "auto"


# ------------------------------------------------------------------ item 3: from_signature


def test_from_signature_final_with_a_string_inside():
    def f(a: typing.Final["int[:]"], b: typing.Final["float"], n: int):
        pass

    assert CudaStruct.from_signature(f, "F")._types == ("Array1D<long long>", "double", "long long")


def test_from_signature_quoted_annotations_under_future_annotations():
    ns: dict = {}
    exec(
        textwrap.dedent(
            """
            from __future__ import annotations
            from typing import Final
            def f(a: "float[:, :]", b: 'Final["int[:]"]', c: Final["float"], d: "const float[:]",
                  e: Final['Final[int]']):
                pass
            """
        ),
        ns,
    )
    assert CudaStruct.from_signature(ns["f"], "F")._types == (
        "Array2D<double>",
        "Array1D<long long>",
        "double",
        "Array1D<double>",
        "long long",
    )


@pytest.mark.parametrize("annotation", ["float[:, :](order=F)", "float[:](order=C)", "Final[int[:](order=F)]"])
def test_from_signature_refuses_a_trailing_order_clause(annotation):
    def f(a, n: int):
        pass

    f.__annotations__["a"] = annotation
    with pytest.raises(ValueError, match=r"field 'a'.*order="):
        CudaStruct.from_signature(f, "F")


def test_from_signature_contiguous_must_name_array_fields():
    def f(a: "float[:]", n: int):
        pass

    assert CudaStruct.from_signature(f, "F", contiguous=["a"])._types == ("CArray1D<double>", "long long")
    with pytest.raises(ValueError, match="contiguous= names field 'n', which is not an array"):
        CudaStruct.from_signature(f, "F", contiguous=["a", "n"])
    with pytest.raises(ValueError, match="contiguous= names 'b', which is no field"):
        CudaStruct.from_signature(f, "F", contiguous="b")


def test_from_pyccel_class_contiguous_by_parameter_or_attribute_name():
    source = textwrap.dedent(
        """
        class A:
            def __init__(self, markers: 'float[:, :]', n: int):
                self.m = markers
                self.count = n
        """
    )
    assert CudaStruct.from_pyccel_class(source, "A", contiguous={"markers"})._types[0] == "CArray2D<double>"
    assert CudaStruct.from_pyccel_class(source, "A", contiguous={"m"})._types[0] == "CArray2D<double>"
    for name in ("n", "count"):
        with pytest.raises(ValueError, match="which is not an array"):
            CudaStruct.from_pyccel_class(source, "A", contiguous={name})
    with pytest.raises(ValueError, match="which is no field"):
        CudaStruct.from_pyccel_class(source, "A", contiguous={"other"})


# ------------------------------------------------------------------ item 5: CudaStructValue(mapping)


def test_struct_value_takes_a_mapping_of_values():
    T = CudaStruct("T", [("a", "int"), ("b", "double")])
    made = T(a=1, b=2.0)
    again = CudaStructValue(T, made.packed, {"b": 2.0, "a": 1})
    assert again._values == (1, 2.0) and again["a"] == 1 and again["b"] == 2.0
    assert again.__cuda_args__() == (made.packed,)
    assert CudaStructValue(T, made.packed, (1, 2.0))._values == (1, 2.0)
    with pytest.raises(TypeError, match=r"missing fields \['b'\], unknown fields \['c'\]"):
        CudaStructValue(T, made.packed, {"a": 1, "c": 3})
    with pytest.raises(TypeError, match="tuple in field order or a mapping"):
        CudaStructValue(T, made.packed, [1, 2.0])
    assert "a" in again and ["x"] not in again


# ------------------------------------------------------------------ item 10: verify_layout


def test_field_names_sizeof_and_alignof_are_refused():
    for name in ("sizeof", "alignof"):
        with pytest.raises(ValueError, match=f"field name '{name}' is not a valid C identifier"):
            CudaStruct("L", [(name, "int")])


def test_verify_layout_result_is_one_flat_dict(monkeypatch):
    from cunumpy import _struct_layout

    L = CudaStruct("L", [("data", "double*"), ("n", "int")])
    monkeypatch.setattr(_struct_layout, "_gpu_usable", lambda: False)
    monkeypatch.setattr(_struct_layout, "_compile_time_layout", lambda s, *a: _struct_layout._result(s, [16, 8, 0, 8]))
    assert L.verify_layout() == {"sizeof": 16, "alignof": 8, "data": 0, "n": 8}
    assert _struct_layout._compare(L, {"sizeof": 16, "alignof": 8, "data": 0, "n": 8}, "test")["n"] == 8
    with pytest.raises(ValueError, match="offsetof n: compiler 12, dtype 8"):
        _struct_layout._compare(L, {"sizeof": 16, "alignof": 8, "data": 0, "n": 12}, "test")


# ------------------------------------------------------------------ item 11: module paths


@pytest.mark.parametrize(
    "module,names,public",
    [
        ("cunumpy._dispatch", {"Kernel": "cunumpy.kernels"}, "cunumpy.kernels"),
        (
            "cunumpy._cuda_kernel",
            {"CudaKernel": "cunumpy.kernels", "CudaKernelVariants": "cunumpy.kernels", "CudaParameter": "cunumpy.cuda"},
            "cunumpy.kernels",
        ),
    ],
)
def test_compatibility_modules_reexport_and_warn_once(module, names, public):
    code = textwrap.dedent(
        f"""
        import warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as first:
            import {module} as m
        with warnings.catch_warnings(record=True) as second:
            import {module}
            from {module} import {", ".join(names)}
        import importlib
        print(len([w for w in first if w.category is DeprecationWarning]), len(second))
        print([str(w.message) for w in first if w.category is DeprecationWarning][0])
        for name, home in {names!r}.items():
            assert getattr(m, name) is getattr(importlib.import_module(home), name), name
        print(sorted(m.__all__))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    counts, message, exported = out.stdout.splitlines()
    assert counts == "1 0"
    assert public in message and "earlier releases" in message
    assert exported == str(sorted(names))


# ------------------------------------------------------------------ issue 22 item 2: field names


@pytest.mark.parametrize("field", ["packed", "pack", "__cuda_args__", "fields", "struct_name", "__init__"])
def test_struct_arguments_field_colliding_with_the_class_is_a_value_error(field):
    with pytest.raises(ValueError, match=f"field named '{field}'"):
        type("Args", (CudaStructArguments,), {"struct_name": "Args", "fields": ((field, "int"), ("n", "int"))})


def test_struct_arguments_field_named_struct_is_refused():
    with pytest.raises(ValueError, match="'struct'"):
        type("Args", (CudaStructArguments,), {"struct_name": "Args", "fields": (("struct", "int"),)})


def test_a_field_that_reads_the_packed_value_is_a_recursion_error_not_a_crash():
    """The C packer reading a field whose getter is the packer itself (no Python frame in
    between) ends in RecursionError; before, a field named `packed` crashed the process."""
    code = textwrap.dedent(
        """
        from cunumpy.arguments import CudaStructArguments

        class Args(CudaStructArguments):
            struct_name = "Args"
            fields = (("n", "int"),)

        Args.n = CudaStructArguments.packed  # a field read through the packer's own descriptor
        a = Args()
        for attempt in (lambda: a.pack(), lambda: a.packed, lambda: a.__cuda_args__()):
            try:
                attempt()
            except RecursionError:
                print("RecursionError")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["RecursionError"] * 3


# ------------------------------------------------------------------ CudaStruct size


def _best_build_time(n, repeats=3):
    """CPU time of this thread (other processes on a loaded machine do not count), GC off."""
    fields = [(f"f{i}", ("double", "int*", "Array2D<float>")[i % 3]) for i in range(n)]
    best = float("inf")
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.thread_time()
            CudaStruct("Big", fields)
            best = min(best, time.thread_time() - start)
    finally:
        if enabled:
            gc.enable()
    return best


def test_struct_construction_is_linear_in_the_number_of_fields():
    """16x the fields cost about 16x the time when construction is linear, 256x when it is
    quadratic (20 000 fields took 16.5 s). The bound is a ratio of CPU times, generous."""
    small, large = _best_build_time(1000, repeats=5), _best_build_time(16000)
    assert large / small < 40, f"1 000 fields {small:.4f} s, 16 000 fields {large:.4f} s"
    big = CudaStruct("Big", [(f"f{i}", "int") for i in range(20000)])
    value = big(**{f"f{i}": i for i in range(20000)})
    assert value["f19999"] == 19999 and "f0" in value


# ------------------------------------------------------------------ item 1: CuPy's attribute protocol


class Duck:
    """A user's test double of a CuPy array: CuPy's attributes over host memory, and an empty
    or partial __cuda_array_interface__ (as such doubles have)."""

    def __init__(self, a, *, cai=None, strides=True, flags=True, device=0, dtype=None):
        self._a = a
        self.shape = a.shape
        if strides:
            self.strides = a.strides
        self.dtype = a.dtype if dtype is None else dtype
        self.data = types.SimpleNamespace(ptr=a.__array_interface__["data"][0])
        if flags:
            self.flags = types.SimpleNamespace(c_contiguous=a.flags.c_contiguous)
        if device is not None:
            self.device = types.SimpleNamespace(id=device)
        if cai is not None:
            self.__cuda_array_interface__ = cai


class InterfaceOnly:
    def __init__(self, a):
        self.__cuda_array_interface__ = {
            "shape": a.shape,
            "typestr": a.dtype.str,
            "data": (a.__array_interface__["data"][0], False),
            "strides": None if a.flags.c_contiguous else a.strides,
            "version": 3,
        }


AXPY = 'extern "C" __global__ void axpy(double a, const double* x, Array2D<double> y, CArray1D<float> z, int n) {}'


def _plans(src, name):
    from cunumpy.kernels import _cuda_kernel as ck

    params = xp.cuda.parse_cuda_signature(src, name)
    specs = tuple(ck._spec(i, p) for i, p in enumerate(params))
    return core.launch_plan(name, specs, np.void, np.generic), _reference.launch_plan(name, specs, np.void, np.generic)


def _outcome(plan, *args, **kw):
    try:
        packed, shape, hidden = plan.pack(*args, **kw)
        return ("ok", packed[8 * plan.n_params :], shape, hidden)
    except Exception as exc:  # noqa: BLE001 - compared
        return (type(exc).__name__, str(exc))


def _duck_cases():
    x = np.arange(5.0)
    y = np.zeros((5, 6))
    z = np.zeros(4, np.float32)
    return (
        x,
        y,
        z,
        [
            (2.0, Duck(x, cai={}), Duck(y[:, ::2], cai={"shape": (5, 3)}), Duck(z), 5),
            (2.0, Duck(x, strides=False), Duck(y), Duck(z, strides=False), 5),
            (2.0, Duck(x, device=None), Duck(y, device=3), Duck(z), 5),
            (2.0, InterfaceOnly(x), InterfaceOnly(y), InterfaceOnly(z), 5),
            (2.0, Duck(x, dtype=np.dtype(np.float32)), Duck(y), Duck(z), 5),  # wrong dtype
            (2.0, Duck(x[::2]), Duck(y), Duck(z), 5),  # not contiguous
            (2.0, Duck(x[::2], strides=False, flags=True), Duck(y), Duck(z), 5),  # says not C-contiguous
            (2.0, Duck(x), Duck(y), Duck(np.zeros((4, 2), np.float32)[:, 0], strides=False, flags=False), 5),
            (2.0, Duck(x), Duck(y[:, ::2], strides=False), Duck(z), 5),  # strided, no strides: refused
            (2.0, Duck(x), Duck(np.zeros(3)), Duck(z), 5),  # wrong ndim
            (2.0, np.zeros(5), Duck(y), Duck(z), 5),  # a host array is still refused
            (2.0, types.SimpleNamespace(data=types.SimpleNamespace(ptr=1)), Duck(y), Duck(z), 5),
        ],
    )


def test_attribute_protocol_packs_as_the_twin():
    c_plan, py_plan = _plans(AXPY, "axpy")
    x, _y, _z, cases = _duck_cases()
    outcomes = []
    for args in cases:
        for device in (None, 0):
            got = _outcome(c_plan, *args, device=device)
            assert got == _outcome(py_plan, *args, device=device), (args, device)
            outcomes.append(got)
    first = outcomes[0]
    assert first[0] == "ok" and first[2] == (5,)
    words = np.frombuffer(first[1][:72], dtype="<u8")
    assert words[1] == x.__array_interface__["data"][0]  # x.data.ptr
    assert words[3:5].tolist() == [5, 3] and words[5:7].tolist() == [6, 2]  # y view: shape, strides
    assert [o[0] for o in outcomes[:8]] == ["ok"] * 5 + ["ValueError"] + ["ok"] * 2
    assert "argument 2 (Array2D<double> y): the array is on device 3" in outcomes[5][1]  # y.device.id
    assert "expected dtype float64" in outcomes[8][1]
    assert "not C-contiguous" in outcomes[10][1]
    assert "no strides and is not C-contiguous" in outcomes[12][1]
    assert "neither strides nor flags.c_contiguous" in outcomes[14][1]
    assert "no strides and is not C-contiguous" in outcomes[16][1]
    assert "2-dimensional" in outcomes[18][1]
    assert "never copies" in outcomes[20][1]
    assert "cannot read the device array" in outcomes[22][1]


def test_attribute_protocol_in_launches_prepare_args_and_structs():
    k = CudaKernel(AXPY, "axpy")
    x, y, _z, cases = _duck_cases()
    args = cases[0]
    assert k(*args, n_threads=0) is None
    assert k(*[Duck(np.zeros(0)) if isinstance(a, Duck) and a.shape == (5,) else a for a in args]) is None
    values = k.prepare_args(*args)
    assert values[1] is args[1] and values[2]["shape"].tolist() == [5, 3] and values[4] == np.int32(5)
    assert values[2]["strides"].tolist() == [6, 2] and values[3]["shape"].tolist() == [4]
    assert k.launch_shape(args=args) == ((1,), (128,))
    with pytest.raises(TypeError, match=r"argument 1 \(double\* x\): expected dtype float64"):
        k.prepare_args(*cases[4])

    T = CudaStruct("T", [("x", "double*"), ("y", "Array2D<double>"), ("n", "int")])
    value = T(x=args[1], y=args[2], n=5)
    assert value.packed["x"] == x.__array_interface__["data"][0]
    assert value.packed["y"]["shape"].tolist() == [5, 3]

    class Args(CudaStructArguments):
        struct_name = "DuckArgs"
        fields = (("x", "double*"), ("y", "Array2D<double>"), ("n", "int"))

        def __init__(self, x, y):
            self.x, self.y, self.n = x, y, 5
            self.pack()

    a = Args(args[1], args[2])
    assert a.packed["y"]["strides"].tolist() == [6, 2]
    a.y = Duck(y)  # another object: re-packed
    assert a.packed["y"]["strides"].tolist() == [6, 1]
    with pytest.raises(TypeError, match=r"struct 'DuckArgs': field 'x'.*expected dtype float64"):
        Args(Duck(np.zeros(3, np.float32)), args[2])


def test_unreadable_attributes_fall_back_to_a_complete_interface():
    x = np.arange(4.0)

    class Broken(InterfaceOnly):
        data = types.SimpleNamespace(ptr=5)  # data.ptr, but no shape or dtype attributes

    c_plan, py_plan = _plans('extern "C" __global__ void k(double* x) {}', "k")
    for plan in (c_plan, py_plan):
        ok = _outcome(plan, Broken(x))
        assert ok[0] == "ok" and np.frombuffer(ok[1], "<u8")[0] == x.__array_interface__["data"][0]
    incomplete = Duck(x, cai={})
    del incomplete.dtype
    for plan in (c_plan, py_plan):
        got = _outcome(plan, incomplete)
        assert got[0] == "TypeError" and "cannot read the device array" in got[1] and "dtype" in got[1]


# ------------------------------------------------------------------ issue 33 item 7: .flags decide contiguity


def test_flags_c_contiguous_false_is_refused_for_pointers_whatever_the_strides():
    x = np.arange(5.0)
    y = np.zeros((5, 6))
    z = np.zeros(4, np.float32)
    says_not = Duck(x)
    says_not.flags = types.SimpleNamespace(c_contiguous=False)  # strides (8,) look contiguous
    c_plan, py_plan = _plans(AXPY, "axpy")
    for plan in (c_plan, py_plan):
        with pytest.raises(TypeError, match=r"argument 1 \(double\* x\): the array is not C-contiguous"):
            plan.pack(2.0, says_not, Duck(y), Duck(z), 5)
        # A view parameter takes any strides: the flag does not matter there.
        y_says_not = Duck(y)
        y_says_not.flags = types.SimpleNamespace(c_contiguous=False)
        assert plan.pack(2.0, Duck(x), y_says_not, Duck(z), 5)[1] == (5,)
        # A CArrayND view is contiguous by declaration: refused as well.
        z_says_not = Duck(z)
        z_says_not.flags = types.SimpleNamespace(c_contiguous=False)
        with pytest.raises(TypeError, match=r"argument 3 \(CArray1D<float> z\): the array is not C-contiguous"):
            plan.pack(2.0, Duck(x), Duck(y), z_says_not, 5)
    k = CudaKernel(AXPY, "axpy")
    with pytest.raises(TypeError, match="not C-contiguous"):
        k.prepare_args(2.0, says_not, Duck(y), Duck(z), 5)
    T = CudaStruct("T", [("x", "double*"), ("n", "int")])
    with pytest.raises(TypeError, match=r"struct 'T': field 'x'.*not C-contiguous"):
        T(x=says_not, n=5)
    assert T(x=Duck(x), n=5).packed["x"] == x.__array_interface__["data"][0]

    class Args(CudaStructArguments):
        struct_name = "FlagArgs"
        fields = (("x", "double*"), ("n", "int"))

        def __init__(self, x):
            self.x, self.n = x, 5
            self.pack()

    with pytest.raises(TypeError, match=r"struct 'FlagArgs': field 'x'.*not C-contiguous"):
        Args(says_not)


# ------------------------------------------------------------------ issue 33 item 7: packed identity


def _identity_classes():
    from cunumpy import _reference

    S = CudaStruct("IdArgs", [("x", "double*"), ("y", "Array2D<double>"), ("n", "int")])
    twin_args, twin_packed = _reference.struct_arguments_descriptors(CudaStructArguments, "_cunumpy_struct_state")
    twin = _reference.struct_packer(
        S.name,
        tuple((s[0], f"field '{p.name}'", *s[2:]) for s, p in ((_spec_of(p), p) for p in S.fields)),
        S.offsets,
        S.itemsize,
        S.dtype,
        S.field_names,
        np.void,
        np.generic,
        np.empty,
    )

    class C(CudaStructArguments):
        struct_name = "IdArgs"
        fields = (("x", "double*"), ("y", "Array2D<double>"), ("n", "int"))

    class Twin(CudaStructArguments):
        __cuda_args__ = twin_args
        packed = twin_packed

    Twin._cunumpy_packer = twin
    return C, Twin


def _spec_of(p):
    from cunumpy.kernels._cuda_parse import _spec

    return _spec(0, p)


@pytest.mark.parametrize("make", [Duck, InterfaceOnly], ids=["attributes", "interface"])
def test_struct_arguments_packed_is_the_same_object_while_no_field_changed(make):
    x, y = np.arange(5.0), np.zeros((5, 6))
    for cls in _identity_classes():
        a = cls()
        a.x, a.y, a.n = make(x), make(y[:, ::2]), 5
        first = a.packed
        assert a.packed is first and a.__cuda_args__()[0] is first, cls
        # Every change the packer would see re-packs.
        if make is Duck:
            a.y.shape, a.y.strides = (5, 2), y[:, ::3].strides  # changed in place
        else:
            a.y.__cuda_array_interface__ = dict(a.y.__cuda_array_interface__, shape=(5, 2), strides=(48, 24))
        second = a.packed
        assert second is not first and second["y"]["shape"].tolist() == [5, 2], cls
        assert second["y"]["strides"].tolist() == [6, 3] and a.packed is second, cls
        if make is Duck:
            other = np.arange(5.0)
            a.x.data = types.SimpleNamespace(ptr=other.__array_interface__["data"][0])
            assert int(a.packed["x"]) == other.__array_interface__["data"][0], cls
            a.x.dtype = np.dtype(np.float32)
            with pytest.raises(TypeError, match="expected dtype float64"):
                a.packed  # noqa: B018 - the property packs
            a.x.dtype = np.dtype(np.float64)
            a.packed  # noqa: B018 - the property packs
            a.x.flags = types.SimpleNamespace(c_contiguous=False)
            with pytest.raises(TypeError, match="not C-contiguous"):
                a.packed  # noqa: B018 - the property packs


def test_prepare_args_passes_the_packed_struct_through():
    C, _twin = _identity_classes()
    k = CudaKernel(
        C.struct.to_header() + 'extern "C" __global__ void k(IdArgs a, double s) {}', "k", structs=[C.struct]
    )
    a = C()
    a.x, a.y, a.n = Duck(np.arange(5.0)), Duck(np.zeros((5, 6))), 5
    values = k.prepare_args(a, 2.0)
    assert values[0] is a.packed and k.prepare_args(a, 3.0)[0] is values[0]


def test_struct_arguments_is_a_cuda_arguments():
    C, _twin = _identity_classes()
    assert issubclass(CudaStructArguments, xp.arguments.CudaArguments)
    assert isinstance(C(), xp.arguments.CudaArguments)


# ------------------------------------------------------------------ issue 33 item 7: marker conditions


@pytest.mark.parametrize("plugin", [True, False])
def test_requires_device_backend_condition_is_a_bool(monkeypatch, plugin):
    import cunumpy.kernel_testing as kt

    monkeypatch.delenv("CUNUMPY_REQUIRE_CUDA", raising=False)
    monkeypatch.setattr(kt, "_plugin_active", lambda: plugin)
    mark = kt._make_requires_device_backend()
    assert len(mark.args) == 1 and isinstance(mark.args[0], bool), mark
    assert mark.name == ("requires_device_backend" if plugin else "skipif")
    assert isinstance(mark.kwargs["reason"], str)
    if not kt.device_backend_available():
        assert mark.args[0] is True
    elif plugin:
        assert mark.args[0] is False
    else:
        assert mark.args[0] is (xp.get_backend() != "cupy")


# ------------------------------------------------------------------ issue 33 item 7: verify_layout include_dirs


def test_verify_layout_finds_the_header_in_include_dirs(monkeypatch, tmp_path):
    from cunumpy import _struct_layout

    L = CudaStruct("L", [("data", "double*"), ("n", "int")])
    d = tmp_path / "headers"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "l.cuh").write_text(L.to_header())
    (tmp_path / "other").mkdir()
    seen = []

    def fake(struct, include, include_dirs, options):
        seen.append((include, include_dirs))
        return _struct_layout._result(struct, [16, 8, 0, 8])

    monkeypatch.setattr(_struct_layout, "_gpu_usable", lambda: False)
    monkeypatch.setattr(_struct_layout, "_compile_time_layout", fake)
    monkeypatch.chdir(tmp_path / "other")  # the header is not relative to the working directory
    found = str((d / "sub" / "l.cuh").resolve())
    for include in ("sub/l.cuh", '#include "sub/l.cuh"', "#include <sub/l.cuh>"):
        assert L.verify_layout(include=include, include_dirs=[tmp_path / "nowhere", d])["n"] == 8
        assert seen[-1] == (found, (str(tmp_path / "nowhere"), str(d)))
    assert L.verify_layout(include="l.cuh", include_dirs=str(d / "sub"))["sizeof"] == 16
    monkeypatch.chdir(d)  # relative to the working directory first, as before
    L.verify_layout(include="sub/l.cuh")
    assert seen[-1][0] == found
    with pytest.raises(
        ValueError, match=r"header 'absent.cuh' does not exist \(looked for 'absent.cuh', '.*headers/absent.cuh'\)"
    ):
        L.verify_layout(include="absent.cuh", include_dirs=[d])


@pytest.mark.nosan  # spawns nvcc, which does not run under the sanitizers' LD_PRELOAD
def test_verify_layout_with_include_dirs_compiles_the_found_header(monkeypatch, tmp_path):
    from cunumpy import _struct_layout

    if _struct_layout._gpu_usable() or _struct_layout.toolkit_compiler()[0] is None:
        pytest.skip("checks the compile-time path, which needs nvcc")
    L = CudaStruct("LD", [("data", "double*"), ("v", "Array2D<float>"), ("n", "int")])
    d = tmp_path / "include"
    d.mkdir()
    L.to_header(d / "ld.cuh")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    assert L.verify_layout(include="ld.cuh", include_dirs=[d]) == {
        "sizeof": 56,
        "alignof": 8,
        "data": 0,
        "v": 8,
        "n": 48,
    }


# ------------------------------------------------------------------ issue 33 item 7: aligned records, values


def test_struct_and_view_records_are_aligned_structs():
    S = CudaStruct("AL", [("y", "Array2D<double>"), ("z", "CArray1D<float>"), ("b", "bool"), ("c", "complex<double>")])
    assert S.dtype.isalignedstruct and S.dtype.itemsize == S.itemsize
    assert S.dtype.fields["y"][0].isalignedstruct and S.dtype.fields["z"][0].isalignedstruct
    assert [S.dtype.fields[n][1] for n in S.field_names] == list(S.offsets) == [0, 40, 56, 64]
    value = S(y=Duck(np.zeros((5, 6))), z=Duck(np.zeros(3, np.float32)), b=True, c=1j)
    assert value.packed.dtype.isalignedstruct
    k = CudaKernel('extern "C" __global__ void k(Array2D<double> y, CArray1D<float> z, int n) {}', "k")
    values = k.prepare_args(Duck(np.zeros((5, 6))), Duck(np.zeros(3, np.float32)), 3)
    assert values[0].dtype.isalignedstruct and values[1].dtype.isalignedstruct
    assert values[0].dtype.itemsize == 40 and values[1].dtype.itemsize == 16


def test_struct_value_from_a_mapping_without_packed_infers_the_launch_shape():
    S = CudaStruct("SV", [("x", "double*"), ("n", "int")])
    k = CudaKernel(S.declaration + 'extern "C" __global__ void k(SV s, double a) {}', "k", structs=[S])
    x = Duck(np.zeros(1000))
    value = CudaStructValue(S, None, {"n": 5, "x": x})  # field order from the struct
    assert value.packed is None and value._values == (x, 5) and list(value) == ["x", "n"]
    assert k.launch_shape(args=(value, 2.0)) == k.launch_shape(args=(S(x=x, n=5), 2.0)) == ((8,), (128,))
