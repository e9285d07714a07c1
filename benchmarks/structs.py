"""Cost of packing CudaStruct values and of the no-change check of CudaStructArguments.

Struct: 10 fields, 4 pointers, 2 Array2D<double> views and 4 scalars, with arrays of the
fake CuPy. Measured in the same run, interleaved:

* ``S(**values)``: the C packer (every field checked like a kernel argument) and the
  CudaStructValue, against building the same ``numpy.void`` in plain Python without any
  checks: from the arrays (the fake CuPy's ``data.ptr`` is slow, so also) from addresses,
  shapes and strides read beforehand. Target: at most 1.5 us.
* ``args.packed`` of a CudaStructArguments whose fields did not change (in C: with the
  instance dict and the class unchanged since the last check, only what can change in place
  under a fixed identity is read, here the C structs of the fake CuPy's host arrays), against
  the same attribute reads in Python and an empty Python method call. Target: 150 ns.

The machine is shared and noisy: read the ratios.
"""

import os

os.environ["CUNUMPY_FAKE_CUPY"] = "1"  # before cunumpy is imported
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import statistics
import sys
import timeit

import numpy as np

import cunumpy as xp

PACK_TARGET_US = 1.5
CHECK_TARGET_NS = 150.0

FIELDS = [
    ("x", "double*"),
    ("v", "double*"),
    ("w", "const double*"),
    ("q", "float*"),
    ("markers", "Array2D<double>"),
    ("grid", "Array2D<double>"),
    ("n", "long long"),
    ("dt", "double"),
    ("count", "int"),
    ("active", "bool"),
]
Struct = xp.arguments.CudaStruct("BenchArgs", FIELDS)


class BenchArgs(xp.arguments.CudaStructArguments):
    struct_name = "BenchArgs"
    fields = tuple(FIELDS)

    def __init__(self, values):
        for k, v in values.items():
            setattr(self, k, v)
        self.pack()

    def empty(self):
        return None


def plain_python_void(values, dtype=Struct.dtype):
    """The same numpy.void built field by field in Python, without any checks."""
    out = np.zeros((), dtype)
    for name in ("x", "v", "w", "q"):
        out[name] = values[name].data.ptr
    for name in ("markers", "grid"):
        a = values[name]
        out[name]["data"] = a.data.ptr
        out[name]["shape"] = a.shape
        out[name]["strides"] = [s // a.itemsize for s in a.strides]
    for name in ("n", "dt", "count", "active"):
        out[name] = values[name]
    return out[()]


def plain_python_void_from_numbers(numbers, dtype=Struct.dtype):
    """The same numpy.void from addresses, shapes and strides read beforehand (only the building)."""
    out = np.zeros((), dtype)
    for name, value in numbers:
        out[name] = value
    return out[()]


def numbers_of(values):
    numbers = []
    for name in ("x", "v", "w", "q"):
        numbers.append((name, values[name].data.ptr))
    for name in ("markers", "grid"):
        a = values[name]
        numbers.append((name, (a.data.ptr, a.shape, [s // a.itemsize for s in a.strides])))
    for name in ("n", "dt", "count", "active"):
        numbers.append((name, values[name]))
    return numbers


def interleaved(statements, namespace, number, rounds=9):
    """Best and median time of each statement. Statements are timed as source text, compiled
    into timeit's loop: a lambda per iteration would add a Python call (about 50 ns here) to
    every figure, more than a third of the check's budget."""
    timers = [timeit.Timer(stmt, globals=namespace) for stmt in statements]
    times = [[] for _ in timers]
    for _ in range(rounds):
        for k, timer in enumerate(timers):
            times[k].append(timer.timeit(number=number) / number)
    return [(min(t), statistics.median(t)) for t in times]


def main() -> int:
    cupy = sys.modules["cupy"]
    assert getattr(cupy, "__cunumpy_fake__", False), "the fake CuPy is not installed"
    values = {
        "x": cupy.zeros(1000),
        "v": cupy.zeros(1000),
        "w": cupy.zeros(1000),
        "q": cupy.zeros(1000, dtype=np.float32),
        "markers": cupy.zeros((1000, 6)),
        "grid": cupy.zeros((64, 64))[:, ::2],
        "n": 1000,
        "dt": 0.01,
        "count": 7,
        "active": True,
    }
    packed = Struct(**values).packed
    assert packed.tobytes() == plain_python_void(values).tobytes(), "the baseline builds a different value"
    args = BenchArgs(values)
    assert args.packed is args.packed

    numbers = numbers_of(values)
    assert plain_python_void_from_numbers(numbers).tobytes() == packed.tobytes()
    namespace = dict(
        Struct=Struct,
        values=values,
        plain_python_void=plain_python_void,
        plain_python_void_from_numbers=plain_python_void_from_numbers,
        numbers=numbers,
        args=args,
        a=args,
        method=args.empty,
    )
    statements = [
        "Struct(**values)",
        "plain_python_void(values)",
        "plain_python_void_from_numbers(numbers)",
        "args.packed",
        # The least Python needs to notice a change: read the ten fields and the two view shapes.
        "(a.x, a.v, a.w, a.q, a.markers, a.grid, a.n, a.dt, a.count, a.active, a.markers.shape, a.grid.shape)",
        "method()",
    ]
    results = interleaved(statements, namespace, number=20000)
    (p_best, p_med), (b_best, b_med), (n_best, n_med), (c_best, c_med), (r_best, r_med), (e_best, e_med) = results
    print("machine: shared 2-core CPU (see uptime); fake CuPy arrays; best (median) of 9 interleaved rounds")
    print(
        f"S(**values), 10 fields          : {p_best * 1e6:7.3f} us ({p_med * 1e6:.3f})  target <= {PACK_TARGET_US} us"
    )
    print(f"plain Python from the arrays    : {b_best * 1e6:7.3f} us ({b_med * 1e6:.3f})")
    print(f"plain Python from read numbers  : {n_best * 1e6:7.3f} us ({n_med * 1e6:.3f})")
    print(f"  ratio packing / plain Python from the arrays: {p_best / b_best:.3f} (median {p_med / b_med:.3f})")
    print(f"  ratio packing / plain Python building only  : {p_best / n_best:.3f} (median {p_med / n_med:.3f})")
    print(
        f"args.packed, nothing changed    : {c_best * 1e9:7.1f} ns ({c_med * 1e9:.1f})  target <= {CHECK_TARGET_NS:.0f} ns"
    )
    print(f"Python reads of the same fields : {r_best * 1e9:7.1f} ns ({r_med * 1e9:.1f})")
    print(f"empty Python method call        : {e_best * 1e9:7.1f} ns ({e_med * 1e9:.1f})")
    print(f"  ratio check / Python field reads: {c_best / r_best:.3f} (median {c_med / r_med:.3f})")
    print(f"  ratio check / empty method call : {c_best / e_best:.3f} (median {c_med / e_med:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
