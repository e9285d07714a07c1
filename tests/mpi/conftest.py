"""Fixtures for tests run by every rank of `mpiexec -n N python -m pytest tests/mpi`.

Every rank runs every test in the same order, so a test must skip on all ranks or on none.
A watchdog ends a rank whose test hangs (a peer that never posts its message): the rank
exits, and mpiexec then ends the whole job instead of waiting forever.
"""

import faulthandler
import os
import sys

import pytest

import cunumpy as xp

#: Seconds one test may take before its rank is killed.
TEST_TIMEOUT = float(os.environ.get("CUNUMPY_MPI_TEST_TIMEOUT", "120"))


@pytest.fixture(autouse=True)
def watchdog():
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(autouse=True)
def forget_cuda_awareness():
    """Each test starts with nothing recorded, and leaves nothing behind."""
    saved = xp.mpi.get_mpi_cuda_aware()
    xp.mpi.set_mpi_cuda_aware(None)
    yield
    xp.mpi.set_mpi_cuda_aware(saved)


@pytest.fixture
def comm():
    MPI = xp.mpi.get_mpi()
    if xp.mpi.is_serial(MPI):
        pytest.exit("tests/mpi must run under mpiexec (the serial stand-in was selected)", returncode=2)
    return MPI.COMM_WORLD


def device_run() -> bool:
    """True when the job runs on the CuPy backend (the fake CuPy in CI)."""
    return xp.get_backend() == "cupy"


@pytest.fixture(params=[False, True], ids=["staged", "cuda_aware"])
def cuda_aware(request):
    """Both MPI paths for device buffers; on NumPy only one case (the flag is unused)."""
    if request.param and not device_run():
        pytest.skip("the CUDA-aware path needs device buffers")
    return request.param
