"""The particle-in-cell loop of the demo, split over MPI ranks: run `make demo-mpi`.

    mpiexec -n 4 python examples/pic_mpi.py                           # NumPy on every rank
    CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy mpiexec -n 2 python examples/pic_mpi.py
    CUNUMPY_BACKEND=cupy mpiexec -n 4 python examples/pic_mpi.py      # one GPU per rank
    python examples/pic_mpi.py                                        # one rank, no MPI started

The physics of examples/demo.py (two blobs of like-charged particles pushing themselves
apart in the unit square, nearest-grid-point deposit and field, a thermal kick from
counter-based random numbers, particles that leave the box dropped), by domain
decomposition:

  slabs      the grid of 2**levels x 2**levels cells is cut into one slab of rows per rank;
             a rank owns the particles in its slab.
  sort       Morton keys of the positions (``algorithms.morton_keys``) and one stable sort of
             the particle arrays by them (``algorithms.sort_by_key``); the keys decode
             (``algorithms.morton_decode``) to each particle's cell.
  deposit    the number of particles per cell (``algorithms.segment_sum`` of ones: exact
             integers) times the charge per particle.
  field      -laplace(phi) = rho in a grounded box (phi = 0 on the walls) by red-black SOR
             sweeps, warm-started from the last step; before each half-sweep the slab's edge
             rows of phi go to the neighbouring ranks (``xp.mpi.exchange``: the halo). The
             field is the centred difference of phi.
  push       the field of the particle's cell plus a kick from ``rng.philox_normal2`` with
             the particle id as the stream and the step as the counter: no generator state,
             the same numbers whichever rank owns the particle.
  migrate    particles whose new cell lies in another slab are found from their Morton keys,
             moved to the front of copies of the particle arrays with
             ``algorithms.compact_by_mask`` and sent to that rank with ``xp.mpi.exchange``
             (counts first, then the particles); particles that left the box are dropped.

Nothing in a step depends on how the particles or the cells are split: cell updates and
particle updates are element-wise, the deposit counts exactly, and the energies are summed
in 64-bit fixed point (units of 2**-32), whose sums do not depend on the order. The
particle count and the field and energy history are therefore bit-identical on any number of
ranks (tests/unit/test_pic_mpi.py runs 1, 2 and 4).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import cunumpy as xp
from cunumpy import algorithms, profiling, rng

SEED = 2026
PHASES = ("compute", "exchange", "migration", "diagnostics")
#: Fixed-point unit of the energy sums: int64 counts of 2**-32.
FIXED = 2.0**32
#: Tags of the messages: halo rows, particle counts and particles, per direction.
TAG_HALO_UP, TAG_HALO_DOWN, TAG_COUNT_UP, TAG_COUNT_DOWN, TAG_MOVE_UP, TAG_MOVE_DOWN = range(6)


class Phases:
    """Wall time per phase; on the CuPy backend each phase synchronises the device on entry
    and exit (``profiling.timed_region``), so the times are the device's."""

    def __init__(self):
        self.seconds = dict.fromkeys(PHASES, 0.0)

    def __call__(self, name: str):
        return _Timed(self, name)


class _Timed:
    def __init__(self, phases: Phases, name: str):
        self.phases, self.name = phases, name

    def __enter__(self):
        self.region = profiling.timed_region(self.name)
        self.timing = self.region.__enter__()

    def __exit__(self, *exc):
        self.region.__exit__(*exc)
        self.phases.seconds[self.name] += self.timing.elapsed
        return False


def fixed_point_sum(values) -> int:
    """Sum of ``values`` in units of 2**-32 as an exact int64: the same on any split."""
    return int(xp.rint(values * FIXED).astype(xp.int64).sum())


class Slab:
    """The rows ``[row0, row1)`` of the grid that this rank owns, and its neighbours."""

    def __init__(self, comm, n_side: int, proc_null: int):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        if n_side % self.size:
            raise SystemExit(f"the grid's {n_side} rows do not split evenly over {self.size} ranks")
        self.rows = n_side // self.size
        self.row0 = self.rank * self.rows
        self.n_side = n_side
        self.below = self.rank - 1 if self.rank > 0 else proc_null
        self.above = self.rank + 1 if self.rank < self.size - 1 else proc_null
        self.migrated = 0  # particles this rank sent to a neighbour, over the run

    def owner(self, cy):
        return cy // self.rows


def initial_particles(n_particles: int, slab: Slab, levels: int, chunk: int = 1 << 16):
    """Every rank draws the initial state of every particle id (philox: stream = id), in
    chunks, and keeps those in its slab; the set is the same on any number of ranks."""
    pos_parts, vel_parts, id_parts = [], [], []
    for start in range(0, n_particles, chunk):
        ids = xp.arange(start, min(start + chunk, n_particles), dtype=xp.int64)
        x0, y0 = rng.philox_normal2(SEED, ids, 0)
        vx, vy = rng.philox_normal2(SEED, ids, 1)
        odd = (ids % 2).astype(xp.float64)
        width = 0.05 + 0.03 * odd
        pos = xp.stack([0.42 + 0.18 * odd + width * x0, 0.40 + 0.2 * odd + width * y0], axis=1)
        vel = 0.05 * xp.stack([vx, vy], axis=1)
        inside = xp.all((pos >= 0.0) & (pos < 1.0), axis=1)
        keys = algorithms.morton_keys(pos, (0.0, 0.0), (1.0, 1.0), levels)
        _, cy = algorithms.morton_decode(keys, 2)
        mine = inside & (slab.owner(cy.astype(xp.int64)) == slab.rank)
        n = algorithms.compact_by_mask(mine, pos, vel, ids)
        pos_parts.append(pos[:n])
        vel_parts.append(vel[:n])
        id_parts.append(ids[:n])
    return xp.concatenate(pos_parts), xp.concatenate(vel_parts), xp.concatenate(id_parts)


def exchange_halo(comm, slab: Slab, phi) -> None:
    """Send the slab's first and last rows of phi to the neighbours, receive theirs into the
    halo rows (row 0 and row -1 of ``phi``). A wall has no neighbour (PROC_NULL): its halo
    row stays 0, the grounded wall."""
    xp.mpi.exchange(
        comm,
        sends=[(phi[-2], slab.above, TAG_HALO_UP), (phi[1], slab.below, TAG_HALO_DOWN)],
        receives=[(phi[0], slab.below, TAG_HALO_UP), (phi[-1], slab.above, TAG_HALO_DOWN)],
    )


def migrate(comm, slab: Slab, levels: int, pos, vel, ids):
    """Keep the particles still in this slab, send those that crossed into a neighbour's,
    receive theirs, drop those that left the box."""
    inside = xp.all((pos >= 0.0) & (pos < 1.0), axis=1)
    keys = algorithms.morton_keys(pos, (0.0, 0.0), (1.0, 1.0), levels)
    _, cy = algorithms.morton_decode(keys, 2)
    owner = slab.owner(cy.astype(xp.int64))
    moving_down = inside & (owner == slab.rank - 1)
    moving_up = inside & (owner == slab.rank + 1)
    staying = inside & (owner == slab.rank)
    lost = int(xp.count_nonzero(inside & ~(staying | moving_down | moving_up)))
    if lost:
        raise RuntimeError(f"rank {slab.rank}: {lost} particle(s) crossed more than one slab in a step; lower dt")
    # The particles that leave for a neighbour: copies moved to the front of their arrays,
    # pos and vel in one contiguous (n, 4) block so that one message carries them; then the
    # few movers split by direction (compact_by_mask leaves what follows the kept entries
    # unspecified, so each direction compacts its own copy).
    block = xp.concatenate([pos, vel], axis=1)
    moved_ids, down = ids.copy(), moving_down.copy()
    n_moving = algorithms.compact_by_mask(moving_down | moving_up, block, moved_ids, down)
    up_block, up_ids, down = block[:n_moving], moved_ids[:n_moving], down[:n_moving]
    down_block, down_ids = up_block.copy(), up_ids.copy()
    n_down = algorithms.compact_by_mask(down, down_block, down_ids)
    n_up = algorithms.compact_by_mask(~down, up_block, up_ids)
    down_block, down_ids, up_block, up_ids = down_block[:n_down], down_ids[:n_down], up_block[:n_up], up_ids[:n_up]
    n = algorithms.compact_by_mask(staying, pos, vel, ids)
    pos, vel, ids = pos[:n], vel[:n], ids[:n]

    counts_out = [np.array([down_ids.shape[0]], np.int64), np.array([up_ids.shape[0]], np.int64)]
    from_below, from_above = np.zeros(1, np.int64), np.zeros(1, np.int64)
    xp.mpi.exchange(
        comm,
        sends=[(counts_out[0], slab.below, TAG_COUNT_DOWN), (counts_out[1], slab.above, TAG_COUNT_UP)],
        receives=[(from_below, slab.below, TAG_COUNT_UP), (from_above, slab.above, TAG_COUNT_DOWN)],
    )
    n_below, n_above = int(from_below[0]), int(from_above[0])
    in_below, in_above = xp.empty((n_below, 4)), xp.empty((n_above, 4))
    ids_below, ids_above = xp.empty(n_below, dtype=xp.int64), xp.empty(n_above, dtype=xp.int64)
    sends, receives = [], []
    for block, moved, dest, tag in (
        (down_block, down_ids, slab.below, TAG_MOVE_DOWN),
        (up_block, up_ids, slab.above, TAG_MOVE_UP),
    ):
        if moved.shape[0]:
            sends += [(block, dest, tag), (moved, dest, tag + 2)]
    for block, moved, source, tag in (
        (in_below, ids_below, slab.below, TAG_MOVE_UP),
        (in_above, ids_above, slab.above, TAG_MOVE_DOWN),
    ):
        if moved.shape[0]:
            receives += [(block, source, tag), (moved, source, tag + 2)]
    if sends or receives:
        xp.mpi.exchange(comm, sends=sends, receives=receives)
    slab.migrated += down_ids.shape[0] + up_ids.shape[0]
    pos = xp.concatenate([pos, in_below[:, :2], in_above[:, :2]])
    vel = xp.concatenate([vel, in_below[:, 2:], in_above[:, 2:]])
    ids = xp.concatenate([ids, ids_below, ids_above])
    return pos, vel, ids


def simulate(
    comm, proc_null: int, n_particles: int, levels: int, steps: int, sweeps: int, phases: Phases, dt: float = 0.004
) -> dict:
    """Run the loop on this rank; every rank returns the same history (host values)."""
    n_side = 1 << levels
    slab = Slab(comm, n_side, proc_null)
    rows = slab.rows
    h = 1.0 / n_side
    thermal, charge_total = 0.05, 10.0
    charge = charge_total / n_particles  # per particle; charge over mass is 1 for all
    omega = 2.0 / (1.0 + np.sin(np.pi * h))  # the optimal SOR factor of the Poisson problem

    pos, vel, ids = initial_particles(n_particles, slab, levels)
    # phi with a halo row above and below and a wall column (phi = 0) left and right.
    phi = xp.zeros((rows + 2, n_side + 2))
    # The colour of a cell is the parity of its global row + column: the same on any split.
    gi = (np.arange(rows)[:, None] + slab.row0) + np.arange(n_side)[None, :]
    red = xp.asarray(gi % 2 == 0)
    black = xp.asarray(gi % 2 == 1)
    history: dict[str, list[int]] = {"alive": [], "kinetic": [], "field": [], "phi_sum": []}
    for step in range(steps):
        with phases("compute"):
            keys = algorithms.morton_keys(pos, (0.0, 0.0), (1.0, 1.0), levels)
            keys, _, pos, vel, ids = algorithms.sort_by_key(keys, pos, vel, ids)
            cx, cy = algorithms.morton_decode(keys, 2)
            cells = (cy.astype(xp.int64) - slab.row0) * n_side + cx.astype(xp.int64)
            counts = algorithms.segment_sum(xp.ones(ids.shape[0]), cells, rows * n_side)
            # h**2 * rho, with rho = count * charge / h**2: the right-hand side of a sweep.
            source = (counts * charge).reshape(rows, n_side)
        # The first solve starts from phi = 0: n_side sweeps converge it; later ones start
        # from the last step's phi and need few.
        for _ in range(sweeps if step else max(sweeps, n_side)):
            for colour in (red, black):
                with phases("exchange"):
                    exchange_halo(comm, slab, phi)
                with phases("compute"):
                    inner = phi[1:-1, 1:-1]
                    jacobi = 0.25 * (phi[:-2, 1:-1] + phi[2:, 1:-1] + phi[1:-1, :-2] + phi[1:-1, 2:] + source)
                    phi[1:-1, 1:-1] = xp.where(colour, inner + omega * (jacobi - inner), inner)
        with phases("exchange"):
            exchange_halo(comm, slab, phi)
        with phases("compute"):
            ex = (-(phi[1:-1, 2:] - phi[1:-1, :-2]) / (2 * h)).reshape(-1)
            ey = (-(phi[2:, 1:-1] - phi[:-2, 1:-1]) / (2 * h)).reshape(-1)
            kick_x, kick_y = rng.philox_normal2(SEED, ids, 2 + step)
            vel[:, 0] += dt * ex[cells] + thermal * np.sqrt(dt) * kick_x
            vel[:, 1] += dt * ey[cells] + thermal * np.sqrt(dt) * kick_y
            pos += dt * vel
        with phases("migration"):
            pos, vel, ids = migrate(comm, slab, levels, pos, vel, ids)
        with phases("diagnostics"):
            local = [
                int(ids.shape[0]),
                fixed_point_sum(0.5 * charge * (vel[:, 0] ** 2 + vel[:, 1] ** 2)),
                fixed_point_sum(0.5 * h * h * (ex**2 + ey**2)),
                fixed_point_sum(phi[1:-1, 1:-1]),
            ]
            # Python ints summed per column: exact, and the same on every rank.
            totals = [sum(column) for column in zip(*comm.allgather(local))]
        for name, value in zip(("alive", "kinetic", "field", "phi_sum"), totals):
            history[name].append(value)
    history["migrated"] = [sum(comm.allgather(slab.migrated))]
    final_phi = comm.gather(xp.to_numpy(phi[1:-1, 1:-1]), root=0)
    particles = comm.gather((xp.to_numpy(ids), xp.to_numpy(pos), xp.to_numpy(vel)), root=0)
    result = {k: np.asarray(v, np.int64) for k, v in history.items()}
    if comm.Get_rank() == 0:
        result["phi"] = np.concatenate(final_phi)
        all_ids = np.concatenate([p[0] for p in particles])
        order = np.argsort(all_ids, kind="stable")
        result["ids"] = all_ids[order]
        result["pos"] = np.concatenate([p[1] for p in particles])[order]
        result["vel"] = np.concatenate([p[2] for p in particles])[order]
    return result


def on_the_fake_device() -> bool:
    return xp.get_backend() == "cupy" and bool(xp.backend_info().get("fake_cupy"))


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=40_000, help="particles in all (default 40000)")
    parser.add_argument("--particles-per-rank", type=int, default=None, help="weak scaling: particles = this x ranks")
    parser.add_argument("--levels", type=int, default=6, help="the grid is 2**levels cells a side (default 6)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--sweeps", type=int, default=8, help="red-black SOR sweeps per step (default 8)")
    parser.add_argument("--dt", type=float, default=0.004, help="time step (default 0.004)")
    parser.add_argument("--save", help="rank 0 writes the history and the final state to this .npz")
    parser.add_argument("--compare", help="rank 0 compares the history and final state with this .npz (--save)")
    parser.add_argument("--json", action="store_true", help="rank 0 prints one JSON line of figures")
    args = parser.parse_args(argv)
    for name in ("particles", "levels", "steps", "sweeps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if not 0.0 < args.dt <= 1.0:
        parser.error("--dt must be in (0, 1]")
    if not 2 <= args.levels <= 10:
        parser.error("--levels must be between 2 and 10")
    return args


def main(argv=None) -> int:
    args = parse_arguments(argv)
    # Start-up, in this order, on every rank (the device steps do nothing on NumPy).
    xp.cuda.bind_local_device()  # GPU = node-local rank % GPUs, before MPI starts
    MPI = xp.mpi.get_mpi()  # mpi4py under a launcher, else the serial stand-in
    comm = MPI.COMM_WORLD
    cuda_aware = xp.mpi.mpi_is_cuda_aware(comm)  # collective; recorded for exchange()
    size = comm.Get_size()
    n_particles = args.particles if args.particles_per_rank is None else args.particles_per_rank * size
    phases = Phases()
    comm.Barrier()
    start = time.perf_counter()
    with profiling.count_transfers() as transfers:
        result = simulate(comm, MPI.PROC_NULL, n_particles, args.levels, args.steps, args.sweeps, phases, args.dt)
    elapsed = time.perf_counter() - start
    # The slowest rank's time per phase decides the wall time.
    slowest = {name: max(comm.allgather(seconds)) for name, seconds in phases.seconds.items()}
    if comm.Get_rank() != 0:
        return 0
    label = xp.get_backend() + (" (fake CuPy)" if on_the_fake_device() else "")
    if args.json:
        figures = {"ranks": size, "backend": label, "particles": n_particles, "levels": args.levels}
        figures |= {"steps": args.steps, "sweeps": args.sweeps, "seconds": elapsed}
        figures |= {f"{name}_s": seconds for name, seconds in slowest.items()}
        figures["alive"] = int(result["alive"][-1])
        figures["migrated"] = int(result["migrated"][0])
        print(json.dumps(figures), flush=True)
    else:
        n_side = 1 << args.levels
        print(f"backend: {label}, {size} rank(s), CUDA-aware MPI: {cuda_aware}")
        print(
            f"{n_particles} particles, {n_side}x{n_side} cells in {size} slab(s) of {n_side // size} rows, "
            f"{args.steps} steps of {args.sweeps} SOR sweeps: {result['alive'][-1]} still in the box, "
            f"{result['migrated'][0]} migrations between ranks"
        )
        kinetic, field = result["kinetic"] / FIXED, result["field"] / FIXED
        print(f"energy: kinetic {kinetic[0]:.6f} -> {kinetic[-1]:.6f}, field {field[0]:.6f} -> {field[-1]:.6f}")
        print(f"{'phase':<12} {'ms (slowest rank)':>18}")
        for name, seconds in slowest.items():
            print(f"{name:<12} {seconds * 1e3:>18.1f}")
        print(f"{'total':<12} {elapsed * 1e3:>18.1f}")
        print(f"rank 0 copies between host and device: {transfers.to_host} to host, {transfers.to_device} to device")
    if args.save:
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.save, **result)
    if args.compare:
        return compare(result, args.compare)
    return 0


#: What does not depend on the decomposition (``migrated`` does: it counts crossings).
COMPARED = ("alive", "kinetic", "field", "phi_sum", "phi", "ids", "pos", "vel")


def compare(result: dict, path: str) -> int:
    """Print whether ``result`` is bit-identical to the run saved in ``path``; 1 if not."""
    with np.load(path) as saved:
        different = [k for k in COMPARED if not np.array_equal(result[k], saved[k])]
    if different:
        print(f"DIFFERENT from {path}: {', '.join(different)}")
        return 1
    print(f"bit-identical to {path}: particle count, energies and phi per step, final particles and field")
    return 0


if __name__ == "__main__":
    sys.exit(main())
