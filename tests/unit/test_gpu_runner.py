"""``make test-gpu`` (tests/gpu/run.sh) on machines without a GPU, and its emulator-versus-GPU
parity cases in a dry run on the fake CuPy (issue 27 item 15).

The GPU path itself runs only where a GPU is; here: the no-GPU answer (one line, exit 0,
nothing installed), the answer when a GPU is listed but CuPy cannot use it (exit 1, named),
and every parity case with the "GPU" side emulated too, so that the cases themselves are
known to build and to compare the right arrays before a GPU runs them.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "gpu" / "run.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _stub_nvidia_smi(tmp_path, output: str, code: int) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "nvidia-smi"
    stub.write_text(f"#!/bin/sh\nprintf '{output}'\nexit {code}\n")
    stub.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TEST_GPU_OUT": str(tmp_path / "out")}


def _run(env, timeout=120):
    return subprocess.run(
        ["bash", str(RUN)], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT, check=False
    )


@pytest.mark.nosan  # shell scripts: nothing for the sanitizers
def test_no_gpu_listed_is_one_line_and_exit_0(tmp_path):
    env = _stub_nvidia_smi(tmp_path, "No devices were found\\n", 6)
    completed = _run(env)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "test-gpu: no NVIDIA GPU on this machine (nvidia-smi lists no GPU): nothing run, exit 0"
    ]
    assert not (tmp_path / "out").exists()  # nothing installed, nothing written


@pytest.mark.nosan
@pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None or any(Path("/dev").glob("nvidia[0-9]*")),
    reason="this machine has an NVIDIA driver",
)
def test_no_driver_at_all_is_one_line_and_exit_0(tmp_path):
    completed = _run({**os.environ, "TEST_GPU_OUT": str(tmp_path / "out")})
    assert completed.returncode == 0
    assert completed.stdout.splitlines() == [
        "test-gpu: no NVIDIA GPU on this machine (no nvidia-smi and no /dev/nvidia* device): nothing run, exit 0"
    ]


@pytest.mark.nosan
def test_a_listed_gpu_that_cupy_cannot_use_fails_with_the_reason(tmp_path):
    """nvidia-smi says there is a GPU, but this Python has no working CuPy: exit 1, said so."""
    env = _stub_nvidia_smi(tmp_path, "GPU 0: NVIDIA Test GPU (UUID: GPU-0)\\n", 0)
    env.update(TEST_GPU_INSTALL="0", PYTHON=sys.executable)
    env.pop("CUNUMPY_FAKE_CUPY", None)
    completed = _run(env)
    lines = completed.stdout.splitlines()
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert lines[0] == "test-gpu: GPU 0: NVIDIA Test GPU (UUID: GPU-0)"
    assert lines[-1].startswith("test-gpu: FAILED: a GPU is present but CuPy cannot use it")


@pytest.mark.nosan  # compiles kernels with the C++ compiler
@pytest.mark.slow
def test_parity_cases_dry_run_on_the_fake_cupy(tmp_path):
    from cunumpy.kernel_testing import emulation_compiler

    if emulation_compiler() is None:
        pytest.skip("no C++ compiler for the CPU emulation")
    env = {**os.environ, "CUNUMPY_FAKE_CUPY": "1", "CUNUMPY_GPU_PARITY_DRY_RUN": "1"}
    env.pop("CUNUMPY_BACKEND", None)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            str(ROOT / "tests" / "gpu" / "test_emulator_parity_gpu.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=ROOT,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    summary = completed.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
