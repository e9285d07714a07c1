"""A portable time loop: 1-D heat diffusion on whichever backend is active.

Run `make demo`. The loop runs on the active backend (NumPy here, CuPy on a GPU machine
with CUNUMPY_BACKEND=cupy), then once more under the fake CuPy, the strict host stand-in
that runs every device code path on a CPU, to show the device path with its transfers.
"""

import os
import subprocess
import sys

import numpy as np

import cunumpy as xp


def initial_condition(n: int) -> np.ndarray:
    """A Gaussian bump on [0, 1], made on the host as the input data of a real code would be."""
    x = np.linspace(0.0, 1.0, n)
    return np.exp(-(((x - 0.5) / 0.05) ** 2))


def diffuse(u, nu: float, steps: int):
    """Explicit finite-difference heat steps with fixed ends; pure xp code, no transfers."""
    for _ in range(steps):
        u[1:-1] = u[1:-1] + nu * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return u


def run(n: int = 4096, steps: int = 500, nu: float = 0.25) -> None:
    print(f"backend: {xp.get_backend()}"
          + (" (fake CuPy: a strict host stand-in)" if xp.backend_info().get("fake_cupy") else ""))
    host = initial_condition(n)
    with xp.profiling.count_transfers() as counter:
        with xp.profiling.timed_region("diffusion") as timing:
            u = xp.to_cunumpy(host)  # one transfer in
            with xp.profiling.assert_no_transfers():  # the time loop moves no data
                diffuse(u, nu, steps)
            result = xp.to_numpy(u)  # one transfer out
    print(f"array type: {type(u).__module__}.{type(u).__name__}")
    print(f"heat kept: {result.sum() / host.sum():.6f} of the initial total, peak {result.max():.4f}")
    print(f"{steps} steps of {n} points in {timing.elapsed * 1e3:.1f} ms (synchronised: {timing.synced})")
    print(counter.report())


def main() -> None:
    run()
    if os.environ.get("CUNUMPY_FAKE_CUPY"):
        return
    print("\n--- the same loop on the device path, under the fake CuPy ---")
    env = dict(os.environ, CUNUMPY_FAKE_CUPY="1", CUNUMPY_BACKEND="cupy")
    subprocess.run([sys.executable, __file__], env=env, check=True)


if __name__ == "__main__":
    main()
