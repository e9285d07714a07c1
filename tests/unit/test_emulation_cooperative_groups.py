"""CPU emulation of <cooperative_groups.h> and <cooperative_groups/reduce.h>: block groups,
tiles of every size (full and partial warps), coalesced groups, cg::reduce, and grid
groups (whose sync() is an error); plus a check that the CUDA sources of the emulation
tests of the new headers compile with nvcc for sm_90 where nvcc is installed."""

import os
import shutil
import subprocess

import numpy as np
import pytest
from _emulation_support import requires_compiler

from cunumpy import kernel_testing as kt
from cunumpy.cuda import cuda_include_dir
from cunumpy.kernels import CudaKernel

emulate = kt.emulate_cuda_kernel

SOURCE = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void block_group(unsigned* out) {
    cg::thread_block b = cg::this_thread_block();
    const unsigned rank = b.thread_rank();
    unsigned* o = out + 8 * (blockIdx.x * b.num_threads() + rank);
    o[0] = rank;
    o[1] = b.num_threads();
    o[2] = b.group_index().x;
    o[3] = b.thread_index().x;
    o[4] = b.thread_index().y;
    o[5] = b.group_dim().x;
    o[6] = b.dim_threads().y;
    __shared__ unsigned seen[256];
    seen[rank] = rank;
    b.sync();
    o[7] = seen[b.num_threads() - 1 - rank];
}

template <unsigned N> __global__ void tile_ops(const int* x, int* out) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<N> tile = cg::tiled_partition<N>(block);
    const unsigned t = blockIdx.x * block.num_threads() + block.thread_rank();
    const int v = x[t];
    int* o = out + 14 * t;
    o[0] = tile.thread_rank();
    o[1] = tile.num_threads();
    o[2] = tile.meta_group_rank();
    o[3] = tile.meta_group_size();
    o[4] = tile.shfl(v, (int)(N - 1));
    o[5] = tile.shfl_down(v, 1);
    o[6] = tile.shfl_up(v, 1);
    o[7] = tile.shfl_xor(v, N > 1 ? (int)(N / 2) : 0);
    o[8] = tile.any(v % 7 == 0);
    o[9] = tile.all(v % 2 == 0);
    o[10] = (int)tile.ballot(v % 3 == 0);
    o[11] = cg::reduce(tile, v, cg::plus<int>());
    o[12] = cg::reduce(tile, v, cg::less<int>());
    o[13] = cg::reduce(tile, v, cg::greater<int>());
    tile.sync();
}

// A block of 48 threads: the second warp's tiles of 32 and 16 have 16 threads.
extern "C" __global__ void partial_tiles(const double* x, double* out) {
    cg::thread_block block = cg::this_thread_block();
    const unsigned t = block.thread_rank();
    auto warp = cg::tiled_partition<32>(block);
    auto quarter = cg::tiled_partition<8>(warp);  // a tile of a tile
    double* o = out + 8 * t;
    o[0] = cg::reduce(warp, x[t], cg::plus<double>());
    o[1] = cg::reduce(quarter, x[t], cg::greater<double>());
    o[2] = warp.ballot(x[t] > 0.5);
    o[3] = warp.all(x[t] >= 0.0);
    o[4] = warp.shfl(x[t], 0);
    o[5] = quarter.meta_group_rank();
    o[6] = quarter.thread_rank();
    o[7] = quarter.meta_group_size();
}

extern "C" __global__ void coalesced(const int* x, int* out) {
    const unsigned t = threadIdx.x;
    const int v = x[t];
    int* o = out + 5 * t;
    if (v % 3 == 0) {
        cg::coalesced_group active = cg::coalesced_threads();
        o[0] = active.num_threads();
        o[1] = active.thread_rank();
        o[2] = active.shfl(v, 1);
        o[3] = cg::reduce(active, v, cg::plus<int>());
        o[4] = active.ballot(v % 2 == 0);
    }
}

extern "C" __global__ void grid_info(unsigned long long* out) {
    cg::grid_group grid = cg::this_grid();
    const unsigned long long r = grid.thread_rank();
    out[3 * r] = grid.is_valid();
    out[3 * r + 1] = grid.num_threads();
    out[3 * r + 2] = grid.block_rank();
}

extern "C" __global__ void grid_sync(int* x) {
    x[threadIdx.x] = 1;
    cg::this_grid().sync();
}
"""


def kernel(name):
    return CudaKernel(SOURCE, name)


@requires_compiler
def test_thread_block_group():
    block = (16, 4)
    out = np.zeros((2, 64, 8), np.uint32)
    emulate(kernel("block_group"), out.reshape(-1), grid=2, block=block)
    rank = np.arange(64)
    for b in range(2):
        np.testing.assert_array_equal(out[b, :, 0], rank)
        assert (out[b, :, 1] == 64).all() and (out[b, :, 2] == b).all()
        np.testing.assert_array_equal(out[b, :, 3], rank % 16)
        np.testing.assert_array_equal(out[b, :, 4], rank // 16)
        assert (out[b, :, 5] == 16).all() and (out[b, :, 6] == 4).all()
        np.testing.assert_array_equal(out[b, :, 7], rank[::-1])


def _tile_expected(x, n, block):
    out = np.zeros((x.size, 14), np.int64)
    for t in range(x.size):
        local = t % block
        rank = local % n
        base = t - rank
        tile = x[base : base + n]
        out[t, :4] = rank, n, local // n, -(-block // n)
        out[t, 4] = tile[n - 1]
        out[t, 5] = tile[rank + 1] if rank + 1 < n else x[t]
        out[t, 6] = tile[rank - 1] if rank >= 1 else x[t]
        out[t, 7] = tile[rank ^ (n // 2)] if n > 1 else x[t]
        out[t, 8] = (tile % 7 == 0).any()
        out[t, 9] = (tile % 2 == 0).all()
        out[t, 10] = sum(1 << r for r in range(n) if tile[r] % 3 == 0)
        out[t, 11:] = tile.sum(), tile.min(), tile.max()
    return out.astype(np.int32)  # ballot of 32 lanes wraps like the kernel's int


@requires_compiler
@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
def test_tiles_of_every_size(n):
    block = 64
    rng = np.random.default_rng(n)
    x = rng.integers(-50, 50, 2 * block).astype(np.int32)
    out = np.zeros((x.size, 14), np.int32)
    emulate(CudaKernel(SOURCE, "tile_ops", template_args=(str(n),)), x, out.reshape(-1), grid=2, block=block)
    np.testing.assert_array_equal(out, _tile_expected(x, n, block))


@requires_compiler
def test_tiles_in_a_partial_warp():
    rng = np.random.default_rng(3)
    x = rng.random(48)
    out = np.zeros((48, 8))
    emulate(kernel("partial_tiles"), x, out.reshape(-1), grid=1, block=48)
    for t in range(48):
        warp = x[t - t % 32 : min(t - t % 32 + 32, 48)]
        quarter = x[t - t % 8 : t - t % 8 + 8]
        assert out[t, 0] == pytest.approx(warp.sum(), rel=1e-14)
        assert out[t, 1] == quarter.max()
        assert out[t, 2] == sum(1 << r for r in range(warp.size) if warp[r] > 0.5)
        assert out[t, 3] == 1 and out[t, 4] == warp[0]
        assert out[t, 5:].tolist() == [(t % 32) // 8, t % 8, 4]
    # The partial warp's 16 lanes reduce in rank order: every lane has the same value.
    assert len(set(out[32:, 0])) == 1


@requires_compiler
def test_coalesced_threads_are_the_active_lanes():
    x = np.arange(64, dtype=np.int32)
    out = np.full((64, 5), -1, np.int32)
    emulate(kernel("coalesced"), x, out.reshape(-1), grid=1, block=64)
    for warp in range(2):
        lanes = [t for t in range(32 * warp, 32 * warp + 32) if x[t] % 3 == 0]
        values = x[lanes]
        for r, t in enumerate(lanes):
            assert out[t, :4].tolist() == [len(lanes), r, values[1], values.sum()]
            assert out[t, 4] == sum(1 << k for k, v in enumerate(values) if v % 2 == 0)
    inactive = x % 3 != 0
    assert (out[inactive] == -1).all()


@requires_compiler
def test_grid_group_without_cooperative_launch():
    out = np.zeros((2 * 32, 3), np.uint64)
    emulate(kernel("grid_info"), out.reshape(-1), grid=2, block=32)
    assert (out[:, 0] == 0).all() and (out[:, 1] == 64).all()
    np.testing.assert_array_equal(out[:, 2], np.repeat([0, 1], 32))


@requires_compiler
def test_grid_sync_is_a_clear_error():
    with pytest.raises(RuntimeError, match="cooperative launch") as info:
        emulate(kernel("grid_sync"), np.zeros(8, np.int32), grid=1, block=8)
    assert "grid_sync" in str(info.value)


# ------------------------------------------------------------------ the same sources on nvcc


def _nvcc():
    found = shutil.which("nvcc")
    if found is None and os.path.exists("/usr/local/cuda/bin/nvcc"):
        found = "/usr/local/cuda/bin/nvcc"
    return found


def _sources():
    import test_emulation_complex as tc
    import test_emulation_half as th

    return {
        "cooperative_groups": SOURCE
        + "\ntemplate __global__ void tile_ops<1>(const int*, int*);\n"
        + "".join(f"template __global__ void tile_ops<{n}>(const int*, int*);\n" for n in (2, 4, 8, 16, 32)),
        "fp16": th.SOURCE,
        "cucomplex": tc.CUCOMPLEX_SOURCE,
        "thrust": tc.THRUST_SOURCE,
    }


@pytest.mark.nosan  # nvcc inherits the sanitizer run's LD_PRELOAD of libasan and crashes
@pytest.mark.parametrize("name", ["cooperative_groups", "fp16", "cucomplex", "thrust"])
def test_the_sources_compile_for_the_gpu(name, tmp_path):
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("needs nvcc")
    path = tmp_path / f"{name}.cu"
    path.write_text(_sources()[name])
    done = subprocess.run(
        [
            nvcc,
            "-arch=sm_90",
            "-std=c++17",
            "-c",
            str(path),
            "-o",
            str(tmp_path / f"{name}.o"),
            f"-I{cuda_include_dir()}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout
