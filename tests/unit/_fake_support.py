"""Fake-CuPy helpers of the unit tests, and covering fake-CuPy-only tests from a plain NumPy run.

Some test files need the fake CuPy active in the process (``CUNUMPY_FAKE_CUPY=1``). On a
plain run their tests skip, and one test per file re-runs the file in a fake-CuPy child so
that ``pytest tests/unit/test_x.py`` alone still covers everything. ``make test`` runs the
whole suite under the fake CuPy as a job of its own (``make test-fake``), so its NumPy run
sets ``CUNUMPY_TESTS_FAKE_SUITE=separate`` and the re-runs skip instead of repeating it.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cunumpy.kernel_testing import fake_cupy_active, run_in_fake_cupy_subprocess


def active_fake_cupy():
    """The fake CuPy module (or the stand-in plugin) when this process runs on it, else None."""
    return sys.modules["cupy"] if fake_cupy_active() else None


#: Value of ``CUNUMPY_TESTS_FAKE_SUITE`` that says the fake-CuPy suite runs as its own job.
SEPARATE = "separate"


def rerun_under_fake_cupy(test_file: str, keyword: str, *, backend: str | None = "cupy", timeout: float = 600):
    """Run the tests of ``test_file`` selected by ``-k keyword`` in a fake-CuPy child; fail
    with the child's output if any of them fails or none ran."""
    if fake_cupy_active():
        pytest.skip("the fake CuPy is active: these tests ran in this process")
    if os.environ.get("CUNUMPY_TESTS_FAKE_SUITE") == SEPARATE:
        pytest.skip("the fake-CuPy suite runs as its own job (make test-fake)")
    code = textwrap.dedent(f"""
        import sys
        import pytest
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", {test_file!r}, "-k", {keyword!r}]))
    """)
    env = {"CUNUMPY_BACKEND": backend} if backend else None
    result = run_in_fake_cupy_subprocess(code, env=env, timeout=timeout)
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert " passed" in last and "failed" not in last and "error" not in last, result.stdout[-3000:]


def run_device_tests_under_standin(test_file: str) -> None:
    """Plain run: the ``test_device_*`` tests of ``test_file`` against the CuPy stand-in plugin
    (``_cuda_standin.py``) in a fresh interpreter; fail with its output unless all ran and passed."""
    here = Path(__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if k not in ("CUNUMPY_FAKE_CUPY", "CUNUMPY_BACKEND")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(here), env.get("PYTHONPATH", "")) if p)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "_cuda_standin",
            str(test_file),
            "-k",
            "test_device_",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(here.parent.parent),
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout.splitlines()[-1], result.stdout[-2000:]
