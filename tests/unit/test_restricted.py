"""API.md §17: without the C extension (as on Pyodide) the package serves the NumPy backend
through the pure-Python twins of its C functions."""

import os
import subprocess
import sys

WITHOUT_EXTENSION = r"""
import sys
sys.modules["cunumpy._core"] = None  # the extension cannot be imported, as on Pyodide
import numpy as np
import cunumpy as xp
from cunumpy._native import HAVE_C_CORE
assert not HAVE_C_CORE
assert xp.get_backend() == "numpy"

a = np.arange(6.0)
view = a[1:4]
assert xp.to_numpy(view) is view and xp.to_cunumpy(view) is view
xp.synchronize(); xp.cuda.set_device(0)
try:
    with xp.use_backend("numpy"):
        raise KeyError
except KeyError:
    pass
assert xp.get_backend() == "numpy"

# PyccelKernel: only the no-conversion path, identical to calling the function.
def kernel(x, y, out):
    out[:] = x + y
calls = []
def returns_none(x):
    calls.append(x)
def raises(x):
    raise ZeroDivisionError("inside")
k = xp.kernels.PyccelKernel(kernel, outputs=(2,))
out = np.zeros(6)
assert k(a, a, out) is None
assert out.tolist() == (2 * a).tolist()
k(out, out, out)  # aliasing is the caller's business, as without the wrapper
assert out.tolist() == (4 * a).tolist()
assert xp.kernels.PyccelKernel(returns_none)(a) is None and calls[0] is a
try:
    xp.kernels.PyccelKernel(raises)(a)
except ZeroDivisionError as exc:
    assert str(exc) == "inside"
else:
    raise AssertionError("the exception was swallowed")

# The algorithms and Philox run on the twins.
keys, order, payload = xp.algorithms.sort_by_key(np.array([3, 1, 2]), np.array([10.0, 20.0, 30.0]))
assert keys.tolist() == [1, 2, 3] and payload.tolist() == [20.0, 30.0, 10.0]
assert xp.algorithms.segment_sum(np.ones(4), np.array([0, 1, 1, -1]), 2).tolist() == [1.0, 2.0]
assert 0.0 <= float(xp.rng.philox_uniform(1, 2, 3)) < 1.0
assert xp.host_call(np.sum, np.ones(3)) == 3.0
for heavy in ("cupy", "pyccel", "numba", "scipy"):
    assert heavy not in sys.modules, heavy
print("ok")
"""


def test_package_works_without_the_c_extension():
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTENSION], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
