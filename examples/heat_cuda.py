"""The 1-D heat equation with a CUDA kernel that runs unchanged everywhere.

One explicit time step, ``u_new[i] = u[i] + alpha * (u[i-1] - 2 u[i] + u[i+1])`` with fixed
ends, is a ``Kernel``: a NumPy host version and a CUDA version of the same signature. The
program never says where it runs:

    python examples/heat_cuda.py                                          # NumPy: the host version
    CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy python examples/heat_cuda.py  # the CUDA version, run
                                                                          # by the CPU emulation
    CUNUMPY_BACKEND=cupy python examples/heat_cuda.py                     # the CUDA version on a GPU

On the fake CuPy the CUDA kernel is compiled with the host C++ compiler and emulated on the
CPU by itself (``CUNUMPY_EMULATION=0`` turns that off). Each run prints the backend, the
temperature profile at a few points, and the largest difference to a plain NumPy loop
computed on the host; it exits with status 1 when that difference exceeds 1e-12.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import cunumpy as xp

CUDA_SOURCE = r"""
#include <cunumpy/index.cuh>

extern "C" __global__ void heat_step(const double* u, double* u_new, double alpha, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    if (i == 0 || i == n - 1) {
        u_new[i] = u[i];  // fixed ends
        return;
    }
    u_new[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1]);
}
"""


def heat_step(u, u_new, alpha, n):
    """The host version: the same step with NumPy slices."""
    u_new[0], u_new[n - 1] = u[0], u[n - 1]
    u_new[1 : n - 1] = u[1 : n - 1] + alpha * (u[: n - 2] - 2.0 * u[1 : n - 1] + u[2:n])


step = xp.kernels.Kernel(
    heat_step,
    xp.kernels.CudaKernel(CUDA_SOURCE, "heat_step"),
    host_options={"outputs": ("u_new",)},
)


def initial_profile(n: int) -> np.ndarray:
    """A hot band in the middle of a cold rod (host data)."""
    x = np.linspace(0.0, 1.0, n)
    return np.where(np.abs(x - 0.5) < 0.1, 1.0, 0.0)


def simulate(n: int, steps: int, alpha: float) -> np.ndarray:
    """``steps`` steps on the active backend: one transfer in, one out."""
    u = xp.to_cunumpy(initial_profile(n))
    u_new = xp.empty_like(u)
    for _ in range(steps):
        step(u, u_new, alpha, n)  # the host version on NumPy, the CUDA kernel on CuPy
        u, u_new = u_new, u
    return xp.to_numpy(u)


def reference(n: int, steps: int, alpha: float) -> np.ndarray:
    """The same computation as a plain NumPy loop, whatever the backend."""
    u = initial_profile(n)
    for _ in range(steps):
        u = np.concatenate(([u[0]], u[1:-1] + alpha * (u[:-2] - 2.0 * u[1:-1] + u[2:]), [u[-1]]))
    return u


def describe_backend() -> str:
    if xp.get_backend() == "numpy":
        return "numpy (the host version of the kernel)"
    if xp.backend_info()["fake_cupy"]:
        return "cupy on the fake CuPy (the CUDA kernel in the CPU emulation)"
    return "cupy (the CUDA kernel on the GPU)"


def _count(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=_count(3), default=200, help="grid points (default 200)")
    parser.add_argument("--steps", type=_count(1), default=1000, help="time steps (default 1000)")
    parser.add_argument("--alpha", type=float, default=0.25, help="diffusion number, at most 0.5 (default 0.25)")
    args = parser.parse_args(argv)
    if not 0.0 < args.alpha <= 0.5:
        parser.error(f"--alpha must be in (0, 0.5] for a stable explicit step, got {args.alpha}")
    return args


def main(argv=None) -> int:
    args = parse_arguments(argv)
    print(f"backend: {describe_backend()}")
    u = simulate(args.points, args.steps, args.alpha)
    expected = reference(args.points, args.steps, args.alpha)
    difference = float(np.max(np.abs(u - expected)))
    probes = np.linspace(0, args.points - 1, 5).astype(int)
    profile = ", ".join(f"u[{i}] = {u[i]:.6f}" for i in probes)
    print(f"{args.points} points, {args.steps} steps, alpha = {args.alpha}: {profile}")
    print(f"largest difference to the NumPy reference: {difference:.3g}")
    return 0 if difference <= 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
