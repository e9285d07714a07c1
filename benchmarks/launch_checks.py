"""Per-call cost of CudaKernel's argument checks and packing in every launch form, without a GPU.

Two kernels: one with 29 parameters (20 pointers, 2 array views, 7 scalars) and one with a
single pointer. Each is called with zero-size arrays of the fake CuPy in every launch form
(inferred size, n_threads=, grid=/block=, shared_mem=, stream=, all of them) and through
prepare_args: every argument is checked and packed, the launch shape is computed and
validated against the device limits, and nothing is launched. The baseline is an empty
Python function called with the same arguments, measured in the same run, interleaved.
Targets: at most 1.5 microseconds per call with 29 arguments, 0.5 with one.

    .venv/bin/python benchmarks/launch_checks.py [--number N] [--rounds R]
"""

import os

os.environ["CUNUMPY_FAKE_CUPY"] = "1"  # before cunumpy is imported
# Idle BLAS threads spin on small machines and steal the CPU being measured.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import statistics
import sys
import timeit

import numpy as np

import cunumpy as xp  # noqa: F401
from cunumpy.kernels import CudaKernel

N_POINTERS, N_VIEWS, N_SCALARS = 20, 2, 7
TARGETS_US = {29: 1.5, 1: 0.5}

SOURCE = (
    'extern "C" __global__ void many('
    + ", ".join(f"double* p{i}" for i in range(N_POINTERS))
    + ", Array2D<double> v, Array3D<float> w, int a, long long b, float c, double d, unsigned e, bool f,"
    " size_t g) {}"
)
ONE = 'extern "C" __global__ void one(double* x) {}'


def empty29(
    a0,
    a1,
    a2,
    a3,
    a4,
    a5,
    a6,
    a7,
    a8,
    a9,
    a10,
    a11,
    a12,
    a13,
    a14,
    a15,
    a16,
    a17,
    a18,
    a19,
    a20,
    a21,
    a22,
    a23,
    a24,
    a25,
    a26,
    a27,
    a28,
    *,
    n_threads=None,
    grid=None,
    block=None,
    shared_mem=0,
    stream=None,
):
    pass


def empty1(a0, *, n_threads=None, grid=None, block=None, shared_mem=0, stream=None):
    pass


def interleaved(fns, number, rounds):
    """Best and median time per call of each function, measured in alternating rounds so that
    a busy machine slows all of them alike."""
    times = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            times[k].append(timeit.timeit(fn, number=number) / number)
    return [(min(t), statistics.median(t)) for t in times]


def forms(kernel, args, stream):
    """(label, keywords) of every launch form; prepare_args is the label None."""
    n = 0
    return [
        ("inferred size", {}),
        ("n_threads=", {"n_threads": n}),
        ("n_threads=(n, 1)", {"n_threads": (n, 1)}),
        ("grid=, block=", {"grid": (n,), "block": (128,)}),
        ("shared_mem=", {"n_threads": n, "shared_mem": 1024}),
        ("stream=", {"stream": stream}),
        ("all keywords", {"grid": n, "block": 64, "shared_mem": 256, "stream": stream}),
        ("prepare_args", None),
    ]


def call(fn, args, kw):
    return (lambda: fn(*args)) if not kw else (lambda: fn(*args, **kw))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000, help="calls per timing")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (best and median)")
    opts = parser.parse_args(argv)
    cupy = sys.modules["cupy"]
    assert getattr(cupy, "__cunumpy_fake__", False), "the fake CuPy is not installed"
    stream = cupy.cuda.Stream()

    many = CudaKernel(SOURCE, "many")
    pointers = [cupy.zeros(0) for _ in range(N_POINTERS)]
    views = [cupy.zeros((0, 3)), cupy.zeros((0, 2, 2), dtype=np.float32)]
    scalars = [1, 2, np.float32(1.5), 2.5, 3, True, 4]
    args29 = (*pointers, *views, *scalars)
    assert len(args29) == N_POINTERS + N_VIEWS + N_SCALARS == 29
    one = CudaKernel(ONE, "one")
    args1 = (cupy.zeros(0),)

    try:
        load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        load = "unknown"
    print(f"load average (1, 5, 15 min): {load}")
    verdicts = []
    for n_args, kernel, args, empty in ((29, many, args29, empty29), (1, one, args1, empty1)):
        cases = forms(kernel, args, stream)
        fns, bases = [], []
        for _label, kw in cases:
            fn = call(kernel.prepare_args, args, {}) if kw is None else call(kernel, args, kw)
            fn()  # the first call of each form validates it on the device (the Python path)
            fns.append(fn)
            bases.append(call(empty, args, kw or {}))
        assert kernel(*args) is None  # a zero-size launch: all checks, nothing launched
        # Each form next to an empty function called with the same arguments and keywords.
        results = interleaved([f for pair in zip(fns, bases) for f in pair], opts.number, opts.rounds)
        target = TARGETS_US[n_args]
        print(f"\n{n_args} argument{'s' if n_args > 1 else ''} (target <= {target} us per call):")
        print(f"  {'form':<20}{'best us':>9}{'median us':>11}{'empty fn us':>13}{'ratio':>8}")
        for k, (label, _) in enumerate(cases):
            (best, median), (base_best, _) = results[2 * k], results[2 * k + 1]
            print(
                f"  {label:<20}{best * 1e6:>9.3f}{median * 1e6:>11.3f}{base_best * 1e6:>13.3f}{best / base_best:>7.1f}x"
            )
            verdicts.append((n_args, label, best * 1e6 <= target, best * 1e6))
    missed = [v for v in verdicts if not v[2]]
    print()
    if missed:
        for n_args, label, _, us in missed:
            print(f"misses the target: {n_args} arguments, {label}: {us:.3f} us")
    else:
        print("every form meets its target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
