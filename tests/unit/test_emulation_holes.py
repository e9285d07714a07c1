"""The emulator's checks without holes: what a kernel gets wrong is reported, and what a GPU
runs is accepted (early exit before a barrier, neighbouring arguments, the shared-histogram
race, grouped racecheck reports, launch shapes, timeouts, warp masks)."""

import numpy as np
import pytest
from _emulation_support import requires_compiler

import cunumpy.kernel_testing as kt
from cunumpy.kernels import CudaKernel

pytestmark = requires_compiler


def run(source, name, *args, **launch):
    return kt.emulate_cuda_kernel(CudaKernel(source, name), *args, **launch)


# ------------------------------------------------------------------ early exit before a barrier

EARLY_EXIT = r"""
extern "C" __global__ void block_sums(const double* x, double* sums, int n) {
    __shared__ double part[128];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;                       // the common early exit
    part[threadIdx.x] = x[i];
    __syncthreads();                          // exited threads count as arrived
    if (threadIdx.x == 0) {
        const int live = min((int)blockDim.x, n - (int)(blockIdx.x * blockDim.x));
        double s = 0.0;
        for (int k = 0; k < live; ++k) s += part[k];
        sums[blockIdx.x] = s;
    }
}
"""


@pytest.mark.parametrize("sanitize", [None, "racecheck"])
def test_threads_that_exit_before_a_barrier_count_as_arrived(sanitize):
    n = 300
    x = np.arange(n, dtype=np.float64)
    sums = np.zeros(3)
    kw = {"sanitize": sanitize} if sanitize else {}
    run(EARLY_EXIT, "block_sums", x, sums, n, grid=3, block=128, **kw)
    np.testing.assert_array_equal(sums, [x[:128].sum(), x[128:256].sum(), x[256:].sum()])


def test_syncthreads_count_after_an_early_exit_counts_the_live_threads():
    src = r"""
    extern "C" __global__ void count(int* out, int n) {
        if ((int)threadIdx.x >= n) return;
        const int c = __syncthreads_count(1);
        if (threadIdx.x == 0) out[0] = c;
    }
    """
    out = np.zeros(1, np.int32)
    run(src, "count", out, 37, grid=1, block=64)
    assert out[0] == 37


def test_threads_alive_at_two_different_barriers_are_divergence():
    src = r"""
    extern "C" __global__ void split(int* x) {
        if (threadIdx.x & 1) { x[threadIdx.x] = 1; __syncthreads(); }
        else { __syncthreads(); x[threadIdx.x] = 2; }
    }
    """
    with pytest.raises(
        RuntimeError, match=r"barrier divergence: .*line 3 .*line 4|barrier divergence: .*line 4 .*line 3"
    ):
        run(src, "split", np.zeros(64, np.int32), grid=1, block=64)


def test_a_thread_waiting_while_another_waits_in_a_warp_operation_is_still_an_error():
    src = r"""
    extern "C" __global__ void stuck(int* x) {
        if (threadIdx.x == 0) __syncthreads();
        else x[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
    }
    """
    with pytest.raises(RuntimeError, match="inconsistent warp operations or barriers"):
        run(src, "stuck", np.zeros(32, np.int32), grid=1, block=32)
