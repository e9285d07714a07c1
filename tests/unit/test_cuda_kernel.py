"""CudaKernel and CudaKernelVariants without a GPU.

Tests named ``test_device_*`` need device arrays: they run against the fake CuPy
(CUNUMPY_FAKE_CUPY=1) and, in a plain run, in a subprocess against the minimal stand-in of
``_cuda_standin.py`` (see ``test_standin_runs_the_device_checks``).
"""

import gc
import os
import subprocess
import sys
import textwrap
import types
import weakref
from pathlib import Path

import numpy as np
import pytest
from _fake_support import run_device_tests_under_standin
from hypothesis import given, settings, strategies as st

import cunumpy as xp
from cunumpy import _reference
from cunumpy._native import core
from cunumpy.kernel_testing import fake_cupy_active
from cunumpy.kernels import CudaKernel, CudaKernelVariants, _cuda_kernel as ck, _cuda_launch, _cuda_variants

ALL = (
    'extern "C" __global__ void k(const double* x, double* y, int n, Array2D<float> v, '
    "CArray1D<int> c, float f, unsigned char u, void* raw) {}"
)
SCALARS = (
    'extern "C" __global__ void s(bool b, signed char i8, unsigned char u8, short i16, '
    "unsigned short u16, int i32, unsigned u32, long long i64, unsigned long long u64, float f32, "
    "double f64, complex<float> c64, complex<double> c128) {}"
)


def _standin_active():
    cupy = sys.modules.get("cupy")
    return cupy is not None and getattr(cupy, "__cunumpy_standin__", False)


@pytest.fixture(autouse=True, scope="module")
def _the_device_path():
    """These tests check CudaKernel's device path (device limits, packing, the C fast path,
    the refusal at compile time) on the fake CuPy, so its automatic CPU emulation is off;
    emulated_launches() blocks still emulate."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUNUMPY_EMULATION", "0")
        yield


# ------------------------------------------------------------------ construction


def test_construction_does_not_import_cupy():
    code = textwrap.dedent(
        """
        import sys
        import cunumpy as xp
        k = xp.kernels.CudaKernel('extern "C" __global__ void k(double* x, int n) {}', "k")
        assert k.signature[0].pointer
        k.launch_shape(100)
        k.compile_options()
        assert "cupy" not in sys.modules, "constructing a CudaKernel imported CuPy"
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CUNUMPY_FAKE_CUPY", "CUNUMPY_BACKEND")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr


def test_properties():
    k = CudaKernel(ALL, "k", block_size=64, options=("-DX=1",), include_dirs=("/tmp/inc",), source_dir="/tmp")
    assert k.name == "k" and k.expression == "k" and k.source == ALL
    assert k.block_size == 64
    assert k.options == ("-DX=1", "-I/tmp/inc")
    assert k.include_dirs == (Path("/tmp/inc"),) and k.source_dir == Path("/tmp")
    assert k.structs == () and k.template_args is None and k.debug is None
    assert [p.name for p in k.signature] == ["x", "y", "n", "v", "c", "f", "u", "raw"]
    assert k.n_threads_from == "auto" and k.check_finite is False
    assert k.is_compiled is False
    assert CudaKernel(ALL, "k", block_size=(8, 4)).block_size == (8, 4)


@pytest.mark.parametrize("block", [0, -1, (0,), (8, 0), (32, 32, 2), 1025, (1, 2, 3, 4), ()])
def test_bad_block_size_is_a_value_error(block):
    with pytest.raises(ValueError):
        CudaKernel(ALL, "k", block_size=block)


@pytest.mark.parametrize("block", [1.5, "128", True, (8, 2.0), None])
def test_non_integer_block_size_is_a_type_error(block):
    with pytest.raises(TypeError):
        CudaKernel(ALL, "k", block_size=block)


def test_bad_construction_arguments():
    with pytest.raises(TypeError):
        CudaKernel(b"src", "k")
    with pytest.raises(TypeError):
        CudaKernel(ALL, None)
    with pytest.raises(TypeError):
        CudaKernel(ALL, "k", options="-O3")
    with pytest.raises(TypeError):
        CudaKernel(ALL, "k", options=(3,))
    with pytest.raises(TypeError):
        CudaKernel(ALL, "k", include_dirs="/tmp")
    with pytest.raises(TypeError):
        CudaKernel(ALL, "k", debug="yes")
    with pytest.raises(TypeError):
        CudaKernel(ALL, "k", n_threads_from="rows")
    with pytest.raises(ValueError, match="no __global__ function named 'other'"):
        CudaKernel(ALL, "other")


def test_plain_global_kernels_compile_through_their_name_expression():
    """C++ linkage (no extern "C"): accepted and compiled by name expression, as CuPy's
    RawModule(name_expressions=...) does; extern "C" kernels are looked up by plain name."""
    k = CudaKernel("__global__ void k(int n) {}", "k")
    assert k._by_expression and [p.name for p in k.signature] == ["n"]
    assert CudaKernel("__global__ void k(int n) {}", "k", check_signature=False)._by_expression
    assert not CudaKernel('extern "C" __global__ void k(int n) {}', "k")._by_expression
    k = CudaKernel("__global__ void k(int n) {}", "k", check_signature=False)
    assert k.signature is None


def test_uncheckable_signature_names_the_parameter():
    with pytest.raises(ValueError, match="parameter 1 'double\\*\\* p'"):
        CudaKernel('extern "C" __global__ void k(int n, double** p) {}', "k")
    k = CudaKernel('extern "C" __global__ void k(int n, double** p) {}', "k", check_signature=False)
    assert k.signature is None


def test_templates():
    src = "template <typename T, int N> __global__ void t(T* x, ArrayView<T, N> v) {}"
    k = CudaKernel(src, "t", template_args=(np.float64, 3))
    assert k.expression == "t<double, 3>"
    assert k.signature[1].ctype == "Array3D<double>"
    assert CudaKernel(src, "t", template_args=("float", 1)).expression == "t<float, 1>"
    assert (
        CudaKernel("template <bool B> __global__ void t(int n) {}", "t", template_args=(True,)).expression == "t<true>"
    )
    with pytest.raises(ValueError):
        CudaKernel(src, "t")
    with pytest.raises(ValueError):
        CudaKernel(src, "t", template_args=(np.float64,))
    with pytest.raises(ValueError):
        CudaKernel(ALL, "k", template_args=("int",))


def test_structs_are_checked_against_the_source():
    class S:
        name = "S"
        dtype = np.dtype([("x", "<u8"), ("n", "<i4")], align=True)
        checked = []  # noqa: RUF012 - shared on purpose: the test reads it from the class

        def check_source(self, source):
            self.checked.append(source)

    src = 'extern "C" __global__ void k(S s, int n) {}'
    k = CudaKernel(src, "k", structs=[S()])
    assert k.signature[0].struct is k.structs[0] and S.checked == [src]
    with pytest.raises(ValueError, match="unknown type 'S'"):
        CudaKernel(src, "k")
    # A struct by pointer is an array of the struct: a structured array of its dtype.
    (p,) = CudaKernel('extern "C" __global__ void k(S* s) {}', "k", structs=[S()]).signature
    assert p.pointer and p.dtype == S.dtype and p.ctype == "S"


def test_from_file_and_all_from_file(tmp_path):
    path = tmp_path / "push_cuda.cu"
    path.write_text(
        '#include "helper.cuh"\n'
        'extern "C" __global__ void second(int n);\n'
        'extern "C" __global__ void push(double* x, int n) {}\n'
        "// __global__ void commented(int n) {}\n"
        "template <typename T> __global__ void third(T* x) {}\n"
        'extern "C" __global__ void second(int n) {}\n'
    )
    (tmp_path / "helper.cuh").write_text("#define HELPER 1\n")
    k = CudaKernel.from_file(path)
    assert k.name == "push" and k.source_dir == tmp_path.resolve()
    assert k.include_dirs[0] == tmp_path.resolve()
    assert k.included_headers == ((tmp_path / "helper.cuh").resolve(),)
    assert CudaKernel.from_file(path, "second").name == "second"
    other = tmp_path / "ops.cu"
    other.write_text(path.read_text())
    with pytest.raises(ValueError, match="name"):
        CudaKernel.from_file(other)
    with pytest.raises(FileNotFoundError):
        CudaKernel.from_file(tmp_path / "absent_cuda.cu")
    with pytest.raises(TypeError):
        CudaKernel.from_file(path, include_dirs="/tmp")
    kernels = CudaKernel.all_from_file(path, check_signature=False)
    assert list(kernels) == ["second", "push", "third"]
    empty = tmp_path / "empty.cu"
    empty.write_text("// __global__ void nothing() {}\n")
    with pytest.raises(ValueError, match="no __global__"):
        CudaKernel.all_from_file(empty)


# ------------------------------------------------------------------ options, headers, debug


def test_compile_options_and_header_hash(tmp_path):
    header = tmp_path / "h.cuh"
    header.write_text("#define A 1\n")
    src = '#include "h.cuh"\n#include <cunumpy/index.cuh>\nextern "C" __global__ void k(int n) {}'
    k = CudaKernel(src, "k", options=("-O3",), source_dir=tmp_path, debug=False)
    opts = k.compile_options()
    inc = f"-I{xp.cuda.cuda_include_dir()}"
    assert opts[0] == "-O3" and opts.count(inc) == 1
    assert [h.name for h in k.included_headers] == ["h.cuh", "index.cuh"]
    hashes = [o for o in opts if o.startswith("-DCUNUMPY_INCLUDE_HASH=0x")]
    assert len(hashes) == 1 and len(hashes[0].split("0x")[1]) == 16
    header.write_text("#define A 2\n")
    assert k.compile_options() != opts  # an edited header changes the options
    assert k.options == ("-O3",)  # the property never holds the additions
    plain = CudaKernel('extern "C" __global__ void k(int n) {}', "k", options=(inc,), debug=False)
    assert plain.compile_options() == (inc,)
    assert plain.included_headers == ()


def test_debug_options_follow_the_global_setting():
    k = CudaKernel(ALL, "k")
    dk = CudaKernel(ALL, "k", debug=True)
    with xp.cuda.cuda_debug(False):
        assert not k.debug_active()
        assert not any(o in k.compile_options() for o in xp.cuda.DEBUG_OPTIONS)
        assert dk.debug_active()
        opts = dk.compile_options()
        assert all(opts.count(o) == 1 for o in xp.cuda.DEBUG_OPTIONS) and "-G" not in opts
    with xp.cuda.cuda_debug(True):
        assert k.debug_active()
        assert not CudaKernel(ALL, "k", debug=False).debug_active()
    twice = CudaKernel(ALL, "k", options=("-lineinfo",), debug=True)
    assert twice.compile_options().count("-lineinfo") == 1


def test_debug_environment_variable():
    code = (
        "import cunumpy as xp\n"
        "k = xp.kernels.CudaKernel('extern \"C\" __global__ void k() {}', 'k')\n"
        "assert k.debug_active()\n"
        "assert '-DCUNUMPY_BOUNDS_CHECK' in k.compile_options()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CUNUMPY_FAKE_CUPY", "CUNUMPY_BACKEND")}
    env["CUNUMPY_CUDA_DEBUG"] = " Yes "
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr


def test_n_threads_from_setter_keeps_the_previous_value_on_error():
    k = CudaKernel(ALL, "k")
    k.n_threads_from = "last_axis"
    with pytest.raises(TypeError, match="auto"):
        k.n_threads_from = "rows"
    assert k.n_threads_from == "last_axis"
    k.n_threads_from = None
    k.n_threads_from = len
    assert k.n_threads_from is len
    k.check_finite = 1
    assert k.check_finite is True


# ------------------------------------------------------------------ launch shape


def test_launch_shape_explicit_sizes():
    k = CudaKernel(ALL, "k")
    assert k.launch_shape(1000) == ((8,), (128,))
    assert k.launch_shape((100, 3)) == ((1, 3), (128, 1))
    assert k.launch_shape(grid=(4, 2)) == ((4, 2), (128,))
    assert k.launch_shape(0) == ((0,), (128,))
    assert k.launch_shape(100, block=16) == ((7,), (16,))
    k2 = CudaKernel(ALL, "k", block_size=(8, 4))
    assert k2.launch_shape((35, 19)) == ((5, 5), (8, 4))
    with pytest.raises(TypeError, match="exactly one"):
        k.launch_shape(10, grid=1)
    with pytest.raises(ValueError):
        k2.launch_shape(100)  # 2-D block, 1-D size
    with pytest.raises(ValueError):
        k.launch_shape(-1)
    with pytest.raises(ValueError):
        k.launch_shape(grid=(-1,))
    with pytest.raises(ValueError):
        k.launch_shape(10, block=0)
    with pytest.raises(ValueError):
        k.launch_shape((1, 2, 3, 4))
    with pytest.raises(TypeError):
        k.launch_shape(1.5)
    with pytest.raises(TypeError, match="infer"):
        k.launch_shape(args=(1, 2))
    k.n_threads_from = None
    with pytest.raises(TypeError, match="n_threads_from is None"):
        k.launch_shape(args=(1,))
    k.n_threads_from = lambda args: (args[0], 2)
    assert k.launch_shape(args=(300,)) == ((3, 2), (128, 1))


def test_device_launch_shape_inference(dev):
    k = CudaKernel(ALL, "k")
    a = dev(np.zeros((1000, 6)))
    assert k.launch_shape(args=(a,)) == ((8,), (128,))
    assert k.launch_shape(args=(3, dev(np.zeros(())), a)) == ((8,), (128,))  # scalars, 0-d skipped
    assert k.launch_shape(args=(dev(np.zeros((0, 6))),)) == ((0,), (128,))
    k2 = CudaKernel(ALL, "k", block_size=(8, 4))
    assert k2.launch_shape(args=(dev(np.zeros((35, 19))),)) == ((5, 5), (8, 4))
    assert k2.launch_shape(args=(dev(np.zeros((35, 19))),), block=16) == ((3,), (16,))
    with pytest.raises(ValueError, match="too few dimensions"):
        k2.launch_shape(args=(dev(np.zeros(35)),))
    k.n_threads_from = "last_axis"
    assert k.launch_shape(args=(dev(np.zeros((3, 300))),)) == ((3,), (128,))
    k.n_threads_from = "first_array"
    assert k.launch_shape(args=(dev(np.zeros((300, 3))),)) == ((3,), (128,))

    class Args:
        def __init__(self, *v):
            self.v = v

        def __cuda_args__(self):
            return self.v

    k.n_threads_from = "auto"
    assert k.launch_shape(args=(Args(5, dev(np.zeros(257))), a)) == ((3,), (128,))


# ------------------------------------------------------------------ argument checks (no device)


def test_host_arrays_are_rejected_with_a_fix():
    k = CudaKernel(ALL, "k")
    with pytest.raises(TypeError, match=r"argument 0 \(double\* x\).*never copies") as info:
        k(np.zeros(3), np.zeros(3), 3, None, None, 1.0, 1, None, n_threads=0)
    assert "numpy.ndarray" in str(info.value)


def test_argument_count():
    k = CudaKernel(ALL, "k")
    with pytest.raises(TypeError, match="takes 8 arguments, got 2"):
        k(1, 2, n_threads=0)
    with pytest.raises(TypeError, match="takes 8 arguments, got 9"):
        k(*range(9), n_threads=0)


def _scalar_args(**over):
    values = dict(b=True, i8=1, u8=1, i16=1, u16=1, i32=1, u32=1, i64=1, u64=1, f32=1.0, f64=1.0, c64=1j, c128=1j)
    values.update(over)
    return tuple(values.values())


def test_scalars_accepted_and_packed():
    k = CudaKernel(SCALARS, "s")
    assert k(*_scalar_args(), n_threads=0) is None
    cases = [
        dict(i32=np.int64(5)),  # NumPy integers by value
        dict(u8=np.int64(255)),
        dict(i64=True, u64=False),  # bool to integer params
        dict(f64=np.float32(1.5), f32=np.float32(1), c128=np.complex64(1j), c64=2.0),
        dict(f64=3, c128=np.float64(2.0), f32=np.int16(3)),
        dict(b=np.bool_(False), f64=np.bool_(True)),
        dict(u64=2**64 - 1, i64=-(2**63)),
    ]
    for over in cases:
        assert k(*_scalar_args(**over), n_threads=0) is None, over


@pytest.mark.parametrize(
    "over, exc, text",
    [
        (dict(i32=2**31), OverflowError, r"\[-2147483648, 2147483647\]"),
        (dict(i32=np.int64(2**31)), OverflowError, "int32"),
        (dict(u8=-1), OverflowError, r"\[0, 255\]"),
        (dict(u64=2**64), OverflowError, "uint64"),
        (dict(i64=-(2**63) - 1), OverflowError, "int64"),
        (dict(i32=1.0), TypeError, "float"),
        (dict(b=1), TypeError, "bool"),
        (dict(f32=True), TypeError, "bool"),
        (dict(f32=np.float64(1.0)), TypeError, "cast safely"),
        (dict(i32=np.float32(1.0)), TypeError, "cast safely"),
        (dict(f64=1j), TypeError, "complex"),
        (dict(c64=np.complex128(1j)), TypeError, "cast safely"),
        (dict(f32=np.int32(1)), TypeError, "cast safely"),
        (dict(i32="1"), TypeError, "str"),
        (dict(i32=None), TypeError, "NoneType"),
        (dict(f64=np.zeros(1)), TypeError, "ndarray"),
        (dict(f64=np.longdouble(1)), TypeError, "cast safely"),
    ],
)
def test_scalar_errors(over, exc, text):
    k = CudaKernel(SCALARS, "s")
    with pytest.raises(exc, match=text) as info:
        k(*_scalar_args(**over), n_threads=0)
    assert "kernel 's': argument" in str(info.value)


def test_check_signature_false_skips_checks():
    k = CudaKernel(ALL, "k", check_signature=False)
    assert k(np.zeros(3), "anything", n_threads=0) is None


def test_compile_without_functional_cupy_is_a_runtime_error():
    if xp.cupy_available():
        pytest.skip("CuPy (or the fake) is usable here")
    k = CudaKernel(ALL, "k")
    with pytest.raises(RuntimeError, match="CuPy"):
        k.compile()
    with pytest.raises(RuntimeError, match="CuPy"):
        k.recompile()
    assert not k.is_compiled


def test_variants():
    made = []

    def factory(dtype, n):
        made.append((dtype, n))
        return CudaKernel("template <typename T, int N> __global__ void t(T* x) {}", "t", template_args=(dtype, n))

    v = CudaKernelVariants(factory)
    a = v.get(np.float64, 1)
    assert v.get(np.float64, 1) is a and made == [(np.float64, 1)]
    v.get("float", 2)
    assert v.keys() == [(np.float64, 1), ("float", 2)] and len(v) == 2 and list(v) == v.keys()
    with pytest.raises(ValueError):
        v.compile_all(jobs=0)
    with pytest.raises(TypeError):
        v.compile_all(jobs=1.5)
    with pytest.raises(TypeError, match="not a CudaKernel"):
        CudaKernelVariants(lambda *k: "nope").get(1)
    with pytest.raises(TypeError):
        CudaKernelVariants(3)


def test_variants_compile_all_attempts_every_variant():
    calls = []

    class Recording(CudaKernel):
        def compile(self, *, log_stream=None):
            calls.append(self.expression)
            if "2" in self.expression:
                raise RuntimeError(self.expression)
            return None

    src = "template <int N> __global__ void t(int n) {}"
    v = CudaKernelVariants(lambda n: Recording(src, "t", template_args=(n,)))
    with pytest.raises(RuntimeError, match="t<2>"):
        v.compile_all([3, 2, 1], jobs=2)
    assert sorted(calls) == ["t<1>", "t<2>", "t<3>"]
    calls.clear()
    with pytest.raises(RuntimeError, match="t<2>"):
        v.compile_all(jobs=None)
    assert len(calls) == 3


# ------------------------------------------------------------------ packer: C against the twin


def _plans(source, name):
    k = CudaKernel(source, name)
    specs = tuple(ck._spec(i, p) for i, p in enumerate(k.signature))
    return (
        core.launch_plan(name, specs, np.void, np.generic),
        _reference.launch_plan(name, specs, np.void, np.generic),
    )


def _outcome(plan, args):
    try:
        packed, first, flag = plan.pack(*args)
    except (TypeError, OverflowError, ValueError) as exc:
        return type(exc).__name__
    table = 8 * plan.n_params
    return packed[table:], first, flag


scalar_values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.booleans(),
    st.complex_numbers(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            np.int8(-3),
            np.uint64(2**63),
            np.int64(-(2**40)),
            np.float32(0.5),
            np.float16(2),
            np.complex64(1j),
            np.bool_(True),
            np.longdouble(1),
            np.uint8(200),
            None,
            "x",
        ]
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(scalar_values, min_size=13, max_size=13))
def test_scalar_packing_matches_the_twin(values):
    c, py = _plans(SCALARS, "s")
    assert _outcome(c, values) == _outcome(py, values)


def test_launch_plan_bad_specs():
    for impl in (core, _reference):
        with pytest.raises(TypeError):
            impl.launch_plan("k", [], np.void, np.generic)
        with pytest.raises(TypeError):
            impl.launch_plan("k", ((0,),), np.void, np.generic)
        with pytest.raises(ValueError, match="kind"):
            impl.launch_plan("k", ((9, "x", None, "", 0, 0, 0, 8, 8, {}),), np.void, np.generic)
        with pytest.raises(ValueError, match="size"):
            impl.launch_plan("k", ((4, "x", np.dtype("i4"), "<i4", 4, 0, 1, 8, 4, {}),), np.void, np.generic)
        with pytest.raises(ValueError, match="ndim"):
            impl.launch_plan("k", ((2, "x", np.dtype("f8"), "<f8", 8, 17, 0, 280, 8, {}),), np.void, np.generic)
        with pytest.raises(TypeError):
            impl.launch_plan("k", (), "void", np.generic)
        with pytest.raises(TypeError):
            impl.packed_address("nope")
    with pytest.raises(TypeError):
        core.launch(1)


def _spec_outcome(impl, spec):
    try:
        plan = impl.launch_plan("k", (spec,), np.void, np.generic)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    return plan.layout


@settings(max_examples=400, deadline=None)
@given(
    kind=st.integers(min_value=-1, max_value=6),
    label=st.sampled_from(["double* x", 3]),
    dtype=st.sampled_from([np.dtype("f8"), None]),
    typestr=st.sampled_from(["<f8", None]),
    itemsize=st.sampled_from([-1, 0, 1, 2, 3, 4, 8, 16, 32]),
    ndim=st.sampled_from([-1, 0, 1, 2, 16, 17]),
    scalar=st.integers(min_value=-1, max_value=5),
    size=st.sampled_from([None, 0, 1, 4, 8, 16, 24, 40, 1 << 21]),
    align=st.sampled_from([0, 1, 2, 3, 4, 8, 16, 32]),
    table=st.sampled_from([{}, None]),
)
def test_spec_checks_of_the_checker_table_match_the_twin(
    kind, label, dtype, typestr, itemsize, ndim, scalar, size, align, table
):
    """Each row of the checker table (pack_kinds.c, _reference.pack._KINDS) accepts the same
    specs and names the same first invalid field; an accepted spec gets the same layout.
    Without a given size, the row's own value size (8 bytes of address or the item, then 8
    per dimension of shape and strides) is used, so that valid specs of every kind occur."""
    if size is None:
        row = _reference.pack._KINDS.get(kind)
        size = row.value_size(itemsize, ndim) if row is not None else 8
    spec = (kind, label, dtype, typestr, itemsize, ndim, scalar, size, align, table)
    assert _spec_outcome(core, spec) == _spec_outcome(_reference, spec)


# ------------------------------------------------------------------ device-side checks


def test_device_pointer_checks(dev):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(4))
    v = dev(np.zeros((4, 6), np.float32))
    c = dev(np.zeros(3, np.int32))
    good = (x, x, 4, v, c, 1.0, 1, x)
    assert k(*good, n_threads=0) is None
    with pytest.raises(TypeError, match=r"argument 1 \(double\* y\).*dtype"):
        k(x, dev(np.zeros(4, np.float32)), 4, v, c, 1.0, 1, x, n_threads=0)
    with pytest.raises(TypeError, match="C-contiguous"):
        k(x, dev(np.zeros((4, 6)))[:, 0:3], 4, v, c, 1.0, 1, x, n_threads=0)
    with pytest.raises(TypeError, match="C-contiguous"):
        k(x, dev(np.zeros(8))[::2], 4, v, c, 1.0, 1, x, n_threads=0)
    # void* takes any dtype, but still needs a contiguous device array
    assert k(x, x, 4, v, c, 1.0, 1, dev(np.zeros((2, 2), np.uint8)), n_threads=0) is None
    with pytest.raises(TypeError, match="never copies"):
        k(x, x, 4, v, c, 1.0, 1, np.zeros(2), n_threads=0)
    # single-element and empty slices stay contiguous
    assert k(dev(np.zeros((6, 4)))[2:3], x, 4, v, c, 1.0, 1, x, n_threads=0) is None
    assert k(dev(np.zeros((4, 6)))[:, 0:0], x, 4, v, c, 1.0, 1, x, n_threads=0) is None
    with pytest.raises(TypeError, match="C-contiguous"):
        k(dev(np.zeros((4, 6)))[:, 0:1], x, 4, v, c, 1.0, 1, x, n_threads=0)


def test_device_view_checks_and_layout(dev):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(4))
    c = dev(np.zeros(3, np.int32))
    base = dev(np.zeros((4, 6), np.float32))
    strided = base[:, ::2]
    packed, first, hidden = k._plan.pack(x, x, 4, strided, c, 1.0, 1, x)
    assert first == (4,) and hidden is False
    off, size = k._plan.layout[3]
    words = np.frombuffer(packed[off : off + size], dtype="<i8")
    assert int(np.uint64(words[0])) == strided.data.ptr
    assert words[1:].tolist() == [4, 3, 6, 2]  # shape, strides in elements
    off, size = k._plan.layout[4]
    words = np.frombuffer(packed[off : off + size], dtype="<i8")
    assert int(np.uint64(words[0])) == c.data.ptr and words[1] == 3
    assert k(x, x, 4, dev(np.zeros((6, 4), np.float32)).T, c, 1.0, 1, x, n_threads=0) is None  # F order
    with pytest.raises(TypeError, match="2-dimensional"):
        k(x, x, 4, dev(np.zeros(4, np.float32)), c, 1.0, 1, x, n_threads=0)
    with pytest.raises(TypeError, match="dtype"):
        k(x, x, 4, dev(np.zeros((2, 2))), c, 1.0, 1, x, n_threads=0)
    with pytest.raises(TypeError, match="C-contiguous"):
        k(x, x, 4, base, dev(np.zeros(6, np.int32))[::2], 1.0, 1, x, n_threads=0)
    with pytest.raises(TypeError, match="never copies"):
        k(x, x, 4, np.zeros((2, 2), np.float32), c, 1.0, 1, x, n_threads=0)


def test_device_cached_arrays_are_not_kept_alive(dev):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(4))
    v = dev(np.zeros((4, 6), np.float32))
    c = dev(np.zeros(3, np.int32))
    for _ in range(3):
        k(x, x, 4, v, c, 1.0, 1, x, n_threads=0)
    probe = weakref.ref(x)
    del x
    gc.collect()
    assert probe() is None, "the kernel's argument cache kept a device array alive"
    y = dev(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="dtype"):  # a new object is checked again
        k(y, y, 4, v, c, 1.0, 1, y, n_threads=0)


def test_device_cuda_args_flattening(dev):
    class Args:
        def __init__(self, *v):
            self.v = v

        def __cuda_args__(self):
            return self.v

    class Bad:
        def __cuda_args__(self):
            return [1]

    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(4))
    v = dev(np.zeros((4, 6), np.float32))
    c = dev(np.zeros(3, np.int32))
    assert k(Args(x, x), Args(4, Args(v, c)), 1.0, 1, x, n_threads=0) is None
    with pytest.raises(TypeError, match=r"takes 8 arguments, got 7 \(after expanding __cuda_args__\)"):
        k(Args(x, x), 4, v, c, 1.0, 1, n_threads=0)
    with pytest.raises(TypeError, match="must return a tuple"):
        k(Bad(), x, 4, v, c, 1.0, 1, x, n_threads=0)


def test_device_struct_values(dev):
    class S:
        name = "S"
        dtype = np.dtype([("x", "<u8"), ("n", "<i4")], align=True)

    k = CudaKernel('extern "C" __global__ void k(S s, double* y) {}', "k", structs=[S()])
    y = dev(np.zeros(3))
    value = np.zeros((), S.dtype)
    value["n"] = 7
    packed, first, _ = k._plan.pack(value[()], y)
    off, size = k._plan.layout[0]
    assert size == 16 and packed[off : off + size] == value.tobytes() and first == (3,)
    with pytest.raises(TypeError, match="packed value"):
        k(np.zeros((), [("x", "<u8")])[()], y, n_threads=0)
    with pytest.raises(TypeError, match="packed value"):
        k({"x": 1, "n": 2}, y, n_threads=0)

    class Packed:
        def __cuda_args__(self):
            return (value[()],)

    # A struct value hides its arrays: inference falls back to searching the argument objects.
    _, first, hidden = k._plan.pack(Packed(), y)
    assert first == (3,) and hidden is True


def test_device_zero_size_launch_checks_everything_and_does_not_compile(dev):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(0))
    v = dev(np.zeros((0, 6), np.float32))
    c = dev(np.zeros(0, np.int32))
    assert k(x, x, 0, v, c, 1.0, 1, x) is None
    assert not k.is_compiled
    with pytest.raises(OverflowError):
        k(x, x, 2**40, v, c, 1.0, 1, x)
    k2 = CudaKernel(ALL, "k", block_size=(1, 1, 128))
    with pytest.raises(ValueError, match=r"kernel 'k' on device 0 .*block\[2\] = 128"):
        k2(x, x, 0, v, c, 1.0, 1, x, n_threads=(0, 1, 1))
    with pytest.raises(ValueError, match=r"grid\[1\] = 70000"):
        k(x, x, 0, v, c, 1.0, 1, x, grid=(0, 70000))
    with pytest.raises(ValueError, match="shared_mem"):
        k(x, x, 0, v, c, 1.0, 1, x, shared_mem=10**9)
    with pytest.raises(ValueError, match="shared_mem"):
        k(x, x, 0, v, c, 1.0, 1, x, shared_mem=-1)
    with pytest.raises(TypeError, match="shared_mem"):
        k(x, x, 0, v, c, 1.0, 1, x, shared_mem=1.5)
    with pytest.raises(TypeError, match="exactly one"):
        k(x, x, 0, v, c, 1.0, 1, x, n_threads=0, grid=0)
    assert not k.is_compiled


def test_device_nonzero_launch_cannot_run_without_a_gpu(dev):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(4))
    v = dev(np.zeros((4, 6), np.float32))
    c = dev(np.zeros(3, np.int32))
    with pytest.raises(NotImplementedError):
        k(x, x, 4, v, c, 1.0, 1, x)
    assert not k.is_compiled  # a failed compilation is not cached
    with pytest.raises(NotImplementedError):
        k.compile()
    assert not k.is_compiled


def test_device_packer_matches_the_twin(dev):
    c_plan, py_plan = _plans(ALL, "k")
    x = dev(np.zeros(4))
    v = dev(np.zeros((4, 6), np.float32))
    cc = dev(np.zeros(3, np.int32))
    cases = [
        (x, x, 4, v, cc, 1.0, 1, x),
        (x, x, 4, v[:, ::2], cc, 1.0, 1, x),
        (x, x, 4, dev(np.zeros((6, 4), np.float32)).T, cc, np.float32(2), np.uint8(3), x),
        (x, dev(np.zeros(4, np.int32)), 4, v, cc, 1.0, 1, x),
        (x, x, 4, v, cc[::2], 1.0, 1, x),
        (np.zeros(4), x, 4, v, cc, 1.0, 1, x),
        (x, x, 4, v, cc, 1.0, 256, x),
        (x, x, 4, v, cc, 1.0, 1),
    ]
    for args in cases:
        assert _outcome(c_plan, args) == _outcome(py_plan, args)


@pytest.mark.skipif(fake_cupy_active(), reason="device tests already run in this process")
def test_standin_runs_the_device_checks():
    """Plain run: the device-side tests against the CuPy stand-in, in a fresh interpreter."""
    run_device_tests_under_standin(__file__)


def test_device_repeated_calls_recheck_what_can_change(dev):
    """After the first call the common case runs in C; it must still see shape changes."""
    src = 'extern "C" __global__ void k(Array2D<double> v, double* x) {}'
    k = CudaKernel(src, "k")
    v = dev(np.zeros((0, 6)))
    x = dev(np.zeros(0))
    for _ in range(3):
        assert k(v, x) is None
        assert k(v, x, stream=None, shared_mem=0, n_threads=None, grid=None, block=None) is None
    try:
        v.shape = (0, 2, 3)
    except (AttributeError, TypeError, ValueError):
        pytest.skip("this device array type has no shape setter")
    with pytest.raises(TypeError, match="2-dimensional"):
        k(v, x)
    w = dev(np.zeros((3, 0)))
    with pytest.raises(NotImplementedError):
        k(w, x)  # 3 threads: a real launch, which the fake refuses
    k.n_threads_from = "last_axis"
    assert k(w, x) is None  # the setting change reaches the fast path
    with pytest.raises(TypeError, match="shared_mem"):
        k(w, x, shared_mem="0")
    assert k(w, x, n_threads=0) is None


def test_kernel_call_method_bad_input():
    for impl in (core, _reference):
        with pytest.raises(TypeError):
            impl.kernel_call_method("CudaKernel")
    c, py = _plans(ALL, "k")
    for plan in (c, py):
        with pytest.raises(TypeError):
            plan.configure_device(1, 2)
        with pytest.raises(ValueError):
            plan.configure_device(-1, (1, 1, 1), (1, 1, 1), 1, 0, lambda: 0)
        with pytest.raises(TypeError):
            plan.configure_device(0, (1, 1, 1), (1, 1, 1), 1, 0, "not callable")
        assert plan.configure_device(None) is None
        for block in (0, (1, 2, 3, 4), (64, 64), 1.5, "8"):
            with pytest.raises(ValueError):
                plan.configure_launch(block, 0)
        with pytest.raises(ValueError):
            plan.configure_launch(128, 3)
        with pytest.raises(TypeError):
            plan.configure_prepare(np.empty, (None,), None, None)  # one entry per parameter
        with pytest.raises(TypeError):
            plan.prepare(1)  # not configured


def test_without_the_c_extension_the_twins_do_the_work():
    """Where _core cannot be built (Pyodide) the pure-Python twins parse, check and pack."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["cunumpy._core"] = None  # as if the extension were missing
        import numpy as np
        import cunumpy as xp
        from cunumpy._native import HAVE_C_CORE
        from cunumpy.kernels import CudaKernel
        assert not HAVE_C_CORE
        src = 'extern "C" __global__ void k(const double* x, int n, Array2D<float> v, float f) {}'
        k = CudaKernel(src, "k")
        assert [p.name for p in k.signature] == ["x", "n", "v", "f"]
        assert k.launch_shape(300) == ((3,), (128,))
        try:
            k(np.zeros(3), 1, None, 1.0, n_threads=0)
        except TypeError as exc:
            assert "never copies" in str(exc), exc
        else:
            raise AssertionError("a host array was accepted")
        try:
            k.launch_shape(-1)
        except ValueError:
            pass
        s = CudaKernel('extern "C" __global__ void s(int n, double d) {}', "s")
        assert s(np.int64(5), np.float32(1), n_threads=0) is None
        try:
            s(2**31, 1.0, n_threads=0)
        except OverflowError:
            pass
        else:
            raise AssertionError("no OverflowError")
        print("OK")
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CUNUMPY_FAKE_CUPY", "CUNUMPY_BACKEND")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0 and "OK" in result.stdout, result.stdout + result.stderr


def _growth(fn, n=20000):
    import tracemalloc

    # The warm-up runs under tracing: a cache that is refilled at a constant size (the
    # sanitizer build's allocator showed one) is then counted before `before`, not as growth.
    tracemalloc.start()
    try:
        for _ in range(2000):
            fn()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(n):
            fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def _raises(fn, exc):
    def call():
        try:
            fn()
        except exc:
            return
        raise AssertionError("no error")

    return call


# ASan keeps freed memory in quarantine, so RSS grows under the sanitizer build by design.
@pytest.mark.nosan
def test_packing_many_times_does_not_grow_memory():
    k = CudaKernel(SCALARS, "s")
    args = _scalar_args(f32=np.float32(1), i64=np.int64(3))
    assert _growth(lambda: k(*args, n_threads=0)) < 20_000
    bad = _scalar_args(i32=2**40)
    assert _growth(_raises(lambda: k(*bad, n_threads=0), OverflowError)) < 20_000
    value = args[9]
    count = sys.getrefcount(value)
    for _ in range(1000):
        k(*args, n_threads=0)
    after = sys.getrefcount(value)  # outside the assert: pytest's rewriting holds references
    assert after == count


def test_device_launch_checks_do_not_leak(dev):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(0))
    v = dev(np.zeros((0, 6), np.float32))
    c = dev(np.zeros(0, np.int32))
    args = (x, x, 0, v, c, 1.0, 1, x)
    counts = [sys.getrefcount(a) for a in (x, v, c)]
    assert _growth(lambda: k(*args)) < 20_000
    assert _growth(_raises(lambda: k(x, x, 0, v, c, 1.0, 1, np.zeros(1)), TypeError)) < 20_000
    after = [sys.getrefcount(a) for a in (x, v, c)]
    assert after == counts


# ------------------------------------------------------------------ arrays and streams on another device


def _on_device(a, device_id):
    """``a`` reporting its memory on device ``device_id`` (CuPy: ``a.data.device_id``,
    ``a.device.id``), as an array allocated under ``cupy.cuda.Device(device_id)`` would."""
    base = type(a)
    base_data = base.data

    class OnDevice(base):
        __slots__ = ()

        @property
        def data(self):
            d = base_data.__get__(self)
            return types.SimpleNamespace(ptr=d.ptr, device_id=device_id)

        @property
        def device(self):
            return types.SimpleNamespace(id=device_id)

    a.__class__ = OnDevice
    return a


def _stream_on(device_id):
    cupy = sys.modules["cupy"]
    external = getattr(getattr(cupy, "cuda", None), "ExternalStream", None)
    if external is not None:
        return external(0x1234, device_id)
    return types.SimpleNamespace(ptr=0x1234, device_id=device_id)


@pytest.fixture
def current_device(monkeypatch):
    """A settable current device: ``current_device[0] = 1`` acts as ``cupy.cuda.Device(1).use()``
    for the launch checks (the getter is looked up once per CuPy module, so it is re-read)."""
    cupy = sys.modules["cupy"]
    cell = [0]
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: cell[0])
    monkeypatch.setattr(_cuda_launch, "_getter_cache", [None, None])
    return cell


OTHER = r"kernel 'k': argument {i} \({decl}\): the array is on device 1 but the launch runs on the current device 0"


@pytest.mark.parametrize("n", [0, 4])
def test_device_pointer_on_another_device_is_a_value_error(dev, n):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(n))
    v = dev(np.zeros((n, 6), np.float32))
    c = dev(np.zeros(3, np.int32))
    y = _on_device(dev(np.zeros(n)), 1)
    for _ in range(2):  # the first call takes the general path, the next ones the C fast path
        with pytest.raises(ValueError, match=OTHER.format(i=1, decl=r"double\* y")) as info:
            k(x, y, n, v, c, 1.0, 1, x)
        assert "cupy.cuda.Device(1)" in str(info.value)
        with pytest.raises(ValueError, match=OTHER.format(i=7, decl=r"void\* raw")):
            k(x, x, n, v, c, 1.0, 1, y)
        if n == 0:
            assert k(x, x, n, v, c, 1.0, 1, x) is None
    assert not k.is_compiled  # nothing was compiled or launched


def test_device_view_on_another_device_is_a_value_error(dev):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(0))
    v = dev(np.zeros((0, 6), np.float32))
    c = dev(np.zeros(3, np.int32))
    for _ in range(2):
        assert k(x, x, 0, v, c, 1.0, 1, x) is None
    v1 = _on_device(dev(np.zeros((0, 6), np.float32)), 1)
    c1 = _on_device(dev(np.zeros(3, np.int32)), 1)
    with pytest.raises(ValueError, match=OTHER.format(i=3, decl=r"Array2D<float> v")):
        k(x, x, 0, v1, c, 1.0, 1, x)
    with pytest.raises(ValueError, match=OTHER.format(i=4, decl=r"CArray1D<int> c")):
        k(x, x, 0, v, c1, 1.0, 1, x)
    with pytest.raises(ValueError, match=OTHER.format(i=4, decl=r"CArray1D<int> c")):
        k(x, x, 0, v, c1, 1.0, 1, x, n_threads=0)  # the general path too
    assert not k.is_compiled


def test_device_arrays_inside_argument_objects_are_checked(dev):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(0))
    v = _on_device(dev(np.zeros((0, 6), np.float32)), 1)
    c = dev(np.zeros(3, np.int32))

    class Args:
        def __cuda_args__(self):
            return (x, x, 0, v, c)

    with pytest.raises(ValueError, match=OTHER.format(i=3, decl=r"Array2D<float> v")):
        k(Args(), 1.0, 1, x)


def test_device_stream_on_another_device_is_a_value_error(dev):
    k = CudaKernel(ALL, "k")
    x = dev(np.zeros(0))
    v = dev(np.zeros((0, 6), np.float32))
    c = dev(np.zeros(3, np.int32))
    s1 = _stream_on(1)
    msg = r"kernel 'k': the stream is on device 1 but the launch runs on the current device 0"
    for _ in range(2):
        with pytest.raises(ValueError, match=msg):
            k(x, x, 0, v, c, 1.0, 1, x, stream=s1)
        with pytest.raises(ValueError, match=msg):
            k(x, x, 0, v, c, 1.0, 1, x, stream=s1, n_threads=0)
        assert k(x, x, 0, v, c, 1.0, 1, x, stream=_stream_on(0)) is None
        assert k(x, x, 0, v, c, 1.0, 1, x, stream=_stream_on(-1)) is None  # "current device" streams
    # A real launch is refused before anything is compiled.
    x4 = dev(np.zeros(4))
    with pytest.raises(ValueError, match=msg):
        k(x4, x4, 4, dev(np.zeros((4, 6), np.float32)), c, 1.0, 1, x4, stream=s1)
    assert not k.is_compiled


def test_device_switching_the_current_device_rechecks_cached_arrays(dev, current_device):
    """Arrays cached by the packer are compared with the current device on every call."""
    k = CudaKernel(ALL, "k")
    x = _on_device(dev(np.zeros(0)), 0)
    v = _on_device(dev(np.zeros((0, 6), np.float32)), 0)
    c = _on_device(dev(np.zeros(3, np.int32)), 0)
    for _ in range(3):
        assert k(x, x, 0, v, c, 1.0, 1, x) is None
    current_device[0] = 1
    msg = r"kernel 'k': argument 0 \(double\* x\): the array is on device 0 but the launch runs on the current device 1"
    for _ in range(2):
        with pytest.raises(ValueError, match=msg):
            k(x, x, 0, v, c, 1.0, 1, x)
    x1 = _on_device(dev(np.zeros(0)), 1)
    v1 = _on_device(dev(np.zeros((0, 6), np.float32)), 1)
    c1 = _on_device(dev(np.zeros(3, np.int32)), 1)
    assert k(x1, x1, 0, v1, c1, 1.0, 1, x1) is None  # arrays of the new current device
    with pytest.raises(ValueError, match="stream is on device 0 .* current device 1"):
        k(x1, x1, 0, v1, c1, 1.0, 1, x1, stream=_stream_on(0))
    current_device[0] = 0
    assert k(x, x, 0, v, c, 1.0, 1, x) is None
    assert not k.is_compiled


def test_device_other_device_check_matches_the_twin(dev):
    c_plan, py_plan = _plans(ALL, "k")
    x = dev(np.zeros(4))
    v = dev(np.zeros((4, 6), np.float32))
    cc = dev(np.zeros(3, np.int32))
    y1 = _on_device(dev(np.zeros(4)), 1)
    v1 = _on_device(dev(np.zeros((4, 6), np.float32)), 1)
    cases = [
        (x, y1, 4, v, cc, 1.0, 1, x),
        (x, x, 4, v1, cc, 1.0, 1, x),
        (x, x, 4, v, cc, 1.0, 1, y1),
        (x, x, 4, v, cc, 1.0, 1, x),
    ]
    for device in (None, 0, 1):
        for args in cases:
            for _ in range(2):  # the second C call hits the per-slot cache
                got = _outcome_on(c_plan, args, device)
                assert got == _outcome_on(py_plan, args, device), (device, args)
    assert _outcome_on(c_plan, cases[0], 0)[0] == "ValueError"
    assert _outcome_on(c_plan, cases[0], None)[0] != "ValueError"  # no current device: no check
    for plan in (c_plan, py_plan):
        with pytest.raises(ValueError, match=r"argument 1 \(double\* y\): the array is on device 1 .* device 0"):
            plan.pack(*cases[0], device=0)
        for bad in ("0", 1.5, True):
            with pytest.raises(TypeError, match="device must be an int or None"):
                plan.pack(*cases[3], device=bad)
        with pytest.raises(TypeError):
            plan.pack(*cases[3], stream=None)


def _outcome_on(plan, args, device):
    try:
        packed, first, flag = plan.pack(*args, device=device)
    except (TypeError, OverflowError, ValueError) as exc:
        return type(exc).__name__, str(exc).split(":")[:3]
    return packed[8 * plan.n_params :], first, flag


# ------------------------------------------------------------------ HIP/ROCm rejections at compile()


@pytest.fixture
def hip(monkeypatch):
    """cunumpy.cuda.is_hip() -> True; records any module construction (there must be none)."""
    import cunumpy.cuda

    monkeypatch.setattr(cunumpy.cuda, "is_hip", lambda: True)
    built = []
    cupy = sys.modules.get("cupy")
    if cupy is not None and hasattr(cupy, "RawModule"):
        original = cupy.RawModule

        def recording(*a, **kw):
            built.append((a, kw))
            return original(*a, **kw)

        monkeypatch.setattr(cupy, "RawModule", recording)
    return built


def _hip_rejects(k, *features):
    for method in (k.compile, k.recompile):
        with pytest.raises(NotImplementedError, match=f"kernel '{k.name}' uses .*HIP/ROCm") as info:
            method()
        for f in features:
            assert f in str(info.value)
    assert not k.is_compiled


def test_hip_rejects_reduce_and_scan_headers(hip, tmp_path):
    body = "(double* out) {}"
    _hip_rejects(
        CudaKernel('#include <cunumpy/reduce.cuh>\nextern "C" __global__ void k' + body, "k"), "cunumpy/reduce.cuh"
    )
    _hip_rejects(
        CudaKernel('#include "cunumpy/scan.cuh"\nextern "C" __global__ void k' + body, "k"),
        "cunumpy/scan.cuh",
        "cunumpy/reduce.cuh",
    )
    # Through a user header.
    (tmp_path / "mine.cuh").write_text('#pragma once\n#include "cunumpy/scan.cuh"\n')
    _hip_rejects(
        CudaKernel('#include "mine.cuh"\nextern "C" __global__ void k' + body, "k", include_dirs=[tmp_path]),
        "cunumpy/scan.cuh",
    )
    # A commented-out include or the other headers are fine.
    ok = CudaKernel(
        "// #include <cunumpy/reduce.cuh>\n#include <cunumpy/atomic.cuh>\n"
        '#include <cunumpy/index.cuh>\nextern "C" __global__ void k' + body,
        "k",
    )
    assert ok._hip_unsupported() == ()
    assert hip == []


def test_hip_rejects_views_with_five_or_more_dimensions(hip, tmp_path):
    k = CudaKernel('#include <cunumpy/array_view.cuh>\nextern "C" __global__ void k(Array5D<double> a) {}', "k")
    _hip_rejects(k, "5 dimensions")
    k = CudaKernel('extern "C" __global__ void k(CArray16D<float> a, Array2D<float> b) {}', "k")
    _hip_rejects(k, "16 dimensions")
    k = CudaKernel(
        'extern "C" __global__ void k(double* a) { ArrayView<double, 6>* p = 0; }', "k", check_signature=False
    )
    _hip_rejects(k, "6 dimensions")
    (tmp_path / "v.cuh").write_text("struct S { CArray7D<double> big; };\n")
    k = CudaKernel('#include "v.cuh"\nextern "C" __global__ void k(double* a) {}', "k", include_dirs=[tmp_path])
    _hip_rejects(k, "7 dimensions")
    ok = CudaKernel(
        "#include <cunumpy/array_view.cuh>\n"
        'extern "C" __global__ void k(Array4D<double> a, CArray1D<int> b) { /* Array9D<int> */ }',
        "k",
    )
    assert ok._hip_unsupported() == ()
    assert hip == []


def test_hip_rejects_bounds_checked_array_views(hip):
    src = '#include <cunumpy/array_view.cuh>\nextern "C" __global__ void k(Array2D<double> a) {}'
    _hip_rejects(CudaKernel(src, "k", debug=True), "array_view.cuh with CUNUMPY_BOUNDS_CHECK")
    for opts in (
        ["-DCUNUMPY_BOUNDS_CHECK"],
        ["-DCUNUMPY_BOUNDS_CHECK=1"],
        ["-D", "CUNUMPY_BOUNDS_CHECK"],
        ["--define-macro=CUNUMPY_BOUNDS_CHECK"],
    ):
        _hip_rejects(CudaKernel(src, "k", options=opts, debug=False), "CUNUMPY_BOUNDS_CHECK")
    _hip_rejects(CudaKernel("#define CUNUMPY_BOUNDS_CHECK\n" + src, "k", debug=False), "CUNUMPY_BOUNDS_CHECK")
    assert CudaKernel(src, "k", debug=False)._hip_unsupported() == ()
    # Bounds checks without array_view.cuh are not a HIP problem.
    plain = CudaKernel('extern "C" __global__ void k(double* a) {}', "k", debug=True)
    assert plain._hip_unsupported() == ()
    assert hip == []


def test_hip_supported_kernels_and_cuda_builds_compile_as_before(monkeypatch):
    import cunumpy.cuda

    scan = CudaKernel('#include <cunumpy/scan.cuh>\nextern "C" __global__ void k(double* out) {}', "k")
    fine = CudaKernel('#include <cunumpy/atomic.cuh>\nextern "C" __global__ void k(double* out) {}', "k")
    for on_hip, kernel in ((False, scan), (True, fine)):
        monkeypatch.setattr(cunumpy.cuda, "is_hip", lambda on_hip=on_hip: on_hip)
        # Past the HIP check: without CuPy a RuntimeError, with the fake its refusal to compile.
        with pytest.raises((RuntimeError, NotImplementedError)) as info:
            kernel.compile()
        assert "HIP" not in str(info.value)


def test_device_hip_first_launch_is_rejected_before_compiling(dev, hip):
    k = CudaKernel('#include <cunumpy/reduce.cuh>\nextern "C" __global__ void k(double* out) {}', "k")
    x = dev(np.zeros(4))
    for _ in range(2):
        with pytest.raises(NotImplementedError, match=r"kernel 'k' uses cunumpy/reduce.cuh .*HIP/ROCm"):
            k(x)
    assert k(dev(np.zeros(0))) is None  # a zero-size launch does not compile
    assert hip == [] and not k.is_compiled


def test_parallel_compile_that_cannot_enter_the_device_is_that_kernels_error(monkeypatch):
    """Worker threads start on device 0: when the caller's device cannot be entered there,
    the kernel's compile fails with that error instead of compiling on device 0."""
    import types

    compiled = []

    class Recording(CudaKernel):
        def compile(self, *, log_stream=None):
            compiled.append(self.expression)

    class Device:
        def __init__(self, dev):
            raise RuntimeError(f"cannot enter device {dev}")

    stub = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=Device))
    monkeypatch.setitem(sys.modules, "cupy", stub)
    monkeypatch.setattr(_cuda_launch, "_current_device", lambda cupy: 1)
    src = "template <int N> __global__ void t(int n) {}"
    v = CudaKernelVariants(lambda n: Recording(src, "t", template_args=(n,)))
    with pytest.raises(RuntimeError, match="cannot enter device 1"):
        v.compile_all([1, 2], jobs=2)
    assert compiled == []
    # KernelCatalog.compile_all goes through the same helper.
    errors = _cuda_variants._compile_each(
        [("a", Recording(src, "t", template_args=(3,))), ("b", Recording(src, "t", template_args=(4,)))], 2
    )
    assert sorted(errors) == ["a", "b"] and "cannot enter device 1" in str(errors["a"])
    assert compiled == []
