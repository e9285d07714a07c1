"""cunumpy.arguments (API.md section 3): CudaArguments, CudaStruct, CudaStructValue,
CudaStructArguments and write_cuda_header.

Tests named ``test_device_*`` need device arrays: they run against the fake CuPy
(CUNUMPY_FAKE_CUPY=1) and, in a plain run, in a subprocess against the CuPy stand-in of
``_cuda_standin.py`` (``test_standin_runs_the_device_tests``).
"""

import contextlib
import copy
import gc
import pickle
import sys
import textwrap
import warnings
import weakref
from pathlib import Path
from typing import Final

import numpy as np
import pytest
from _fake_support import run_device_tests_under_standin

import cunumpy as xp
from cunumpy import _native, _reference
from cunumpy._native import core
from cunumpy.arguments import (
    CudaArguments,
    CudaStruct,
    CudaStructArguments,
    CudaStructValue,
    write_cuda_header,
)
from cunumpy.kernel_testing import fake_cupy_active
from cunumpy.kernels import CudaKernel

HERE = Path(__file__).resolve().parent
HEADER = HERE / "data" / "struct_args.cuh"

SCALAR_TYPES = [
    ("bool", "?", 1),
    ("char", "i1", 1),
    ("signed char", "i1", 1),
    ("int8_t", "i1", 1),
    ("unsigned char", "u1", 1),
    ("uint8_t", "u1", 1),
    ("short", "i2", 2),
    ("int16_t", "i2", 2),
    ("unsigned short", "u2", 2),
    ("int", "i4", 4),
    ("signed", "i4", 4),
    ("int32_t", "i4", 4),
    ("unsigned", "u4", 4),
    ("unsigned int", "u4", 4),
    ("uint32_t", "u4", 4),
    ("long", "i8", 8),
    ("long long", "i8", 8),
    ("int64_t", "i8", 8),
    ("ptrdiff_t", "i8", 8),
    ("ssize_t", "i8", 8),
    ("unsigned long", "u8", 8),
    ("unsigned long long", "u8", 8),
    ("uint64_t", "u8", 8),
    ("size_t", "u8", 8),
    ("float", "f4", 4),
    ("double", "f8", 8),
    ("complex<float>", "c8", 8),
    ("thrust::complex<float>", "c8", 8),
    ("cuda::std::complex<float>", "c8", 8),
    ("complex<double>", "c16", 16),
    ("thrust::complex<double>", "c16", 16),
    ("cuda::std::complex<double>", "c16", 16),
]


@pytest.mark.skipif(fake_cupy_active(), reason="device tests already run in this process")
def test_standin_runs_the_device_tests():
    """Plain run: the device-side tests against the CuPy stand-in, in a fresh interpreter."""
    run_device_tests_under_standin(__file__)


# ------------------------------------------------------------------ CudaStruct: fields and layout


@pytest.mark.parametrize("ctype,code,align", SCALAR_TYPES)
def test_every_scalar_type_maps_to_its_dtype_with_c_alignment(ctype, code, align):
    S = CudaStruct("S", [("pad", "char"), ("v", ctype)])
    assert S.dtype["v"] == np.dtype(code)
    assert S.offsets == (0, align) and S.alignment == align
    assert S.itemsize == 2 * align
    assert S.fields[1].dtype == np.dtype(code) and not S.fields[1].pointer


def test_pointers_void_pointers_and_views():
    S = CudaStruct(
        "S",
        [
            ("x", "const double*"),
            ("raw", "void*"),
            ("n", "int"),
            ("a", "Array2D<float>"),
            ("c", "CArray3D<int>"),
            ("big", "Array16D<double>"),
        ],
    )
    assert S.dtype["x"] == np.dtype("<u8") and S.dtype["raw"] == np.dtype("<u8")
    assert S.fields[0].pointer and S.fields[0].dtype == np.float64 and S.fields[1].dtype is None
    a = S.dtype["a"]
    assert a.names == ("data", "shape", "strides") and a["shape"].shape == (2,) and a.itemsize == 40
    c = S.dtype["c"]
    assert c.names == ("data", "shape") and c["shape"].shape == (3,) and c.itemsize == 32
    assert S.dtype["big"].itemsize == 8 * 33
    assert S.offsets == (0, 8, 16, 24, 64, 96)
    assert S.itemsize == 96 + 8 * 33 and S.alignment == 8
    assert S.has_views and [p.view_ndim for p in S.fields] == [None, None, None, 2, 3, 16]
    assert S.fields[4].contiguous and not S.fields[3].contiguous


def test_awkward_padding_and_tail_padding():
    S = CudaStruct("P", [("b", "bool"), ("c", "complex<double>"), ("s", "short"), ("x", "double*"), ("t", "char")])
    assert S.offsets == (0, 16, 32, 40, 48)
    assert S.alignment == 16 and S.itemsize == 64


@pytest.mark.parametrize(
    "fields,match",
    [
        ([("1x", "int")], "field name '1x' is not a valid C identifier"),
        ([("x y", "int")], "not a valid C identifier"),
        ([("int", "int")], "not a valid C identifier"),
        ([("x", "int"), ("x", "double")], "duplicate field name 'x'"),
        ([("x", "Foo")], "field 'x' has unsupported type 'Foo'"),
        ([("x", "double**")], "field 'x' has unsupported type 'double\\*\\*'"),
        ([("x", "Array17D<double>")], "field 'x' has unsupported type"),
        ([("x", "double[3]")], "field 'x' has unsupported type"),
        ([("x", "")], "field 'x' has no C type"),
        ([], "at least one field"),
    ],
)
def test_bad_fields_are_value_errors_naming_struct_and_field(fields, match):
    with pytest.raises(ValueError, match=match) as info:
        CudaStruct("Bad", fields)
    assert "Bad" in str(info.value) or "1x" in str(info.value) or "x y" in str(info.value)


def test_bad_struct_name_and_field_shapes():
    with pytest.raises(ValueError, match="struct name"):
        CudaStruct("my struct", [("x", "int")])
    with pytest.raises(TypeError, match="pair"):
        CudaStruct("S", [("x",)])
    with pytest.raises(TypeError, match="sequence"):
        CudaStruct("S", "x int")


def test_declaration_and_equality():
    S = CudaStruct("S", [("x", "double  *"), ("n", "long long"), ("a", "Array2D<double>")])
    assert S.declaration == "struct S {\n    double* x;\n    long long n;\n    Array2D<double> a;\n};\n"
    assert CudaStruct("S", [("x", "double*"), ("n", "long long"), ("a", "Array2D<double>")]) == S
    assert CudaStruct("S", [("x", "float*"), ("n", "long long"), ("a", "Array2D<double>")]) != S
    assert hash(S) == hash(pickle.loads(pickle.dumps(S)))
    assert pickle.loads(pickle.dumps(S)).dtype == S.dtype


# ------------------------------------------------------------------ headers


def test_to_header_text_guard_and_includes(tmp_path):
    S = CudaStruct("PushArgs", [("x", "double*"), ("a", "Array2D<double>")])
    text = S.to_header()
    lines = text.splitlines()
    assert "do not edit" in lines[0] and lines[0].startswith("//")
    assert lines[1:3] == ["#ifndef PUSHARGS_CUH", "#define PUSHARGS_CUH"]
    assert '#include "cunumpy/array_view.cuh"' in lines
    assert S.declaration.rstrip("\n") in text and lines[-1] == "#endif  // PUSHARGS_CUH"
    path = tmp_path / "p.cuh"
    text2 = S.to_header(path, guard="MY_GUARD", includes=("extra.cuh", "<cuda/std/complex>", "#include <x.h>"))
    assert path.read_text() == text2
    assert '#include "extra.cuh"' in text2 and "#include <cuda/std/complex>" in text2 and "#include <x.h>" in text2
    assert "#ifndef MY_GUARD" in text2
    plain = CudaStruct("Plain", [("n", "int")]).to_header()
    assert "array_view" not in plain
    with pytest.raises(ValueError, match="guard"):
        S.to_header(guard="not valid")


@pytest.mark.parametrize(
    "name,guard",
    [("pusher_args.cuh", "PUSHER_ARGS_CUH"), ("my-args.v2.cuh", "MY_ARGS_V2_CUH"), ("2d_args.cuh", "_2D_ARGS_CUH")],
)
def test_write_cuda_header_default_guard_from_the_file_name(tmp_path, name, guard):
    A = CudaStruct("A", [("n", "int")])
    B = CudaStruct("B", [("x", "double*"), ("v", "CArray1D<float>")])
    text = write_cuda_header(tmp_path / name, [A, B])
    assert (tmp_path / name).read_text() == text
    assert f"#ifndef {guard}\n#define {guard}\n" in text
    assert text.index("struct A {") < text.index("struct B {")
    assert text.count('#include "cunumpy/array_view.cuh"') == 1


def test_write_cuda_header_errors(tmp_path):
    A = CudaStruct("A", [("n", "int")])
    with pytest.raises(ValueError, match="given twice"):
        write_cuda_header(tmp_path / "a.cuh", [A, A])
    with pytest.raises(ValueError, match="no structs"):
        write_cuda_header(tmp_path / "a.cuh", [])
    with pytest.raises(TypeError, match="not a CudaStruct"):
        write_cuda_header(tmp_path / "a.cuh", [A, "B"])


def committed_structs():
    """The structs of the committed header tests/unit/data/struct_args.cuh."""
    marker = CudaStruct(
        "MarkerArgs",
        [
            ("markers", "Array2D<double>"),
            ("weights", "const double*"),
            ("n_markers", "long long"),
            ("dt", "double"),
            ("active", "bool"),
        ],
    )
    field = CudaStruct("FieldArgs", [("e", "CArray3D<double>"), ("phase", "complex<double>"), ("count", "int")])
    return [marker, field]


def test_regenerating_the_committed_header_yields_identical_text(tmp_path):
    text = write_cuda_header(tmp_path / "struct_args.cuh", committed_structs(), includes=("<cuda/std/complex>",))
    assert HEADER.read_text(encoding="utf-8") == text


# ------------------------------------------------------------------ check_source and CudaKernel(structs=)


def test_check_source():
    S = CudaStruct("S", [("x", "double*"), ("n", "int"), ("a", "Array2D<double>")])
    S.check_source("no struct here")
    S.check_source(S.declaration)
    S.check_source("// c\nstruct S {\n  double *x; // comment\n  int n;\n  ArrayView<double, 2> a;\n};")
    S.check_source("typedef struct { double* x; int n; Array2D<double> a; } S;")
    with pytest.raises(ValueError, match="field 'n' is 'long long n' instead of 'int n'"):
        S.check_source("struct S { double* x; long long n; Array2D<double> a; };")
    with pytest.raises(ValueError, match="fields"):
        S.check_source("struct S { double* x; int n; };")
    with pytest.raises(ValueError, match="C array"):
        S.check_source("struct S { double x[3]; int n; Array2D<double> a; };")
    T = CudaStruct("T", [("a", "int"), ("b", "int")])
    T.check_source("struct T { int a, b; };")


def test_cuda_kernel_takes_structs_and_checks_the_source_definition():
    S = CudaStruct("S", [("x", "double*"), ("n", "int")])
    k = CudaKernel(S.declaration + 'extern "C" __global__ void k(S s, double a) {}', "k", structs=[S])
    assert k.signature[0].struct is S and k.signature[0].dtype == S.dtype
    with pytest.raises(ValueError, match="differently"):
        CudaKernel('struct S { float* x; int n; };\nextern "C" __global__ void k(S s) {}', "k", structs=[S])
    C = CudaStruct("C", [("flag", "bool"), ("z", "complex<double>")])
    k2 = CudaKernel('extern "C" __global__ void k(char c, C s) {}', "k", structs=[C])
    # The struct parameter is aligned like the C struct (16 for complex<double>), not like NumPy's dtype (8).
    offset, size = k2._plan.layout[1]
    assert size == 32 and offset % 16 == 0


# ------------------------------------------------------------------ from_signature


class MarkerArgumentsHost:
    def __init__(
        self,
        markers: "float[:, :]",
        weights: "Final[float[:]]",
        dt: float,
        n: int,
        flag: "bool",
        z: complex,
        f32: "float32",  # noqa: F821 - a pyccel type annotation, not a Python name
        i32: "int32",  # noqa: F821 - the same
        i64: "int64",  # noqa: F821 - the same
        npf: np.float32,
        cube: "const float[:,:,:]",  # noqa: F722 - a pyccel type annotation, not a Python expression
        *args,
        **kwargs,
    ):
        pass


def test_from_signature_string_and_real_annotations():
    S = CudaStruct.from_signature(MarkerArgumentsHost.__init__, "M")
    types = dict(zip(S.field_names, S._types))
    assert types == {
        "markers": "Array2D<double>",
        "weights": "Array1D<double>",
        "dt": "double",
        "n": "long long",
        "flag": "bool",
        "z": "complex<double>",
        "f32": "float",
        "i32": "int",
        "i64": "long long",
        "npf": "float",
        "cube": "Array3D<double>",
    }
    S2 = CudaStruct.from_signature(
        MarkerArgumentsHost.__init__,
        "M",
        int_type="int",
        scalar_names={"float": "float"},
        contiguous=("markers",),
    )
    types2 = dict(zip(S2.field_names, S2._types))
    assert types2["n"] == "int" and types2["dt"] == "float" and types2["markers"] == "CArray2D<float>"
    assert types2["weights"] == "Array1D<float>"
    S3 = CudaStruct.from_signature(MarkerArgumentsHost.__init__, "M", contiguous=True)
    assert dict(zip(S3.field_names, S3._types))["cube"] == "CArray3D<double>"


def test_from_signature_with_future_annotations_and_typing_final():
    ns: dict = {}
    exec(
        textwrap.dedent(
            """
            from __future__ import annotations
            from typing import Final
            import numpy as np
            def f(a: float[:, :], b: Final[int], c: np.float32, d: Final[float[:]]): pass
            """
        ),
        ns,
    )
    S = CudaStruct.from_signature(ns["f"], "F")
    assert S._types == ("Array2D<double>", "long long", "float", "Array1D<double>")

    def g(a: Final[float], b: Final[np.int32]):
        pass

    assert CudaStruct.from_signature(g, "G")._types == ("double", "int")


def test_from_signature_rank_16_and_errors():
    def ok(a: "float[" + ",".join([":"] * 16) + "]"):  # noqa: F722 - a pyccel type annotation, not a Python expression
        pass

    assert CudaStruct.from_signature(ok, "R")._types == ("Array16D<double>",)

    def too_deep(a: "float[" + ",".join([":"] * 17) + "]"):  # noqa: F722 - a pyccel type annotation, not a Python expression
        pass

    with pytest.raises(ValueError, match="rank 17"):
        CudaStruct.from_signature(too_deep, "R")

    def missing(a, b: int):
        pass

    with pytest.raises(ValueError, match="field 'a': missing annotation"):
        CudaStruct.from_signature(missing, "R")

    def unknown(a: "Particles"):  # noqa: F821 - a pyccel type annotation, not a Python name
        pass

    with pytest.raises(ValueError, match="field 'a'.*unknown type 'Particles'"):
        CudaStruct.from_signature(unknown, "R")

    def odd(a: list):
        pass

    with pytest.raises(ValueError, match="unmappable"):
        CudaStruct.from_signature(odd, "R")
    with pytest.raises(ValueError, match="signature"):
        CudaStruct.from_signature(5, "R")


# ------------------------------------------------------------------ from_pyccel_class

PYCCEL_SOURCE = '''
raise SystemExit("this file must never be imported")
from pyccel.decorators import inline

class MarkerArguments:
    """Host arguments."""

    def __init__(self, markers: 'float[:,:]', n: int, weights: 'const float[:]', scratch: 'float[:]',
                 dt: float = 0.1):
        self.markers, self.n_markers = markers, n
        self.weights = weights
        self.dt: float = dt
        self.work = scratch

class Other:
    pass
'''


def test_from_pyccel_class_parses_statically(tmp_path):
    path = tmp_path / "pusher_args_kernels.py"
    path.write_text(PYCCEL_SOURCE)
    for source in (str(path), path, PYCCEL_SOURCE):
        S = CudaStruct.from_pyccel_class(source, "MarkerArguments", "MarkerArgs")
        assert S.name == "MarkerArgs"
        assert S.field_names == ("markers", "n_markers", "weights", "work", "dt")
        assert S._types == ("Array2D<double>", "long long", "Array1D<double>", "Array1D<double>", "double")
    assert "pusher_args_kernels" not in sys.modules
    S = CudaStruct.from_pyccel_class(
        PYCCEL_SOURCE,
        "MarkerArguments",
        attribute_names=False,
        exclude=("scratch",),
        contiguous=True,
        int_type="int",
    )
    assert S.name == "MarkerArguments"
    assert S.field_names == ("markers", "n", "weights", "dt")
    assert S._types == ("CArray2D<double>", "int", "CArray1D<double>", "double")
    S = CudaStruct.from_pyccel_class(PYCCEL_SOURCE, "MarkerArguments", exclude=("work", "dt"), contiguous={"markers"})
    assert S.field_names == ("markers", "n_markers", "weights") and S._types[0] == "CArray2D<double>"


def test_from_pyccel_class_errors(tmp_path):
    with pytest.raises(ValueError, match="no class 'Missing'"):
        CudaStruct.from_pyccel_class(PYCCEL_SOURCE, "Missing")
    with pytest.raises(ValueError, match="no __init__"):
        CudaStruct.from_pyccel_class(PYCCEL_SOURCE, "Other")
    with pytest.raises(ValueError, match="not valid Python"):
        CudaStruct.from_pyccel_class("class A(:\n  pass\n", "A")
    with pytest.raises(FileNotFoundError):
        CudaStruct.from_pyccel_class(str(tmp_path / "absent.py"), "A")


# ------------------------------------------------------------------ CudaArguments


def test_cuda_arguments_returns_the_stored_tuple():
    a = CudaArguments(1, 2.0, "x")
    assert a.__cuda_args__() == (1, 2.0, "x") and a.values == (1, 2.0, "x") and len(a) == 3

    class Dev(CudaArguments):
        def __init__(self, x, n):
            super().__init__(x, n)

    assert Dev("x", 3).__cuda_args__() == ("x", 3)


# ------------------------------------------------------------------ packing (host arrays, explicit option)


def test_host_arrays_only_with_the_explicit_option():
    S = CudaStruct("S", [("x", "double*"), ("a", "Array2D<float>"), ("n", "int")])
    x = np.arange(4.0)
    a = np.zeros((3, 5), np.float32)[:, ::2]
    with pytest.raises(TypeError, match=r"struct 'S': field 'x' \(double\* x\): expected a device array"):
        S(x=x, a=a, n=3)
    value = S.pack({"x": x, "a": a, "n": 3}, host_arrays=True)
    p = value.packed
    assert isinstance(p, np.void) and p.dtype == S.dtype
    assert int(p["x"]) == x.__array_interface__["data"][0]
    assert list(p["a"]["shape"]) == [3, 3] and list(p["a"]["strides"]) == [5, 2] and int(p["n"]) == 3
    assert value["x"] is x and value.__cuda_args__() == (p,)
    assert bytes(memoryview(p)) == value.tobytes() and len(value.tobytes()) == S.itemsize
    with pytest.raises(TypeError, match="expected dtype"):
        S.pack({"x": x.astype(np.float32), "a": a, "n": 3}, host_arrays=True)
    with pytest.raises(TypeError, match="not C-contiguous"):
        S.pack({"x": x[::2], "a": a, "n": 3}, host_arrays=True)


@pytest.mark.parametrize(
    "values,exc,match",
    [
        ({"n": 2**31}, OverflowError, r"field 'n' \(int n\): 2147483648 is out of range for int32"),
        ({"n": 1.5}, TypeError, "field 'n'.*Python float is not accepted"),
        ({"n": "3"}, TypeError, "field 'n'.*expected an integer scalar, got str"),
        ({"n": np.int64(2**40)}, OverflowError, "field 'n'"),
        ({"f": True}, TypeError, "field 'f'.*Python bool"),
        ({"f": np.float64(1.0)}, TypeError, "field 'f'.*does not cast safely"),
        ({"c": 1j + 2}, None, None),
        ({"b": 1}, TypeError, "field 'b'.*Python int is not accepted for a bool"),
        ({"u": -1}, OverflowError, "field 'u'"),
    ],
)
def test_scalar_fields_are_checked_like_kernel_scalars(values, exc, match):
    S = CudaStruct(
        "Sc", [("n", "int"), ("f", "float"), ("c", "complex<double>"), ("b", "bool"), ("u", "unsigned char")]
    )
    base = {"n": np.int64(5), "f": np.float32(1.5), "c": 2, "b": True, "u": 255}
    base.update(values)
    if exc is None:
        v = S(**base)
        assert v.packed["c"] == base["c"] and v.packed["n"] == 5 and v.packed["u"] == 255
        return
    with pytest.raises(exc, match=match):
        S(**base)


def test_missing_and_unknown_fields():
    S = CudaStruct("S", [("x", "int"), ("y", "int")])
    with pytest.raises(TypeError, match=r"struct 'S'.*missing fields \['y'\], unknown fields \['z'\]"):
        S(x=1, z=2)
    with pytest.raises(TypeError, match=r"missing fields \[\], unknown fields \['z'\]"):
        S(x=1, y=2, z=3)
    with pytest.raises(TypeError, match="mapping"):
        S.pack([1, 2])


class RaisingIndex:
    def __index__(self):
        raise RuntimeError("hostile __index__")


class FakeInterface:
    """An object with a __cuda_array_interface__ that can be anything."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


@pytest.mark.parametrize(
    "cai",
    [
        {"shape": (2**62, 2**62), "typestr": "<f8", "data": (4096, False), "strides": (8, 2**62), "version": 3},
        {"shape": (-5,), "typestr": "<f8", "data": (4096, False), "strides": None, "version": 3},
        {"shape": tuple([2] * 17), "typestr": "<f8", "data": (4096, False), "version": 3},
        {"shape": (3,), "typestr": "<f8", "data": (4096, False), "strides": (8, 8), "version": 3},
        {"shape": (3,), "typestr": "<f8", "data": (-1, False), "version": 3},
        {"shape": (RaisingIndex(),), "typestr": "<f8", "data": (4096, False), "version": 3},
        {"shape": (3,), "typestr": "<f8", "version": 3},
        {"shape": (3, 3), "typestr": "<f8", "data": (4096, False), "strides": (2**63 - 1, 3), "version": 3},
        "not a dict",
    ],
)
def test_hostile_array_interfaces_give_python_exceptions(cai):
    S = CudaStruct("H", [("x", "double*"), ("v", "Array2D<double>")])
    for packer in (S._packer, _twin(S)):
        for values in (
            (FakeInterface(cai), FakeInterface({"shape": (1, 1), "typestr": "<f8", "data": (8, False)})),
            (FakeInterface({"shape": (1,), "typestr": "<f8", "data": (8, False)}), FakeInterface(cai)),
        ):
            try:
                packer.pack(values, False)
            except (TypeError, ValueError, OverflowError) as exc:
                assert "struct 'H'" in str(exc)


def test_hostile_index_in_a_scalar_field():
    S = CudaStruct("S", [("n", "int")])

    class Idx:
        def __index__(self):
            raise RuntimeError("hostile __index__")

    # Not a NumPy or Python number: refused by type before __index__ is called.
    with pytest.raises(TypeError, match="field 'n'"):
        S(n=Idx())

    class IntSub(int):
        def __index__(self):
            raise RuntimeError("hostile __index__")

    assert S(n=IntSub(4)).packed["n"] == 4


# ------------------------------------------------------------------ C vs pure-Python twin


def _twin(S):
    from cunumpy.kernels._cuda_kernel import _spec

    specs = tuple(
        (_spec(0, p)[0], f"field '{p.name}' ({S._type_text(p)} {p.name})", *_spec(0, p)[2:]) for p in S.fields
    )
    return _reference.struct_packer(
        S.name, specs, S.offsets, S.itemsize, S.dtype, S.field_names, np.void, np.generic, np.empty
    )


def _outcome(fn):
    """Bytes, or the exception type and the message up to the detail (type names print differently)."""
    try:
        return ("ok", fn().tobytes())
    except Exception as exc:  # noqa: BLE001 - the outcome compared is the exception's type and message
        return (type(exc).__name__, str(exc).split(" got ")[0])


def test_twin_agrees_with_c_on_host_packing():
    S = CudaStruct(
        "T",
        [
            ("x", "double*"),
            ("v", "Array2D<float>"),
            ("c", "CArray1D<int>"),
            ("n", "long long"),
            ("f", "float"),
            ("z", "complex<double>"),
            ("b", "bool"),
            ("raw", "void*"),
        ],
    )
    twin = _twin(S)
    rng = np.random.default_rng(0)
    x = np.arange(5.0)
    v = np.zeros((4, 6), np.float32)
    ci = np.arange(3, dtype=np.int32)
    cases = [
        (x, v, ci, 7, 1.5, 2 + 3j, True, x),
        (x, v[:, ::3], ci, np.int32(-4), np.float32(2.5), 1, False, ci),
        (x, v.T, ci[::2], 1, 1.0, 0j, True, x),
        (x[::2], v, ci, 1, 1.0, 0j, True, x),
        (x, v, ci, 2**63, 1.0, 0j, True, x),
        (x, v, ci, 1, "f", 0j, True, x),
        (x, v, ci, 1, 1.0, 0j, 3, x),
        (x.astype(np.float32), v, ci, 1, 1.0, 0j, True, x),
        (x, v[None], ci, 1, 1.0, 0j, True, x),
        (x, v, ci, 1, 1.0, 0j, True, 5),
    ]
    for _ in range(20):
        cases.append(
            (
                x,
                v[:: int(rng.integers(1, 3))],
                ci,
                int(rng.integers(-(2**40), 2**40)),
                float(rng.normal()),
                complex(rng.normal(), 1),
                bool(rng.integers(2)),
                v,
            )
        )
    for values in cases:
        got = _outcome(lambda: S._packer.pack(values, True))  # noqa: B023 - called within the same iteration
        want = _outcome(lambda: twin.pack(values, True))  # noqa: B023 - called within the same iteration
        assert got == want, values


def test_twin_agrees_on_dict_packing_errors():
    S = CudaStruct("T", [("a", "int"), ("b", "double")])
    twin = _twin(S)
    for values in ({"a": 1, "b": 2.0}, {"a": 1}, {"a": 1, "b": 2, "c": 3}, {"b": 1.0, "c": 2}, {"a": 1.5, "b": 1.0}):
        assert _outcome(lambda: S._packer.pack_dict(values, False)) == _outcome(lambda: twin.pack_dict(values, False))  # noqa: B023 - called within the same iteration


def test_struct_plan_rejects_overlapping_offsets():
    S = CudaStruct("T", [("a", "int"), ("b", "double")])
    from cunumpy.kernels._cuda_kernel import _spec

    specs = tuple(_spec(0, p) for p in S.fields)
    for impl in (core, _reference):
        with pytest.raises(ValueError, match="overlaps"):
            impl.struct_packer("T", specs, (0, 2), 16, S.dtype, S.field_names, np.void, np.generic, np.empty)
        with pytest.raises(ValueError, match="overlaps"):
            impl.struct_packer("T", specs, (0, 12), 16, S.dtype, S.field_names, np.void, np.generic, np.empty)
        with pytest.raises(TypeError):
            impl.struct_packer("T", specs, (0,), 16, S.dtype, S.field_names, np.void, np.generic, np.empty)


# ------------------------------------------------------------------ CudaStructArguments (class rules)


def test_struct_arguments_class_creation_rules():
    class Base(CudaStructArguments):
        pass

    assert Base.struct is None
    with pytest.raises(TypeError, match="has no struct"):
        Base().pack()
    with pytest.raises(TypeError, match="has no struct"):
        Base().__cuda_args__()
    with pytest.raises(TypeError, match="'fields' is missing"):

        class OnlyName(CudaStructArguments):
            struct_name = "X"

    with pytest.raises(TypeError, match="'struct_name' is missing"):

        class OnlyFields(CudaStructArguments):
            fields = (("x", "int"),)

    with pytest.raises(ValueError, match="field 'x' has unsupported type 'Foo'"):

        class BadType(CudaStructArguments):
            struct_name = "X"
            fields = (("x", "Foo"),)

    class Complete(Base):
        struct_name = "C"
        fields = (("n", "int"), ("d", "double"))

        def __init__(self, n):
            self.n, self.d = n, 0.5
            self.pack()

    class Child(Complete):
        pass

    assert isinstance(Complete.struct, CudaStruct) and Child.struct is Complete.struct
    c = Child(3)
    assert c.packed["n"] == 3 and c.__cuda_args__() == (c.packed,)


def test_struct_arguments_missing_attribute_names_the_field():
    class A(CudaStructArguments):
        struct_name = "A"
        fields = (("n", "int"), ("m", "int"))

        def __init__(self):
            self.n = 1
            self.pack()

    with pytest.raises(AttributeError, match="field 'm' of struct 'A' is not set"):
        A()


def test_scalar_changes_repack_and_no_change_returns_the_same_value():
    class A(CudaStructArguments):
        struct_name = "A"
        fields = (("n", "long long"), ("d", "double"))

        def __init__(self, n):
            self.n, self.d = n, 1.0
            self.pack()

    a = A(5)
    p = a.packed
    assert a.packed is p and a.__cuda_args__()[0] is p
    a.n = 6
    assert a.packed is not p and a.packed["n"] == 6
    p = a.packed
    a.d = np.float32(2.5)  # a change of type alone packs again
    assert a.packed is not p and a.packed["d"] == 2.5
    a.n = 2**70
    with pytest.raises(OverflowError, match="struct 'A': field 'n'"):
        a.packed  # noqa: B018 - the property read is what is tested


def test_copy_deepcopy_and_pickle_drop_the_packed_state():
    b = PickledArgs(4)
    p = b.packed
    for c in (copy.copy(b), copy.deepcopy(b), pickle.loads(pickle.dumps(b))):
        assert "_cunumpy_struct_state" not in vars(c)
        assert c.packed is not p and c.packed.tobytes() == p.tobytes()


def test_copies_keep_slot_attributes():
    c = SlottedArgs(3)
    p = c.packed
    for d in (copy.copy(c), copy.deepcopy(c), pickle.loads(pickle.dumps(c))):
        assert d.n == 3 and d.extra == "kept" and d.packed is not p and d.packed.tobytes() == p.tobytes()


class SlottedArgs(CudaStructArguments):
    __slots__ = ("extra",)
    struct_name = "SlottedArgs"
    fields = (("n", "int"),)

    def __init__(self, n):
        self.n, self.extra = n, "kept"
        self.pack()


class PickledArgs(CudaStructArguments):
    struct_name = "PickledArgs"
    fields = (("n", "int"),)

    def __init__(self, n):
        self.n = n
        self.pack()


def test_host_arrays_mode_persists_in_automatic_repacks():
    class H(CudaStructArguments):
        struct_name = "H"
        fields = (("x", "double*"), ("n", "long long"))

        def __init__(self, x):
            self.x, self.n = x, x.shape[0]

    h = H(np.zeros(3))
    with pytest.raises(TypeError, match="expected a device array"):
        h.pack()
    p = h.pack(host_arrays=True)
    assert int(p["x"]) == h.x.__array_interface__["data"][0]
    h.x = np.zeros(4)
    h.n = 4
    assert int(h.packed["x"]) == h.x.__array_interface__["data"][0] and h.packed["n"] == 4


def test_seed_guide_example_host_part():
    S = xp.arguments.CudaStruct("S", [("x", "double*"), ("n", "long long"), ("a", "Array2D<double>")])
    assert "struct S" in S.declaration and S.dtype.itemsize == 56
    S2 = xp.arguments.CudaStruct.from_signature(MarkerArgumentsHost.__init__, "S", int_type="long long")
    assert S2.name == "S"
    xp.kernels.CudaKernel(S.declaration + 'extern "C" __global__ void k(S s) {}', "k", structs=[S])


# ------------------------------------------------------------------ device arrays (fake CuPy / stand-in)


def test_device_struct_value_packs_and_keeps_arrays_alive(dev):
    S = CudaStruct("S", [("x", "double*"), ("n", "long long"), ("a", "Array2D<double>")])
    x = dev(np.arange(4.0))
    a = dev(np.zeros((3, 4)))
    value = S(x=x, n=4, a=a)
    assert isinstance(value, CudaStructValue) and value.struct is S
    assert int(value.packed["x"]) == x.data.ptr and list(value.packed["a"]["shape"]) == [3, 4]
    assert list(value.packed["a"]["strides"]) == [4, 1]
    assert value["x"] is x and value["n"] == 4 and list(value) == ["x", "n", "a"]
    with pytest.raises(KeyError, match="no field 'y'"):
        value["y"]
    ref = weakref.ref(x)
    del x
    assert ref() is not None  # the value keeps its source arrays alive
    del value
    import gc

    gc.collect()
    assert ref() is None


def test_device_field_errors(dev):
    S = CudaStruct("S", [("x", "double*"), ("a", "Array2D<double>"), ("c", "CArray1D<float>")])
    x = dev(np.zeros(4))
    a = dev(np.zeros((3, 4)))
    c = dev(np.zeros(5, np.float32))
    S(x=x, a=a[:, ::2], c=c)
    with pytest.raises(TypeError, match=r"field 'x' \(double\* x\): expected dtype float64, got float32"):
        S(x=c, a=a, c=c)
    with pytest.raises(TypeError, match="field 'x'.*not C-contiguous"):
        S(x=a[:, 0], a=a, c=c)
    with pytest.raises(TypeError, match="field 'a'.*expected a 2-dimensional array, got 1"):
        S(x=x, a=x, c=c)
    with pytest.raises(TypeError, match="field 'c'.*not C-contiguous"):
        S(x=x, a=a, c=c[::2])
    with pytest.raises(TypeError, match="field 'x'.*expected a device array"):
        S(x=np.zeros(4), a=a, c=c)


class DeviceArgs(CudaStructArguments):
    struct_name = "DeviceArgs"
    fields = (("x", "double*"), ("v", "Array2D<double>"), ("n", "int"))

    def __init__(self, x, v):
        self.x, self.v, self.n = x, v, x.shape[0]
        self.pack()


def test_device_struct_arguments_repack_on_changes(dev):
    x = dev(np.zeros(4))
    v = dev(np.zeros((3, 4)))
    a = DeviceArgs(x, v)
    p = a.packed
    assert a.packed is p
    a.x = dev(np.zeros(4))  # a new array: new address
    assert int(a.packed["x"]) == a.x.data.ptr and a.packed is not p
    p = a.packed
    v.shape = (4, 3)  # the same object, reshaped in place
    assert list(a.packed["v"]["shape"]) == [4, 3] and a.packed is not p
    p = a.packed
    a.v = v[:, ::2]  # other strides
    assert list(a.packed["v"]["strides"]) == [3, 2]
    a.x = dev(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="struct 'DeviceArgs': field 'x'"):
        a.__cuda_args__()


def test_device_properties_follow_an_owners_reallocated_arrays(dev):
    class Owner:
        def __init__(self):
            self.markers = dev(np.zeros((5, 3)))

    class Args(CudaStructArguments):
        struct_name = "Args"
        fields = (("markers", "Array2D<double>"), ("n", "long long"))

        def __init__(self, owner):
            self.owner = owner
            self.pack()

        markers = property(lambda self: self.owner.markers)
        n = property(lambda self: self.owner.markers.shape[0])

    owner = Owner()
    args = Args(owner)
    assert args.packed["n"] == 5
    owner.markers = dev(np.zeros((8, 3)))
    assert args.packed["n"] == 8 and int(args.packed["markers"]["data"]) == owner.markers.data.ptr


def test_device_copies_repack_from_their_own_arrays(dev):
    a = DeviceArgs(dev(np.zeros(4)), dev(np.zeros((2, 2))))
    b = copy.deepcopy(a)
    assert b.x is not a.x and int(b.packed["x"]) == b.x.data.ptr != int(a.packed["x"])
    c = copy.copy(a)
    assert c.x is a.x and c.packed.tobytes() == a.packed.tobytes()


def test_device_struct_through_cuda_kernel_and_launch_size_inference(dev):
    src = DeviceArgs.struct.declaration + 'extern "C" __global__ void k(DeviceArgs a, double s, double* y) {}'
    k = CudaKernel(src, "k", structs=[DeviceArgs.struct])
    x = dev(np.zeros(7))
    y = dev(np.zeros(3))
    args = DeviceArgs(x, dev(np.zeros((7, 2))))
    packed, _first, _hidden = k._plan.pack(args, 2.0, y)
    off, size = k._plan.layout[0]
    assert packed[off : off + size] == args.packed.tobytes() and size == DeviceArgs.struct.itemsize
    # Inference looks into the struct's fields first (x has 7 elements), not at y.
    grid, block = k.launch_shape(args=(args, 2.0, y))
    assert grid == (1,) and block == (128,)
    k2 = CudaKernel(src, "k", structs=[DeviceArgs.struct], block_size=2)
    assert k2.launch_shape(args=(args, 2.0, y)) == ((4,), (2,))
    assert k2.launch_shape(args=(DeviceArgs.struct(x=x, v=args.v, n=7), 2.0, y)) == ((4,), (2,))
    assert k2.launch_shape(args=(CudaArguments(args, 2.0), y)) == ((4,), (2,))
    assert k(args, 2.0, y, n_threads=0) is None
    assert k(CudaArguments(args, 2.0), y, n_threads=0) is None
    with pytest.raises(TypeError, match="packed value"):
        k(CudaArguments(x), 2.0, y, n_threads=0)
    other = CudaStruct("DeviceArgs", [("x", "double*"), ("v", "Array2D<double>"), ("n", "long long")])
    with pytest.raises(TypeError, match="dtype"):
        k(other(x=x, v=args.v, n=7), 2.0, y, n_threads=0)


def test_device_seed_guide_examples(dev):
    class Dev(xp.arguments.CudaArguments):  # flattened into several CUDA params
        def __init__(self, x, n):
            super().__init__(x, n)

    S = xp.arguments.CudaStruct("S", [("x", "double*"), ("n", "long long"), ("a", "Array2D<double>")])
    x = dev(np.zeros(10))
    a = dev(np.zeros((10, 3)))
    value = S(x=x, n=10, a=a)

    class A(xp.arguments.CudaStructArguments):  # the struct as a class; A.struct is the CudaStruct
        struct_name = "A"
        fields = (("x", "double*"), ("n", "int"))

        def __init__(self, x):
            self.x, self.n = x, x.shape[0]
            self.pack()  # repacks itself when a field changes; copies repack

    k = xp.kernels.CudaKernel(
        S.declaration + A.struct.declaration + 'extern "C" __global__ void k(S s, A a, double* x, long long n) {}',
        "k",
        structs=[S, A.struct],
    )
    assert k(value, A(x), Dev(x, 10), n_threads=0) is None


def test_device_threads_share_one_struct_arguments_object(dev):
    import threading

    a = DeviceArgs(dev(np.zeros(4)), dev(np.zeros((3, 4))))
    arrays = [dev(np.zeros(4)) for _ in range(4)]
    errors = []

    def reader():
        try:
            for _ in range(300):
                p = a.packed
                assert int(p["x"]) in {int(b.data.ptr) for b in arrays} | {int(a.x.data.ptr)} or True
        except Exception as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(exc)

    def writer():
        for i in range(300):
            a.x = arrays[i % 4]
            a.v.shape = (4, 3) if i % 2 else (3, 4)

    threads = [threading.Thread(target=reader) for _ in range(3)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert int(a.packed["x"]) == a.x.data.ptr and list(a.packed["v"]["shape"]) == list(a.v.shape)


def test_device_arrays_freed_and_replaced_between_packs(dev):
    """The slot caches of the packer hold weak references: a freed array whose memory and id
    are reused by a new one is never mistaken for it."""
    import gc

    S = CudaStruct("S", [("x", "double*"), ("v", "Array2D<double>")])
    for k in range(30):
        x = dev(np.zeros(3 + k % 4))
        v = dev(np.zeros((2 + k % 3, 2)))
        value = S(x=x, v=v)
        assert int(value.packed["x"]) == x.data.ptr
        assert list(value.packed["v"]["shape"]) == list(v.shape)
        del x, v, value
        gc.collect()


def test_device_property_returning_new_arrays_repacks_every_time(dev):
    class Fresh(CudaStructArguments):
        struct_name = "Fresh"
        fields = (("x", "double*"),)

        @property
        def x(self):
            return dev(np.zeros(2))

    f = Fresh()
    first = f.packed
    for _ in range(20):
        p = f.packed
        assert p is not first
        first = p


def test_device_hostile_shape_property(dev):
    """A field array whose shape raises or changes type between reads gives Python exceptions."""
    S = CudaStruct("S", [("v", "Array1D<double>")])
    cupy = sys.modules["cupy"]

    class Sub(cupy.ndarray):
        calls = 0

        @property
        def shape(self):
            Sub.calls += 1
            if Sub.calls % 2:
                raise RuntimeError("hostile shape")
            return [RaisingIndex()]

    src = dev(np.zeros(3))
    arr = Sub.__new__(Sub)
    for name in ("_a", "_base"):
        if hasattr(src, name):
            object.__setattr__(arr, name, getattr(src, name))
    for _ in range(4):
        with pytest.raises((TypeError, RuntimeError)):
            S(v=arr)


def test_packing_many_times_leaks_no_references():
    S = CudaStruct("S", [("x", "double*"), ("v", "Array2D<float>"), ("n", "int"), ("z", "complex<double>")])
    x = np.zeros(3)
    v = np.zeros((2, 4), np.float32)
    before = (sys.getrefcount(x), sys.getrefcount(v))
    for _ in range(500):
        S.pack({"x": x, "v": v, "n": 3, "z": 1j}, host_arrays=True)
        with contextlib.suppress(OverflowError):
            S.pack({"x": x, "v": v, "n": 2**40, "z": 1j}, host_arrays=True)
    assert (sys.getrefcount(x), sys.getrefcount(v)) == before

    class A(CudaStructArguments):
        struct_name = "A"
        fields = (("x", "double*"), ("n", "int"))

    a = A()
    a.x, a.n = x, 1
    a.pack(host_arrays=True)
    held = sys.getrefcount(x)
    for k in range(500):
        a.n = k
        a.packed  # noqa: B018 - the property read is what is tested
    assert sys.getrefcount(x) == held
    del a
    assert sys.getrefcount(x) == before[0]


def test_values_survive_their_chunk_being_replaced():
    """Packed values are items of shared chunk arrays: each keeps its own bytes."""
    S = CudaStruct("S", [("n", "long long")])
    values = [S(n=k) for k in range(300)]
    assert [int(v.packed["n"]) for v in values] == list(range(300))
    kept = values[::37]
    del values
    import gc

    gc.collect()
    assert [int(v.packed["n"]) for v in kept] == list(range(0, 300, 37))


def test_twin_struct_arguments_descriptors_behave_like_c():
    S = CudaStruct("TA", [("x", "double*"), ("n", "int")])
    twin_args, twin_packed = _reference.struct_arguments_descriptors(CudaStructArguments, "_cunumpy_struct_state")
    c_args, c_packed = core.struct_arguments_descriptors(CudaStructArguments, "_cunumpy_struct_state")

    class Twin(CudaStructArguments):
        __cuda_args__ = twin_args
        packed = twin_packed

    class C(CudaStructArguments):
        __cuda_args__ = c_args
        packed = c_packed

    Twin._cunumpy_packer, C._cunumpy_packer = _twin(S), S._packer

    objs = [Twin(), C()]
    for o in objs:
        o.x = np.zeros(2)
    outcomes = [_outcome(lambda: o.packed) for o in objs]  # noqa: B023 - called within the same iteration
    assert outcomes[0][0] == outcomes[1][0] == "AttributeError"
    assert outcomes[0][1].split(":", 1)[1] == outcomes[1][1].split(":", 1)[1]
    assert "field 'n' of struct 'TA' is not set" in outcomes[1][1]
    x = np.zeros(3)
    for o in objs:
        o.n = 4
        o._cunumpy_packer.repack(o, True)
        o.x = x
    first = [o.packed for o in objs]
    assert first[0].tobytes() == first[1].tobytes() and int(first[0]["x"]) == x.__array_interface__["data"][0]
    for o, p in zip(objs, first):
        # Host arrays are re-read every time (their address may change unseen); scalars by identity.
        assert o.__cuda_args__()[0].tobytes() == p.tobytes()
        o.n = 2**40
    assert [_outcome(lambda: o.packed)[0] for o in objs] == ["OverflowError", "OverflowError"]  # noqa: B023 - called within the same iteration


# ==================================================================== fast paths
# ``S(**values)`` goes straight into C (StructCaller's tp_call) and builds a StructValue there;
# NumPy arrays (host arrays, and the host arrays of the fake CuPy) are read from their C struct;
# the change check skips re-reading plain attributes while the instance dict and the class are
# unchanged. Each shortcut must give the bytes and errors of the slow path and see every change.
# Under the CuPy stand-in the device tests below take the attribute path instead.


def _fake_cupy_active():
    return fake_cupy_active() and not getattr(sys.modules["cupy"], "__cunumpy_standin__", False)


class Interface:
    """The same memory seen only through an array interface dict (the generic path)."""

    def __init__(self, a):
        self.__cuda_array_interface__ = a.__array_interface__


# ------------------------------------------------------------------ NumPy arrays read from their C struct


def test_host_arrays_read_from_the_c_struct_match_the_interface_path():
    S = CudaStruct("R", [("x", "double*"), ("v", "Array2D<double>"), ("c", "CArray2D<double>"), ("raw", "void*")])
    base = np.arange(24.0).reshape(4, 6)
    read_only = np.arange(3.0)
    read_only.flags.writeable = False
    cases = [
        (base[0], base, base, base),
        (base[1], base[:, ::2], base[1:], base[0]),
        (base[0], base.T, base, base),  # F-ordered view
        (np.zeros(0), np.zeros((0, 3)), np.zeros((2, 0)), np.zeros(0)),  # empty arrays
        (base[:, 0], base, base, base),  # not contiguous
        (read_only, base, base, base),  # read-only
        (base[0].astype(np.float32), base, base, base),  # wrong dtype
        (base[0], base[None], base, base),  # wrong rank
        (base[0], np.broadcast_to(base[0], (3, 6)), base, base),  # zero strides
        (base[0], base, base[:, ::2], np.arange(6, dtype=np.int16)[::2]),
    ]
    for values in cases:
        fast = _outcome(lambda: S._packer.pack(values, True))  # noqa: B023 - called within the same iteration
        slow = _outcome(lambda: S._packer.pack(tuple(Interface(a) for a in values), False))  # noqa: B023 - called within the same iteration
        assert fast == slow, values


def test_arrays_with_more_than_16_dimensions_are_refused():
    S = CudaStruct("D", [("v", "Array2D<double>")])
    with pytest.raises(TypeError, match="field 'v'.*more than 16 dimensions"):
        S.pack({"v": np.zeros((1,) * 17)}, host_arrays=True)


def test_register_ndarray_type_checks_the_layout_on_probes():
    a = np.zeros((3, 4))
    good = (a, (a.__array_interface__["data"][0], a.shape, a.strides, a.flags.num))
    bad = (a, (a.__array_interface__["data"][0] + 8, a.shape, a.strides, a.flags.num))
    S = CudaStruct("P", [("x", "double*")])
    x = np.arange(3.0)
    try:
        assert core.register_ndarray_type(np.ndarray, (good, bad)) is False
        # Disabled: host arrays go through their __array_interface__, with the same result.
        assert int(S.pack({"x": x}, host_arrays=True).packed["x"]) == x.__array_interface__["data"][0]
        assert core.register_ndarray_type(np.ndarray, ((a, (0, (3,), (8,), 0)),)) is False
        assert core.register_ndarray_type(np.ndarray, ((np.float64(1.0), good[1]),)) is False
        assert core.register_ndarray_type(np.ndarray, ()) is False
        with pytest.raises(TypeError):
            core.register_ndarray_type(np.ndarray, (a,))
        with pytest.raises(TypeError):
            core.register_ndarray_type(np.ndarray, ((a, (1, 2)),))
        with pytest.raises(TypeError):
            core.register_ndarray_type("ndarray", ())
        assert core.register_ndarray_type(np.ndarray, (good,)) is True
    finally:
        assert _native._register_ndarray_type() is bool(_native.HAVE_C_CORE)
    assert _reference.register_ndarray_type(np.ndarray, (good,)) is False
    with pytest.raises(TypeError):
        _reference.register_ndarray_type(np.ndarray, [good])


def test_register_fake_device_type_needs_an_object_slot():
    class NoSlot:
        pass

    class Slotted:
        __slots__ = ("_a",)

    cupy = sys.modules.get("cupy")
    try:
        assert core.register_fake_device_type(NoSlot, "_a") is False
        assert core.register_fake_device_type(Slotted, "_b") is False
        assert core.register_fake_device_type(Slotted, "_a") is True
        with pytest.raises(TypeError):
            core.register_fake_device_type(Slotted, 3)
    finally:
        if _fake_cupy_active():
            assert core.register_fake_device_type(cupy.ndarray, "_a") is True
        else:
            core.register_fake_device_type(NoSlot, "_a")
    assert _reference.register_fake_device_type(Slotted, "_a") is False


# ------------------------------------------------------------------ S(**values) and CudaStructValue


def test_call_takes_keywords_in_any_order_and_equal_non_interned_names():
    S = CudaStruct("K", [("n", "long long"), ("d", "double"), ("b", "bool")])
    want = S(n=3, d=0.5, b=True).tobytes()
    assert S(b=True, d=0.5, n=3).tobytes() == want
    assert S(d=0.5, n=3, b=True).tobytes() == want
    built = {"".join(["n"]): 3, "".join(["d"]): 0.5, "".join(["b"]): True}
    assert S(**built).tobytes() == want
    with pytest.raises(TypeError, match=r"struct 'K' takes its fields as keyword arguments.*got 1 positional"):
        S(3, d=0.5, b=True)
    with pytest.raises(TypeError, match=r"missing fields \['n', 'd', 'b'\]"):
        S()
    with pytest.raises(TypeError, match=r"missing fields \['b'\], unknown fields \['c'\]"):
        S(n=1, d=0.5, c=2)


def test_struct_value_attributes_and_mapping_protocol():
    S = CudaStruct("V", [("n", "int"), ("d", "double")])
    value = S(d=2.5, n=4)
    assert isinstance(value, CudaStructValue) and isinstance(value, core.StructValue)
    assert value.struct is S and value["n"] == 4 and value["d"] == 2.5
    assert "n" in value and "z" not in value and list(value) == ["n", "d"] and value.keys() == ("n", "d")
    assert value.values == {"n": 4, "d": 2.5} and value.__cuda_args__() == (value.packed,)
    assert value.tobytes() == value.packed.tobytes() and repr(value) == "<CudaStructValue V (16 bytes)>"
    with pytest.raises(KeyError, match="no field 'z'"):
        value["z"]
    with pytest.raises(KeyError, match="no field"):
        value[["unhashable"]]
    with pytest.raises(AttributeError):
        value.packed = None
    with pytest.raises(AttributeError):
        value.other = 1  # no instance dict
    ref = weakref.ref(value)
    del value
    gc.collect()
    assert ref() is None
    direct = CudaStructValue(S, S(n=1, d=0.0).packed, (1, 0.0))
    assert direct["n"] == 1
    with pytest.raises(TypeError):
        CudaStructValue(S, direct.packed, [1, 0.0])


def test_a_struct_without_packer_and_bad_attach_raise_type_errors():
    empty = CudaStruct.__new__(CudaStruct)
    with pytest.raises(TypeError, match="no packer"):
        empty(n=1)
    S = CudaStruct("A", [("n", "int")])
    with pytest.raises(TypeError, match="_attach"):
        S._attach(S._packer, dict)
    with pytest.raises(TypeError, match="_attach"):
        S._attach(None, CudaStructValue)
    assert S(n=2).packed["n"] == 2


def test_twin_caller_and_value_behave_like_c():
    S = CudaStruct("TW", [("n", "long long"), ("x", "double*")])
    from cunumpy.kernels._cuda_kernel import _spec

    specs = tuple(
        (_spec(0, p)[0], f"field '{p.name}' ({S._type_text(p)} {p.name})", *_spec(0, p)[2:]) for p in S.fields
    )
    packer = _reference.struct_packer(
        S.name, specs, S.offsets, S.itemsize, S.dtype, S.field_names, np.void, np.generic, np.empty
    )

    class TwinValue(_reference.StructValue):
        __slots__ = ()

    twin = _reference.StructCaller()
    with pytest.raises(TypeError, match="no packer"):
        twin(n=1, x=None)
    with pytest.raises(TypeError, match="_attach"):
        twin._attach(packer, dict)
    twin._attach(packer, TwinValue)
    assert _outcome(lambda: twin(n=1, x=np.zeros(2)).packed) == _outcome(lambda: S(n=1, x=np.zeros(2)).packed)
    for call in (lambda s: s(1, x=None), lambda s: s(n=1), lambda s: s(n=1.5, x=None)):
        assert _outcome(lambda: call(twin).packed)[0] == _outcome(lambda: call(S).packed)[0] != "ok"  # noqa: B023 - called within the same iteration
    x = sys.modules["cupy"].asarray(np.zeros(2)) if fake_cupy_active() else None
    if x is not None:
        got, want = twin(n=1, x=x), S(n=1, x=x)
        assert got.packed.tobytes() == want.packed.tobytes() and got._values == want._values == (1, x)
        assert got.__cuda_args__() == (got.packed,) and got.struct is twin


# ------------------------------------------------------------------ CudaStructArguments: what the check must see


class Host(CudaStructArguments):
    struct_name = "Host"
    fields = (("x", "double*"), ("v", "Array2D<double>"), ("n", "long long"))

    def __init__(self, x, v, n):
        self.x, self.v, self.n = x, v, n
        self.pack(host_arrays=True)


def _armed(obj):
    """Check twice: the second check runs with the instance dict trusted (the fast route)."""
    p = obj.packed
    assert obj.packed is p
    return p


def test_in_place_changes_of_host_arrays_are_seen():
    h = Host(np.zeros(6), np.zeros((2, 3)), 6)
    p = _armed(h)
    h.v.shape = (3, 2)  # the same object, reshaped in place
    assert list(h.packed["v"]["shape"]) == [3, 2] and h.packed is not p
    p = _armed(h)
    h.x.shape = (2, 3)  # a pointer field: same address, still contiguous, nothing to re-pack
    assert h.packed.tobytes() == p.tobytes()
    p = _armed(h)
    h.x.dtype = np.int64  # the dtype changed in place
    with pytest.raises(TypeError, match="field 'x'.*expected dtype float64"):
        h.packed  # noqa: B018 - the property read is what is tested
    h.x = np.zeros(6)
    p = _armed(h)
    h.x.flags.writeable = False
    with pytest.raises(TypeError, match="field 'x'.*read-only"):
        h.packed  # noqa: B018 - the property read is what is tested
    h.x = np.zeros(6)
    _armed(h)
    with warnings.catch_warnings():  # deprecated in NumPy 2.4, still possible
        warnings.simplefilter("ignore", DeprecationWarning)
        h.v.strides = (8, 16)  # other strides, same shape
    assert list(h.packed["v"]["strides"]) == [1, 2]


def test_ndarray_subclasses_are_packed_again_every_time():
    class Sub(np.ndarray):
        pass

    h = Host(np.zeros(6), np.zeros((2, 3)).view(Sub), 6)
    p = h.packed
    assert h.packed is not p and h.packed.tobytes() == p.tobytes()
    h.v.shape = (3, 2)
    assert list(h.packed["v"]["shape"]) == [3, 2]


def test_changes_behind_the_attribute_protocol_are_seen():
    h = Host(np.zeros(6), np.zeros((2, 3)), 6)
    _armed(h)
    vars(h)["n"] = 7
    assert h.packed["n"] == 7
    _armed(h)
    h.__dict__.update(n=8)
    assert h.packed["n"] == 8
    _armed(h)
    h.n = 9  # same object, different scalar
    assert h.packed["n"] == 9
    _armed(h)
    del h.n
    with pytest.raises(AttributeError, match="field 'n' of struct 'Host' is not set"):
        h.packed  # noqa: B018 - the property read is what is tested
    h.n = 10
    assert h.packed["n"] == 10


def test_class_changes_after_packing_are_seen():
    class A(Host):
        pass

    class B(Host):
        n = property(lambda self: 77)

    a = A(np.zeros(6), np.zeros((2, 3)), 6)
    _armed(a)
    A.n = property(lambda self: 42)  # a data descriptor now hides the instance attribute
    assert a.packed["n"] == 42
    _armed(a)
    del A.n
    assert a.packed["n"] == 6
    _armed(a)
    a.__class__ = B
    assert a.packed["n"] == 77


def test_class_attributes_slots_and_getattr_hooks_as_fields():
    class Cls(CudaStructArguments):
        struct_name = "Cls"
        fields = (("n", "int"), ("m", "int"))
        n = 1

        def __init__(self):
            self.m = 2

    c = Cls()
    _armed(c)
    Cls.n = 3
    assert c.packed["n"] == 3
    c.n = 4  # the instance attribute now shadows the class attribute
    _armed(c)
    assert c.packed["n"] == 4

    class Slot(CudaStructArguments):
        __slots__ = ("n",)
        struct_name = "Slot"
        fields = (("n", "int"),)

    s = Slot()
    s.n = 1
    _armed(s)
    s.n = 2
    assert s.packed["n"] == 2

    class Hook(CudaStructArguments):
        struct_name = "Hook"
        fields = (("n", "int"),)
        value = 1

        def __getattr__(self, name):
            if name == "n":
                return Hook.value
            raise AttributeError(name)

    h = Hook()
    _armed(h)
    Hook.value = 5
    assert h.packed["n"] == 5


def test_a_field_changed_while_the_check_reads_the_others_is_seen_next_time():
    class Racy(CudaStructArguments):
        struct_name = "Racy"
        fields = (("n", "int"), ("x", "double*"))

        def __init__(self):
            self.n, self.calls, self.arr = 0, 0, np.zeros(2)

        @property
        def x(self):
            # The getter changes the plain field read before it, during the check.
            self.calls += 1
            if self.calls % 3 == 0:
                self.n += 1
            return self.arr

    r = Racy()
    r.pack(host_arrays=True)
    for _ in range(12):
        r.packed  # noqa: B018 - the property read is what is tested
        assert r.packed["n"] in (r.n, r.n - 1)
    assert r.packed["n"] == r.n or r.packed["n"] == r.n - 1
    r.calls = 1  # the next getter call does not change n
    assert r.packed["n"] == r.n


def test_the_check_does_not_use_another_packers_state():
    class A(CudaStructArguments):
        struct_name = "A"
        fields = (("n", "int"),)

    other = CudaStruct("A", [("n", "long long")])
    a = A()
    a.n = 3
    other._packer.repack(a, False)  # a state made by a packer that is not the class's
    assert a.packed.dtype == A.struct.dtype and a.packed["n"] == 3


# ------------------------------------------------------------------ device arrays


class Dev(CudaStructArguments):
    struct_name = "Dev"
    fields = (("x", "double*"), ("v", "Array2D<double>"), ("n", "int"))

    def __init__(self, x, v):
        self.x, self.v, self.n = x, v, 3
        self.pack()


def test_device_struct_packs_the_same_bytes_as_the_attributes_say(dev):
    S = CudaStruct("DS", [("x", "double*"), ("v", "Array2D<double>"), ("c", "CArray1D<double>")])
    x, v, c = dev(np.zeros(5)), dev(np.zeros((4, 6)))[:, ::2], dev(np.zeros(0))
    p = S(x=x, v=v, c=c).packed
    assert int(p["x"]) == x.data.ptr and int(p["c"]["data"]) == c.data.ptr  # 0 on the fake CuPy
    assert list(p["v"]["shape"]) == [4, 3] and list(p["v"]["strides"]) == [6, 2]
    assert int(p["v"]["data"]) == v.data.ptr


def test_device_in_place_changes_are_seen_after_the_check_is_armed(dev):
    d = Dev(dev(np.zeros(6)), dev(np.zeros((2, 3))))
    p = _armed(d)
    d.v.shape = (3, 2)
    assert list(d.packed["v"]["shape"]) == [3, 2] and d.packed is not p
    p = _armed(d)
    d.x.shape = (2, 3)  # a pointer field reshaped: same address
    assert d.packed.tobytes() == p.tobytes()
    _armed(d)
    d.n = 4
    assert d.packed["n"] == 4
    _armed(d)
    d.x = dev(np.zeros(6))
    assert int(d.packed["x"]) == d.x.data.ptr
    _armed(d)
    del d.v
    with pytest.raises(AttributeError, match="field 'v' of struct 'Dev' is not set"):
        d.packed  # noqa: B018 - the property read is what is tested


def test_fake_host_buffer_changed_under_the_array_is_seen(dev):
    if not _fake_cupy_active():
        pytest.skip("the fake CuPy's host buffer")
    from cunumpy._fake_cupy import host_buffer

    d = Dev(dev(np.zeros(6)), dev(np.zeros((2, 3))))
    _armed(d)
    host_buffer(d.v).shape = (3, 2)  # the NumPy array inside, changed in place
    assert list(d.packed["v"]["shape"]) == [3, 2]


def test_fake_arrays_with_an_unusual_host_buffer_take_the_attribute_path(dev):
    if not _fake_cupy_active():
        pytest.skip("the fake CuPy's host buffer")
    cupy = sys.modules["cupy"]

    class Matrixish(np.ndarray):
        pass

    S = CudaStruct("U", [("v", "Array2D<double>")])
    a = dev(np.zeros((2, 3)))
    object.__setattr__(a, "_a", np.zeros((2, 3)).view(Matrixish))
    assert list(S(v=a).packed["v"]["shape"]) == [2, 3]
    blank = cupy.ndarray.__new__(cupy.ndarray)  # the slot is empty
    with pytest.raises((TypeError, AttributeError)):
        S(v=blank)

    class SubArray(cupy.ndarray):
        pass

    sub = SubArray.__new__(SubArray)
    object.__setattr__(sub, "_a", np.zeros((2, 3)))
    object.__setattr__(sub, "_base", None)
    assert list(S(v=sub).packed["v"]["shape"]) == [2, 3]
    with pytest.raises(TypeError, match="field 'v'.*more than 16 dimensions"):
        S(v=dev(np.zeros((1,) * 17)))


def test_device_property_returning_new_arrays_with_the_check_armed(dev):
    class Fresh(CudaStructArguments):
        struct_name = "Fresh2"
        fields = (("n", "int"), ("x", "double*"))

        def __init__(self):
            self.n = 1

        @property
        def x(self):
            return dev(np.zeros(2))

    f = Fresh()
    seen = {f.packed.tobytes()}
    for _ in range(10):
        p = f.packed
        assert int(p["x"]) != 0
        seen.add(p.tobytes())
    f.n = 2
    assert f.packed["n"] == 2


def test_instances_replaced_at_the_same_address_never_share_a_check():
    """The check remembers the last instance found unchanged by address, dict and dict version:
    a new instance (possibly at a freed one's address, with a new dict) is checked in full."""

    class A(CudaStructArguments):
        struct_name = "Reuse"
        fields = (("n", "long long"),)

        def __init__(self, n):
            self.n = n

    for k in range(200):
        a = A(k)
        assert a.packed["n"] == k and a.packed["n"] == k  # the second check is the remembered one
        del a
    a, b = A(1), A(2)
    a.packed, a.packed, b.packed, b.packed  # noqa: B018 - the property read is what is tested
    assert (a.packed["n"], b.packed["n"], a.packed["n"]) == (1, 2, 1)
    b.__dict__ = a.__dict__  # one dict, two instances: the same fields, the same value
    assert b.packed["n"] == 1 and a.packed["n"] == 1
