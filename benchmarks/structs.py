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

import statistics  # noqa: E402
import sys  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402

import cunumpy as xp  # noqa: E402

PACK_TARGET_US = 1.5
CHECK_TARGET_NS = 150.0

FIELDS = [
    ("x", "double*"), ("v", "double*"), ("w", "const double*"), ("q", "float*"),
    ("markers", "Array2D<double>"), ("grid", "Array2D<double>"),
    ("n", "long long"), ("dt", "double"), ("count", "int"), ("active", "bool"),
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


def interleaved(fns, number, rounds=9):
    times = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            times[k].append(timeit.timeit(fn, number=number) / number)
    return [(min(t), statistics.median(t)) for t in times]


def main() -> int:
    cupy = sys.modules["cupy"]
    assert getattr(cupy, "__cunumpy_fake__", False), "the fake CuPy is not installed"
    values = {
        "x": cupy.zeros(1000), "v": cupy.zeros(1000), "w": cupy.zeros(1000),
        "q": cupy.zeros(1000, dtype=np.float32),
        "markers": cupy.zeros((1000, 6)), "grid": cupy.zeros((64, 64))[:, ::2],
        "n": 1000, "dt": 0.01, "count": 7, "active": True,
    }
    packed = Struct(**values).packed
    assert packed.tobytes() == plain_python_void(values).tobytes(), "the baseline builds a different value"
    args = BenchArgs(values)
    assert args.packed is args.packed

    numbers = numbers_of(values)
    assert plain_python_void_from_numbers(numbers).tobytes() == packed.tobytes()
    pack = lambda: Struct(**values)  # noqa: E731
    baseline = lambda: plain_python_void(values)  # noqa: E731
    building = lambda: plain_python_void_from_numbers(numbers)  # noqa: E731
    check = lambda: args.packed  # noqa: E731
    # The least Python needs to notice a change: read the ten fields and the two view shapes.
    reads = lambda a=args: (a.x, a.v, a.w, a.q, a.markers, a.grid, a.n, a.dt, a.count, a.active,  # noqa: E731
                            a.markers.shape, a.grid.shape)
    method = args.empty
    empty_call = lambda: method()  # noqa: E731
    results = interleaved([pack, baseline, building, check, reads, empty_call], number=20000)
    (p_best, p_med), (b_best, b_med), (n_best, n_med), (c_best, c_med), (r_best, r_med), (e_best, e_med) = results
    print("machine: shared 2-core CPU, loaded; fake CuPy arrays; best (median) of 9 interleaved rounds")
    print(f"S(**values), 10 fields          : {p_best * 1e6:7.3f} us ({p_med * 1e6:.3f})  target <= {PACK_TARGET_US} us")
    print(f"plain Python from the arrays    : {b_best * 1e6:7.3f} us ({b_med * 1e6:.3f})")
    print(f"plain Python from read numbers  : {n_best * 1e6:7.3f} us ({n_med * 1e6:.3f})")
    print(f"  ratio packing / plain Python from the arrays: {p_best / b_best:.3f} (median {p_med / b_med:.3f})")
    print(f"  ratio packing / plain Python building only  : {p_best / n_best:.3f} (median {p_med / n_med:.3f})")
    print(f"args.packed, nothing changed    : {c_best * 1e9:7.1f} ns ({c_med * 1e9:.1f})  target <= {CHECK_TARGET_NS:.0f} ns")
    print(f"Python reads of the same fields : {r_best * 1e9:7.1f} ns ({r_med * 1e9:.1f})")
    print(f"empty Python method call        : {e_best * 1e9:7.1f} ns ({e_med * 1e9:.1f})")
    print(f"  ratio check / Python field reads: {c_best / r_best:.3f} (median {c_med / r_med:.3f})")
    print(f"  ratio check / empty method call : {c_best / e_best:.3f} (median {c_med / e_med:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
