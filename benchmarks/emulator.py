"""The CPU emulator of CUDA kernels: its runtime's context switch, and kernels end to end.

Figures, each against a baseline measured in the same run (the machine is shared: run it
when it is quiet, and read the ratios, not the absolute times):
- the fiber context switch against a ucontext switch (target: at most 10 ns, at least 50x
  faster), from cunumpy._core.emu_switch_benchmark;
- an elementwise kernel (y[i] = a*x[i] + y[i], 4M doubles) against the NumPy expression
  a*x + y (target: at most 3x NumPy's time);
- a 256-thread block sum with cunumpy/reduce.cuh over 4M doubles against numpy.sum, and the
  cost per CUDA thread per collective (one worker, thread CPU time), also for barriers alone
  and shuffles alone;
- parallel blocks: the block sum with 2 workers against 1 (target: at least 1.7x);
- the memory checks: axpy and the block sum with memcheck (always on) against the same launch
  with memcheck=False, the explicit performance option (target: at most 1.3x), and with
  sanitize=racecheck / initcheck / both (target: at most 30x); one worker, CPU time
  (sanitized launches run their blocks on one worker).
`--only checks` runs the last part alone.
The kernel figures are measured twice: through the C runtime alone (_core.emu_launch on a
library compiled here against the prelude) and end to end through
kernel_testing.emulate_cuda_kernel (when that layer is present). Exit status 1 when a target
is missed.
"""

import os

# Idle BLAS threads spin on small machines and steal the CPU being measured.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import ctypes
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

SWITCH_TARGET_NS = 10.0
SWITCH_TARGET_RATIO = 50.0


def switch_benchmark() -> list[str]:
    """The fiber switch against swapcontext, measured alike in one call: 7 interleaved rounds of
    ping-pong runs of each, thread CPU time, the best round of each side."""
    from cunumpy import _core

    fiber_ns, uc_ns = _core.emu_switch_benchmark(2_000_000)
    ratio = uc_ns / fiber_ns
    print(f"context switch ({_core.EMU_CONTEXT_SWITCH}): fiber {fiber_ns:.1f} ns, ucontext {uc_ns:.1f} ns, "
          f"{ratio:.0f}x faster (target <= {SWITCH_TARGET_NS:g} ns and >= {SWITCH_TARGET_RATIO:g}x)")
    failures = []
    if fiber_ns > SWITCH_TARGET_NS:
        failures.append(f"fiber switch {fiber_ns:.1f} ns > {SWITCH_TARGET_NS:g} ns")
    if ratio < SWITCH_TARGET_RATIO:
        failures.append(f"fiber switch only {ratio:.0f}x faster than ucontext")
    return failures

# ---------------------------------------------------------------------------------------------
# The C runtime alone: the same kernels compiled here against the prelude and launched with
# cunumpy._core.emu_launch, so the Python layer's marshalling is not in the figures.

RUNTIME_SOURCE = r"""
#include "cunumpy_emu/prelude.h"
#include <cunumpy/index.cuh>
#include <cunumpy/reduce.cuh>

extern "C" __global__ void axpy(double a, const double *x, double *y, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    y[i] = a * x[i] + y[i];
}
CUNUMPY_EMU_EXPORT_KERNEL(axpy, axpy)

extern "C" __global__ void block_sum(const double *x, double *out, long long n)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    cunumpy_block_sum_to(out, i < n ? x[i] : 0.0);
}
CUNUMPY_EMU_EXPORT_KERNEL(block_sum, block_sum)

// One collective kind alone, `reps` times per thread.
extern "C" __global__ void barriers(int reps)
{
    for (int r = 0; r < reps; ++r)
        __syncthreads();
}
CUNUMPY_EMU_EXPORT_KERNEL(barriers, barriers)

extern "C" __global__ void shuffles(int reps, double *out)
{
    double v = threadIdx.x;
    for (int r = 0; r < reps; ++r)
        v += __shfl_xor_sync(0xffffffffu, v, 1 << (r % 5));
    if (v < 0.0)
        out[0] = v;
}
CUNUMPY_EMU_EXPORT_KERNEL(shuffles, shuffles)
"""


class _RuntimeKernel:
    """One kernel of the library: its entry addresses and a parameter table kept alive here."""

    def __init__(self, lib, name, *values):
        self.keep = [v if isinstance(v, ctypes._SimpleCData) else ctypes.c_void_p(v.ctypes.data) for v in values]
        self.params = (ctypes.c_void_p * len(self.keep))(*[ctypes.addressof(v) for v in self.keep])
        self.entries = [ctypes.cast(getattr(lib, f), ctypes.c_void_p).value
                        for f in ("cunumpy_emu_bind", f"cunumpy_emu_thread_{name}", f"cunumpy_emu_block_{name}")]
        self.name = name

    def __call__(self, grid, block, **kw):
        from cunumpy import _core

        _core.emu_launch(*self.entries, grid, block, self.params, kernel_name=self.name, **kw)


def runtime_benchmarks(tmp) -> list[str]:
    import cunumpy
    import cunumpy.cuda

    cxx = shutil.which(os.environ.get("CXX") or "c++")
    src, lib_path = os.path.join(tmp, "bench.cpp"), os.path.join(tmp, "bench.so")
    with open(src, "w") as f:
        f.write(RUNTIME_SOURCE)
    prelude = os.path.join(os.path.dirname(cunumpy.__file__), "_emulation", "include")
    subprocess.run([cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-Wno-unknown-pragmas", "-I", prelude, "-I",
                    cunumpy.cuda.cuda_include_dir(), src, "-o", lib_path], check=True)
    lib = ctypes.CDLL(lib_path)
    failures = []
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N_ELEMENTS)
    y = rng.standard_normal(N_ELEMENTS)
    a = 1.5
    axpy = _RuntimeKernel(lib, "axpy", ctypes.c_double(a), x, y, ctypes.c_longlong(N_ELEMENTS))
    grid = ((N_ELEMENTS + 255) // 256,)
    want = a * x + y
    axpy(grid, (256,))
    assert np.allclose(y, want)
    t_emu = _best(lambda: axpy(grid, (256,)))
    t_np = _best(lambda: a * x + y)
    ratio = t_emu / t_np
    print(f"[runtime] axpy, 4M doubles, loop mode: {t_emu * 1e3:.2f} ms, NumPy {t_np * 1e3:.2f} ms, "
          f"ratio {ratio:.2f} (target <= {AXPY_TARGET})")
    if ratio > AXPY_TARGET:
        failures.append(f"[runtime] axpy ratio {ratio:.2f} > {AXPY_TARGET}")

    xs = (np.arange(N_ELEMENTS) % 1000).astype(np.float64)  # exact sums in any order
    out = np.zeros(1)
    block_sum = _RuntimeKernel(lib, "block_sum", xs, out, ctypes.c_longlong(N_ELEMENTS))
    sum_grid = ((N_ELEMENTS + 255) // 256,)

    def run_sum(workers=0):
        out[0] = 0.0
        block_sum(sum_grid, (256,), fibers=True, workers=workers)

    run_sum()
    assert out[0] == xs.sum()
    t_sum = _best(run_sum, rounds=3)
    t_np_sum = _best(lambda: np.sum(xs))
    print(f"[runtime] block sum (reduce.cuh, 256 threads), 4M doubles, fibers, all workers: {t_sum * 1e3:.1f} ms, "
          f"numpy.sum {t_np_sum * 1e3:.2f} ms, ratio {t_sum / t_np_sum:.0f}")
    # Cost per CUDA thread per collective: one worker (the calling thread runs every block),
    # timed in this thread's CPU time, so other processes on the machine do not inflate it.
    t_sum_cpu = _best(lambda: run_sum(1), rounds=3, clock=time.thread_time)
    print(f"[runtime] block sum, 1 worker, CPU time: {t_sum_cpu * 1e3:.1f} ms, "
          f"{t_sum_cpu / (N_ELEMENTS * (BLOCK_SUM_BARRIERS + BLOCK_SUM_SHUFFLES)) * 1e9:.1f} ns per thread per "
          f"collective ({BLOCK_SUM_BARRIERS} barriers and {BLOCK_SUM_SHUFFLES} shuffles per thread)")
    reps = ctypes.c_int(COLLECTIVE_REPS)
    barriers = _RuntimeKernel(lib, "barriers", reps)
    shuffles = _RuntimeKernel(lib, "shuffles", reps, out)
    for _name, kernel, what in (("barriers", barriers, "__syncthreads"), ("shuffles", shuffles, "__shfl_xor_sync")):
        t = _best(lambda: kernel(sum_grid, (256,), fibers=True, workers=1), rounds=3, clock=time.thread_time)  # noqa: B023 - called within the same iteration
        print(f"[runtime] {what} alone, {COLLECTIVE_REPS} per thread, 256-thread blocks, 4M threads, 1 worker, "
              f"CPU time: {t / (N_ELEMENTS * COLLECTIVE_REPS) * 1e9:.1f} ns per thread per {what}")
    t1 = _best(lambda: run_sum(1), rounds=3)
    t2 = _best(lambda: run_sum(2), rounds=3)
    speedup = t1 / t2
    print(f"[runtime] parallel blocks (block sum): 1 worker {t1 * 1e3:.1f} ms, 2 workers {t2 * 1e3:.1f} ms, "
          f"speed-up {speedup:.2f} (target >= {SPEEDUP_TARGET}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs)")
    if speedup < SPEEDUP_TARGET:
        failures.append(f"[runtime] 2-worker speed-up {speedup:.2f} < {SPEEDUP_TARGET}")
    return failures


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
COLLECTIVE_REPS = 8


def _best(fn, rounds=5, clock=time.perf_counter):
    """Best time of `fn` over `rounds` calls on `clock` (time.thread_time: CPU time of this
    thread, for launches run by this thread alone)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
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


MEMCHECK_TARGET = 1.3
SANITIZE_TARGET = 30.0


def checks_benchmarks() -> list[str]:
    """The cost of the memory checks, each against the unchecked launch (memcheck=False) in
    the same run. One worker (sanitized launches run on one anyway), so every launch runs on
    this thread and is timed in its CPU time: other processes on the machine do not count."""
    from cunumpy import kernel_testing as kt
    from cunumpy.kernels import CudaKernel

    failures = []
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N_ELEMENTS)
    y = rng.standard_normal(N_ELEMENTS)
    out = np.zeros(1)
    axpy = CudaKernel(LAUNCH_SOURCE, "axpy", block_size=256)
    block_sum = CudaKernel(BLOCK_SUM_SOURCE, "block_sum", block_size=256)
    cases = (
        ("axpy, 4M doubles", lambda **kw: kt.emulate_cuda_kernel(axpy, 1.5, x, y, N_ELEMENTS, **kw)),
        ("block sum, 4M doubles", lambda **kw: kt.emulate_cuda_kernel(block_sum, x, out, N_ELEMENTS, **kw)),
    )
    variants = (
        ("memcheck", {}, MEMCHECK_TARGET),
        ("racecheck", {"sanitize": ("racecheck",)}, SANITIZE_TARGET),
        ("initcheck", {"sanitize": ("initcheck",)}, SANITIZE_TARGET),
        ("racecheck+initcheck", {"sanitize": ("racecheck", "initcheck")}, SANITIZE_TARGET),
    )
    previous = os.environ.get("CUNUMPY_EMULATION_THREADS")
    os.environ["CUNUMPY_EMULATION_THREADS"] = "1"
    try:
        for name, launch in cases:
            for _, settings, _ in variants:
                launch(**settings)  # compile each variant before timing
            launch(memcheck=False)
            for label, settings, target in variants:
                rounds = 5 if label == "memcheck" else 2
                plain, checked = float("inf"), float("inf")
                for _ in range(rounds):  # interleaved with the unchecked launch
                    plain = min(plain, _best(lambda: launch(memcheck=False), rounds=1, clock=time.thread_time))  # noqa: B023 - called within the same iteration
                    checked = min(checked, _best(lambda: launch(**settings), rounds=1, clock=time.thread_time))  # noqa: B023 - called within the same iteration
                ratio = checked / plain
                print(f"[checks] {name}: {label} {checked * 1e3:.1f} ms, unchecked {plain * 1e3:.1f} ms "
                      f"(CPU time, one worker), ratio {ratio:.2f} (target <= {target:g})")
                if ratio > target:
                    failures.append(f"[checks] {name}: {label} ratio {ratio:.2f} > {target:g}")
    finally:
        if previous is None:
            os.environ.pop("CUNUMPY_EMULATION_THREADS", None)
        else:
            os.environ["CUNUMPY_EMULATION_THREADS"] = previous
    print(f"[checks] load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return failures


def main() -> int:
    from cunumpy import kernel_testing

    if sys.argv[1:] == ["--only", "checks"]:
        failures = checks_benchmarks()
        for failure in failures:
            print("MISSED:", failure)
        return 1 if failures else 0

    failures = switch_benchmark()
    compiler = getattr(kernel_testing, "emulation_compiler", None)
    have_compiler = compiler() is not None if compiler else shutil.which(os.environ.get("CXX") or "c++") is not None
    if not have_compiler:
        print("no C++ compiler: the CPU emulation cannot run")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        failures += runtime_benchmarks(tmp)
    if hasattr(kernel_testing, "emulate_cuda_kernel"):
        failures += launch_benchmarks()
        failures += checks_benchmarks()
    else:
        print("kernel_testing.emulate_cuda_kernel is not in this build: end-to-end figures skipped")
    for failure in failures:
        print("MISSED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
