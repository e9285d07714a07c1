"""Launch cost on a real GPU: CudaKernel (checked, packed in C, launched through the driver)
against CuPy's RawKernel called with the same 29 arguments, same run."""

import statistics
import sys
import timeit
from pathlib import Path

import numpy as np

import cunumpy as xp
from cunumpy._native import core
from cunumpy.kernels import CudaKernel


def interleaved(fns, number, rounds=9):
    times = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            times[k].append(timeit.timeit(fn, number=number) / number)
    return [(min(t), statistics.median(t)) for t in times]


def main() -> int:
    if not xp.cupy_available() or getattr(sys.modules.get("cupy"), "__cunumpy_fake__", False):
        print("needs CuPy on a real GPU; skipped")
        return 0
    import cupy as cp

    path = Path(__file__).resolve().parent / "kernels" / "basics_cuda.cu"
    k = CudaKernel.from_file(path, "empty29")
    ptrs = [cp.zeros(1) for _ in range(20)]
    v, w = cp.zeros((1, 3)), cp.zeros((1, 2, 2), cp.float32)
    scalars = (1, 2, np.float32(1.5), 2.5, 3, True, 4)
    args = (*ptrs, v, w, *scalars)
    k(*args)
    raw = k.compile()

    def record(a, with_strides=True):
        n = a.ndim
        fields = [("data", "<u8"), ("shape", "<i8", (n,))] + ([("strides", "<i8", (n,))] if with_strides else [])
        r = np.zeros((), np.dtype(fields))
        r["data"], r["shape"] = a.data.ptr, a.shape
        r["strides"] = [s // a.itemsize for s in a.strides]
        return r[()]

    raw_args = (
        *ptrs,
        record(v),
        record(w),
        np.int32(1),
        np.int64(2),
        np.float32(1.5),
        np.float64(2.5),
        np.uint32(3),
        np.bool_(True),
        np.uint64(4),
    )
    zero = (*[cp.zeros(0) for _ in range(20)], cp.zeros((0, 3)), cp.zeros((0, 2, 2), cp.float32), *scalars)
    try:
        raw((1,), (128,), raw_args)
    except Exception as exc:  # noqa: BLE001 - CuPy versions without structured scalars as arguments
        print(
            f"CuPy's RawKernel does not take the view records ({type(exc).__name__}: {exc}); "
            "comparing against an empty Python function instead"
        )
        raw_call = None
    else:
        raw_call = lambda: raw((1,), (128,), raw_args)  # noqa: E731

    def empty(*a):
        return None

    cp.cuda.runtime.deviceSynchronize()
    number = 20_000
    baseline = raw_call if raw_call is not None else (lambda: empty(*args))
    (ours, ours_med), (base, base_med), (zero_t, _) = interleaved(
        [lambda: k(*args), baseline, lambda: k(*zero)], number
    )
    cp.cuda.runtime.deviceSynchronize()
    us = 1e6
    name = "CuPy RawKernel launch, same arguments (unchecked)" if raw_call else "empty Python function"
    print(f"driver launch path available: {core.driver_available()}")
    print(
        f"CudaKernel launch, 29 arguments (checked + packed + cuLaunchKernel): {ours * us:.2f} us "
        f"(median {ours_med * us:.2f})"
    )
    print(f"{name}: {base * us:.2f} us (median {base_med * us:.2f})")
    print(f"ratio CudaKernel / baseline: {ours / base:.2f}")
    print(f"CudaKernel zero-size call (all checks, no launch): {zero_t * us:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
