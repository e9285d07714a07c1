"""Faults on real ranks end the job instead of hanging: each case launches `mpiexec -n 2`
in a subprocess with a timeout (the backend of this test run is passed on)."""

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.nosan  # launches MPI jobs

MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(
    MPIEXEC is None or importlib.util.find_spec("mpi4py") is None, reason="needs mpiexec and mpi4py"
)

# Ranks that survive the fault wait here; an abort must end them long before.
JOB = textwrap.dedent(
    """
    import sys, time
    import cunumpy as xp
    MPI = xp.mpi.get_mpi()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    peer = 1 - rank
    mode = sys.argv[1]
    if mode == "wait":
        # rank 1 receives 8 items into room for 4: MPI reports the truncation on completion
        if rank == 0:
            xp.mpi.exchange(comm, sends=[(xp.zeros(8), 1, 3)], cuda_aware=False)
        else:
            xp.mpi.exchange(comm, receives=[(xp.zeros(4), 0, 3)], cuda_aware=False)
    elif mode == "post":
        # a tag above MPI_TAG_UB is refused when the request is posted
        tag = comm.Get_attr(MPI.TAG_UB) + 1
        xp.mpi.exchange(comm, sends=[(xp.zeros(8), peer, tag)], receives=[(xp.zeros(8), peer, tag)],
                        cuda_aware=False)
    elif mode == "ok":
        got = xp.zeros(8)
        xp.mpi.exchange(comm, sends=[(xp.full(8, float(rank)), peer, 3)], receives=[(got, peer, 3)],
                        cuda_aware=False)
        assert float(xp.to_numpy(got)[0]) == peer
        print("exchanged", flush=True)
        sys.exit(0)
    comm.Barrier()
    time.sleep(120)
    print("still running", flush=True)
    """
)

TIMEOUT = 90


def run_job(tmp_path, mode):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MAYBEMPI")}
    return subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, str(script), mode],
        capture_output=True, text=True, env=env, timeout=TIMEOUT,
    )


@needs_mpi
def test_a_healthy_job_exits_cleanly(tmp_path):
    result = run_job(tmp_path, "ok")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("exchanged") == 2


@needs_mpi
@pytest.mark.parametrize("mode", ["wait", "post"])
def test_a_failure_in_exchange_aborts_the_job(tmp_path, mode):
    result = run_job(tmp_path, mode)
    assert result.returncode != 0
    assert "still running" not in result.stdout
    assert "MPI_Abort" in result.stderr, result.stderr
