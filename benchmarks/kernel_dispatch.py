"""Per-call cost of ``Kernel`` dispatch on the NumPy backend, against a baseline measured in
the same run.

``Kernel(host_fn, cuda)(a, b, c, d, 1.0, 3)`` over ``host_fn(a, b, c, d, 1.0, 3)`` for a
trivial ``host_fn``, for ``dispatch="backend"`` and ``dispatch="arrays"``, in ns per call
(target: at most 150 ns added), next to the no-conversion overhead of ``PyccelKernel(host_fn)``
(the same C base class does both decisions). Measured twice: without CuPy imported (a CPU-only machine) and
with the fake CuPy imported (the device-type checks then have a type to compare against).
The CUDA kernel is never compiled or launched. Run: ``.venv/bin/python benchmarks/kernel_dispatch.py``.
"""

import os
import subprocess
import sys

PART = r"""
import sys, timeit
import numpy as np
import cunumpy as xp

SRC = '''extern "C" __global__ void f(const double* a, const double* b, const double* c, double* d,
                                  double x, int n) {}'''

def f(a, b, c, d, x, n):
    return None

cuda = xp.kernels.CudaKernel(SRC, "f")
pyccel = xp.kernels.PyccelKernel(f)
by_backend = xp.kernels.Kernel(f, cuda)
by_arrays = xp.kernels.Kernel(f, cuda, dispatch="arrays")
a, b, c, d = (np.zeros(4) for _ in range(4))
xp.set_backend("numpy")
assert by_backend(a, b, c, d, 1.0, 3) is None and by_arrays(a, b, c, d, 1.0, 3) is None
n = 20_000
plain, wrapped, backend, arrays = [], [], [], []
for _ in range(80):  # short interleaved samples: the minimum finds the quiet moments of a loaded machine
    plain.append(timeit.timeit("f(a, b, c, d, 1.0, 3)", globals=globals(), number=n) / n)
    wrapped.append(timeit.timeit("pyccel(a, b, c, d, 1.0, 3)", globals=globals(), number=n) / n)
    backend.append(timeit.timeit("by_backend(a, b, c, d, 1.0, 3)", globals=globals(), number=n) / n)
    arrays.append(timeit.timeit("by_arrays(a, b, c, d, 1.0, 3)", globals=globals(), number=n) / n)
p, pk, kb, ka = (min(t) * 1e9 for t in (plain, wrapped, backend, arrays))
label = "fake CuPy imported" if "cupy" in sys.modules else "CuPy not imported"
print(f"{label:18s}: host_fn {p:6.1f} ns | PyccelKernel +{pk - p:5.1f} | Kernel dispatch='backend' "
      f"+{kb - p:5.1f} ns ({(kb - p) / max(pk - p, 1e-9):4.2f}x PyccelKernel's) | dispatch='arrays' "
      f"+{ka - p:5.1f} ns ({(ka - p) / max(pk - p, 1e-9):4.2f}x)   target: +150 ns at most")
"""


def main():
    for fake in ("0", "1"):
        env = dict(os.environ, CUNUMPY_FAKE_CUPY=fake, CUNUMPY_BACKEND="numpy")
        subprocess.run([sys.executable, "-c", PART], env=env, check=True)


if __name__ == "__main__":
    main()
