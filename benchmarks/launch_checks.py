"""Per-call cost of CudaKernel's argument checks and packing, without a GPU.

A kernel with 29 parameters (20 pointers, 2 array views, 7 scalars) is called with
zero-size arrays of the fake CuPy: every argument is checked and packed, the launch shape is
inferred and validated against the device limits, and nothing is launched. The baseline is
an empty Python function called with the same 29 arguments, measured in the same run.
Target: at most 1.5 microseconds per launch.
"""

import os

os.environ["CUNUMPY_FAKE_CUPY"] = "1"  # before cunumpy is imported
# Idle BLAS threads spin on small machines and steal the CPU being measured.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import statistics  # noqa: E402
import sys  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402

import cunumpy as xp  # noqa: E402
from cunumpy.kernels import CudaKernel  # noqa: E402

N_POINTERS, N_VIEWS, N_SCALARS = 20, 2, 7
TARGET_US = 1.5

SOURCE = (
    'extern "C" __global__ void many('
    + ", ".join(f"double* p{i}" for i in range(N_POINTERS))
    + ", Array2D<double> v, Array3D<float> w, int a, long long b, float c, double d, unsigned e, bool f,"
    " size_t g) {}"
)


def empty(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20,
          a21, a22, a23, a24, a25, a26, a27, a28):
    pass


def interleaved(fns, number, rounds=9):
    """Best and median time per call of each function, measured in alternating rounds so that
    a busy machine slows all of them alike."""
    times = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            times[k].append(timeit.timeit(fn, number=number) / number)
    return [(min(t), statistics.median(t)) for t in times]


def main() -> int:
    cupy = sys.modules["cupy"]
    assert getattr(cupy, "__cunumpy_fake__", False), "the fake CuPy is not installed"
    kernel = CudaKernel(SOURCE, "many")
    pointers = [cupy.zeros(0) for _ in range(N_POINTERS)]
    views = [cupy.zeros((0, 3)), cupy.zeros((0, 2, 2), dtype=np.float32)]
    scalars = [1, 2, np.float32(1.5), 2.5, 3, True, 4]
    args = (*pointers, *views, *scalars)
    assert len(args) == N_POINTERS + N_VIEWS + N_SCALARS == 29
    assert kernel(*args) is None  # a zero-size launch: all checks, nothing launched

    number = 20_000
    (launch_best, launch_median), (pack_best, _), (base_best, base_median) = interleaved(
        [lambda: kernel(*args), lambda: kernel._plan.pack(*args), lambda: empty(*args)], number
    )

    us = 1e6
    print(f"CudaKernel zero-size launch, 29 arguments: {launch_best * us:.3f} us "
          f"(median {launch_median * us:.3f} us)")
    print(f"  of which checking + packing (LaunchPlan.pack): {pack_best * us:.3f} us")
    print(f"empty Python function, 29 arguments:        {base_best * us:.3f} us "
          f"(median {base_median * us:.3f} us)")
    print(f"ratio launch / empty function: {launch_best / base_best:.1f}x")
    print(f"per argument: launch {launch_best * us / 29 * 1000:.1f} ns, "
          f"checks beyond the empty call {(launch_best - base_best) * us / 29 * 1000:.1f} ns")
    verdict = "meets" if launch_best * us <= TARGET_US else "misses"
    print(f"target <= {TARGET_US} us per launch: {verdict} it ({launch_best * us:.3f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
