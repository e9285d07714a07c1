"""Memcheck's inline shadow checks against a call per access (the fallback where the shadow
cannot be mapped at its fixed address) and the unchecked launch: axpy over 4M doubles on one
worker, CPU time per launch (best of 5 groups of 5), each setting in its own process,
interleaved rounds. Usage::

    python benchmarks/emulator_shadow.py [--rounds 3]

The settings: default (checks mode 1, the shadow at 0x200000000000),
CUNUMPY_EMULATION_SHADOW=0 (checks mode 2, a call per access), CUNUMPY_EMULATION_MEMCHECK=0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

PROBE = r"""
import time
import numpy as np
from cunumpy import kernel_testing as kt
from cunumpy.kernels import CudaKernel

SRC = '''
extern "C" __global__ void axpy(double a, const double* x, double* y, long long n)
{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }
'''
k = CudaKernel(SRC, "axpy")
n = 1 << 22
x, y = np.ones(n), np.zeros(n)
kt.emulate_cuda_kernel(k, 2.0, x, y, n)  # build (or load) and warm up
best = []
for _ in range(5):
    t = time.process_time()
    for _ in range(5):
        kt.emulate_cuda_kernel(k, 2.0, x, y, n)
    best.append((time.process_time() - t) / 5)
print(min(best) * 1e3)
"""

SETTINGS = {
    "shadow (mode 1)": {},
    "call per access (mode 2)": {"CUNUMPY_EMULATION_SHADOW": "0"},
    "unchecked": {"CUNUMPY_EMULATION_MEMCHECK": "0"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="cunumpy-shadow-bench-") as cache:
        for round_ in range(1, args.rounds + 1):
            row = []
            for name, extra in SETTINGS.items():
                env = dict(os.environ, CUNUMPY_EMULATION_CACHE=cache, CUNUMPY_EMULATION_THREADS="1", **extra)
                done = subprocess.run(
                    [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True
                )
                row.append(f"{name} {float(done.stdout):.2f} ms")
            print(f"round {round_}: " + ", ".join(row))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
