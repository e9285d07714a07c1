"""tools/check_includes.py: the include graph of the C, C++ and CUDA sources has no circle,
and the check finds one when there is."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_includes.py"


def _run(root):
    return subprocess.run([sys.executable, str(TOOL), str(root)], capture_output=True, text=True, check=False)


def test_the_tree_has_no_include_circle():
    done = _run(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 circles" in done.stdout


def test_a_circle_is_found_through_quoted_and_angle_includes(tmp_path):
    core = tmp_path / "src" / "cunumpy" / "_core"
    emu = tmp_path / "src" / "cunumpy" / "_emulation" / "include" / "cunumpy_emu"
    core.mkdir(parents=True)
    emu.mkdir(parents=True)
    (emu / "prelude.h").write_text('#include "helpers.h"\n')
    (emu / "helpers.h").write_text("#include <cunumpy_emu/prelude.h>\n")
    (core / "a.c").write_text('#include "a.h"\n#include <stdio.h>\n')
    (core / "a.h").write_text('/* #include "a.c" */\n// #include "a.c"\n')
    done = _run(tmp_path)
    assert done.returncode == 1
    circle = [line for line in done.stdout.splitlines() if line.startswith("include circle:")]
    assert len(circle) == 1
    assert "cunumpy_emu/prelude.h" in circle[0] and "cunumpy_emu/helpers.h" in circle[0]
    assert "1 circles" in done.stdout  # commented-out includes and system headers are not edges
