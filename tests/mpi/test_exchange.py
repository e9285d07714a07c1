"""cunumpy.mpi on real ranks: the probe, halo exchanges, many buffers, per-rank streams.

Run by every rank of `mpiexec -n 2|4 python -m pytest tests/mpi`, on the NumPy backend and
with CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy, where a fake device array's
`__cuda_array_interface__` points at host memory: both the CUDA-aware path and the
staging path then really go through MPI.
"""

import numpy as np
import pytest
from conftest import device_run

import cunumpy as xp


def global_field(i, j):
    """The value of the global grid point (i, j): unique, so misplaced data shows."""
    return 1000.0 * i + j


def test_probe_agrees_on_every_rank_and_is_recorded(comm):
    answer = xp.mpi.mpi_is_cuda_aware(comm)
    assert comm.allgather(answer) == [answer] * comm.Get_size()
    # NumPy: never CUDA-aware. Fake CuPy: host memory behind the device pointer, so MPICH
    # reads it, and the probe must find that out.
    assert answer is device_run()
    assert xp.mpi.get_mpi_cuda_aware() is answer


def test_probe_uses_comm_world_by_default(comm):
    assert xp.mpi.mpi_is_cuda_aware() is device_run()


def test_start_up_sequence_of_the_guide_runs_as_written(comm):
    device = xp.cuda.bind_local_device()
    from mpi4py import MPI

    xp.mpi.require_cuda_aware_mpi()
    assert (device is None) is (not device_run())
    a = xp.full(4, float(comm.Get_rank() + 1))
    total = xp.zeros(4)
    xp.mpi.synchronize_for_mpi(a, total)
    comm.Allreduce(a, total, op=MPI.SUM)
    size = comm.Get_size()
    np.testing.assert_array_equal(xp.to_numpy(total), np.full(4, size * (size + 1) / 2))


def test_guide_mpi_buffer_examples_run_as_written(comm, cuda_aware):
    xp.mpi.set_mpi_cuda_aware(cuda_aware)
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    a = xp.full(8, float(rank))
    received = xp.zeros(8)
    with xp.mpi.mpi_buffer(received, send=False, recv=True) as rbuf:
        request = comm.Irecv(rbuf, source=left, tag=3)
        with xp.mpi.mpi_buffer(a) as sbuf:
            comm.Send(sbuf, dest=right, tag=3)
        request.Wait()
    np.testing.assert_array_equal(xp.to_numpy(received), np.full(8, float(left)))
    send_staging = xp.mpi.MPIStaging(a.shape, a.dtype)
    recv_staging = xp.mpi.MPIStaging(a.shape, a.dtype)
    for step in range(3):
        a[...] = rank + 10 * step
        with recv_staging.buffer(received, send=False, recv=True) as rbuf:
            request = comm.Irecv(rbuf, source=left, tag=4)
            with send_staging.buffer(a) as sbuf:
                comm.Send(sbuf, dest=right, tag=4)
            request.Wait()
        np.testing.assert_array_equal(xp.to_numpy(received), np.full(8, float(left + 10 * step)))


def test_halo_exchange_on_a_1d_decomposition(comm, cuda_aware):
    """Rows of a (nx + 2, ny) block: contiguous faces, periodic in x."""
    rank, size = comm.Get_rank(), comm.Get_size()
    nx, ny = 5, 7
    i0 = rank * nx
    rows = np.arange(i0 - 1, i0 + nx + 1) % (size * nx)
    expected = global_field(rows[:, None], np.arange(ny)[None, :])
    u = xp.to_cunumpy(np.where((np.arange(nx + 2) % (nx + 1) == 0)[:, None], -1.0, expected))
    up, down = (rank + 1) % size, (rank - 1) % size
    xp.mpi.exchange(
        comm,
        sends=[(u[nx], up, 0), (u[1], down, 1)],
        receives=[(u[0], down, 0), (u[nx + 1], up, 1)],
        cuda_aware=cuda_aware,
    )
    np.testing.assert_array_equal(xp.to_numpy(u), expected)


def cartesian(comm):
    from mpi4py import MPI

    dims = MPI.Compute_dims(comm.Get_size(), 2)
    return comm.Create_cart(dims, periods=[True, True]), dims


def block_2d(cart, dims, nx=4, ny=6):
    """A local (nx + 2, ny + 2) block with ghost layers set to -1 and its expected halo."""
    cx, cy = cart.Get_coords(cart.Get_rank())
    gi = (np.arange(cx * nx - 1, cx * nx + nx + 1) % (dims[0] * nx))[:, None]
    gj = (np.arange(cy * ny - 1, cy * ny + ny + 1) % (dims[1] * ny))[None, :]
    expected = global_field(gi, gj)
    host = expected.copy()
    host[0, :] = host[-1, :] = host[:, 0] = host[:, -1] = -1.0
    # Corners are not exchanged by a face-only halo update.
    for i in (0, -1):
        for j in (0, -1):
            expected[i, j] = -1.0
    return xp.to_cunumpy(host), expected


def face_descriptors(cart, u):
    """Sends and receives of the four faces; the x faces (columns) are non-contiguous."""
    sends, receives = [], []
    for axis in (0, 1):
        lower, upper = cart.Shift(axis, 1)
        if axis == 0:
            first, last, ghost_lo, ghost_hi = u[1, 1:-1], u[-2, 1:-1], u[0, 1:-1], u[-1, 1:-1]
        else:
            first, last, ghost_lo, ghost_hi = u[1:-1, 1], u[1:-1, -2], u[1:-1, 0], u[1:-1, -1]
        tag = 10 * axis
        sends += [(last, upper, tag), (first, lower, tag + 1)]
        receives += [(ghost_lo, lower, tag), (ghost_hi, upper, tag + 1)]
    return sends, receives


def test_halo_exchange_on_a_2d_decomposition_with_strided_faces(comm, cuda_aware):
    cart, dims = cartesian(comm)
    u, expected = block_2d(cart, dims)
    sends, receives = face_descriptors(cart, u)
    assert any(not a.flags.c_contiguous for a, _, _ in sends)
    xp.mpi.exchange(cart, sends=sends, receives=receives, cuda_aware=cuda_aware)
    np.testing.assert_array_equal(xp.to_numpy(u), expected)
    cart.Free()


def test_halo_exchange_2d_with_mpi_buffer_and_sendrecv(comm, cuda_aware):
    """The same update written with mpi_buffer around raw Sendrecv calls."""
    xp.mpi.set_mpi_cuda_aware(cuda_aware)
    cart, dims = cartesian(comm)
    u, expected = block_2d(cart, dims)
    sends, receives = face_descriptors(cart, u)
    for (send, dest, tag), (recv, source, _) in zip(sends, receives):
        with xp.mpi.mpi_buffer(send) as sbuf, xp.mpi.mpi_buffer(recv, send=False, recv=True) as rbuf:
            cart.Sendrecv(sbuf, dest=dest, sendtag=tag, recvbuf=rbuf, source=source, recvtag=tag)
    np.testing.assert_array_equal(xp.to_numpy(u), expected)
    cart.Free()


def test_exchange_with_many_buffers_per_neighbour(comm, cuda_aware):
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    dtypes = [np.float64, np.float32, np.int32, np.int64, np.complex128, np.uint8]
    sends, receives, expected = [], [], []
    for k in range(24):
        dtype = dtypes[k % len(dtypes)]
        n = 1 + 37 * k % 101
        for direction, peer, source in ((0, right, left), (1, left, right)):
            tag = 2 * k + direction
            payload = (np.arange(n) + 1000 * rank + tag).astype(dtype)
            sends.append((xp.to_cunumpy(payload), peer, tag))
            receives.append((xp.zeros(n, dtype=dtype), source, tag))
            expected.append((np.arange(n) + 1000 * source + tag).astype(dtype))
    with xp.profiling.count_transfers() as counter:
        xp.mpi.exchange(comm, sends=sends, receives=receives, cuda_aware=cuda_aware)
    for (received, _, _), want in zip(receives, expected):
        np.testing.assert_array_equal(xp.to_numpy(received), want)
    staged = device_run() and not cuda_aware
    assert counter.to_host == (len(sends) if staged else 0)
    assert counter.to_device == (len(receives) if staged else 0)


def test_random_streams_per_rank_are_distinct_and_reproducible(comm):
    rank = comm.Get_rank()
    first = xp.to_numpy(xp.rng.random_streams.seed(1234, rank=rank).generator().random(8))
    again = xp.to_numpy(xp.rng.random_streams.seed(1234, rank=rank).generator().random(8))
    np.testing.assert_array_equal(first, again)
    draws = comm.allgather(first.tolist())
    assert len({tuple(d) for d in draws}) == comm.Get_size()


def test_a_malformed_descriptor_posts_nothing(comm, cuda_aware):
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    stale = xp.full(4, -7.0)
    fresh = xp.full(4, float(rank))
    received = xp.zeros(4)
    if rank == 0:
        # A valid send first: had it been posted, the right neighbour would get -7 below.
        with pytest.raises(ValueError, match=r"sends\[1\]"):
            xp.mpi.exchange(comm, sends=[(stale, right, 5), (stale, right)], cuda_aware=cuda_aware)
        with pytest.raises(ValueError, match=r"receives\[0\]"):
            xp.mpi.exchange(comm, sends=[(stale, right, 5)], receives=[(received, left, 5, 0)], cuda_aware=cuda_aware)
        with pytest.raises(ValueError, match="rank"):
            xp.mpi.exchange(comm, sends=[(stale, right, 5)], receives=[(received, size + 3, 5)], cuda_aware=cuda_aware)
    comm.Barrier()
    xp.mpi.exchange(comm, sends=[(fresh, right, 5)], receives=[(received, left, 5)], cuda_aware=cuda_aware)
    np.testing.assert_array_equal(xp.to_numpy(received), np.full(4, float(left)))
    assert not comm.Iprobe(source=left, tag=5)


def test_a_rank_raising_inside_mpi_buffer_copies_nothing_back_and_unlocks(comm, cuda_aware):
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    xp.mpi.set_mpi_cuda_aware(cuda_aware)
    target = xp.full((3, 4), -1.0)[:, 1]  # a strided view: packing and scattering involved
    staging = xp.mpi.MPIStaging(3, np.float64)
    outgoing = xp.full(3, float(rank))

    class Failure(Exception):
        pass

    with pytest.raises(Failure), staging.buffer(target, send=False, recv=True) as rbuf:
        comm.Sendrecv(xp.to_numpy(outgoing), dest=right, sendtag=8, recvbuf=rbuf, source=left, recvtag=8)
        raise Failure
    np.testing.assert_array_equal(xp.to_numpy(target), np.full(3, -1.0))
    # The staging is free again and works.
    with staging.buffer(target, send=False, recv=True) as rbuf:
        comm.Sendrecv(xp.to_numpy(outgoing), dest=right, sendtag=9, recvbuf=rbuf, source=left, recvtag=9)
    np.testing.assert_array_equal(xp.to_numpy(target), np.full(3, float(left)))


def test_open_boundaries_mixed_dtypes_and_empty_messages(comm, cuda_aware):
    """The descriptors of examples/pic_mpi.py: rows of phi to the neighbours of a non-periodic
    chain (PROC_NULL at the walls, whose halo stays as it was), particle counts as host int64
    arrays, and messages of zero elements. Each exchange is the common form (the C path)."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    below = rank - 1 if rank > 0 else MPI.PROC_NULL
    above = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    phi = xp.to_cunumpy(np.full((4, 3), -1.0))
    phi[1:-1] = xp.to_cunumpy(np.full((2, 3), float(rank)))
    xp.mpi.exchange(
        comm,
        sends=[(phi[-2], above, 0), (phi[1], below, 1)],
        receives=[(phi[0], below, 0), (phi[-1], above, 1)],
        cuda_aware=cuda_aware,
    )
    got = xp.to_numpy(phi)
    np.testing.assert_array_equal(got[0], np.full(3, rank - 1.0 if rank > 0 else -1.0))
    np.testing.assert_array_equal(got[-1], np.full(3, rank + 1.0 if rank < size - 1 else -1.0))
    counts = [np.array([10 * rank + 1], np.int64), np.array([10 * rank + 2], np.int64)]
    got_below, got_above = np.full(1, -7, np.int64), np.full(1, -7, np.int64)
    empty_out, empty_in = xp.zeros((0, 4)), xp.zeros((0, 4))
    xp.mpi.exchange(
        comm,
        sends=[(counts[0], below, 2), (counts[1], above, 3)],
        receives=[(got_below, below, 3), (got_above, above, 2)],
    )
    xp.mpi.exchange(comm, sends=[(empty_out, above, 4)], receives=[(empty_in, below, 4)], cuda_aware=cuda_aware)
    assert int(got_below[0]) == (10 * (rank - 1) + 2 if rank > 0 else -7)
    assert int(got_above[0]) == (10 * (rank + 1) + 1 if rank < size - 1 else -7)
