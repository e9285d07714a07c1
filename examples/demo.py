"""A particle-in-cell style time loop on whichever backend is active: run `make demo`.

A blob of like-charged particles sits in the unit square and pushes itself apart. Each
step does what a particle code does, with cunumpy's particle algorithms:

  sort     Morton keys of the positions (``algorithms.morton_keys``) and one stable sort
           of every particle array by them (``algorithms.sort_by_key``); the key of a
           particle at ``levels`` bits per axis is the index of its grid cell in Morton
           order, so the grid below is stored in that order too.
  deposit  nearest-grid-point charge: ``algorithms.segment_sum`` of the particle charges
           by cell key.
  field    the electric field of that charge by a spectral Poisson solve (``xp.fft``;
           periodic, which is a fair approximation while the blob is away from the walls).
  push     field at each particle's cell, a thermal kick from ``rng.philox_normal2``
           (stream = particle id, counter = step: the same numbers whatever the order of
           the particles or the backend), then the position update.
  remove   particles that left the box are dropped in place with
           ``algorithms.compact_by_mask``.

The loop runs on the active backend (NumPy here, CuPy on a GPU machine with
CUNUMPY_BACKEND=cupy) and then once more under the fake CuPy, the strict host stand-in
that runs every device code path on a CPU. Each run prints the time and the transfers of
every phase; the parent writes one PNG (the final charge density and the particle count
per step of both runs) and prints its path.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import cunumpy as xp
from cunumpy import algorithms, profiling, rng

PHASES = ("init", "sort", "deposit", "field", "push", "remove", "output")
SEED = 2026


class PhaseLog:
    """Wall time and transfer events per phase: ``with log("push"): ...``.

    On the CuPy backend each phase synchronises the device on entry and exit (that is
    what ``timed_region`` does), so the times are the device's, not just launch times.
    """

    def __init__(self):
        self.budget = profiling.TransferBudget()
        self.seconds = dict.fromkeys(PHASES, 0.0)

    @contextlib.contextmanager
    def __call__(self, name: str):
        with self.budget.phase(name), profiling.timed_region(name) as timing:
            yield
        self.seconds[name] += timing.elapsed

    def table(self) -> str:
        lines = [f"{'phase':<8} {'calls':>5} {'time ms':>9} {'to_device':>9} {'to_host':>7} {'syncs':>5}"]
        calls = self.budget.calls
        for name in PHASES:
            c = self.budget[name]
            lines.append(
                f"{name:<8} {calls.get(name, 0):>5} {self.seconds[name] * 1e3:>9.1f} "
                f"{c.to_device:>9} {c.to_host:>7} {c.syncs:>5}"
            )
        total = sum(self.seconds.values())
        lines.append(f"{'total':<8} {'':>5} {total * 1e3:>9.1f}")
        return "\n".join(lines)


def simulate(n_particles: int, levels: int, steps: int, log: PhaseLog) -> dict:
    """Run the loop; return the particle count per step and the final density (host arrays)."""
    n_side = 1 << levels
    n_cells = n_side * n_side
    dt, thermal, charge_total = 0.004, 0.05, 10.0
    charge = charge_total / n_particles  # per particle; charge over mass is 1 for all

    with log("init"):
        # Particle i draws its numbers from stream i: no generator state to share or split.
        ids = xp.arange(n_particles, dtype=xp.int64)
        x0, y0 = rng.philox_normal2(SEED, ids, 0)
        vx, vy = rng.philox_normal2(SEED, ids, 1)
        # Two blobs of unequal size: even ids in one, odd ids in the other.
        odd = (ids % 2).astype(xp.float64)
        width = 0.05 + 0.03 * odd
        pos = xp.stack([0.42 + 0.18 * odd + width * x0, 0.40 + 0.2 * odd + width * y0], axis=1)
        vel = thermal * xp.stack([vx, vy], axis=1)
        charges = xp.full(n_particles, charge)
        # The grid in Morton order: cell c of the Morton numbering is row-major cell
        # row_major[c]. Wave numbers of the spectral solve, for the rfft2 layout.
        cx, cy = algorithms.morton_decode(xp.arange(n_cells, dtype=xp.uint64), 2)
        row_major = (cy * n_side + cx).astype(xp.int64)
        kx = 2 * np.pi * xp.fft.rfftfreq(n_side, d=1.0 / n_side)
        ky = 2 * np.pi * xp.fft.fftfreq(n_side, d=1.0 / n_side)
        k2 = ky[:, None] ** 2 + kx[None, :] ** 2
        k2[0, 0] = 1.0  # the mean charge carries no field
        cell_area = 1.0 / n_cells

    alive = []
    for step in range(steps):
        with log("sort"):
            keys = algorithms.morton_keys(pos, (0.0, 0.0), (1.0, 1.0), levels)
            keys, _, pos, vel, ids = algorithms.sort_by_key(keys, pos, vel, ids)
        n = ids.shape[0]
        with log("deposit"):
            rho_morton = algorithms.segment_sum(charges[:n], keys, n_cells) / cell_area
        with log("field"):
            rho = xp.empty(n_cells)
            rho[row_major] = rho_morton
            # Gauss's law, -laplace(phi) = rho, and E = -grad(phi), in Fourier space.
            phi_k = xp.fft.rfft2(rho.reshape(n_side, n_side)) / k2
            phi_k[0, 0] = 0.0
            ex = xp.fft.irfft2(-1j * kx[None, :] * phi_k, s=(n_side, n_side)).reshape(-1)[row_major]
            ey = xp.fft.irfft2(-1j * ky[:, None] * phi_k, s=(n_side, n_side)).reshape(-1)[row_major]
        with log("push"):
            kick_x, kick_y = rng.philox_normal2(SEED, ids, 2 + step)
            cells = keys.astype(xp.int64)
            vel[:, 0] += dt * ex[cells] + thermal * np.sqrt(dt) * kick_x
            vel[:, 1] += dt * ey[cells] + thermal * np.sqrt(dt) * kick_y
            pos += dt * vel
        with log("remove"):
            inside = xp.all((pos >= 0.0) & (pos < 1.0), axis=1)
            n = algorithms.compact_by_mask(inside, pos, vel, ids)
            pos, vel, ids = pos[:n], vel[:n], ids[:n]
        alive.append(n)

    with log("output"):
        density = xp.to_numpy(rho.reshape(n_side, n_side))
    return {"alive": np.asarray(alive), "density": density}


def on_the_fake_device() -> bool:
    """The CuPy backend is active and it is the fake CuPy (not merely installed)."""
    return xp.get_backend() == "cupy" and bool(xp.backend_info().get("fake_cupy"))


def run(args) -> dict:
    label = xp.get_backend() + (" (fake CuPy: the strict host stand-in)" if on_the_fake_device() else "")
    print(f"backend: {label}")
    log = PhaseLog()
    with profiling.count_transfers() as transfers:
        result = simulate(args.particles, args.levels, args.steps, log)
    alive = result["alive"]
    print(
        f"{args.particles} particles, {1 << args.levels}x{1 << args.levels} cells, {args.steps} steps: "
        f"{alive[-1]} still in the box"
    )
    print(log.table())
    print(transfers.report())
    result["label"] = label
    return result


def output_path(requested: str | None) -> Path:
    """``--output``, else build/demo/ of the checkout, else a temporary folder (read-only checkout)."""
    if requested:
        return Path(requested)
    folder = Path(__file__).resolve().parents[1] / "build" / "demo"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise PermissionError(folder)
    except OSError:
        folder = Path(tempfile.gettempdir()) / "cunumpy-demo"
        folder.mkdir(parents=True, exist_ok=True)
    return folder / "pic_demo.png"


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # headless: no display needed
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), constrained_layout=True)
    density = results[0]["density"]
    image = left.imshow(density, origin="lower", extent=(0, 1, 0, 1), cmap="magma")
    fig.colorbar(image, ax=left, label="charge density")
    left.set_title(f"charge density after the last step\n({results[0]['label']})", fontsize=10)
    left.set_xlabel("x")
    left.set_ylabel("y")
    for result, style in zip(results, ("-", "--")):
        right.plot(np.arange(1, len(result["alive"]) + 1), result["alive"], style, label=result["label"])
    right.set_title("particles in the box", fontsize=10)
    right.set_xlabel("step")
    right.set_ylabel("count")
    right.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _int_in(low: int, high: int):
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=_int_in(1, 10**8), default=40_000)
    parser.add_argument(
        "--levels", type=_int_in(2, 10), default=6, help="Morton bits per axis: the grid is 2**levels cells a side"
    )
    parser.add_argument("--steps", type=_int_in(1, 10**6), default=100)
    parser.add_argument("--output", help="PNG path (default: build/demo/pic_demo.png, or a temporary folder)")
    parser.add_argument("--save-result", help=argparse.SUPPRESS)  # the fake-CuPy child's hand-over file
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_arguments(argv)
    result = run(args)
    if args.save_result:
        np.savez(args.save_result, alive=result["alive"], density=result["density"], label=result["label"])
        return
    results = [result]
    if not on_the_fake_device():
        print("\n--- the same loop on the device path, under the fake CuPy ---", flush=True)
        env = dict(os.environ, CUNUMPY_FAKE_CUPY="1", CUNUMPY_BACKEND="cupy")
        with tempfile.TemporaryDirectory() as scratch:
            saved = Path(scratch) / "fake.npz"
            forwarded = [f"--particles={args.particles}", f"--levels={args.levels}", f"--steps={args.steps}"]
            subprocess.run([sys.executable, __file__, *forwarded, f"--save-result={saved}"], env=env, check=True)
            with np.load(saved) as child:
                results.append({k: child[k] for k in ("alive", "density")} | {"label": str(child["label"])})
        same = np.array_equal(results[0]["alive"], results[1]["alive"])
        print(f"\nparticle counts per step on both runs: {'identical' if same else 'different'}")
    path = output_path(args.output)
    plot(results, path)
    print(f"plot written to {path}")


if __name__ == "__main__":
    main()
