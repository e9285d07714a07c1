"""The tools `make test` and CI use: tools/run_parts.py runs every part and reports each, and
tools/load.py runs a command with CPU-bound competitors (issue 34, items 1 and 2)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_PARTS = ROOT / "tools" / "run_parts.py"
LOAD = ROOT / "tools" / "load.py"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_every_part_runs_and_each_is_reported(tmp_path):
    (tmp_path / "Makefile").write_text("first:\n\t@echo ran-first\nbroken:\n\t@exit 3\nlast:\n\t@echo ran-last\n")
    done = subprocess.run(
        [sys.executable, str(RUN_PARTS), "--make", f"make -C {tmp_path}", "first", "broken", "last"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 1, out
    # the part after the failed one still ran; each part announced its start
    assert "ran-first" in out and "ran-last" in out
    for number, part in enumerate(["first", "broken", "last"], 1):
        assert f"[{number}/3] {part} started at " in out
    summary = out[out.index("test: summary") :].splitlines()
    assert [line.split()[1] for line in summary[1:4]] == ["first", "broken", "last"]
    assert "passed" in summary[1] and "FAILED (exit status 2)" in summary[2] and "passed" in summary[3]
    assert all(line.rstrip().endswith(" min") for line in summary[1:4])
    assert summary[-1] == "test: 1 part(s) did not pass: broken"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_all_parts_passing_exits_zero(tmp_path):
    (tmp_path / "Makefile").write_text("one:\n\t@true\n")
    done = subprocess.run(
        [sys.executable, str(RUN_PARTS), "--make", f"make -C {tmp_path}", "one"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "test: every part passed", done.stdout


def test_load_runs_the_command_with_competitors_and_passes_its_status_on():
    code = "import sys; print('command ran'); sys.exit(7)"
    done = subprocess.run(
        [sys.executable, str(LOAD), "2", "--", sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 7, done.stderr
    assert "2 CPU-bound competitor(s) running" in done.stdout and "command ran" in done.stdout
    assert "competitors stopped after" in done.stdout


def test_load_checks_its_argument():
    done = subprocess.run([sys.executable, str(LOAD), "two"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "N must be a whole number of processes, got 'two'" in done.stderr
