"""The CPU emulator of CUDA kernels (kernel_testing.emulate_cuda_kernel), end to end.

Figures, each against a baseline measured in the same run (the machine is shared: run it
when it is quiet, and read the ratios, not the absolute times):
- an elementwise kernel (y[i] = a*x[i] + y[i], 4M doubles) against the NumPy expression
  a*x + y (target: at most 3x NumPy's time);
- a 256-thread block sum with cunumpy/reduce.cuh over 4M doubles against numpy.sum, with the
  cost per thread per barrier;
- parallel blocks: the block sum with 2 workers against 1 (target: at least 1.7x).
Exit status 1 when a target is missed.
"""

import os

# Idle BLAS threads spin on small machines and steal the CPU being measured.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

# ---------------------------------------------------------------------------------------------
# End-to-end launches through the Python layer (kernel_testing.emulate_cuda_kernel): the
# arguments are marshalled by signature, the library comes from the cache, the C runtime runs
# the blocks. Baselines are the NumPy expressions of the same work, measured in the same run.

# No barrier or warp operation: the loop mode.
LAUNCH_SOURCE = r"""
#include <cunumpy/index.cuh>

extern "C" __global__ void axpy(double a, const double* x, double* y, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    y[i] = a * x[i] + y[i];
}
"""

BLOCK_SUM_SOURCE = r"""
#include <cunumpy/reduce.cuh>

extern "C" __global__ void block_sum(const double* x, double* out, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    cunumpy_block_sum_to(out, i < n ? x[i] : 0.0);
}
"""

N_ELEMENTS = 4 * 1024 * 1024
AXPY_TARGET = 3.0
SPEEDUP_TARGET = 1.7
# Collectives per thread in cunumpy_block_sum (reduce.cuh): 3 __syncthreads and a 5-step
# shuffle butterfly (warp 0 runs a second one).
BLOCK_SUM_BARRIERS = 3
BLOCK_SUM_SHUFFLES = 5


def _best(fn, rounds=5):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def launch_benchmarks() -> list[str]:
    """axpy against NumPy, a reduce.cuh block sum against numpy.sum, 2 workers against 1."""
    from cunumpy import kernel_testing as kt
    from cunumpy.kernels import CudaKernel

    failures = []
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N_ELEMENTS)
    y = rng.standard_normal(N_ELEMENTS)
    a = 1.5

    axpy = CudaKernel(LAUNCH_SOURCE, "axpy", block_size=256)
    kt.compile_for_emulation(axpy)
    check = y.copy()
    kt.emulate_cuda_kernel(axpy, a, x, check, N_ELEMENTS)
    assert np.allclose(check, a * x + y)
    t_emu = _best(lambda: kt.emulate_cuda_kernel(axpy, a, x, y, N_ELEMENTS))
    t_np = _best(lambda: a * x + y)
    ratio = t_emu / t_np
    print(f"axpy, 4M doubles: emulated {t_emu * 1e3:.2f} ms, NumPy {t_np * 1e3:.2f} ms, "
          f"ratio {ratio:.2f} (target <= {AXPY_TARGET})")
    if ratio > AXPY_TARGET:
        failures.append(f"axpy ratio {ratio:.2f} > {AXPY_TARGET}")

    block_sum = CudaKernel(BLOCK_SUM_SOURCE, "block_sum", block_size=256)
    out = np.zeros(1)
    kt.emulate_cuda_kernel(block_sum, x, out, N_ELEMENTS)
    assert np.isclose(out[0], x.sum(), rtol=1e-9, atol=1e-6)

    def run_sum():
        out[0] = 0.0
        kt.emulate_cuda_kernel(block_sum, x, out, N_ELEMENTS)

    t_sum = _best(run_sum, rounds=3)
    t_np_sum = _best(lambda: np.sum(x))
    per_barrier = t_sum / (N_ELEMENTS * BLOCK_SUM_BARRIERS)
    per_collective = t_sum / (N_ELEMENTS * (BLOCK_SUM_BARRIERS + BLOCK_SUM_SHUFFLES))
    print(f"block sum (reduce.cuh, 256 threads), 4M doubles: emulated {t_sum * 1e3:.1f} ms, numpy.sum "
          f"{t_np_sum * 1e3:.2f} ms, ratio {t_sum / t_np_sum:.0f}; {per_barrier * 1e9:.1f} ns per thread per "
          f"barrier ({per_collective * 1e9:.1f} ns per thread per collective, counting the shuffles)")

    timings = {}
    previous = os.environ.get("CUNUMPY_EMULATION_THREADS")
    try:
        for workers in ("1", "2"):
            os.environ["CUNUMPY_EMULATION_THREADS"] = workers
            timings[workers] = _best(run_sum, rounds=3)
    finally:
        if previous is None:
            os.environ.pop("CUNUMPY_EMULATION_THREADS", None)
        else:
            os.environ["CUNUMPY_EMULATION_THREADS"] = previous
    speedup = timings["1"] / timings["2"]
    print(f"parallel blocks (block sum): 1 worker {timings['1'] * 1e3:.1f} ms, 2 workers "
          f"{timings['2'] * 1e3:.1f} ms, speed-up {speedup:.2f} (target >= {SPEEDUP_TARGET}; "
          f"{os.cpu_count()} CPUs, shared with other jobs)")
    if speedup < SPEEDUP_TARGET:
        failures.append(f"2-worker speed-up {speedup:.2f} < {SPEEDUP_TARGET}")
    return failures


def main() -> int:
    from cunumpy.kernel_testing import emulation_compiler

    if emulation_compiler() is None:
        print("no C++ compiler: the CPU emulation cannot run")
        return 1
    failures = launch_benchmarks()
    for failure in failures:
        print("MISSED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
