"""The programs in examples/ run, each in a fresh interpreter on the session's backend (the
NumPy run and the fake-CuPy run of `make test`); the MPI one also under `mpiexec -n 2`.
The documentation includes their code, so what it shows is what runs here."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# The programs run unchanged: on the fake CuPy their CUDA launches emulate by themselves.

# program -> (arguments, a line its output must contain)
PROGRAMS = {
    "structs.py": ([], "1948 particles left, 1948 deposited in 16 cells"),
    "mpi_halo.py": (["--steps=50"], "largest error"),
    "kernel_folder/run_plasma.py": ([], "charge: 4000 of 4000 particles"),
    "fast_before_gpu.py": (
        [],
        "transpose_padded: global 16384 sectors for 16384 ideal (1.00x), shared wavefronts 4096",
    ),
}
# Tested elsewhere: demo.py by test_demo.py, heat_cuda.py by test_heat_example.py, pic_mpi.py
# by test_pic_mpi.py.
ELSEWHERE = {"demo.py", "heat_cuda.py", "pic_mpi.py"}

pytestmark = pytest.mark.nosan  # compilers and child interpreters: nothing for the sanitizers


def _run(*command, timeout=300):
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_example_runs(program):
    args, expected = PROGRAMS[program]
    done = _run(sys.executable, str(EXAMPLES / program), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert expected in done.stdout, done.stdout
    backend = "cupy" if os.environ.get("CUNUMPY_BACKEND", "").lower() == "cupy" else "numpy"
    assert f"backend: {backend}" in done.stdout


def test_every_example_program_is_run_somewhere():
    programs = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.py")}
    package = {p for p in programs if p.startswith(("kernel_folder/plasma/", "kernel_folder/test_"))}
    assert programs - package - set(PROGRAMS) - ELSEWHERE == set()


def test_plasma_kernels_compiled_by_pyccel():
    pytest.importorskip("pyccel")
    done = _run(sys.executable, str(EXAMPLES / "kernel_folder" / "run_plasma.py"), "--pyccel", "--steps=2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "host implementation of push: pyccel (compiled by Pyccel)" in done.stdout


def test_the_kernel_package_tests_pass():
    """examples/kernel_folder/test_plasma.py: signatures, host/CUDA parity, the fixture."""
    done = _run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLES / "kernel_folder"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed" not in done.stdout and "passed" in done.stdout


def test_halo_exchange_on_two_ranks():
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("no mpiexec (the mpi extra installs MPICH into the environment)")
    done = _run(mpiexec, "-n", "2", sys.executable, str(EXAMPLES / "mpi_halo.py"), "--steps=50")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 rank(s)" in done.stdout and "largest error" in done.stdout
