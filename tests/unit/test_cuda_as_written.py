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


PARTICLE = r"""
struct Particle { float4 pos; float2 vel; int id; };
extern "C" __global__ void weigh(Particle p, float* out) { out[0] = p.pos.x + p.pos.w + p.vel.y + p.id; }
"""


def test_vector_struct_fields_have_cuda_layout():
    s = CudaStruct.from_source(PARTICLE, "Particle")
    assert (s.offsets, s.itemsize, s.alignment) == ((0, 16, 24), 32, 16)
    assert s.dtype.fields["vel"][0].names == ("x", "y")
    with pytest.raises(ValueError, match="pointer to the vector type float2"):
        CudaStruct("Bad", [("p", "float2*")])


@requires_compiler
def test_vector_struct_fields_take_tuples():
    s = CudaStruct.from_source(PARTICLE, "Particle")
    out = np.zeros(1, np.float32)
    emulate(CudaKernel(PARTICLE, "weigh", structs=[s]), s(pos=(1, 2, 3, 4), vel=(5, 6), id=7), out, n_threads=1)
    assert out[0] == 18
    emulate(CudaKernel(PARTICLE, "weigh"), {"pos": (1, 2, 3, 4), "vel": (5, 6), "id": 8}, out, n_threads=1)
    assert out[0] == 19


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
    out[:] = 0
    emulate(k, nodes.view(np.uint8).reshape(3, 8), edges, out, 3)  # the bytes, as CuPy holds them
    np.testing.assert_array_equal(out, [3, 0, 12])
    res = np.zeros(1, np.int32)
    emulate(CudaKernel(GRAPH, "scale_node"), {"start": 6, "count": 7}, res, n_threads=1)
    assert res[0] == 42


def test_struct_pointers_take_bytes_on_the_device_path():
    """CuPy has no structured dtypes: a device array of uint8 with a last axis of the struct's size."""
    k = CudaKernel(GRAPH, "degree_sum")
    nodes = np.zeros((3, 8), np.uint8)
    edges = np.zeros((5, 8), np.uint8)
    out = np.zeros(3, np.float32)
    k.prepare_args(_Device(nodes), _Device(edges), _Device(out), 3)
    with pytest.raises(TypeError, match="or uint8 bytes with a last axis of 8"):
        k.prepare_args(_Device(np.zeros((3, 4), np.uint8)), _Device(edges), _Device(out), 3)


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
    # A CuPy array on the fake CuPy (as on a GPU), a NumPy array without CuPy.
    np.testing.assert_array_equal(_host(k.get_global("taps")), [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(_host(k.get_global("offset")), [2.0, 0.5])
    k.set_global("calls", 0)
    emulate(k, x, y, 16, sanitize="racecheck")  # another library: the value set follows
    assert int(k.get_global("calls")) == 16


@requires_compiler
def test_initcheck_reports_a_constant_never_set():
    src = r"""
__constant__ float taps[4];
__constant__ float preset[2] = {1.0f, 2.0f};
extern "C" __global__ void read_taps(float* y) { y[threadIdx.x] = taps[threadIdx.x] + preset[1]; }
"""
    k = CudaKernel(src, "read_taps")
    y = np.zeros(4, np.float32)
    with pytest.raises(kt.InitcheckError, match="'taps' element 0"):
        emulate(k, y, grid=1, block=4, sanitize="initcheck")
    k.set_global("taps", [1, 2, 3, 4])
    emulate(k, y, grid=1, block=4, sanitize="initcheck")  # set, and preset has an initializer
    np.testing.assert_array_equal(y, [3, 4, 5, 6])


@requires_compiler
def test_a_variable_the_preprocessor_leaves_out():
    src = r"""
#if 0
__constant__ float unused[4];
#endif
__constant__ float used[2];
extern "C" __global__ void k(float* y) { y[threadIdx.x] = used[threadIdx.x]; }
"""
    k = CudaKernel(src, "k")
    k.set_global("used", [1, 2])
    y = np.zeros(2, np.float32)
    emulate(k, y, grid=1, block=2)
    np.testing.assert_array_equal(y, [1, 2])
    with pytest.raises(ValueError, match="'unused' is not in the compiled source"):
        k.set_global("unused", [0, 0, 0, 0])
        emulate(k, y, grid=1, block=2)


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


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


# ------------------------------------------------------------------ cooperative groups, gaps (item 6)

GROUPS = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
template <unsigned int BlockSize>
__global__ void tile64_sums(const float* in, float* out, int n) {
    __shared__ cg::block_tile_memory<BlockSize> scratch;
    cg::thread_block cta = cg::this_thread_block(scratch);
    cg::thread_block_tile<64> tile = cg::tiled_partition<64>(cta);
    __shared__ float s[BlockSize];
    unsigned int t = cta.thread_rank();
    unsigned int i = blockIdx.x * BlockSize + t;
    s[t] = i < n ? in[i] : 0.0f;
    tile.sync();
    for (unsigned int d = 32; d > 0; d >>= 1) {
        if (tile.thread_rank() < d) s[t] += s[t + d];
        tile.sync();
    }
    if (tile.thread_rank() == 0) out[blockIdx.x * tile.meta_group_size() + tile.meta_group_rank()] = s[t];
}
extern "C" __global__ void warp_sum_max(const int* in, int* out, int n) {
    cg::thread_block_tile<32> w = cg::tiled_partition<32>(cg::this_thread_block());
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    int total = cg::reduce(w, v, cg::plus<int>());
    int mx = cg::reduce(w, v, cg::greater<int>());
    if (w.thread_rank() == 0) { atomicAdd(&out[0], total); atomicMax(&out[1], mx); }
}
extern "C" __global__ void count_by_label(const int* key, int* count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        cg::coalesced_group same = cg::labeled_partition(cg::coalesced_threads(), key[i]);
        if (same.thread_rank() == 0) atomicAdd(&count[key[i]], (int)same.size());
    }
}
"""


@requires_compiler
def test_cooperative_groups_of_the_samples():
    x = np.random.default_rng(1).random(1000).astype(np.float32)
    out = np.zeros(16, np.float32)
    emulate(CudaKernel(GROUPS, "tile64_sums<128>"), x, out, 1000, grid=8, block=128, sanitize="racecheck")
    np.testing.assert_allclose(out, np.add.reduceat(np.pad(x, (0, 24)), np.arange(0, 1024, 64)), rtol=1e-5)
    a = np.arange(1000, dtype=np.int32)
    o = np.zeros(2, np.int32)
    emulate(CudaKernel(GROUPS, "warp_sum_max"), a, o, 1000)
    assert list(o) == [a.sum(), 999]
    key = (np.arange(1000) % 7).astype(np.int32)
    c = np.zeros(7, np.int32)
    emulate(CudaKernel(GROUPS, "count_by_label"), key, c, 1000)
    np.testing.assert_array_equal(c, np.bincount(key))


GAPPY = r"""
extern "C" __global__ void twice(float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = 2.0f * i;
}
__device__ float helper(float x) { return some_intrinsic_the_emulation_lacks(x); }
extern "C" __global__ void uses_helper(float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = helper(a[i]);
}
extern "C" __global__ void fetch(unsigned long long tex, float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = tex1Dfetch<float>(tex, i);
}
"""


@requires_compiler
def test_one_kernels_gap_never_sinks_its_neighbours():
    a = np.zeros(8, np.float32)
    with pytest.warns(RuntimeWarning) as record:
        emulate(CudaKernel(GAPPY, "twice"), a, 8)
    np.testing.assert_array_equal(a, 2 * np.arange(8))
    text = "\n".join(str(w.message) for w in record)
    assert "function 'helper'" in text and "line 6" in text and "some_intrinsic_the_emulation_lacks" in text
    assert "function 'fetch'" in text and "tex1Dfetch" in text
    with pytest.raises(NotImplementedError, match=r"kernel 'fetch' uses tex1Dfetch \(line 13\): textures and surfaces"):
        emulate(CudaKernel(GAPPY, "fetch"), 0, a, 8)
    with pytest.raises(RuntimeError, match="some_intrinsic_the_emulation_lacks"):
        emulate(CudaKernel(GAPPY, "uses_helper"), a, 8)


def test_texture_parameters_are_named():
    with pytest.raises(ValueError, match=r"textures and surfaces \(cudaTextureObject_t\) are not supported"):
        CudaKernel('extern "C" __global__ void k(cudaTextureObject_t t, float* a) {}', "k")


def test_the_python_twin_packs_as_the_c_core():
    """The pure-Python packer (used where the extension is not built) agrees with the C one."""
    from cunumpy import _native
    from cunumpy._reference import pack as twin
    from cunumpy.kernels._cuda_parse import _spec

    src = 'struct Node { int a; int b; };\nextern "C" __global__ void k(uint4* v, float2 f, const Node* g, int n) {}'
    specs = tuple(_spec(i, p) for i, p in enumerate(CudaKernel(src, "k").signature))
    v, g = np.zeros((4, 4), np.uint32), np.zeros((3, 8), np.uint8)
    results = []
    for core in (_native.core, twin):
        plan = core.launch_plan("k", specs, np.void, np.generic)
        packed, _, _ = plan.pack(_Device(v), (1.5, 2), _Device(g), 3)
        off, size = plan.layout[1]
        errors = []
        for bad in [
            (_Device(np.zeros((4, 3), np.uint32)), (1.0, 2.0), _Device(g), 3),
            (_Device(v), (1.0, "x"), _Device(g), 3),
            (_Device(v), (1.0, 2.0), _Device(np.zeros((3, 4), np.uint8)), 3),
            (_Device(v), (1.0, 2.0, 3.0), _Device(g), 3),
        ]:
            with pytest.raises(TypeError) as info:
                plan.pack(*bad)
            errors.append(str(info.value).split(":")[1])
        results.append((bytes(packed)[off : off + size], errors))
    assert results[0] == results[1]
