"""Faults on real ranks end the job instead of hanging: each case launches `mpiexec -n 2`
in a subprocess with a timeout (the backend of this test run is passed on)."""

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import time
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
    elif mode == "descriptor":
        # issue 22 item 9: rank 1 passes a 2-tuple and gets exchange()'s ValueError before
        # posting anything; rank 0 waits for its message. The uncaught error must end the job.
        if rank == 0:
            xp.mpi.exchange(comm, receives=[(xp.zeros(4), 1, 7)], cuda_aware=False)
        else:
            xp.mpi.exchange(comm, sends=[(xp.zeros(4), 0)], cuda_aware=False)
    elif mode == "thread":
        import threading
        got = xp.zeros(2)
        xp.mpi.exchange(comm, sends=[(xp.ones(2), peer, 1)], receives=[(got, peer, 1)], cuda_aware=False)
        if rank == 1:
            def work():
                raise ValueError("a worker thread failed")
            worker = threading.Thread(target=work, name="worker")
            worker.start()
            worker.join()
        else:
            xp.mpi.exchange(comm, receives=[(got, 1, 2)], cuda_aware=False)
    elif mode == "exit":
        # rank 1 ends with sys.exit(3) while rank 0 waits for its message
        got = xp.zeros(2)
        xp.mpi.exchange(comm, sends=[(xp.ones(2), peer, 1)], receives=[(got, peer, 1)], cuda_aware=False)
        if rank == 1:
            sys.exit(3)
        xp.mpi.exchange(comm, receives=[(got, 1, 2)], cuda_aware=False)
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


def run_job(tmp_path, mode, timeout=TIMEOUT, **variables):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MAYBEMPI", "CUNUMPY_MPI_ABORT_ON_EXCEPTION")}
    env.update(variables)
    return subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, str(script), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
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
    # exchange() prints the error before aborting (the abort ends the rank before the re-raised
    # error could be printed); MPICH's own "application called MPI_Abort" line is not checked:
    # Hydra's mpiexec may exit on the abort before forwarding it
    assert "cunumpy.mpi: exchange() failed on rank" in result.stderr, result.stderr
    assert "calling MPI_Abort(comm, 1)" in result.stderr, result.stderr


@needs_mpi
@pytest.mark.parametrize(
    "mode, error",
    [
        ("descriptor", "ValueError: exchange(): sends[0] must be an (array, dest, tag) tuple"),
        ("thread", "ValueError: a worker thread failed"),
    ],
)
def test_an_uncaught_exception_on_one_rank_ends_the_job(tmp_path, mode, error):
    start = time.monotonic()
    # was: the job never ended (rank 0 waited in exchange for a message never sent). A job
    # that is not aborted ends only after the job's 120 s sleep (printing "still running") or
    # not at all (run_job's timeout), so ending well before that sleep is the behaviour.
    result = run_job(tmp_path, mode, timeout=300)
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert "still running" not in result.stdout
    # The whole traceback, then cunumpy's line, reach the launcher's stderr before the abort.
    # Was flaky: Hydra serves a rank's abort request before a stderr pipe that became readable
    # at the same moment and exits without forwarding it, so flushing alone lost the output
    # (or part of it) in about one run in ten; the hook now waits until the pipe is read.
    # MPICH's own "application called MPI_Abort" line, written inside MPI_Abort, can still be
    # lost that way, so it is not checked.
    assert error in result.stderr, result.stderr
    line = "cunumpy.mpi: uncaught ValueError" + (" in thread 'worker'" if mode == "thread" else "")
    assert f"{line} on rank 1 of 2; calling MPI_Abort(MPI_COMM_WORLD, 1)" in result.stderr, result.stderr
    assert result.stderr.index(error) < result.stderr.index(line)
    assert elapsed < 110, f"the job took {elapsed:.1f} s to end"


@needs_mpi
def test_a_rank_ending_with_a_non_zero_sys_exit_ends_the_job(tmp_path):
    start = time.monotonic()
    # was: the job never ended (a SystemExit does not reach sys.excepthook)
    result = run_job(tmp_path, "exit", timeout=300)
    assert result.returncode != 0
    assert "still running" not in result.stdout
    assert "cunumpy.mpi: sys.exit(3) on rank 1 of 2; calling MPI_Abort(MPI_COMM_WORLD, 3)" in result.stderr, (
        result.stderr
    )
    assert time.monotonic() - start < 110
