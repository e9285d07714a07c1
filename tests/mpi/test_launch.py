"""Run with `mpiexec -n N python -m pytest tests/mpi`: every rank runs every test."""

import numpy as np

import cunumpy as xp


def test_launcher_is_detected_and_mpi4py_is_used():
    assert xp.mpi.launched_under_mpi()
    MPI = xp.mpi.get_mpi()
    assert not xp.mpi.is_serial(MPI)
    assert MPI.COMM_WORLD.Get_size() >= 2


def test_local_rank_matches_the_communicator_on_one_node():
    MPI = xp.mpi.get_mpi()
    assert xp.mpi.local_rank() == MPI.COMM_WORLD.Get_rank()


def test_host_buffers_allreduce_on_the_numpy_backend():
    MPI = xp.mpi.get_mpi()
    comm = MPI.COMM_WORLD
    with xp.use_backend("numpy"):
        send = xp.full(4, float(comm.Get_rank() + 1))
        recv = xp.empty_like(send)
        comm.Allreduce(xp.to_numpy(send), recv, op=MPI.SUM)
    size = comm.Get_size()
    np.testing.assert_array_equal(recv, np.full(4, size * (size + 1) / 2))
