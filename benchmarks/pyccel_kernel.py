"""PyccelKernel costs, each against a baseline measured in the same run.

(a) No-conversion overhead: ``PyccelKernel(f)(a, b, c, d, 1.0, 3)`` over ``f(a, b, c, d, 1.0, 3)``
    for a trivial ``f`` on the NumPy backend, in ns per call (target: at most 100 ns). Measured
    without CuPy imported (the CPU-only case) and with the fake CuPy imported (every argument
    gets a device-type check).
(b) Conversion-path traversal of 64 fake-CuPy arrays nested in lists, dicts and objects:
    ``_core.host_arguments`` (C) against its pure-Python twin (target: at least 5x faster).
    ``to_host`` is a constant-time lookup so the traversal itself is timed; the whole
    converting call (with the fake's copies) is shown for context.

Each part runs in a fresh interpreter because the fake CuPy must be chosen before
``import cunumpy``. Run: ``.venv/bin/python benchmarks/pyccel_kernel.py``.
"""

import os
import subprocess
import sys

PART_A = r"""
import sys, timeit
import numpy as np
import cunumpy as xp

def f(a, b, c, d, x, n):
    return None

k = xp.kernels.PyccelKernel(f)
a, b, c, d = (np.zeros(4) for _ in range(4))
xp.set_backend("numpy")
assert k(a, b, c, d, 1.0, 3) is None
n = 200_000
plain, wrapped = [], []
for _ in range(15):  # interleaved, so both see the same machine load
    plain.append(timeit.timeit("f(a, b, c, d, 1.0, 3)", globals=globals(), number=n) / n)
    wrapped.append(timeit.timeit("k(a, b, c, d, 1.0, 3)", globals=globals(), number=n) / n)
p, w = min(plain) * 1e9, min(wrapped) * 1e9
label = "fake CuPy imported" if "cupy" in sys.modules else "CuPy not imported"
print(f"(a) {label:18s}: f(...) {p:6.1f} ns, PyccelKernel(f)(...) {w:6.1f} ns, overhead {w - p:5.1f} ns/call (target <= 100)")
"""

PART_B = r"""
import sys, timeit
import numpy as np
import cunumpy as xp
from cunumpy import _reference
from cunumpy._native import core

cupy = sys.modules["cupy"]
assert getattr(cupy, "__cunumpy_fake__", False), "the fake CuPy is not active"

class State:
    pass
State.__module__ = "bench_simulation.state"

arrays = [cupy.asarray(np.full(8, float(i))) for i in range(64)]
hosts = {id(a): a.get() for a in arrays}
def lookup(a):
    return hosts[id(a)]

# 64 arrays: 16 objects holding lists and dicts of arrays, a few aliases and a cycle.
objects = []
for i in range(16):
    s = State()
    s.x = arrays[4 * i]
    s.fields = [arrays[4 * i + 1], {"v": arrays[4 * i + 2], "w": (arrays[4 * i + 3], arrays[4 * i])}]
    s.dt, s.name = 0.1, f"s{i}"
    objects.append(s)
objects[0].peer = objects[1]
loop = [arrays[0]]
loop.append(loop)
args = (objects[:8], {"rest": objects[8:], "loop": loop}, 2.0, 7)
modules = ("bench_simulation.",)
for impl in (core, _reference):
    _, _, count, plan = impl.host_arguments(args, None, lookup, modules, (0,))
    assert count == 64, count

n = 500
c_times, py_times = [], []
for _ in range(7):
    c_times.append(timeit.timeit(lambda: core.host_arguments(args, None, lookup, modules, (0,)), number=n) / n)
    py_times.append(timeit.timeit(lambda: _reference.host_arguments(args, None, lookup, modules, (0,)), number=n) / n)
c, py = min(c_times) * 1e6, min(py_times) * 1e6
print(f"(b) traversal of 64 fake-CuPy arrays: C {c:7.1f} us, Python twin {py:7.1f} us, C is {py / c:4.1f}x faster (target >= 5x)")

def kernel(states, extra, dt, n):
    return None
k = xp.kernels.PyccelKernel(kernel, object_modules=modules, outputs=(0,))
m = 50
whole = min(timeit.repeat(lambda: k(*args), number=m, repeat=5)) / m * 1e6
print(f"    whole converting call (64 copies to the host, 32 back, fake CuPy): {whole:8.1f} us")
"""


def run(code, fake):
    env = dict(os.environ)
    env.pop("CUNUMPY_BACKEND", None)
    if fake:
        env["CUNUMPY_FAKE_CUPY"] = "1"
        # The fake registers itself as `cupy` when cunumpy is imported; import it like a user would.
        code = code.replace("import cunumpy as xp", "import cunumpy as xp\nimport cupy", 1)
    else:
        env.pop("CUNUMPY_FAKE_CUPY", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        raise SystemExit(done.returncode)
    print(done.stdout, end="")


if __name__ == "__main__":
    run(PART_A, fake=False)
    run(PART_A, fake=True)
    run(PART_B, fake=True)
