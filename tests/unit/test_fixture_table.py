"""The table of LLM_GUIDE.md "Testing on both backends without a GPU" holds (issue 23, item
2; issue 27, item 9): for each of its columns a throw-away project runs in a fresh
interpreter with that environment, and each row's tests end as the table says, with the
backend it names active (and, on the fake CuPy, a CUDA kernel emulated).
"""

import functools
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import _emulation_support  # noqa: F401 - a fresh emulation cache for this run, passed to the children
import pytest

import cunumpy
from cunumpy.kernel_testing import emulation_compiler

pytestmark = pytest.mark.nosan  # child interpreters running pure-Python code

GUIDE = Path(cunumpy.__file__).resolve().parent / "LLM_GUIDE.md"

#: The table's rows and the tests of the project that each row stands for.
ROWS = {
    "`backend` fixture, `numpy` case": ["test_backend_fixture[numpy]"],
    "`backend` fixture, `cupy` case": ["test_backend_fixture[cupy]"],
    "`requires_device_backend`": ["test_requires_device_backend"],
    "`requires_cupy`": ["test_requires_cupy"],
    "`requires_warp_shuffle`, `requires_high_dim_cuda_views`, `requires_bounds_check_views`": [
        "test_requires_warp_shuffle",
        "test_requires_high_dim_cuda_views",
        "test_requires_bounds_check_views",
    ],
    "no marker": ["test_no_marker"],
}

PROJECT = '''
    import os

    import numpy as np
    import pytest

    import cunumpy as xp
    from cunumpy import kernel_testing

    SOURCE = r"""
    extern "C" __global__ void twice(double* x, long long n) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        if (i < n) x[i] *= 2.0;
    }
    """


    def record(request):
        """Write the test's id and the active backend; launch a kernel where one can launch."""
        launched = "no-launch"
        if kernel_testing.fake_cupy_active() and kernel_testing.emulation_compiler() is not None:
            import cupy

            x = cupy.arange(4.0)
            xp.kernels.CudaKernel(SOURCE, "twice")(x, 4)
            assert x.get().tolist() == [0.0, 2.0, 4.0, 6.0]
            launched = "emulated"
        with open(os.environ["CN_RECORD"], "a") as f:
            f.write(f"{request.node.name} {xp.get_backend()} {launched}\\n")


    def test_backend_fixture(backend, request):
        assert xp.get_backend() == backend
        record(request)


    @pytest.mark.requires_device_backend
    def test_requires_device_backend(request):
        record(request)


    @pytest.mark.requires_cupy
    def test_requires_cupy(request):
        record(request)


    @pytest.mark.requires_warp_shuffle
    def test_requires_warp_shuffle(request):
        record(request)


    @pytest.mark.requires_high_dim_cuda_views
    def test_requires_high_dim_cuda_views(request):
        record(request)


    @pytest.mark.requires_bounds_check_views
    def test_requires_bounds_check_views(request):
        record(request)


    def test_no_marker(request):
        record(request)
'''


def _clean_environment(extra) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CUNUMPY_", "PYTEST_")) and k != "COVERAGE_PROCESS_START"
    }
    if "CUNUMPY_EMULATION_CACHE" in os.environ:  # the test run's own cache
        env["CUNUMPY_EMULATION_CACHE"] = os.environ["CUNUMPY_EMULATION_CACHE"]
    env.update(extra)
    return env


@functools.cache
def _real_gpu() -> bool:
    code = "import cunumpy as xp; print(xp.cupy_available())"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_clean_environment({}), timeout=120
    )
    return result.stdout.strip() == "True"


def _table():
    """(column environments, {row label: [cell, ...]}) read from the guide."""
    lines = GUIDE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("<!-- fixture-table"))
    header, rows = lines[start + 1], lines[start + 3 :]
    columns = []
    for cell in [c.strip() for c in header.strip("|").split("|")][1:]:
        if cell == "no variables":
            columns.append({})
        else:
            columns.append(dict(pair.split("=") for pair in re.findall(r"CUNUMPY_\w+=\w+", cell)))
    table = {}
    for line in rows:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0]] = cells[1:]
    return columns, table


def _expected(cell: str):
    """(outcome, backend or None) of a table cell."""
    if cell.startswith("runs"):
        return "PASSED", "cupy" if "fake CuPy" in cell else "numpy"
    if cell == "skipped":
        return "SKIPPED", None
    if cell == "error":
        return "ERROR", None
    raise AssertionError(f"unknown cell {cell!r} in the guide's fixture table")


def _run_project(root, env):
    record = root / "record.txt"
    record.unlink(missing_ok=True)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "-c",
            str(root / "pytest.ini"),
            "--rootdir",
            str(root),
            str(root),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        env=_clean_environment(dict(env, CN_RECORD=str(record))),
        timeout=600,
    )
    outcomes = dict(re.findall(r"::(test_\w+(?:\[\w+\])?) (PASSED|FAILED|SKIPPED|ERROR)", result.stdout))
    ran = {}
    if record.exists():
        for line in record.read_text().splitlines():
            name, backend, launched = line.split()
            ran[name] = (backend, launched)
    return outcomes, ran, result.stdout + result.stderr


def test_the_table_lists_every_row_and_column():
    columns, table = _table()
    assert list(table) == list(ROWS)
    assert columns == [
        {},
        {"CUNUMPY_FAKE_CUPY": "1"},
        {"CUNUMPY_BACKEND": "cupy"},
        {"CUNUMPY_FAKE_CUPY": "1", "CUNUMPY_BACKEND": "cupy"},
        {"CUNUMPY_REQUIRE_CUDA": "1"},
    ]
    assert all(len(cells) == len(columns) for cells in table.values())


@pytest.mark.parametrize("column", range(5))
def test_each_column_of_the_fixture_table(tmp_path, column):
    if _real_gpu():  # pragma: no cover - the table describes a machine without a GPU
        pytest.skip("a functional CuPy is installed: the table describes a machine without a GPU")
    columns, table = _table()
    env = columns[column]
    if env.get("CUNUMPY_FAKE_CUPY") and emulation_compiler() is None:
        pytest.skip("the fake-CuPy columns assume a C++ compiler for the CPU emulation")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\n")
    (tmp_path / "test_table.py").write_text(textwrap.dedent(PROJECT))
    outcomes, ran, output = _run_project(tmp_path, env)
    compiler = "emulated" if env.get("CUNUMPY_FAKE_CUPY") else "no-launch"
    for row, cells in table.items():
        outcome, backend = _expected(cells[column])
        for test in ROWS[row]:
            assert outcomes.get(test) == outcome, f"{row} with {env or 'no variables'}: {test}\n{output}"
            if outcome == "PASSED":
                assert ran[test][0] == backend, f"{row} with {env}: ran on {ran[test]}\n{output}"
                assert ran[test][1] == compiler, output
            if outcome == "ERROR":
                assert "CUNUMPY_REQUIRE_CUDA is set" in output
    if "CUNUMPY_FAKE_CUPY" not in env and "CUNUMPY_REQUIRE_CUDA" not in env:
        # The skip reasons say what is missing.
        assert "needs a GPU or the fake CuPy (set CUNUMPY_FAKE_CUPY=1)" in output
        assert "needs CuPy with a GPU" in output
