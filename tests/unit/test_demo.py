"""examples/demo.py, the particle-in-cell step `make demo` runs: small sizes, a fresh
interpreter, the session's backend (and, on the NumPy run, the fake-CuPy child too)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"
SMALL = ["--particles=3000", "--levels=4", "--steps=6"]
# The suite runs on the fake device (CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy); the
# sanitizer run sets only the first: the fake is installed, the backend is NumPy.
SESSION_ON_FAKE = (
    os.environ.get("CUNUMPY_FAKE_CUPY", "") == "1" and os.environ.get("CUNUMPY_BACKEND", "").lower() == "cupy"
)


def _demo(*args):
    return subprocess.run([sys.executable, str(DEMO), *args], capture_output=True, text=True, timeout=300)


def test_the_demo_runs_every_phase_and_writes_its_plot(tmp_path):
    pytest.importorskip("matplotlib")  # the demo extra
    png = tmp_path / "out" / "pic.png"
    result = _demo(*SMALL, f"--output={png}")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for phase in ("init", "sort", "deposit", "field", "push", "remove", "output"):
        assert f"\n{phase} " in out, out
    assert "3000 particles, 16x16 cells, 6 steps:" in out
    assert "transfer(s):" in out
    assert out.rstrip().endswith(f"plot written to {png}")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if SESSION_ON_FAKE:
        assert "backend: cupy (fake CuPy" in out and "under the fake CuPy ---" not in out
    else:
        # The child under the fake CuPy runs the same numbers: counter-based random draws.
        assert out.startswith("backend: numpy\n")
        assert "backend: cupy (fake CuPy" in out
        assert "particle counts per step on both runs: identical" in out


@pytest.mark.parametrize("args", [["--steps=0"], ["--levels=11"], ["--particles=-5"], ["--particles=many"]])
def test_bad_sizes_are_usage_errors(args):
    result = _demo(*args)
    assert result.returncode == 2
    assert "usage:" in result.stderr


def _load_demo():
    spec = importlib.util.spec_from_file_location("cunumpy_demo_under_test", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plot_goes_to_build_demo_of_the_checkout(tmp_path):
    demo = _load_demo()
    demo.__file__ = str(tmp_path / "examples" / "demo.py")
    assert demo.output_path(None) == tmp_path / "build" / "demo" / "pic_demo.png"
    assert (tmp_path / "build" / "demo").is_dir()


def test_an_unwritable_checkout_falls_back_to_a_temporary_folder(tmp_path, monkeypatch):
    demo = _load_demo()
    (tmp_path / "build").write_text("not a folder")  # mkdir fails even for root
    demo.__file__ = str(tmp_path / "examples" / "demo.py")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert demo.output_path(None) == tmp_path / "tmp" / "cunumpy-demo" / "pic_demo.png"
    assert demo.output_path(str(tmp_path / "x.png")) == tmp_path / "x.png"
