"""The CUDA signature parser (C and its pure-Python twin) and the source tools of cunumpy.cuda."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import cunumpy as xp
from cunumpy import _reference
from cunumpy._native import core

PARSERS = [pytest.param(core, id="c"), pytest.param(_reference, id="python")]


def sig(impl, source, name="k", structs=(), template_args=None):
    return impl.cuda_parse_signature(source, name, tuple(structs), template_args)


# ------------------------------------------------------------------ type mapping (LP64)

LP64 = [
    ("bool", "bool"),
    ("char", "int8"),
    ("signed char", "int8"),
    ("int8_t", "int8"),
    ("unsigned char", "uint8"),
    ("uint8_t", "uint8"),
    ("short", "int16"),
    ("short int", "int16"),
    ("int16_t", "int16"),
    ("unsigned short", "uint16"),
    ("uint16_t", "uint16"),
    ("int", "int32"),
    ("signed", "int32"),
    ("signed int", "int32"),
    ("int32_t", "int32"),
    ("unsigned", "uint32"),
    ("unsigned int", "uint32"),
    ("uint32_t", "uint32"),
    ("long", "int64"),
    ("long int", "int64"),
    ("long long", "int64"),
    ("long long int", "int64"),
    ("int64_t", "int64"),
    ("std::int64_t", "int64"),
    ("ptrdiff_t", "int64"),
    ("ssize_t", "int64"),
    ("unsigned long", "uint64"),
    ("unsigned long long", "uint64"),
    ("uint64_t", "uint64"),
    ("size_t", "uint64"),
    ("std::size_t", "uint64"),
    ("float", "float32"),
    ("double", "float64"),
    ("complex<float>", "complex64"),
    ("thrust::complex<float>", "complex64"),
    ("cuda::std::complex<float>", "complex64"),
    ("complex<double>", "complex128"),
    ("thrust::complex<double>", "complex128"),
    ("cuda::std::complex<double>", "complex128"),
]


@pytest.mark.parametrize("impl", PARSERS)
@pytest.mark.parametrize("ctype, dtype", LP64)
def test_lp64_mapping_of_scalars_and_pointers(impl, ctype, dtype):
    src = f'extern "C" __global__ void k(const {ctype} * __restrict__ p, volatile {ctype} v) {{}}'
    params, is_template, extern_c = sig(impl, src)
    assert (is_template, extern_c) == (False, True)
    (pn, _, pd, pptr, _, _, _), (vn, _, vd, vptr, _, _, _) = params
    assert (pn, pd, pptr) == ("p", dtype, True)
    assert (vn, vd, vptr) == ("v", dtype, False)


@pytest.mark.parametrize("impl", PARSERS)
def test_views_structs_void_and_qualifiers(impl):
    src = """
    // __global__ void k(int not_this_one)
    /* extern "C" __global__ void k(float neither) */
    #define DECL __global__ void k(MACRO)
    extern "C" __global__ void __launch_bounds__(256, 2)
    k(Array2D<double> a, const CArray3D<float> c, ArrayView<int, 16> v, CArrayView<unsigned, 1> w,
      Params s, void* __restrict__ raw, bool flag, double x[], const int n = 4)
    {
    }
    """
    params, _, _ = sig(impl, src, structs=("Params",))
    assert params == (
        ("a", "Array2D<double>", "float64", False, None, 2, False),
        ("c", "CArray3D<float>", "float32", False, None, 3, True),
        ("v", "Array16D<int>", "int32", False, None, 16, False),
        ("w", "CArray1D<unsigned int>", "uint32", False, None, 1, True),
        ("s", "Params", None, False, "Params", 0, False),
        ("raw", "void", None, True, None, 0, False),
        ("flag", "bool", "bool", False, None, 0, False),
        ("x", "double", "float64", True, None, 0, False),
        ("n", "int", "int32", False, None, 0, False),
    )


@pytest.mark.parametrize("impl", PARSERS)
def test_empty_and_void_parameter_lists(impl):
    assert sig(impl, 'extern "C" __global__ void k() {}')[0] == ()
    assert sig(impl, 'extern "C" __global__ void k(void) {}')[0] == ()


@pytest.mark.parametrize("impl", PARSERS)
def test_extern_c_blocks_and_plain_global(impl):
    assert sig(impl, 'extern "C" { __global__ void k(int n) {} }')[2] is True
    assert sig(impl, "__global__ void k(int n) {}")[2] is False
    # A block that closed before the kernel does not count.
    assert sig(impl, 'extern "C" { __device__ int f() { return 1; } } __global__ void k(int n) {}')[2] is False


@pytest.mark.parametrize("impl", PARSERS)
def test_templates_are_substituted(impl):
    src = "template <typename T, int N, bool B = true> __global__ void k(T* x, ArrayView<T, N> v, T s) {}"
    params, is_template, extern_c = sig(impl, src, template_args=("double", "3"))
    assert is_template and not extern_c
    assert [p[1:4] for p in params] == [
        ("double", "float64", True),
        ("Array3D<double>", "float64", False),
        ("double", "float64", False),
    ]
    params, _, _ = sig(impl, src, template_args=("unsigned long long", "1", "false"))
    assert params[0][2] == "uint64"


@pytest.mark.parametrize("impl", PARSERS)
def test_template_argument_errors(impl):
    src = "template <typename T, int N> __global__ void k(T* x) {}"
    with pytest.raises(ValueError, match="template_args"):
        sig(impl, src)
    with pytest.raises(ValueError, match="template arguments"):
        sig(impl, src, template_args=("double",))
    with pytest.raises(ValueError, match="template arguments"):
        sig(impl, src, template_args=("double", "1", "2"))
    with pytest.raises(ValueError, match="not a template"):
        sig(impl, 'extern "C" __global__ void k(int n) {}', template_args=("double",))
    with pytest.raises(ValueError, match="variadic"):
        sig(impl, "template <typename... T> __global__ void k(int n) {}", template_args=("int",))


@pytest.mark.parametrize("impl", PARSERS)
@pytest.mark.parametrize(
    "decl, reason",
    [
        ("double** p", "pointer-to-pointer"),
        ("Array2D<double>* v", "by value"),
        ("MACRO(x)", "macro"),
        ("half h", "unknown type"),
        ("long double d", "unknown type"),
        ("double& r", "reference"),
        ("void v", "void"),
        ("Array17D<double> v", "1 to 16"),
        ("ArrayView<double, 0> v", "1 to 16"),
        ("Array2D<half> v", "element type"),
        ("int a b", "cannot be checked"),
        ("...", "variadic"),
    ],
)
def test_uncheckable_parameters_name_the_parameter(impl, decl, reason):
    src = f'extern "C" __global__ void k(int first, {decl}) {{}}'
    with pytest.raises(ValueError, match=reason) as info:
        sig(impl, src, structs=("S",))
    assert "parameter 1" in str(info.value)


@pytest.mark.parametrize("impl", PARSERS)
def test_missing_kernel_and_bad_argument_types(impl):
    with pytest.raises(ValueError, match="no __global__ function named 'other'"):
        sig(impl, 'extern "C" __global__ void k() {}', name="other")
    with pytest.raises(TypeError, match="source"):
        impl.cuda_parse_signature(b"k", "k")
    with pytest.raises(TypeError, match="name"):
        impl.cuda_parse_signature("", 3)
    with pytest.raises(TypeError, match="struct_names"):
        impl.cuda_parse_signature("", "k", ["S"])
    with pytest.raises(TypeError, match="template_args"):
        impl.cuda_parse_signature("", "k", (), ["int"])
    with pytest.raises(TypeError, match="source"):
        impl.cuda_kernel_names(None)


@pytest.mark.parametrize("impl", PARSERS)
def test_kernel_names_in_order_once(impl):
    src = """
    // __global__ void commented(int)
    extern "C" __global__ void b(int n);
    template <typename T> __global__ void t(T x) {}
    extern "C" __global__ void a(int n) {}
    extern "C" __global__ void b(int n) {}
    const char* s = "__global__ void in_string(int)";
    """
    assert impl.cuda_kernel_names(src) == ["b", "t", "a"]


@pytest.mark.parametrize("impl", PARSERS)
def test_definition_preferred_over_declaration(impl):
    src = 'extern "C" __global__ void k(int);\nextern "C" __global__ void k(int n) {}'
    assert sig(impl, src)[0][0][0] == "n"


# ------------------------------------------------------------------ fuzzing: C against the twin

_TOKENS = [
    "extern",
    '"C"',
    "__global__",
    "void",
    "k",
    "(",
    ")",
    "{",
    "}",
    ";",
    ",",
    "*",
    "&",
    "<",
    ">",
    "::",
    "const",
    "double",
    "int",
    "unsigned",
    "long",
    "template",
    "typename",
    "T",
    "N",
    "Array2D",
    "CArrayView",
    "ArrayView",
    "3",
    "17",
    "=",
    "[",
    "]",
    "S",
    "std",
    "complex",
    "float",
    "#define",
    "\n",
    "//",
    "/*",
    "*/",
    "...",
    "__launch_bounds__",
    "x",
    "'",
    '"',
    "\\",
    "é",
    "\x00",
]


def _outcome(impl, fn, *args):
    try:
        return ("ok", fn(impl)(*args))
    except (ValueError, TypeError) as exc:
        return ("error", type(exc).__name__)


source_text = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(_TOKENS), max_size=60).map(" ".join),
    st.lists(st.sampled_from(_TOKENS), max_size=60).map("".join),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source_text,
    st.sampled_from(["k", "T", ""]),
    st.one_of(st.none(), st.lists(st.sampled_from(["int", "double", "3", "T", "", "S*"]), max_size=3).map(tuple)),
)
def test_fuzzed_sources_never_crash_and_match_the_twin(source, name, targs):
    structs = ("S",)
    c = _outcome(core, lambda m: m.cuda_parse_signature, source, name, structs, targs)
    py = _outcome(_reference, lambda m: m.cuda_parse_signature, source, name, structs, targs)
    assert c == py
    assert core.cuda_kernel_names(source) == _reference.cuda_kernel_names(source)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS[3:30]), min_size=1, max_size=8))
def test_fuzzed_parameter_lists_match_the_twin(words):
    src = 'extern "C" __global__ void k(' + " ".join(words) + ") {}"
    c = _outcome(core, lambda m: m.cuda_parse_signature, src, "k", ("S",), None)
    py = _outcome(_reference, lambda m: m.cuda_parse_signature, src, "k", ("S",), None)
    assert c == py


# ------------------------------------------------------------------ cunumpy.cuda source tools


def test_parse_cuda_signature_builds_parameters():
    from cunumpy.cuda import CudaParameter

    params = xp.cuda.parse_cuda_signature(
        'extern "C" __global__ void k(const float* x, Array2D<double> v, void* p, int n) {}', "k"
    )
    assert all(isinstance(p, CudaParameter) for p in params)
    x, v, p, n = params
    assert x.dtype == np.float32 and x.pointer and x.ctype == "float"
    assert v.view_ndim == 2 and not v.contiguous and v.dtype == np.float64
    assert p.dtype is None and p.pointer
    assert n.dtype == np.int32 and not n.pointer
    assert xp.cuda.parse_cuda_signature('extern "C" __global__ void k() {}', "k") == ()


def test_parse_cuda_signature_with_dtype_template_args_and_structs():
    class S:  # the two attributes CudaKernel needs of a CudaStruct
        name = "S"
        dtype = np.dtype([("x", "<u8"), ("n", "<i4")], align=True)

    src = "template <typename T, int N> __global__ void k(T* x, ArrayView<T, N> v, S s) {}"
    x, v, s = xp.cuda.parse_cuda_signature(src, "k", structs=[S()], template_args=(np.float32, 2))
    assert x.dtype == np.float32 and v.ctype == "Array2D<float>"
    assert s.dtype == S.dtype and isinstance(s.struct, S)
    with pytest.raises(TypeError, match="template_args"):
        xp.cuda.parse_cuda_signature(src, "k", template_args=(1.5, 2))
    with pytest.raises(TypeError, match="CudaStruct"):
        xp.cuda.parse_cuda_signature(src, "k", structs=["S"], template_args=("int", 1))
    with pytest.raises(ValueError, match="parameter 2"):
        xp.cuda.parse_cuda_signature(src, "k", template_args=("int", 1))


def test_ctype_of():
    expected = {
        np.bool_: "bool",
        np.int8: "signed char",
        np.uint8: "unsigned char",
        np.int16: "short",
        np.uint16: "unsigned short",
        np.int32: "int",
        np.uint32: "unsigned int",
        np.int64: "long long",
        np.uint64: "unsigned long long",
        np.float32: "float",
        np.float64: "double",
        np.complex64: "complex<float>",
        np.complex128: "complex<double>",
    }
    for dt, name in expected.items():
        assert xp.cuda.ctype_of(dt) == name
        assert xp.cuda.ctype_of(np.dtype(dt).name) == name
    for bad in (np.float16, "U3", object, np.dtype([("a", "<f8")]), "not a dtype"):
        with pytest.raises(ValueError):
            xp.cuda.ctype_of(bad)


def test_cuda_kernel_names_public():
    assert xp.cuda.cuda_kernel_names('extern "C" __global__ void a() {} __global__ void b() {}') == ["a", "b"]
    with pytest.raises(TypeError):
        xp.cuda.cuda_kernel_names(3)


def test_cuda_include_dir_holds_the_headers():
    d = Path(xp.cuda.cuda_include_dir())
    for h in ("index", "array_view", "atomic", "reduce", "scan"):
        assert (d / "cunumpy" / f"{h}.cuh").is_file()


def test_resolve_includes_and_hash(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "sub").mkdir()
    a = tmp_path / "a.cuh"
    b = tmp_path / "inc" / "b.cuh"
    c = tmp_path / "sub" / "c.cuh"
    a.write_text('#include "b.cuh"\n#include "sub/c.cuh"\n')
    b.write_text('#include "a.cuh"\n// #include "missing_in_comment.cuh"\n')
    c.write_text("#include <cunumpy/index.cuh>\n#include <cuda_runtime.h>\n")
    src = '#include "a.cuh"\n#include "nowhere.cuh"\n/* #include "b.cuh" */'
    found = xp.cuda.resolve_includes(src, [tmp_path / "inc"], base_dir=tmp_path)
    assert found == [a.resolve(), b.resolve(), c.resolve()]
    angle = xp.cuda.resolve_includes(
        src, [tmp_path / "inc"], base_dir=tmp_path, angle_dirs=[xp.cuda.cuda_include_dir()]
    )
    assert angle[-1].name == "index.cuh"
    assert xp.cuda.resolve_includes("__global__ void k() {}", ["/does/not/exist"]) == []

    h1 = xp.cuda.include_hash(found)
    assert len(h1) == 16 and int(h1, 16) >= 0
    assert xp.cuda.include_hash(found) == h1
    copy = tmp_path / "copy.cuh"
    copy.write_bytes(a.read_bytes())
    assert xp.cuda.include_hash([copy, b, c]) == h1  # contents count, not paths
    b.write_text(b.read_text() + "\n")
    assert xp.cuda.include_hash(found) != h1
    with pytest.raises(TypeError):
        xp.cuda.include_hash(str(a))
    with pytest.raises(TypeError):
        xp.cuda.resolve_includes(b"#include")
    with pytest.raises(FileNotFoundError):
        xp.cuda.include_hash([tmp_path / "absent.cuh"])


def test_cuda_names_exported():
    for name in (
        "parse_cuda_signature",
        "CudaParameter",
        "cuda_kernel_names",
        "ctype_of",
        "cuda_include_dir",
        "resolve_includes",
        "include_hash",
    ):
        assert name in xp.cuda.__all__
        assert hasattr(xp.cuda, name)
    assert not hasattr(xp.cuda, "CudaKernel")
