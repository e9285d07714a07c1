"""examples/pic_mpi.py gives the same answer on 1, 2 and 4 MPI ranks.

Each run is a fresh `mpiexec -n N` job on the session's backend (the NumPy run of
`make test`, and the fake-CuPy run, where the kernels of the algorithms are emulated); the
small grid and few steps keep the six jobs short. The comparison is bit for bit, with no
tolerance: every cell update and every particle update is element-wise, the deposit counts
particles exactly, and the energies are summed in int64 fixed point, so nothing depends on
how the cells and particles are split or ordered. Only the number of migrations between
ranks depends on the split (it is 0 on one rank), and it must not be 0 on two and four.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "examples" / "pic_mpi.py"
#: 16 x 16 cells (4 rows a slab on 4 ranks), few steps, a long time step so that particles
#: cross between slabs and, from step 5, leave the box (the count changes).
ARGS = ["--particles=3000", "--levels=4", "--steps=8", "--sweeps=4", "--dt=0.04"]
COMPARED = ("alive", "kinetic", "field", "phi_sum", "phi", "ids", "pos", "vel")

pytestmark = pytest.mark.nosan  # child interpreters under mpiexec: nothing for the sanitizers


def _mpiexec() -> str:
    pytest.importorskip("mpi4py")
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("no mpiexec (the mpi extra installs MPICH into the environment)")
    return mpiexec


def _on_fake_cupy() -> bool:
    return os.environ.get("CUNUMPY_BACKEND", "").lower() == "cupy" and os.environ.get("CUNUMPY_FAKE_CUPY") == "1"


def _run(mpiexec: str, ranks: int, out: Path, env: dict) -> dict:
    done = subprocess.run(
        [mpiexec, "-n", str(ranks), sys.executable, str(PROGRAM), *ARGS, f"--save={out}"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{ranks} rank(s)" in done.stdout, done.stdout
    with np.load(out) as saved:
        return {k: saved[k] for k in saved.files}


def test_the_answer_does_not_depend_on_the_rank_count(tmp_path):
    if os.environ.get("CUNUMPY_BACKEND", "").lower() == "cupy" and not _on_fake_cupy():
        pytest.skip("a GPU run: one rank per GPU needs as many GPUs as ranks")
    mpiexec = _mpiexec()
    env = dict(os.environ)
    runs = {n: _run(mpiexec, n, tmp_path / f"{n}.npz", env) for n in (1, 2, 4)}
    one = runs[1]
    assert one["alive"].shape == (8,) and one["ids"].shape[0] == one["alive"][-1]
    assert len(np.unique(one["ids"])) == one["ids"].shape[0]  # no particle lost or doubled
    assert int(one["migrated"][0]) == 0
    assert one["alive"][-1] < one["alive"][0], "no particle left the box: the count per step is not tested"
    for n in (2, 4):
        for key in COMPARED:
            assert np.array_equal(runs[n][key], one[key]), f"{key} differs between 1 and {n} ranks"
        assert int(runs[n]["migrated"][0]) > 0, f"no particle crossed between the {n} slabs: the test proves nothing"
    if _on_fake_cupy():
        # The same loop on the NumPy backend gives the same bits as the device path.
        numpy_env = {k: v for k, v in env.items() if k not in ("CUNUMPY_BACKEND", "CUNUMPY_FAKE_CUPY")}
        on_numpy = _run(mpiexec, 2, tmp_path / "numpy.npz", numpy_env)
        for key in COMPARED:
            assert np.array_equal(on_numpy[key], one[key]), f"{key} differs between NumPy and the fake CuPy"


def test_bad_arguments_are_refused_with_a_message():
    done = subprocess.run(
        [sys.executable, str(PROGRAM), "--levels=1"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 2 and "--levels" in done.stderr


def test_a_particle_crossing_two_slabs_ends_the_job_with_a_message(tmp_path):
    """The migration sends to neighbours only: a time step so long that particles jump over a
    slab is a RuntimeError on the rank that sees it, and the job ends (MPI_Abort) instead of
    hanging the other ranks."""
    mpiexec = _mpiexec()
    args = ["--particles=3000", "--levels=4", "--steps=4", "--sweeps=2", "--dt=0.3"]
    done = subprocess.run(
        [mpiexec, "-n", "4", sys.executable, str(PROGRAM), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode != 0
    assert "crossed more than one slab in a step; lower dt" in done.stderr, done.stderr
