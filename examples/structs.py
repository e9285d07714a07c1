"""Kernel arguments grouped in C structs: a CudaStruct value and a CudaStructArguments class.

    python examples/structs.py                                    # NumPy: the host kernels
    CUNUMPY_BACKEND=cupy python examples/structs.py               # a GPU: the CUDA kernels

A CudaStruct describes one C struct (its declaration, a NumPy dtype with the C layout, a
packer); a value packed from device arrays travels to the kernel by value. A
CudaStructArguments class makes the instances of your own class that struct argument:
its fields are attributes, re-packed when an array behind them changed.
"""

import tempfile
from pathlib import Path

import numpy as np

import cunumpy as xp


class Particles:
    """The owner of the data: one row per particle, (position, velocity)."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        host = np.column_stack([rng.uniform(0.0, 1.0, n), rng.normal(0.0, 1.0, n)])
        self.markers = xp.to_cunumpy(host)  # the one transfer in

    def keep(self, alive):
        """Drop particles: the owner reallocates its array."""
        self.markers = self.markers[alive].copy()


class PushArgs(xp.arguments.CudaStructArguments):
    """The struct argument of the push kernel, read from a Particles object."""

    struct_name = "PushArgs"
    fields = (("markers", "Array2D<double>"), ("n", "long long"), ("length", "double"))

    def __init__(self, particles, length):
        self.particles = particles
        self.length = length
        if xp.is_gpu(particles.markers):
            self.pack()  # on the device path: a wrong field shows up here, not at a launch

    # Properties follow the owner's arrays, also after it reallocated them.
    markers = property(lambda self: self.particles.markers)
    n = property(lambda self: self.particles.markers.shape[0])


# A struct from a list of fields: the charge grid of the deposit.
Grid = xp.arguments.CudaStruct("Grid", [("rho", "double*"), ("n_cells", "long long"), ("dx", "double")])

# The C side of both structs in one header, as a project commits it next to its kernels
# (and tests that regenerating it gives the same text). PushArgs.struct is the class's
# CudaStruct: its declaration, dtype and header are those of any CudaStruct.
HEADERS = Path(tempfile.mkdtemp(prefix="cunumpy-structs-"))
xp.arguments.write_cuda_header(HEADERS / "particle_args.cuh", [Grid, PushArgs.struct])

SOURCE = r"""
#include "particle_args.cuh"
#include <cunumpy/index.cuh>
#include <cunumpy/atomic.cuh>

extern "C" __global__ void push(PushArgs args, double dt)
{
    CUNUMPY_THREAD_1D(i, args.n);
    double x = args.markers(i, 0) + dt * args.markers(i, 1);
    args.markers(i, 0) = x - args.length * floor(x / args.length);
}

extern "C" __global__ void deposit(Grid grid, const double* x, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    cunumpy_atomic_add(&grid.rho[(long long)(x[i] / grid.dx)], 1.0);
}
"""


def push(args, dt):
    """Host kernel of push: the same parameters, the struct's fields as attributes."""
    m = args.markers
    m[:, 0] = np.mod(m[:, 0] + dt * m[:, 1], args.length)


def deposit(grid, x, n):
    """Host kernel of deposit."""
    np.add.at(grid.rho, (x[:n] / grid.dx).astype(np.int64), 1.0)


def kernels():
    cuda = {
        name: xp.kernels.CudaKernel(SOURCE, name, include_dirs=[HEADERS], structs=[Grid, PushArgs.struct])
        for name in ("push", "deposit")
    }
    return xp.kernels.Kernel(push, cuda["push"]), xp.kernels.Kernel(deposit, cuda["deposit"])


def main():
    print("backend:", xp.get_backend())
    print(f"{Grid!r}: dtype {Grid.dtype}")
    print("PushArgs.struct.declaration:\n" + PushArgs.struct.declaration)
    push_kernel, deposit_kernel = kernels()

    particles = Particles(2000, seed=3)
    args = PushArgs(particles, length=1.0)
    for _ in range(5):
        push_kernel(args, 0.02)
    particles.keep(particles.markers[:, 1] > -2.0)  # reallocated: args follows by itself
    push_kernel(args, 0.02)

    n_cells = 16
    rho = xp.zeros(n_cells)
    positions = xp.ascontiguousarray(particles.markers[:, 0])
    if xp.is_gpu(rho):
        grid = Grid(rho=rho, n_cells=n_cells, dx=1.0 / n_cells)  # packed now: holds rho's address
    else:
        grid = _Fields(rho=rho, n_cells=n_cells, dx=1.0 / n_cells)  # the host kernel reads attributes
    n = positions.shape[0]
    # The launch size is inferred from the first array the arguments hold, here grid.rho
    # (16 cells): one thread per particle has to be asked for.
    deposit_kernel(grid, positions, n, n_threads=n)
    total = float(xp.to_numpy(rho).sum())
    print(f"{args.n} particles left, {total:.0f} deposited in {n_cells} cells")
    assert total == args.n


class _Fields:
    """The grid's fields as attributes, for the host kernel."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


if __name__ == "__main__":
    main()
