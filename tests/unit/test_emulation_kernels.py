"""CPU emulation, end to end: built-ins, atomics, intrinsics, views, shared memory,
barriers, every warp operation (partial masks and partial warps), the shipped headers
against their Python twins or NumPy, and the error cases (trap, bounds check, inline PTX,
barrier divergence, mask mismatch, a null dereference under checked execution).

Kernels sharing a source share one library: each module-level source compiles once.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _emulation_support import finishes_within, requires_compiler

import cunumpy as xp
from cunumpy import kernel_testing as kt
from cunumpy.kernels import CudaKernel

pytestmark = requires_compiler

emulate = kt.emulate_cuda_kernel

# ------------------------------------------------------------------ loop mode (no collectives)

LOOP = r"""
#include <cunumpy/index.cuh>
#include <cunumpy/atomic.cuh>
#include <cunumpy/array_view.cuh>
#include <cunumpy/morton.cuh>
#include <cunumpy/random.cuh>

extern "C" __global__ void builtins(int* out) {
    const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int* o = out + 13 * (b * (int)(blockDim.x * blockDim.y * blockDim.z) + t);
    o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
    o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
    o[6] = blockDim.x; o[7] = blockDim.y; o[8] = blockDim.z;
    o[9] = gridDim.x; o[10] = gridDim.y; o[11] = gridDim.z;
    o[12] = warpSize;
}

extern "C" __global__ void axpy(double a, const double* x, double* y, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    y[i] = a * x[i] + y[i];
}

extern "C" __global__ void atomics(int* c, unsigned long long* big, double* d, float* f, long long n) {
    CUNUMPY_GRID_STRIDE_1D(i, n) {
        atomicAdd(&c[0], 1);
        atomicSub(&c[1], 2);
        atomicMax(&c[2], (int)i);
        atomicMin(&c[3], (int)i);
        int old = c[4], assumed;
        do { assumed = old; old = atomicCAS(&c[4], assumed, assumed + 1); } while (old != assumed);
        atomicExch(&c[5], 7);
        atomicOr(&c[6], 1 << (i % 31));
        atomicAnd(&c[7], ~(1 << (i % 5)));
        atomicAdd(&big[0], (unsigned long long)i);
        atomicAdd(&d[0], 0.5);
        cunumpy_atomic_add(&d[1], 1.0);
        atomicAdd(&f[0], 1.0f);
    }
}

extern "C" __global__ void intrinsics(const unsigned* u, const double* d, const float* f, unsigned* ou,
                                      long long* oll, double* od, float* of, int n) {
    CUNUMPY_THREAD_1D(i, n);
    ou[6 * i + 0] = __popc(u[i]);
    ou[6 * i + 1] = __clz((int)u[i]);
    ou[6 * i + 2] = __ffs((int)u[i]);
    ou[6 * i + 3] = __brev(u[i]);
    ou[6 * i + 4] = __umulhi(u[i], 0x9e3779b9u);
    ou[6 * i + 5] = (unsigned)__mul24((int)(u[i] & 0xfff), 1000);
    oll[i] = __double_as_longlong(__ldg(&d[i]));
    od[2 * i] = rsqrt(d[i]);
    od[2 * i + 1] = __longlong_as_double(__double_as_longlong(d[i]));
    of[2 * i] = __int_as_float(__float_as_int(f[i]));
    of[2 * i + 1] = __expf(f[i]);
}

extern "C" __global__ void views(Array2D<double> a, CArray1D<double> out) {
    CUNUMPY_THREAD_1D(i, a.shape[0]);
    double s = 0;
    for (long long j = 0; j < a.shape[1]; j++) s += a(i, j) * (j + 1);
    out(i) = s;
}

extern "C" __global__ void grid2d(Array2D<int> a) {
    CUNUMPY_THREAD_2D(i, j, a.shape[0], a.shape[1]);
    a(i, j) = (int)(10 * i + j);
}

extern "C" __global__ void philox(unsigned long long seed, unsigned long long stream0, unsigned long long counter,
                                  double* u, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    u[i] = cunumpy_uniform(seed, stream0 + (unsigned long long)i, counter);
}

extern "C" __global__ void morton(const double* p, double lx, double ly, double sx, double sy, int levels,
                                  unsigned long long* keys, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    keys[i] = cunumpy_morton_key2(p[2 * i], p[2 * i + 1], lx, ly, sx, sy, levels);
}

extern "C" __global__ void trapper(int* x) {
    if (blockIdx.x == 1 && threadIdx.x == 3) __trap();
    x[threadIdx.x] = 1;
}

extern "C" __global__ void asserter(const int* x) {
    assert(x[threadIdx.x] == 0);
}

extern "C" __global__ void poke(long long address) {
    if (threadIdx.x == 5) *(volatile int*)address = 1;
}

extern "C" __global__ void ptx(unsigned* out) {
    unsigned lane = 0;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    out[threadIdx.x] = lane;
}

extern "C" __global__ void no_parameters() {
    if (blockIdx.x == 1 && threadIdx.x == 2) __trap();
}

extern "C" __global__ void out_of_bounds(Array1D<double> a) {
    a(threadIdx.x + 1000) = 1.0;
}
"""


def loop_kernel(name, **kw):
    return CudaKernel(LOOP, name, **kw)


@pytest.fixture(scope="module", autouse=True)
def loop_library():
    """Build the loop-mode source once for the module (every kernel of it)."""
    return kt.compile_for_emulation(loop_kernel("axpy"))


def test_loop_source_runs_in_loop_mode(loop_library):
    from cunumpy._emulation import _launch

    lib = _launch.library_for(loop_kernel("axpy"), None, ())
    assert not lib.fibers and lib.path == loop_library


@pytest.mark.parametrize("grid,block", [((2, 3, 2), (4, 2, 3)), ((5,), (33,)), ((1, 2), (1, 1, 7))])
def test_thread_and_block_built_ins(grid, block):
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    n = int(np.prod(g) * np.prod(b))
    out = np.full((n, 13), -1, np.int32)
    emulate(loop_kernel("builtins"), out, grid=grid, block=block)
    bz, by, bx, tz, ty, tx = np.meshgrid(
        np.arange(g[2]),
        np.arange(g[1]),
        np.arange(g[0]),
        np.arange(b[2]),
        np.arange(b[1]),
        np.arange(b[0]),
        indexing="ij",
    )
    expected = np.stack([tx, ty, tz, bx, by, bz] + [np.full_like(tx, v) for v in (*b, *g, 32)], axis=-1).reshape(n, 13)
    np.testing.assert_array_equal(out, expected)


def test_axpy_matches_numpy_and_infers_the_launch_size():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000)
    y = rng.standard_normal(1000)
    expected = 2.5 * x + y
    emulate(loop_kernel("axpy"), 2.5, x, y, 1000)
    np.testing.assert_allclose(y, expected, rtol=1e-15)


def test_results_are_written_back_into_non_contiguous_and_read_only_inputs():
    x = np.arange(100.0)
    base = np.ones(300)
    y = base[::3]
    emulate(loop_kernel("axpy"), 2.0, x, y, 100)
    np.testing.assert_array_equal(base[::3], 2 * x + 1)
    assert (base[1::3] == 1).all() and (base[2::3] == 1).all()
    x.flags.writeable = False  # a const input may be read-only: it is copied, never written
    emulate(loop_kernel("axpy"), 1.0, x, y, 100)
    np.testing.assert_array_equal(base[::3], 3 * x + 1)


def test_strided_views_and_contiguous_views():
    a = np.arange(120.0).reshape(12, 10)[::2, ::-3]
    storage = np.zeros((6, 2))
    out = storage[:, 1]  # a CArray1D parameter: copied in and back
    emulate(loop_kernel("views"), a, out)
    np.testing.assert_array_equal(storage[:, 1], (a * np.arange(1, a.shape[1] + 1)).sum(axis=1))
    assert (storage[:, 0] == 0).all()


def test_two_dimensional_inference():
    a = np.full((35, 19), -1, np.int32)
    emulate(loop_kernel("grid2d", block_size=(8, 4)), a)
    np.testing.assert_array_equal(a, 10 * np.arange(35)[:, None] + np.arange(19)[None, :])


def test_parallel_blocks_with_atomics_give_exact_totals(monkeypatch):
    n = 200_000
    for workers in ("1", "2", ""):
        if workers:
            monkeypatch.setenv("CUNUMPY_EMULATION_THREADS", workers)
        else:
            monkeypatch.delenv("CUNUMPY_EMULATION_THREADS", raising=False)
        c = np.array([0, 0, -1, 2**31 - 1, 0, 0, 0, -1], np.int32)
        big = np.zeros(1, np.uint64)
        d = np.zeros(2)
        f = np.zeros(1, np.float32)
        emulate(loop_kernel("atomics"), c, big, d, f, n, grid=97, block=128)
        assert c.tolist() == [n, -2 * n, n - 1, 0, n, 7, 2**31 - 1, ~0b11111], workers
        assert int(big[0]) == n * (n - 1) // 2
        assert d.tolist() == [0.5 * n, float(n)]
        assert float(f[0]) == float(n)  # integers below 2**24 add exactly in float


def test_math_and_bit_intrinsics():
    rng = np.random.default_rng(1)
    n = 64
    u = rng.integers(1, 2**32, n, dtype=np.uint64).astype(np.uint32)
    d = rng.uniform(0.1, 10.0, n)
    f = rng.uniform(-3, 3, n).astype(np.float32)
    ou = np.zeros((n, 6), np.uint32)
    oll = np.zeros(n, np.int64)
    od = np.zeros((n, 2))
    of = np.zeros((n, 2), np.float32)
    emulate(loop_kernel("intrinsics"), u, d, f, ou, oll, od, of, n)
    ints = [int(v) for v in u]
    assert ou[:, 0].tolist() == [bin(v).count("1") for v in ints]
    assert ou[:, 1].tolist() == [32 - v.bit_length() for v in ints]
    assert ou[:, 2].tolist() == [(v & -v).bit_length() for v in ints]
    assert ou[:, 3].tolist() == [int(f"{v:032b}"[::-1], 2) for v in ints]
    assert ou[:, 4].tolist() == [(v * 0x9E3779B9) >> 32 for v in ints]
    assert ou[:, 5].tolist() == [((v & 0xFFF) * 1000) & 0xFFFFFFFF for v in ints]
    np.testing.assert_array_equal(oll, d.view(np.int64))
    np.testing.assert_allclose(od[:, 0], 1 / np.sqrt(d), rtol=1e-15)
    np.testing.assert_array_equal(od[:, 1], d)
    np.testing.assert_array_equal(of[:, 0], f)
    np.testing.assert_allclose(of[:, 1], np.exp(f), rtol=1e-6)


def test_random_header_matches_philox_uniform():
    n = 1000
    u = np.zeros(n)
    emulate(loop_kernel("philox"), 12345, 7, 3, u, n)
    np.testing.assert_array_equal(u, xp.rng.philox_uniform(12345, 7 + np.arange(n), 3))


def test_morton_header_matches_morton_keys():
    rng = np.random.default_rng(2)
    p = rng.uniform(-1, 3, (500, 2))
    lower, upper, levels = np.array([-1.0, -1.0]), np.array([3.0, 3.0]), 16
    scales = xp.algorithms.morton_scales(lower, upper, levels)
    keys = np.zeros(500, np.uint64)
    emulate(loop_kernel("morton"), p, lower[0], lower[1], scales[0], scales[1], levels, keys, 500)
    np.testing.assert_array_equal(keys, xp.algorithms.morton_keys(p, lower, upper, levels))


def test_trap_is_a_runtime_error_naming_the_kernel_and_block():
    x = np.zeros(8, np.int32)
    with pytest.raises(RuntimeError, match="trapper") as info:
        emulate(loop_kernel("trapper"), x, grid=2, block=8)
    assert "block" in str(info.value)


def test_kernels_without_parameters_launch():
    emulate(loop_kernel("no_parameters"), grid=1, block=8)
    with pytest.raises(RuntimeError, match="no_parameters"):
        emulate(loop_kernel("no_parameters"), grid=2, block=8)


def test_failed_assert_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="asserter"):
        emulate(loop_kernel("asserter"), np.array([0, 0, 1, 0], np.int32), grid=1, block=4)
    emulate(loop_kernel("asserter"), np.zeros(4, np.int32), grid=1, block=4)


def test_inline_ptx_compiles_to_a_trap():
    with pytest.raises(RuntimeError, match="inline PTX"):
        emulate(loop_kernel("ptx"), np.zeros(4, np.uint32), grid=1, block=4)


def test_bounds_check_failure_is_a_runtime_error():
    a = np.zeros(10)
    checked = CudaKernel(LOOP, "out_of_bounds", options=("-DCUNUMPY_BOUNDS_CHECK",))
    with pytest.raises(RuntimeError, match="out_of_bounds"):
        emulate(checked, a, grid=1, block=2)
    debug = CudaKernel(LOOP, "out_of_bounds", debug=True)  # debug mode turns the check on
    with pytest.raises(RuntimeError, match="out_of_bounds"):
        emulate(debug, a, grid=1, block=2)
    assert (a == 0).all()


def test_null_dereference_under_checked_execution_is_a_runtime_error():
    for address in (0, 8):
        with pytest.raises(RuntimeError, match="poke"):
            emulate(loop_kernel("poke"), address, grid=3, block=8, checked=True)
    # debug mode checks too, and the process goes on working afterwards
    with pytest.raises(RuntimeError, match="poke"):
        emulate(loop_kernel("poke", debug=True), 0, grid=1, block=8)
    x = np.zeros(10)
    emulate(loop_kernel("axpy"), 1.0, np.ones(10), x, 10)
    assert (x == 1).all()


@pytest.mark.nosan
def test_null_dereference_in_a_child_process_leaves_it_alive():
    code = textwrap.dedent(f"""
        from cunumpy import kernel_testing as kt
        from cunumpy.kernels import CudaKernel
        k = CudaKernel({LOOP!r}, "poke")
        try:
            kt.emulate_cuda_kernel(k, 0, grid=1, block=8, checked=True)
        except RuntimeError as exc:
            print("caught:", exc)
        print("alive")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "caught:" in done.stdout and "alive" in done.stdout


# ------------------------------------------------------------------ fiber mode (barriers, warps)

FIBERS = r"""
#include <cunumpy/reduce.cuh>
#include <cunumpy/scan.cuh>

__device__ unsigned warp_lanes() {
    const unsigned n = blockDim.x * blockDim.y * blockDim.z;
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned first = t & ~31u;
    const unsigned lanes = n - first < 32u ? n - first : 32u;
    return lanes == 32u ? 0xffffffffu : (1u << lanes) - 1u;
}

extern "C" __global__ void block_reverse(const double* x, double* y) {
    __shared__ double tile[256];
    const long long base = (long long)blockIdx.x * blockDim.x;
    tile[threadIdx.x] = x[base + threadIdx.x];
    __syncthreads();
    y[base + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void dynamic_shared(const int* x, int* y) {
    extern __shared__ int buffer[];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    buffer[threadIdx.x] = x[i];
    __syncthreads();
    y[i] = buffer[(threadIdx.x + 1) % blockDim.x];
}

extern "C" __global__ void shuffles(const int* x, const double* d, int* out, double* dout, int width, int delta) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = warp_lanes();
    const int lane = threadIdx.x & 31;
    out[4 * t + 0] = __shfl_sync(mask, x[t], (lane * 7 + 3) % width, width);
    out[4 * t + 1] = __shfl_up_sync(mask, x[t], delta, width);
    out[4 * t + 2] = __shfl_down_sync(mask, x[t], delta, width);
    out[4 * t + 3] = __shfl_xor_sync(mask, x[t], delta % width, width);
    dout[2 * t + 0] = __shfl_sync(mask, d[t], (lane + 1) % width, width);
    dout[2 * t + 1] = __shfl_down_sync(mask, d[t], 1, width);
}

extern "C" __global__ void votes(const int* x, unsigned* out) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = warp_lanes();
    out[5 * t + 0] = __ballot_sync(mask, x[t] & 1);
    out[5 * t + 1] = __any_sync(mask, x[t] == 5);
    out[5 * t + 2] = __all_sync(mask, x[t] >= 0);
    out[5 * t + 3] = __activemask();
    __syncwarp(mask);
    out[5 * t + 4] = mask;
}

extern "C" __global__ void partial_masks(const int* x, int* out) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    out[3 * t + 0] = -1;
    out[3 * t + 1] = -1;
    out[3 * t + 2] = -1;
    if (lane < 16) {
        out[3 * t + 0] = __shfl_sync(0x0000ffffu, x[t], 15 - lane);
        out[3 * t + 1] = (int)__ballot_sync(0x0000ffffu, x[t] > 0);
    }
    if (lane % 2 == 0) {
        out[3 * t + 2] = cunumpy_warp_sum(x[t], 0x55555555u);  // sparse mask
    }
}

extern "C" __global__ void warp_sync(int* x) {
    __shared__ int s[64];
    s[threadIdx.x] = x[threadIdx.x] * 2;
    __syncwarp();
    x[threadIdx.x] = s[threadIdx.x ^ 1];
}

extern "C" __global__ void block_votes(const int* x, int* out) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int count = __syncthreads_count(x[t] % 3 == 0);
    const int all = __syncthreads_and(x[t] >= 0);
    const int any = __syncthreads_or(x[t] == 7);
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = count;
        out[3 * blockIdx.x + 1] = all;
        out[3 * blockIdx.x + 2] = any;
    }
}

extern "C" __global__ void block_sums(const long long* x, long long* sums, long long* totals, long long* scans,
                                      double* dmin, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long v = i < n ? x[i] : 0;
    const long long s = cunumpy_block_sum(v);
    const long long e = cunumpy_block_exclusive_sum(v);
    const double m = cunumpy_block_min(i < n ? (double)x[i] : 1e300);
    cunumpy_block_sum_to(totals, v);
    if (i < n) scans[i] = e;
    if (threadIdx.x == 0) { sums[blockIdx.x] = s; dmin[blockIdx.x] = m; }
}

extern "C" __global__ void block_sum_3d(const int* x, int* sums) {
    const int t = cunumpy_block_thread();
    const int b = blockIdx.x;
    const int s = cunumpy_block_sum(x[b * cunumpy_block_threads() + t]);
    if (t == 0) sums[b] = s;
}

extern "C" __global__ void diverging_barrier(int* x) {
    if (threadIdx.x < 5) __syncthreads();
    else __syncthreads();
    x[threadIdx.x] = 1;
}

extern "C" __global__ void mismatched_masks(int* x) {
    const unsigned m = threadIdx.x < 16 ? 0x0000ffffu : 0xffffffffu;
    x[threadIdx.x] = __shfl_sync(m, x[threadIdx.x], 0);
}

extern "C" __global__ void fiber_poke(long long address) {
    __syncthreads();
    if (threadIdx.x == 9) *(volatile int*)address = 1;
    __syncthreads();
}

extern "C" __global__ void fiber_trap(int* x) {
    __syncthreads();
    if (blockIdx.x == 2 && threadIdx.x == 33) __trap();
    __syncthreads();
    x[threadIdx.x] = 1;
}
"""


def fiber_kernel(name, **kw):
    return CudaKernel(FIBERS, name, **kw)


@pytest.fixture(scope="module")
def fiber_library():
    return kt.compile_for_emulation(fiber_kernel("block_reverse"))


def test_fiber_source_runs_in_fiber_mode(fiber_library):
    from cunumpy._emulation import _launch

    assert _launch.library_for(fiber_kernel("shuffles"), None, ()).fibers


def test_static_shared_memory_and_barriers(fiber_library):
    x = np.arange(1024.0)
    y = np.zeros_like(x)
    emulate(fiber_kernel("block_reverse"), x, y, n_threads=1024, block=256)
    np.testing.assert_array_equal(y, x.reshape(4, 256)[:, ::-1].ravel())


def test_extern_shared_memory_sized_by_shared_mem(fiber_library):
    x = np.arange(300, dtype=np.int32)
    y = np.zeros_like(x)
    emulate(fiber_kernel("dynamic_shared"), x, y, grid=3, block=100, shared_mem=400)
    np.testing.assert_array_equal(y, np.roll(x.reshape(3, 100), -1, axis=1).ravel())


def _shuffle_expected(x, width, delta, n_block):
    out = np.zeros((x.size, 4), np.int64)
    for t in range(x.size):
        lane = (t % n_block) % 32
        warp_base = t - lane
        seg = lane & ~(width - 1)
        src = seg + ((lane * 7 + 3) % width) % width
        out[t, 0] = x[warp_base + src]
        out[t, 1] = x[t - delta] if (lane % width) >= delta else x[t]
        out[t, 2] = x[t + delta] if (lane % width) + delta < width else x[t]
        out[t, 3] = x[warp_base + (lane ^ (delta % width))]
    return out


@pytest.mark.parametrize("width", [32, 16, 8, 4, 2, 1])
def test_shuffles_of_every_kind_and_width(fiber_library, width):
    rng = np.random.default_rng(width)
    n = 128
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    d = rng.standard_normal(n)
    out = np.zeros((n, 4), np.int32)
    dout = np.zeros((n, 2))
    delta = min(3, width - 1) if width > 1 else 0
    emulate(fiber_kernel("shuffles"), x, d, out, dout, width, delta, grid=2, block=64)
    np.testing.assert_array_equal(out, _shuffle_expected(x, width, delta, 64))
    lane = np.arange(n) % 32
    seg = lane & ~(width - 1)
    base = np.arange(n) - lane
    np.testing.assert_array_equal(dout[:, 0], d[base + seg + (lane + 1) % width])
    down = np.where((lane % width) + 1 < width, np.arange(n) + 1, np.arange(n))
    np.testing.assert_array_equal(dout[:, 1], d[np.minimum(down, n - 1)])


def test_shuffles_in_a_partial_warp(fiber_library):
    # 40 threads: the second warp has 8 lanes, and its shuffles name only those.
    x = np.arange(40, dtype=np.int32) * 3
    out = np.zeros((40, 4), np.int32)
    dout = np.zeros((40, 2))
    emulate(fiber_kernel("shuffles"), x, np.zeros(40), out, dout, 8, 1, grid=1, block=40)
    np.testing.assert_array_equal(out, _shuffle_expected(x, 8, 1, 40))


def test_votes_ballot_any_all_activemask(fiber_library):
    x = np.arange(100, dtype=np.int32)
    x[70] = -4
    out = np.zeros((100, 5), np.uint32)
    emulate(fiber_kernel("votes"), x, out, grid=1, block=100)
    for w, lanes in enumerate((32, 32, 32, 4)):
        rows = out[32 * w : 32 * w + lanes]
        chunk = x[32 * w : 32 * w + lanes]
        mask = 0xFFFFFFFF if lanes == 32 else (1 << lanes) - 1
        ballot = sum(1 << k for k, v in enumerate(chunk) if v & 1)
        assert (rows[:, 0] == ballot).all()
        assert (rows[:, 1] == int((chunk == 5).any())).all()
        assert (rows[:, 2] == int((chunk >= 0).all())).all()
        assert (rows[:, 3] == mask).all()  # converged: every live lane of the warp
        assert (rows[:, 4] == mask).all()


def test_partial_and_sparse_masks(fiber_library):
    x = np.arange(64, dtype=np.int32) - 10
    out = np.zeros((64, 3), np.int32)
    emulate(fiber_kernel("partial_masks"), x, out, grid=1, block=64)
    for t in range(64):
        lane, base = t % 32, t - t % 32
        if lane < 16:
            assert out[t, 0] == x[base + 15 - lane]
            assert out[t, 1] == np.int32(np.uint32(sum(1 << k for k in range(16) if x[base + k] > 0)))
        else:
            assert out[t, 0] == -1 and out[t, 1] == -1
        expected = x[base : base + 32 : 2].sum() if lane % 2 == 0 else -1
        assert out[t, 2] == expected


def test_syncwarp_orders_shared_memory(fiber_library):
    x = np.arange(64, dtype=np.int32)
    emulate(fiber_kernel("warp_sync"), x, grid=1, block=64)
    np.testing.assert_array_equal(x, 2 * (np.arange(64) ^ 1))


def test_syncthreads_count_and_or(fiber_library):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 10, 300).astype(np.int32)
    x[100:200][x[100:200] == 7] = 8  # block 1 has no 7
    out = np.zeros((3, 3), np.int32)
    emulate(fiber_kernel("block_votes"), x, out, grid=3, block=100)
    blocks = x.reshape(3, 100)
    np.testing.assert_array_equal(out[:, 0], (blocks % 3 == 0).sum(axis=1))
    np.testing.assert_array_equal(out[:, 1], 1)
    np.testing.assert_array_equal(out[:, 2], (blocks == 7).any(axis=1).astype(int))


@pytest.mark.parametrize("block", [256, 100, 1024])
def test_reduce_and_scan_headers_match_numpy(fiber_library, block):
    rng = np.random.default_rng(block)
    n = 5000
    x = rng.integers(-(10**6), 10**6, n)
    n_blocks = -(-n // block)
    sums = np.zeros(n_blocks, np.int64)
    totals = np.zeros(1, np.int64)
    scans = np.zeros(n, np.int64)
    dmin = np.zeros(n_blocks)
    emulate(fiber_kernel("block_sums"), x, sums, totals, scans, dmin, n, block=block)
    padded = np.concatenate([x, np.zeros(n_blocks * block - n, np.int64)]).reshape(n_blocks, block)
    np.testing.assert_array_equal(sums, padded.sum(axis=1))
    assert totals[0] == x.sum()
    exclusive = np.cumsum(padded, axis=1) - padded
    np.testing.assert_array_equal(scans, exclusive.ravel()[:n])
    values = np.full(n_blocks * block, 1e300)
    values[:n] = x
    np.testing.assert_array_equal(dmin, values.reshape(n_blocks, block).min(axis=1))


def test_reduce_header_in_a_three_dimensional_block(fiber_library):
    x = np.arange(2 * 70, dtype=np.int32)
    sums = np.zeros(2, np.int32)
    emulate(fiber_kernel("block_sum_3d"), x, sums, grid=2, block=(5, 7, 2))
    np.testing.assert_array_equal(sums, x.reshape(2, 70).sum(axis=1))


def test_barrier_divergence_is_an_error_not_a_hang(fiber_library):
    error = finishes_within(60, emulate, fiber_kernel("diverging_barrier"), np.zeros(32, np.int32), grid=2, block=32)
    assert isinstance(error, RuntimeError), error
    assert "diverging_barrier" in str(error) and "block" in str(error)


def test_mismatched_warp_masks_are_an_error_not_a_hang(fiber_library):
    error = finishes_within(60, emulate, fiber_kernel("mismatched_masks"), np.zeros(32, np.int32), grid=1, block=32)
    assert isinstance(error, RuntimeError), error
    assert "mismatched_masks" in str(error)


def test_trap_in_fiber_mode_names_the_block(fiber_library):
    with pytest.raises(RuntimeError, match="fiber_trap") as info:
        emulate(fiber_kernel("fiber_trap"), np.zeros(64, np.int32), grid=4, block=64)
    assert "2" in str(info.value)


def test_null_dereference_in_a_fiber_is_a_runtime_error(fiber_library):
    with pytest.raises(RuntimeError, match="fiber_poke"):
        emulate(fiber_kernel("fiber_poke"), 0, grid=2, block=64, checked=True)
    x = np.arange(1024.0)
    y = np.zeros_like(x)
    emulate(fiber_kernel("block_reverse"), x, y, n_threads=1024, block=256)
    np.testing.assert_array_equal(y, x.reshape(4, 256)[:, ::-1].ravel())


def test_one_kernel_object_launched_from_many_threads(fiber_library):
    import threading

    loop = loop_kernel("axpy")
    fibers = fiber_kernel("block_reverse")
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(5):
                x = rng.standard_normal(512)
                y = np.zeros(512)
                emulate(fibers, x, y, n_threads=512, block=256)
                np.testing.assert_array_equal(y, x.reshape(2, 256)[:, ::-1].ravel())
                z = x.copy()
                emulate(loop, 2.0, x, z, 512)
                np.testing.assert_array_equal(z, 3 * x)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


ACTIVEMASK_BRANCHES = r"""
extern "C" __global__ void same_tails(unsigned int* out, int split)
{
    int t = threadIdx.x;
    if (t % split == 0)
        out[t] = __activemask();
    else
        out[t] = __activemask();
}
"""


def test_activemask_in_branches_with_identical_tails_is_per_branch():
    """Regression: at -O2 GCC merged the two identical calls into one, so the lanes of both
    branches formed one group (0xffffffff for everyone)."""
    kernel = CudaKernel(ACTIVEMASK_BRANCHES, "same_tails")
    out = np.zeros(32, np.uint32)
    emulate(kernel, out, 3, grid=1, block=32)
    first = sum(1 << t for t in range(32) if t % 3 == 0)
    expected = np.where(np.arange(32) % 3 == 0, first, 0xFFFFFFFF ^ first).astype(np.uint32)
    np.testing.assert_array_equal(out, expected)
