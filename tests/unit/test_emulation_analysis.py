"""Performance analysis of emulated launches (analyze_kernel, analyzed_launches): a corpus of
kernels whose counts are computed by hand from the rules of the performance-analysis guide,
each asserting the launch's totals and the source line they land on.

All kernels share one source (one library). Lines are found by their ``// @marker`` comment.
"""

import json
import os
import shutil

import numpy as np
import pytest
from _emulation_support import requires_compiler

from cunumpy import kernel_testing as kt
from cunumpy._emulation import _analysis
from cunumpy.kernels import CudaKernel

pytestmark = requires_compiler

SRC = r"""
extern "C" __global__ void copy(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {  // @copy_if
        out[i] = x[i];  // @copy
    }
}

extern "C" __global__ void offset_read(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = x[i + 1];  // @offset
}

extern "C" __global__ void stride3(double* out, const double* x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = x[3 * i];  // @stride3
}

extern "C" __global__ void aos(float* out, const float* p) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = p[3 * i] + p[3 * i + 1] + p[3 * i + 2];  // @aos
}

extern "C" __global__ void soa(float* out, const float* px, const float* py, const float* pz) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = px[i] + py[i] + pz[i];  // @soa
}

extern "C" __global__ void broadcast_global(float* out, const float* x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = x[0];  // @bcast_global
}

extern "C" __global__ void scatter_store(float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[8 * i] = 1.0f;  // @scatter
}

extern "C" __global__ void transpose_naive(float* out, const float* in) {
    __shared__ float tile[32][32];
    tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * 32 + threadIdx.x];  // @naive_store
    __syncthreads();  // @naive_sync
    out[threadIdx.y * 32 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];  // @naive_load
}

extern "C" __global__ void transpose_padded(float* out, const float* in) {
    __shared__ float tile[32][33];
    tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * 32 + threadIdx.x];  // @pad_store
    __syncthreads();
    out[threadIdx.y * 32 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];  // @pad_load
}

extern "C" __global__ void shared_broadcast(float* out) {
    __shared__ float s[32];
    s[threadIdx.x] = (float)threadIdx.x;  // @sb_store
    __syncthreads();
    out[threadIdx.x] = s[0];  // @sb_load
}

extern "C" __global__ void shared_stride2(float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = 1.0f;
    s[threadIdx.x + 32] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = s[2 * threadIdx.x];  // @stride2_load
}

extern "C" __global__ void shared_double(double* out) {
    __shared__ double s[64];
    s[threadIdx.x] = 1.0;  // @dbl_store
    s[threadIdx.x + 32] = 2.0;
    __syncthreads();
    out[threadIdx.x] = s[2 * threadIdx.x];  // @dbl_load
}

extern "C" __global__ void shared_vec4(float* out) {
    __shared__ float4 s[32];
    s[threadIdx.x] = make_float4(1.0f, 2.0f, 3.0f, 4.0f);  // @vec4_store
    __syncthreads();
    reinterpret_cast<float4*>(out)[threadIdx.x] = s[threadIdx.x];  // @vec4_load
}

extern "C" __global__ void dynamic_shared(float* out) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x * 32] = 1.0f;  // @dyn_store
    __syncthreads();
    out[threadIdx.x] = dyn[threadIdx.x * 32];
}

extern "C" __global__ void parity(float* out) {
    int i = threadIdx.x;
    if (i % 2 == 1) {  // @parity_if
        out[i] = 1.0f;  // @parity_odd
    } else {
        out[i] = 2.0f;  // @parity_even
    }
}

extern "C" __global__ void by_warp(float* out) {
    int i = threadIdx.x;
    if ((i / 32) % 2 == 1) {  // @warp_if
        out[i] = 1.0f;
    } else {
        out[i] = 2.0f;
    }
}

extern "C" __global__ void ragged_loop(float* out, const float* x) {
    int lane = threadIdx.x;
    float acc = 0.0f;
    for (int k = 0; k <= lane % 4; ++k) {  // @loop_for
        acc += x[k * 32 + lane];  // @loop_load
    }
    out[lane] = acc;
}

extern "C" __global__ void atomic_one(float* sum) {
    atomicAdd(&sum[0], 1.0f);  // @atomic_one
}

extern "C" __global__ void atomic_many(int* counts) {
    atomicAdd(&counts[threadIdx.x], 1);  // @atomic_many
}

extern "C" __global__ void atomic_shared(int* out) {
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    atomicAdd(&count, 1);  // @atomic_shared
    __syncthreads();
    if (threadIdx.x == 0) out[0] = count;
}
"""

LINES = {}
for _n, _text in enumerate(SRC.splitlines(), 1):
    if "// @" in _text:
        LINES[_text.split("// @", 1)[1].split()[0]] = _n


def kernel(name):
    return CudaKernel(SRC, name)


def analyze(name, *args, **kwargs):
    return kt.analyze_kernel(kernel(name), *args, **kwargs)


def line(analysis, marker):
    entry = analysis.line(LINES[marker])
    assert entry is not None, f"no figures on line {LINES[marker]} (@{marker}): {analysis.lines}"
    return entry.metrics


def subset(metrics, **expected):
    return {k: metrics[k] for k in expected}


# ------------------------------------------------------------------ global memory


def test_coalesced_copy_four_sectors_per_request():
    x = np.arange(1024, dtype=np.float32)
    out = np.zeros_like(x)
    a = analyze("copy", out, x, np.int32(1024), grid=4, block=256)
    np.testing.assert_array_equal(out, x)
    expected = dict(
        global_load_requests=32,
        global_load_sectors=128,
        global_load_ideal_sectors=128,
        global_store_requests=32,
        global_store_sectors=128,
        global_store_ideal_sectors=128,
    )
    assert subset(a.totals, **expected) == expected
    assert subset(line(a, "copy"), **expected) == expected
    assert a.totals["divergent_branches"] == 0
    assert a.totals["active_lanes_avg"] == 32.0
    assert a.kernel == "copy" and a.grid == (4, 1, 1) and a.block == (256, 1, 1) and a.arch == "sm_90"


def test_partial_last_warp():
    # 100 threads of a 128-thread block: warps of 32, 32, 32 and 4 lanes
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    a = analyze("copy", out, x, np.int32(100), grid=1, block=128)
    m = line(a, "copy")
    assert (m["global_load_requests"], m["global_load_sectors"], m["global_load_ideal_sectors"]) == (4, 13, 13)
    assert m["active_lanes_avg"] == (32 * 3 + 4) / 4
    # the last warp's `if` goes both ways (4 lanes in, 28 out)
    assert line(a, "copy_if")["divergent_branches"] == 1
    assert a.totals["divergent_branches"] == 1


def test_offset_read_five_sectors():
    x = np.arange(1025, dtype=np.float32)
    out = np.zeros(1024, dtype=np.float32)
    a = analyze("offset_read", out, x, np.int32(1024), grid=4, block=256)
    m = line(a, "offset")
    assert (m["global_load_requests"], m["global_load_sectors"], m["global_load_ideal_sectors"]) == (32, 160, 128)
    assert (m["global_store_sectors"], m["global_store_ideal_sectors"]) == (128, 128)


def test_view_counts_from_the_allocation():
    # a view starting one element into its array: sectors count from the array's first byte
    base = np.arange(1025, dtype=np.float32)
    out = np.zeros(1024, dtype=np.float32)
    a = analyze("copy", out, base[1:], np.int32(1024), grid=4, block=256)
    m = line(a, "copy")
    assert (m["global_load_sectors"], m["global_load_ideal_sectors"]) == (160, 128)
    np.testing.assert_array_equal(out, base[1:])


def test_every_third_double():
    x = np.arange(3 * 64, dtype=np.float64)
    out = np.zeros(64)
    a = analyze("stride3", out, x, grid=2, block=32)
    m = line(a, "stride3")
    assert (m["global_load_requests"], m["global_load_sectors"], m["global_load_ideal_sectors"]) == (2, 48, 16)
    np.testing.assert_array_equal(out, x[::3])


def test_array_of_structs_against_structure_of_arrays():
    n = 256
    p = np.random.default_rng(0).random((n, 3), dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    aos_kernel = kernel("aos")
    # the AoS read: 3 loads per warp (8 warps), each lane 12 bytes apart: 12 sectors a load, 4 ideal
    a = kt.analyze_kernel(aos_kernel, out, p.reshape(-1), grid=1, block=n)
    m = line(a, "aos")
    assert (m["global_load_requests"], m["global_load_sectors"], m["global_load_ideal_sectors"]) == (24, 288, 96)
    np.testing.assert_allclose(out, p[:, 0] + p[:, 1] + p[:, 2], rtol=1e-6)
    s = analyze("soa", out, p[:, 0].copy(), p[:, 1].copy(), p[:, 2].copy(), grid=1, block=n)
    m = line(s, "soa")
    assert (m["global_load_requests"], m["global_load_sectors"], m["global_load_ideal_sectors"]) == (24, 96, 96)


def test_broadcast_global_read_is_one_sector():
    x = np.ones(1, dtype=np.float32)
    out = np.zeros(64, dtype=np.float32)
    a = analyze("broadcast_global", out, x, grid=1, block=64)
    m = line(a, "bcast_global")
    assert (m["global_load_requests"], m["global_load_sectors"], m["global_load_ideal_sectors"]) == (2, 2, 2)


def test_scattered_store_one_sector_per_lane():
    out = np.zeros(8 * 32, dtype=np.float32)
    a = analyze("scatter_store", out, grid=1, block=32)
    m = line(a, "scatter")
    assert (m["global_store_requests"], m["global_store_sectors"], m["global_store_ideal_sectors"]) == (1, 32, 4)


# ------------------------------------------------------------------ shared memory


def test_naive_transpose_32_way_conflicts():
    x = np.arange(1024, dtype=np.float32)
    out = np.zeros_like(x)
    a = analyze("transpose_naive", out, x, grid=1, block=(32, 32))
    np.testing.assert_array_equal(out.reshape(32, 32), x.reshape(32, 32).T)
    load = line(a, "naive_load")
    assert (load["shared_load_requests"], load["shared_load_wavefronts"], load["shared_load_ideal_wavefronts"]) == (
        32,
        1024,
        32,
    )
    assert load["shared_bank_conflicts"] == 992
    store = line(a, "naive_store")
    assert (store["shared_store_requests"], store["shared_store_wavefronts"]) == (32, 32)
    assert store["shared_bank_conflicts"] == 0
    assert a.totals["shared_bank_conflicts"] == 992
    assert line(a, "naive_sync")["barriers"] == 32
    assert a.totals["barriers"] == 32


def test_padded_transpose_no_conflicts():
    x = np.arange(1024, dtype=np.float32)
    out = np.zeros_like(x)
    a = analyze("transpose_padded", out, x, grid=1, block=(32, 32))
    np.testing.assert_array_equal(out.reshape(32, 32), x.reshape(32, 32).T)
    load = line(a, "pad_load")
    assert (load["shared_load_requests"], load["shared_load_wavefronts"], load["shared_load_ideal_wavefronts"]) == (
        32,
        32,
        32,
    )
    assert a.totals["shared_bank_conflicts"] == 0


def test_shared_broadcast_is_one_wavefront():
    out = np.zeros(32, dtype=np.float32)
    a = analyze("shared_broadcast", out, grid=1, block=32)
    load = line(a, "sb_load")
    assert (load["shared_load_requests"], load["shared_load_wavefronts"], load["shared_load_ideal_wavefronts"]) == (
        1,
        1,
        1,
    )
    assert line(a, "sb_store")["shared_store_wavefronts"] == 1


def test_shared_stride_two_floats_two_way_conflict():
    out = np.zeros(32, dtype=np.float32)
    a = analyze("shared_stride2", out, grid=1, block=32)
    load = line(a, "stride2_load")
    # words 0, 2, ..., 62: banks 0, 2, ..., 30 twice each -> 2 wavefronts; 128 bytes -> 1 ideal
    assert (load["shared_load_wavefronts"], load["shared_load_ideal_wavefronts"], load["shared_bank_conflicts"]) == (
        2,
        1,
        1,
    )


def test_shared_doubles_per_half_warp():
    out = np.zeros(32)
    a = analyze("shared_double", out, grid=1, block=32)
    store = line(a, "dbl_store")
    # consecutive doubles: each half-warp covers the 32 banks once -> 2 wavefronts, 2 ideal
    assert (store["shared_store_wavefronts"], store["shared_store_ideal_wavefronts"]) == (2, 2)
    load = line(a, "dbl_load")
    # every other double: a half-warp touches banks 4l, 4l+1 (mod 32) twice -> 2 + 2, ideal 2
    assert (load["shared_load_wavefronts"], load["shared_load_ideal_wavefronts"], load["shared_bank_conflicts"]) == (
        4,
        2,
        2,
    )


def test_shared_16_byte_per_quarter_warp():
    out = np.zeros(32 * 4, dtype=np.float32)
    a = analyze("shared_vec4", out, grid=1, block=32)
    load = line(a, "vec4_load")
    # 8 lanes x 16 bytes = 128 bytes per quarter: 1 wavefront each, 4 in all; 512 bytes -> 4 ideal
    assert (load["shared_load_wavefronts"], load["shared_load_ideal_wavefronts"], load["shared_bank_conflicts"]) == (
        4,
        4,
        0,
    )


def test_dynamic_shared_counts_from_its_start():
    out = np.zeros(32, dtype=np.float32)
    a = analyze("dynamic_shared", out, grid=1, block=32, shared_mem=32 * 32 * 4)
    store = line(a, "dyn_store")
    assert (store["shared_store_wavefronts"], store["shared_store_ideal_wavefronts"]) == (32, 1)
    assert store["shared_bank_conflicts"] == 31


# ------------------------------------------------------------------ divergence


def test_divergence_by_lane_parity():
    out = np.zeros(64, dtype=np.float32)
    a = analyze("parity", out, grid=1, block=64)
    assert line(a, "parity_if")["divergent_branches"] == 2
    assert a.totals["divergent_branches"] == 2
    odd = line(a, "parity_odd")
    assert (odd["global_store_requests"], odd["global_store_sectors"], odd["global_store_ideal_sectors"]) == (2, 8, 4)
    assert odd["active_lanes_avg"] == 16.0
    assert line(a, "parity_even")["active_lanes_avg"] == 16.0
    np.testing.assert_array_equal(out, np.where(np.arange(64) % 2 == 1, 1.0, 2.0))


def test_branch_by_warp_does_not_diverge():
    out = np.zeros(128, dtype=np.float32)
    a = analyze("by_warp", out, grid=1, block=128)
    assert a.totals["divergent_branches"] == 0
    assert a.totals["active_lanes_avg"] == 32.0


def test_loop_kth_execution_grouping():
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(32, dtype=np.float32)
    a = analyze("ragged_loop", out, x, grid=1, block=32)
    m = line(a, "loop_load")
    # iteration k is made by the lanes with lane % 4 >= k: 32, 24, 16, 8 lanes
    assert m["global_load_requests"] == 4
    assert (m["global_load_sectors"], m["global_load_ideal_sectors"]) == (4 + 4 + 4 + 4, 4 + 3 + 2 + 1)
    assert m["active_lanes_avg"] == (32 + 24 + 16 + 8) / 4
    # the loop's exit test goes both ways after iterations 1, 2 and 3
    assert a.totals["divergent_branches"] == 3
    assert line(a, "loop_for")["divergent_branches"] == 3
    expected = np.array([sum(x[k * 32 + lane] for k in range(lane % 4 + 1)) for lane in range(32)], np.float32)
    np.testing.assert_allclose(out, expected)


# ------------------------------------------------------------------ atomics


def test_atomics_on_one_address():
    s = np.zeros(1, dtype=np.float32)
    a = analyze("atomic_one", s, grid=2, block=64)
    m = line(a, "atomic_one")
    assert (m["atomic_requests"], m["atomic_same_address_max"]) == (4, 32)
    assert s[0] == 128
    assert a.totals["global_load_requests"] == 0 and a.totals["global_store_requests"] == 0


def test_atomics_on_distinct_addresses():
    c = np.zeros(64, dtype=np.int32)
    a = analyze("atomic_many", c, grid=1, block=64)
    assert subset(line(a, "atomic_many"), atomic_requests=2, atomic_same_address_max=1) == {
        "atomic_requests": 2,
        "atomic_same_address_max": 1,
    }


def test_shared_atomics():
    out = np.zeros(1, dtype=np.int32)
    a = analyze("atomic_shared", out, grid=1, block=64)
    m = line(a, "atomic_shared")
    assert (m["atomic_requests"], m["atomic_same_address_max"]) == (2, 32)
    assert out[0] == 64
    assert a.totals["barriers"] == 4


# ------------------------------------------------------------------ occupancy


@pytest.mark.parametrize(
    ("arch", "threads", "registers", "shared", "expected", "limiter"),
    [
        ("sm_90", 256, 32, 0, 1.0, "none"),
        # 32-thread blocks: 32 blocks x 1 warp of 64
        ("sm_90", 32, 16, 0, 0.5, "blocks"),
        # sm_86: 48 warps, a 1024-thread block is 32 of them, a second does not fit
        ("sm_86", 1024, 16, 0, 32 / 48, "threads"),
        # 128 registers: 4096 per warp, 4 warps per sub-partition, 16 per SM: 2 blocks of 8 warps
        ("sm_90", 256, 128, 0, 16 / 64, "registers"),
        # 100 KiB + 1 KiB reserved per block: 2 blocks in 228 KiB, 16 warps of 64
        ("sm_90", 256, 32, 100 * 1024, 16 / 64, "shared memory"),
        # sm_70 reserves nothing: 48 KiB blocks, 2 in 96 KiB
        ("sm_70", 256, 32, 48 * 1024, 16 / 64, "shared memory"),
        # sm_75: 32 warps, 16 blocks
        ("sm_75", 64, 32, 0, 1.0, "none"),
        ("sm_89", 32, 16, 0, 24 / 48, "blocks"),
        ("sm_80", 128, 255, 0, 8 / 64, "registers"),
    ],
)
def test_occupancy_limits(arch, threads, registers, shared, expected, limiter):
    ratio, found, _ = _analysis.occupancy(arch, threads, registers, shared)
    assert ratio == pytest.approx(expected)
    assert found == limiter


@pytest.mark.nosan  # nvcc's own tools crash with AddressSanitizer's runtime preloaded (make test-asan)
def test_occupancy_from_nvcc():
    if shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"):
        x = np.arange(64, dtype=np.float32)
        a = analyze("copy", np.zeros_like(x), x, np.int32(64), grid=1, block=64)
        assert a.totals["occupancy"] is None and a.notes
        return
    x = np.arange(64, dtype=np.float32)
    a = analyze("copy", np.zeros_like(x), x, np.int32(64), grid=1, block=64)
    assert isinstance(a.totals["registers_per_thread"], int) and a.totals["registers_per_thread"] > 0
    assert a.totals["local_bytes_per_thread"] == 0 and a.totals["static_shared_bytes"] == 0
    # 64-thread blocks: 32 blocks x 2 warps = 64 warps on sm_90
    assert (a.totals["occupancy"], a.totals["occupancy_limiter"]) == (1.0, "none")
    t = kt.analyze_kernel(kernel("transpose_padded"), np.zeros(1024, np.float32), np.zeros(1024, np.float32),
                          grid=1, block=(32, 32))  # fmt: skip
    assert t.totals["static_shared_bytes"] == 32 * 33 * 4
    d = analyze("dynamic_shared", np.zeros(32, np.float32), grid=1, block=32, shared_mem=100 * 1024, arch="sm_80")
    # 100 KiB + 1 KiB per block: 1 block of 1 warp in 164 KiB
    assert (d.totals["occupancy"], d.totals["occupancy_limiter"]) == (1 / 64, "shared memory")


# ------------------------------------------------------------------ API


def test_results_equal_a_plain_launch():
    x = np.arange(1024, dtype=np.float32)
    plain = np.zeros(1024, dtype=np.float32)
    analysed = np.zeros(1024, dtype=np.float32)
    kt.emulate_cuda_kernel(kernel("transpose_naive"), plain, x, grid=1, block=(32, 32))
    analyze("transpose_naive", analysed, x, grid=1, block=(32, 32))
    np.testing.assert_array_equal(plain, analysed)


def test_memcheck_stays_on():
    x = np.arange(10, dtype=np.float32)
    out = np.zeros(32, dtype=np.float32)
    with pytest.raises(kt.MemcheckError):
        analyze("offset_read", out, x, np.int32(32), grid=1, block=32)


def test_analyzed_launches_collects_every_launch():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    k = kernel("copy")
    with kt.analyzed_launches(arch="sm_80") as found:
        kt.emulate_cuda_kernel(k, out, x, np.int32(64), grid=1, block=64)
        kt.emulate_cuda_kernel(k, out, x, np.int32(32), grid=1, block=64)
    assert [a.kernel for a in found] == ["copy", "copy"]
    assert found[0].arch == "sm_80"
    assert found[0].totals["global_load_sectors"] == 8 and found[1].totals["global_load_sectors"] == 4
    # outside the block nothing is analysed
    kt.emulate_cuda_kernel(k, out, x, np.int32(64), grid=1, block=64)
    assert len(found) == 2


FAKE_CHILD = """
import numpy as np
from cunumpy import kernel_testing as kt
import cupy as cp
from cunumpy.kernels import CudaKernel
k = CudaKernel(SRC, "copy")
x = cp.arange(64, dtype=cp.float32)
out = cp.zeros(64, dtype=cp.float32)
with kt.analyzed_launches() as found:
    k(out, x, np.int32(64), grid=(1,), block=(64,))
assert len(found) == 1, found
assert found[0].totals["global_store_sectors"] == 8, found[0].totals
assert (kt.host_buffer(out) == np.arange(64, dtype=np.float32)).all()
print("OK")
"""


def test_analyzed_launches_under_the_fake_cupy():
    # the automatic emulation of a launch on the fake CuPy is analysed too
    done = kt.run_in_fake_cupy_subprocess(f"SRC = {SRC!r}\n" + FAKE_CHILD, timeout=600)
    assert "OK" in done.stdout


def test_environment_variable(monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_ANALYZE", "sm_86")
    before = len(_analysis.session_analyses)
    x = np.arange(64, dtype=np.float32)
    kt.emulate_cuda_kernel(kernel("copy"), np.zeros_like(x), x, np.int32(64), grid=1, block=64)
    assert len(_analysis.session_analyses) == before + 1
    assert _analysis.session_analyses[-1].arch == "sm_86"
    del _analysis.session_analyses[before:]
    monkeypatch.setenv("CUNUMPY_EMULATION_ANALYZE", "sm_12")
    with pytest.raises(ValueError, match="CUNUMPY_EMULATION_ANALYZE"):
        kt.emulate_cuda_kernel(kernel("copy"), np.zeros_like(x), x, np.int32(64), grid=1, block=64)


def test_bad_arch():
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(ValueError, match="arch"):
        analyze("copy", np.zeros_like(x), x, np.int32(64), grid=1, block=64, arch="sm_99")
    with pytest.raises(TypeError, match="arch"):
        analyze("copy", np.zeros_like(x), x, np.int32(64), grid=1, block=64, arch=90)
    with pytest.raises(ValueError, match="arch"), kt.analyzed_launches(arch="volta"):
        pass


def test_to_dict_text_html(tmp_path):
    x = np.arange(1024, dtype=np.float32)
    a = analyze("transpose_naive", np.zeros_like(x), x, grid=1, block=(32, 32))
    d = a.to_dict()
    json.dumps(d)
    assert d["kernel"] == "transpose_naive" and d["totals"]["shared_bank_conflicts"] == 992
    assert any(e["line"] == LINES["naive_load"] and "tile[threadIdx.x][threadIdx.y]" in e["text"] for e in d["lines"])
    text = a.to_text()
    first = text.splitlines()[2]
    assert "tile[threadIdx.x][threadIdx.y]" in first  # the worst line first
    page = a.to_html(tmp_path / "a.html").read_text()
    assert "<!DOCTYPE html>" in page and "tile[threadIdx.x][threadIdx.y]" in page and "rgba(" in page


PLUGIN_TEST = '''
import numpy as np
from cunumpy import kernel_testing as kt
from cunumpy.kernels import CudaKernel

SRC = r"""
extern "C" __global__ void strided(float* out, const float* x) {
    int i = threadIdx.x;
    out[i] = x[4 * i];
}
"""


def test_strided():
    x = np.arange(256, dtype=np.float32)
    out = np.zeros(64, dtype=np.float32)
    kt.emulate_cuda_kernel(CudaKernel(SRC, "strided"), out, x, grid=1, block=64)
    assert out[1] == 4
'''


def test_pytest_plugin_table_and_json(tmp_path):
    import subprocess
    import sys

    (tmp_path / "test_strided.py").write_text(PLUGIN_TEST)
    report = tmp_path / "analysis.json"
    env = {k: v for k, v in os.environ.items() if k not in ("CUNUMPY_EMULATION_ANALYZE", "PYTEST_XDIST_WORKER")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "test_strided.py",
         f"--cunumpy-analysis={report}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cunumpy kernel analysis" in done.stdout and "out[i] = x[4 * i];" in done.stdout
    data = json.loads(report.read_text())
    assert data[0]["kernel"] == "strided"
    assert (data[0]["totals"]["global_load_sectors"], data[0]["totals"]["global_load_ideal_sectors"]) == (32, 8)
