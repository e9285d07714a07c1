"""How the CUDA source parser scales with the number of kernels in one file.

Two regressions made whole-file parsing quadratic: `cuda_kernel_names` looked each name up in
the list of names found so far (about 40 s at 32 000 kernels), and `CudaKernel.all_from_file`
tokenized the whole file again for every kernel (4 000 kernels took 50 s). The unit tests
check the results at those sizes; this script measures the scaling, which a unit test must
not time: the time for 8n kernels over the time for n kernels, measured in the same run.
Linear work gives about 8, quadratic about 64. Target: at most 24: beyond a few thousand
kernels the token array and the name set outgrow the caches, and perf shows page faults and
set lookups, not extra work, making a kernel cost about 3x more at 32 000 than at 4 000.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

from cunumpy import cuda
from cunumpy.kernels import CudaKernel

GROWTH = 8
TARGET_RATIO = 24.0


def kernel_file_source(n: int) -> str:
    return "\n".join(f'extern "C" __global__ void k{i}(double* x, int n) {{ x[0] = n; }}' for i in range(n))


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def scaling(label: str, run, small: int, repeats: int) -> bool:
    """Interleave the small and the large case so that a busy machine slows both alike."""
    small_times, large_times = [], []
    for _ in range(3):
        small_times.append(best_of(lambda: run(small), repeats))
        large_times.append(best_of(lambda: run(small * GROWTH), repeats))
    t_small, t_large = min(small_times), min(large_times)
    ratio = t_large / t_small
    verdict = "meets" if ratio <= TARGET_RATIO else "misses"
    print(
        f"{label}: {small} kernels {t_small * 1e3:.2f} ms, {small * GROWTH} kernels {t_large * 1e3:.2f} ms, "
        f"ratio {ratio:.1f} (linear ~{GROWTH}, quadratic ~{GROWTH**2}; target <= {TARGET_RATIO:g}: {verdict} it)"
        f"  [median small {statistics.median(small_times) * 1e3:.2f} ms]"
    )
    return ratio <= TARGET_RATIO


def main() -> int:
    sources = {n: kernel_file_source(n) for n in (4000, 4000 * GROWTH)}
    ok = scaling("cuda_kernel_names", lambda n: cuda.cuda_kernel_names(sources[n]), 4000, repeats=3)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for n in (250, 250 * GROWTH):
            paths[n] = Path(tmp) / f"k{n}.cu"
            paths[n].write_text(kernel_file_source(n))
        ok &= scaling("CudaKernel.all_from_file", lambda n: CudaKernel.all_from_file(paths[n]), 250, repeats=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
