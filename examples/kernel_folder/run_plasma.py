"""Particles pushed and deposited by the kernels of the `plasma` kernel package.

Runs unchanged on NumPy and on the CuPy backend (a GPU, or the fake CuPy of cunumpy):

    python examples/kernel_folder/run_plasma.py
    CUNUMPY_BACKEND=cupy python examples/kernel_folder/run_plasma.py
    python examples/kernel_folder/run_plasma.py --pyccel    # host kernels compiled by Pyccel

On the CuPy backend `push` runs its CUDA port and `deposit`, not ported yet, falls back to
its host kernel on copies of the device arrays.
"""

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

import cunumpy as xp

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the package beside this file

import plasma


def compile_with_pyccel(module):
    """compile_host for the catalog: the module compiled to C by Pyccel, in a temporary folder."""
    from pyccel import epyccel

    return epyccel(module, language="c", folder=tempfile.mkdtemp(prefix="plasma-pyccel-"))


def run(particles, cells, steps, catalog):
    length, dt = 1.0, 0.05
    dx = length / cells
    rng = np.random.default_rng(7)
    x = xp.to_cunumpy(rng.uniform(0.0, length, particles))  # one transfer in
    v = xp.to_cunumpy(rng.normal(0.0, 1.0, particles))
    rho = xp.zeros(cells)
    push, deposit = catalog["push"], catalog["deposit"]
    with xp.profiling.count_transfers() as counter, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(steps):
            push(x, v, dt, length, particles)
            rho[...] = 0.0
            deposit(x, rho, dx, particles)
    density = xp.to_numpy(rho)  # one transfer out
    return density, counter, caught


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=4000)
    parser.add_argument("--cells", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--pyccel", action="store_true", help="compile the host kernels with Pyccel")
    args = parser.parse_args(argv)

    catalog = plasma.make_catalog(compile_with_pyccel) if args.pyccel else plasma.catalog
    print("backend:", xp.get_backend())
    print(catalog.summary())
    density, counter, caught = run(args.particles, args.cells, args.steps, catalog)
    how = "compiled by Pyccel" if args.pyccel else "the .py module as it is; --pyccel compiles it"
    print(f"host implementation of push: {catalog['push'].selected()} ({how})")
    print(
        f"charge: {density.sum():.0f} of {args.particles} particles, cells {density.min():.0f} to {density.max():.0f}"
    )
    print(
        f"deposit fell back to the host {counter.fallbacks} time(s); "
        f"{sum(issubclass(w.category, RuntimeWarning) for w in caught)} RuntimeWarning(s)"
    )
    if density.sum() != args.particles:
        sys.exit("the deposit lost particles")


if __name__ == "__main__":
    main()
