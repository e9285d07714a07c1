"""Heat diffusion on a ring of MPI ranks, one GPU per rank, halos exchanged with xp.mpi.exchange.

    mpiexec -n 2 python examples/mpi_halo.py                         # NumPy on every rank
    CUNUMPY_BACKEND=cupy mpiexec -n 2 python examples/mpi_halo.py    # one GPU per rank
    python examples/mpi_halo.py                                      # one rank, no MPI started

Each rank holds n_local cells of a periodic 1-D field and two halo cells, u[0] and u[-1].
Every step sends its first and last cells to its neighbours, receives their cells into
its halos, then applies the explicit stencil. The result is checked against the exact
decay of the discrete sine mode.
"""

import argparse

import numpy as np

import cunumpy as xp


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=64, help="cells per rank")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)

    # Start-up, in this order, on every rank (the device steps do nothing on NumPy).
    xp.cuda.bind_local_device()  # GPU = node-local rank % GPUs, before MPI starts
    MPI = xp.mpi.get_mpi()  # mpi4py under a launcher, else the serial stand-in
    comm = MPI.COMM_WORLD
    cuda_aware = xp.mpi.mpi_is_cuda_aware(comm)  # collective; recorded for exchange()
    rank, size = comm.Get_rank(), comm.Get_size()
    left, right = (rank - 1) % size, (rank + 1) % size

    n, total = args.cells, args.cells * comm.Get_size()
    x = (rank * n + np.arange(n) + 0.5) / total
    u = xp.zeros(n + 2)
    u[1:-1] = xp.to_cunumpy(np.sin(2 * np.pi * x))  # the one transfer in
    alpha = 0.25

    with xp.profiling.count_transfers() as counter:
        for _ in range(args.steps):
            xp.mpi.exchange(
                comm,
                sends=[(u[1:2], left, 0), (u[-2:-1], right, 1)],  # (array, dest, tag)
                receives=[(u[-1:], right, 0), (u[0:1], left, 1)],  # (array, source, tag)
            )
            u[1:-1] = u[1:-1] + alpha * (u[:-2] - 2.0 * u[1:-1] + u[2:])

    decay = (1.0 - 4.0 * alpha * np.sin(np.pi / total) ** 2) ** args.steps
    error = float(np.abs(xp.to_numpy(u[1:-1]) - decay * np.sin(2 * np.pi * x)).max())
    worst = max(comm.allgather(error))
    if rank == 0:
        print(f"backend: {xp.get_backend()}, {size} rank(s), CUDA-aware MPI: {cuda_aware}")
        print(f"{total} cells, {args.steps} steps: largest error {worst:.2e}")
        print(f"rank 0 copies between host and device in the loop: {counter.to_host + counter.to_device}")
    if worst > 1e-12:
        raise SystemExit(f"rank {rank}: the field differs from the exact solution by {worst}")


if __name__ == "__main__":
    main()
