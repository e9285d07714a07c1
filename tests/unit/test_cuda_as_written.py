"""Real CUDA code as written: type names as nvcc reads them (typedef, using, #define, -D, uint),
CUDA vector types (pointers, by value), structs defined in the source (by pointer and by value,
CudaStruct.from_source), __constant__ / __device__ variables from Python (set_global,
get_global, the fake CuPy's RawModule.get_global) and templates by name expression.

The parsing tests need no compiler; the launches run in the CPU emulation. The fake-CuPy
tests run in a child process on the fake CuPy (``test_fake_cupy_globals_in_subprocess``)."""

import numpy as np
import pytest
from _emulation_support import requires_compiler
from _fake_support import active_fake_cupy, rerun_under_fake_cupy

from cunumpy import kernel_testing as kt
from cunumpy.arguments import CudaStruct
from cunumpy.cuda import parse_cuda_signature
from cunumpy.kernels import CudaKernel

emulate = kt.emulate_cuda_kernel

# ------------------------------------------------------------------ type names (item 2)


@pytest.mark.parametrize(
    "prelude, decl, dtype",
    [
        ("", "uint* a", "uint32"),
        ("", "ushort* a", "uint16"),
        ("", "ulong* a", "uint64"),
        ("typedef unsigned int u32;", "u32* a", "uint32"),
        ("typedef float real_t; typedef real_t value_t;", "const value_t* __restrict__ a", "float32"),
        ("using real = double;", "real* a", "float64"),
        ("#define REAL float", "REAL* a", "float32"),
        ("/* typedef int fake_t; */ typedef short s16;", "s16* a", "int16"),
    ],
)
def test_aliases_are_read_as_the_compiler_does(prelude, decl, dtype):
    src = f'{prelude}\nextern "C" __global__ void k({decl}, int n) {{}}'
    (a, n) = CudaKernel(src, "k").signature
    assert a.pointer and a.dtype == np.dtype(dtype) and n.dtype == np.dtype("int32")


def test_macros_of_the_options():
    src = 'extern "C" __global__ void k(REAL* a, INDEX n) {}'
    (a, n) = CudaKernel(src, "k", options=("-DREAL=double", "-D", "INDEX=long long")).signature
    assert a.dtype == np.dtype("float64") and n.dtype == np.dtype("int64")
    with pytest.raises(ValueError, match="unknown type 'REAL'"):
        CudaKernel(src, "k")


def test_typedef_in_an_included_header(tmp_path):
    (tmp_path / "types.cuh").write_text("#pragma once\ntypedef uint4 data_t;\nusing index_t = int;\n")
    src = '#include "types.cuh"\nextern "C" __global__ void k(data_t* d, index_t n) {}'
    (d, n) = CudaKernel(src, "k", include_dirs=[tmp_path]).signature
    assert d.ctype == "uint4" and d.dtype.names == ("x", "y", "z", "w") and n.dtype == np.dtype("int32")


def test_unknown_names_still_fail_naming_the_parameter():
    with pytest.raises(ValueError, match="parameter 0 'mystery_t\\* a': unknown type 'mystery_t'"):
        CudaKernel('extern "C" __global__ void k(mystery_t* a) {}', "k")


# ------------------------------------------------------------------ vector types (item 1)


@pytest.mark.parametrize(
    "name, scalar, n, align, itemsize",
    [
        ("char4", "i1", 4, 4, 4),
        ("uchar2", "u1", 2, 2, 2),
        ("short3", "i2", 3, 2, 6),
        ("int2", "i4", 2, 8, 8),
        ("uint4", "u4", 4, 16, 16),
        ("float3", "f4", 3, 4, 12),
        ("float4", "f4", 4, 16, 16),
        ("double2", "f8", 2, 16, 16),
        ("double3", "f8", 3, 8, 24),
        ("longlong4", "i8", 4, 16, 32),
        ("ulong2", "u8", 2, 16, 16),
        ("half2", "f2", 2, 4, 4),
    ],
)
def test_vector_layouts(name, scalar, n, align, itemsize):
    (p,) = parse_cuda_signature(f'extern "C" __global__ void k({name} v) {{}}', "k")
    v = p.struct
    assert (v.name, v.scalar, v.length, v.alignment, v.dtype.itemsize) == (name, np.dtype(scalar), n, align, itemsize)
    assert p.dtype.names == ("x", "y", "z", "w")[:n]


VECTORS = r"""
typedef uint4 data_t;
extern "C" __global__ void fill4(data_t* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = make_uint4(i, 2 * i, 3 * i, 4 * i);
}
extern "C" __global__ void cadd(const float2* a, const float2* b, float2* c, float2 shift, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = make_float2(a[i].x + b[i].x + shift.x, a[i].y + b[i].y + shift.y);
}
extern "C" __global__ void dot3(const double3* p, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = p[i].x * p[i].x + p[i].y * p[i].y + p[i].z * p[i].z;
}
"""


@requires_compiler
def test_vector_pointers_take_a_trailing_axis_or_a_structured_array():
    n = 37
    d = np.zeros((n, 4), np.uint32)
    emulate(CudaKernel(VECTORS, "fill4"), d, n)
    i = np.arange(n, dtype=np.uint32)
    np.testing.assert_array_equal(d, np.stack([i, 2 * i, 3 * i, 4 * i], axis=1))
    rec = np.zeros(n, dtype=[("x", "<u4"), ("y", "<u4"), ("z", "<u4"), ("w", "<u4")])
    emulate(CudaKernel(VECTORS, "fill4"), rec, n)
    np.testing.assert_array_equal(rec["w"], 4 * i)

    rng = np.random.default_rng(0)
    a, b = rng.random((n, 2), dtype=np.float32), rng.random((n, 2), dtype=np.float32)
    c = np.zeros_like(a)
    cadd = CudaKernel(VECTORS, "cadd")
    emulate(cadd, a, b, c, (1.0, -2), n)
    np.testing.assert_allclose(c, a + b + np.float32([1.0, -2.0]))
    shift = np.array((0.5, 0.25), dtype=cadd.signature[3].dtype)[()]
    emulate(cadd, a, b, c, shift, n)
    np.testing.assert_allclose(c, a + b + np.float32([0.5, 0.25]))

    p = rng.random((n, 3))
    out = np.zeros(n)
    emulate(CudaKernel(VECTORS, "dot3"), p, out, n)
    np.testing.assert_allclose(out, (p * p).sum(axis=1))


@requires_compiler
def test_vector_arguments_are_checked():
    n = 4
    fill4 = CudaKernel(VECTORS, "fill4")
    with pytest.raises(TypeError, match="last axis of length 4"):
        emulate(fill4, np.zeros((n, 3), np.uint32), n)
    with pytest.raises(TypeError, match="expected dtype uint32"):
        emulate(fill4, np.zeros((n, 4), np.int32), n)
    with pytest.raises(TypeError, match="structured array of dtype"):
        emulate(fill4, np.zeros(n, dtype=[("a", "<u4"), ("b", "<u4"), ("c", "<u4"), ("d", "<u4")]), n)
    cadd = CudaKernel(VECTORS, "cadd")
    a = np.zeros((n, 2), np.float32)
    with pytest.raises(TypeError, match="tuple of 2 numbers, got 3"):
        emulate(cadd, a, a, a, (1.0, 2.0, 3.0), n)
    with pytest.raises(TypeError, match="component 1: expected a real number"):
        emulate(cadd, a, a, a, (1.0, "x"), n)
    with pytest.raises(TypeError, match="a tuple of 2 numbers or a structured scalar"):
        emulate(cadd, a, a, a, 1.0, n)
    with pytest.raises(TypeError, match="component 0: expected an integer"):
        emulate(CudaKernel('extern "C" __global__ void k(int2 v, int* o) {}', "k"), (1.5, 2), np.zeros(1, np.int32))


def test_vector_pointers_are_checked_by_the_c_packer():
    """The launch path (prepare_args) checks the last axis and the alignment of device arrays."""
    k = CudaKernel(VECTORS, "fill4")
    good = np.zeros((8, 4), np.uint32)
    k.prepare_args(_Device(good), 8)
    with pytest.raises(TypeError, match="last axis has length 4"):
        k.prepare_args(_Device(np.zeros((8, 2), np.uint32)), 8)
    base = np.zeros(48, np.uint32)
    start = next(s for s in range(4) if (base.ctypes.data + 4 * s) % 16)
    with pytest.raises(TypeError, match="not aligned to 16 bytes"):
        k.prepare_args(_Device(base[start : start + 32].reshape(8, 4)), 8)


class _Device:
    """A device array as far as the launch path sees it: __cuda_array_interface__ over host memory."""

    def __init__(self, a):
        self._a = a
        self.__cuda_array_interface__ = {
            "shape": a.shape,
            "typestr": a.dtype.str,
            "data": (a.ctypes.data, False),
            "strides": None,
            "version": 3,
        }


# ------------------------------------------------------------------ structs of the source (item 3)

GRAPH = r"""
struct Node { int start; int count; };
typedef struct { float w; int to; } Edge;
extern "C" __global__ void degree_sum(const Node* nodes, const Edge* edges, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int e = nodes[i].start; e < nodes[i].start + nodes[i].count; e++) s += edges[e].w;
    out[i] = s;
}
extern "C" __global__ void scale_node(Node node, int* out) { out[0] = node.start * node.count; }
"""


def test_struct_from_source():
    s = CudaStruct.from_source(GRAPH, "Node")
    assert s.field_names == ("start", "count") and s.itemsize == 8
    e = CudaStruct.from_source(GRAPH, "Edge")
    assert e.offsets == (0, 4) and e.dtype == np.dtype({"names": ["w", "to"], "formats": ["<f4", "<i4"]})
    with pytest.raises(ValueError, match="defines no struct 'Missing'"):
        CudaStruct.from_source(GRAPH, "Missing")
    with pytest.raises(ValueError, match="C array"):
        CudaStruct.from_source("struct A { float v[3]; };", "A")
    aliased = CudaStruct.from_source(
        "typedef unsigned int uint32; struct P { uint32 id; REAL x; };", "P", options=["-DREAL=double"]
    )
    assert aliased.dtype == np.dtype(
        {"names": ["id", "x"], "formats": ["<u4", "<f8"], "offsets": [0, 8], "itemsize": 16}
    )


@requires_compiler
def test_struct_pointers_take_structured_arrays():
    node_t = CudaStruct.from_source(GRAPH, "Node").dtype
    edge_t = CudaStruct.from_source(GRAPH, "Edge").dtype
    nodes = np.zeros(3, node_t)
    nodes["start"], nodes["count"] = [0, 2, 2], [2, 0, 3]
    edges = np.zeros(5, edge_t)
    edges["w"] = [1, 2, 3, 4, 5]
    out = np.zeros(3, np.float32)
    k = CudaKernel(GRAPH, "degree_sum")
    emulate(k, nodes, edges, out, 3)
    np.testing.assert_array_equal(out, [3, 0, 12])
    wrong = np.zeros(3, dtype=[("start", "<i8"), ("count", "<i4")])
    with pytest.raises(
        TypeError,
        match=r"field .start. has dtype int64 instead of int32; field .count. is at offset 8 instead of 4; itemsize 12",
    ):
        emulate(k, wrong, edges, out, 3)
    res = np.zeros(1, np.int32)
    emulate(CudaKernel(GRAPH, "scale_node"), {"start": 6, "count": 7}, res, n_threads=1)
    assert res[0] == 42


# ------------------------------------------------------------------ __constant__ / __device__ (item 4)

GLOBALS = r"""
#define TAPS 5
__constant__ float taps[TAPS];
__constant__ float2 offset;
__device__ unsigned int calls;
extern "C" __global__ void fir(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int k = 0; k < TAPS; k++) s += taps[k] * x[(i + k) % n];
    y[i] = s * offset.x + offset.y;
    atomicAdd(&calls, 1u);
}
"""


@requires_compiler
def test_constant_memory_from_python():
    k = CudaKernel(GLOBALS, "fir")
    k.set_global("taps", [1, 2, 3, 4, 5])
    k.set_global("offset", (2.0, 0.5))
    k.set_global("calls", 0)
    x = np.arange(16, dtype=np.float32)
    y = np.zeros_like(x)
    emulate(k, x, y, 16)
    ref = sum((t + 1) * np.roll(x, -t) for t in range(5)) * 2.0 + 0.5
    np.testing.assert_allclose(y, ref)
    emulate(k, x, y, 16)
    assert int(k.get_global("calls")) == 32  # a __device__ variable keeps its value between launches
    np.testing.assert_array_equal(k.get_global("taps"), [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(k.get_global("offset"), [2.0, 0.5])
    k.set_global("calls", 0)
    emulate(k, x, y, 16, sanitize="racecheck")  # another library: the value set follows
    assert int(k.get_global("calls")) == 16


def test_global_values_are_checked():
    k = CudaKernel(GLOBALS, "fir")
    with pytest.raises(ValueError, match=r"'taps' \(float\) has shape \(5,\), got a value of shape \(3,\)"):
        k.set_global("taps", [1, 2, 3])
    with pytest.raises(ValueError, match="no __constant__ or __device__ variable 'nope'.*calls, offset, taps"):
        k.set_global("nope", 1)
    with pytest.raises(TypeError, match="'calls' .* does not fit"):
        k.set_global("calls", -1)
    with pytest.raises(TypeError, match="'name' must be a str"):
        k.get_global(3)


def test_fake_cupy_globals_in_subprocess():
    rerun_under_fake_cupy(__file__, "on_the_fake_cupy")


@requires_compiler
def test_raw_module_get_global_on_the_fake_cupy():
    cp = active_fake_cupy()
    if cp is None:
        pytest.skip("runs on the fake CuPy (test_fake_cupy_globals_in_subprocess)")
    src = (
        GLOBALS
        + r"""
template <int B> __global__ void first(float* y) { y[threadIdx.x] = B + taps[0]; }
"""
    )
    mod = cp.RawModule(code=src, name_expressions=["first<8>"])
    taps = cp.ndarray((5,), cp.float32, mod.get_global("taps"))
    taps[...] = cp.asarray([1, 0, 0, 0, 0], dtype=cp.float32)
    off = cp.ndarray((2,), cp.float32, mod.get_global("offset"))
    off[...] = cp.asarray([1, 0], dtype=cp.float32)
    x = cp.arange(8, dtype=cp.float32)
    y = cp.zeros(8, dtype=cp.float32)
    mod.get_function("fir")((1,), (8,), (x, y, np.int32(8)))
    np.testing.assert_array_equal(cp.asnumpy(y), np.arange(8))
    mod.get_function("first<8>")((1,), (8,), (y,))
    np.testing.assert_array_equal(cp.asnumpy(y), np.full(8, 9.0))
    k = CudaKernel(GLOBALS, "fir")
    k.set_global("taps", np.array([0, 1, 0, 0, 0], np.float32))
    k.set_global("offset", (1, 0))
    k(x, y, 8)
    np.testing.assert_array_equal(cp.asnumpy(y), np.roll(np.arange(8), -1))
    assert isinstance(k.get_global("taps"), cp.ndarray)


# ------------------------------------------------------------------ templates by name expression (item 5)

TEMPLATES = r"""
template <int BLOCK, typename T> __global__ void scale(T* a, T f, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) a[i] *= f * BLOCK;
}
"""


def test_name_expressions():
    k = CudaKernel(TEMPLATES, "scale<32, float>")
    assert k.name == "scale" and k.expression == "scale<32, float>" and k.template_args == ("32", "float")
    assert [p.dtype for p in k.signature] == [np.dtype("float32"), np.dtype("float32"), np.dtype("int32")]
    with pytest.raises(ValueError, match="malformed name expression"):
        CudaKernel(TEMPLATES, "scale<32, >")
    with pytest.raises(ValueError, match="takes 2 to 2 template arguments"):
        CudaKernel(TEMPLATES, "scale<32>")


@requires_compiler
def test_name_expression_launches():
    a = np.ones(64, np.float64)
    emulate(CudaKernel(TEMPLATES, "scale<16, double>", block_size=16), a, 0.5, 64)
    np.testing.assert_array_equal(a, np.full(64, 8.0))
