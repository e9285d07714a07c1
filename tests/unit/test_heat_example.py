"""examples/heat_cuda.py runs unchanged on NumPy and on the fake CuPy (its CUDA kernel
emulated on the CPU), each time agreeing with a plain NumPy loop."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _emulation_support import requires_compiler

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "heat_cuda.py"
SMALL = ["--points=64", "--steps=50"]

pytestmark = pytest.mark.nosan  # child interpreters


def _run(env_extra, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    env["CUNUMPY_EMULATION_CACHE"] = os.environ["CUNUMPY_EMULATION_CACHE"]  # the test run's own
    env.update(env_extra)
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, env=env, timeout=300)


def _check(result, backend_line):
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"backend: {backend_line}"
    assert lines[1].startswith("64 points, 50 steps, alpha = 0.25: u[0] = 0.000000, ")
    assert lines[2] == "largest difference to the NumPy reference: 0" or float(lines[2].split(": ")[1]) <= 1e-12
    return lines


def test_on_numpy():
    _check(_run({}, *SMALL), "numpy (the host version of the kernel)")


@requires_compiler
def test_on_the_fake_cupy_the_cuda_kernel_is_emulated():
    fake = _check(
        _run({"CUNUMPY_FAKE_CUPY": "1", "CUNUMPY_BACKEND": "cupy"}, *SMALL),
        "cupy on the fake CuPy (the CUDA kernel in the CPU emulation)",
    )
    host = _check(_run({}, *SMALL), "numpy (the host version of the kernel)")
    assert fake[1] == host[1]  # the same profile


@pytest.mark.parametrize("args", [["--points=2"], ["--steps=0"], ["--alpha=0.6"], ["--points=many"]])
def test_bad_arguments_are_usage_errors(args):
    result = _run({}, *args)
    assert result.returncode == 2 and "usage:" in result.stderr
