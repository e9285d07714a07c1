"""`python -m cunumpy [info] [--json]`: the diagnostics a user pastes into a bug report.

Every test runs the command in a fresh interpreter. The suite's own CUNUMPY_* variables
are passed on where the test says so, so that the fake-CuPy run of the suite checks the
report of the fake CuPy and the NumPy run the report without it.
"""

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

import cunumpy as xp

# Child processes running pure-Python code (plugin loading, CLI output): nothing for the
# sanitizer build to check, and slow under its preloaded runtime.
pytestmark = pytest.mark.nosan

HEAVY = ("cupy", "mpi4py", "scipy", "pytest", "pyccel", "numba", "petsc4py", "mlx")
SESSION_FAKE = os.environ.get("CUNUMPY_FAKE_CUPY", "") == "1"


def _environment(inherit_cunumpy: bool, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if inherit_cunumpy or not k.startswith("CUNUMPY_")}
    env.update(extra)
    return env


def _cli(*args, inherit_cunumpy=True, env=None, code=None):
    command = [sys.executable, "-m", "cunumpy", *args] if code is None else [sys.executable, "-c", code]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env=_environment(inherit_cunumpy, **(env or {})),
    )


def _json(*args, **kw) -> dict:
    result = _cli(*args, "--json", **kw)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_text_report_has_every_section():
    result = _cli()
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"cunumpy {xp.__version__}\n")
    for line in (
        "python:",
        "platform:",
        "numpy:",
        "array-api-compat:",
        "cupy:",
        "mpi4py:",
        "scipy:",
        "pyccel:",
        "numba:",
        "in use:",
        "active:",
        "CuPy:",
        "nvcc:",
        "devices:",
    ):
        assert line in out, f"{line!r} missing from:\n{out}"
    assert f"python:   {sys.version.split()[0]}" in out
    assert "C extension (" in out  # the build under test has its C core


def test_info_is_the_default_command():
    plain, info = _cli(), _cli("info")
    assert plain.returncode == info.returncode == 0
    # (the emulation cache may grow in between: other processes share it)
    strip = lambda text: [line for line in text.splitlines() if "python:" not in line and "cache:" not in line]  # noqa: E731
    assert strip(plain.stdout) == strip(info.stdout)


def test_json_matches_the_running_interpreter():
    info = _json("info")
    assert info["cunumpy"] == xp.__version__
    assert info["python"]["version"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert info["packages"]["numpy"] == __import__("numpy").__version__
    assert set(info["packages"]) >= {"numpy", "array-api-compat", "cupy", "mpi4py", "scipy", "pyccel", "numba"}
    assert info["c_core"]["in_use"] is True and info["c_core"]["path"].endswith((".so", ".pyd"))
    assert info["backend"]["active"] == xp.get_backend()
    assert info["backend"]["fake_cupy"] is SESSION_FAKE
    assert set(info["cuda"]) >= {"toolkit", "device_count", "device", "cuda_visible_devices"}
    assert info["environment"] == {k: v for k, v in os.environ.items() if k.startswith("CUNUMPY_")}


def test_json_without_cupy_says_why():
    info = _json(inherit_cunumpy=False)
    backend = info["backend"]
    if backend["cupy_available"]:
        pytest.skip("a functional CuPy is installed here")
    assert backend["active"] == "numpy"
    assert backend["cupy_unavailable_reason"]
    assert info["cuda"]["device_count"] == 0 and info["cuda"]["device"] is None


def test_json_under_the_fake_cupy_reports_its_device():
    info = _json(env={"CUNUMPY_FAKE_CUPY": "1", "CUNUMPY_BACKEND": "cupy"})
    assert info["backend"] == info["backend"] | {
        "active": "cupy",
        "cupy_available": True,
        "fake_cupy": True,
        "cupy_unavailable_reason": None,
    }
    assert info["cuda"]["device_count"] >= 1
    assert info["cuda"]["device"]["name"]
    text = _cli(env={"CUNUMPY_FAKE_CUPY": "1", "CUNUMPY_BACKEND": "cupy"}).stdout
    assert "available (the fake CuPy" in text and "current device:" in text


@pytest.mark.parametrize(
    "args",
    [("bogus",), ("--jsn",), ("info", "extra"), ("info", "--json", "--nope"), ("--json=1",)],
)
def test_bad_arguments_print_usage_and_exit_2(args):
    result = _cli(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: python -m cunumpy")
    assert result.stdout == ""


def test_help_exits_0():
    result = _cli("--help")
    assert result.returncode == 0
    assert "--json" in result.stdout


def test_the_report_imports_no_optional_package():
    code = textwrap.dedent(
        f"""
        import contextlib, io, sys
        from cunumpy.__main__ import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["info"]) == 0
            assert main(["--json"]) == 0
        print(",".join(m for m in {HEAVY!r} if m in sys.modules))
        """
    )
    result = _cli(code=code, inherit_cunumpy=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def _stub_package(root, name, source):
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(source))
    return str(root)


def test_the_reason_cupy_fails_to_import_is_reported(tmp_path):
    path = _stub_package(tmp_path, "cupy", "raise ImportError('libcudart.so.13: cannot open shared object file')")
    env = {"PYTHONPATH": path, "CUNUMPY_BACKEND": "cupy"}
    info = _json(inherit_cunumpy=False, env=env)
    assert info["backend"]["active"] == "numpy"  # the silent fallback of set_backend
    assert info["backend"]["cupy_unavailable_reason"] == (
        "ImportError: libcudart.so.13: cannot open shared object file"
    )
    text = _cli(inherit_cunumpy=False, env=env).stdout
    assert "CuPy:         unavailable: ImportError: libcudart.so.13" in text


def test_a_cupy_without_devices_is_reported(tmp_path):
    stub = """
        __version__ = "14.1.0"
        class _Runtime:
            @staticmethod
            def getDeviceCount():
                return 0
        class cuda:
            runtime = _Runtime
    """
    env = {"PYTHONPATH": _stub_package(tmp_path, "cupy", stub)}
    info = _json(inherit_cunumpy=False, env=env)
    assert "no usable CUDA device" in info["backend"]["cupy_unavailable_reason"]
    assert info["backend"]["imported_cupy_version"] == "14.1.0"


def _fake_nvcc(folder, body):
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    nvcc = bin_dir / "nvcc"
    nvcc.write_text("#!/bin/sh\n" + body)
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return nvcc


def _path_without_nvcc() -> str:
    keep = [
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not os.path.exists(os.path.join(d, "nvcc"))
    ]
    return os.pathsep.join(keep)


def test_the_cuda_toolkit_is_found_through_cuda_home(tmp_path):
    nvcc = _fake_nvcc(tmp_path / "cuda", "echo 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    env = {"PATH": _path_without_nvcc(), "CUDA_HOME": str(tmp_path / "cuda"), "CUDA_PATH": ""}
    toolkit = _json(env=env)["cuda"]["toolkit"]
    assert toolkit == toolkit | {
        "nvcc": str(nvcc),
        "nvcc_found_via": "CUDA_HOME",
        "nvcc_version": "12.4",
        "cuda_home": str(tmp_path / "cuda"),
    }
    assert f"nvcc:                 {nvcc} (release 12.4)" in _cli(env=env).stdout


def test_a_broken_nvcc_is_reported_not_raised(tmp_path):
    _fake_nvcc(tmp_path / "cuda", "exit 3\n")
    env = {"PATH": _path_without_nvcc(), "CUDA_HOME": str(tmp_path / "cuda"), "CUDA_PATH": ""}
    toolkit = _json(env=env)["cuda"]["toolkit"]
    assert toolkit["nvcc_version"] is None
    assert "exit code 3" in toolkit["nvcc_error"]


def test_no_toolkit_anywhere():
    env = {"PATH": _path_without_nvcc(), "CUDA_HOME": "", "CUDA_PATH": ""}
    toolkit = _json(env=env)["cuda"]["toolkit"]
    assert toolkit["nvcc"] is None and toolkit["cuda_home"] is None
    assert "nvcc:                 not found" in _cli(env=env).stdout


def test_the_pure_python_fallback_is_reported():
    # Block the extension the way a platform without it (Pyodide) would see it.
    code = textwrap.dedent(
        """
        import importlib.abc, sys
        class NoCore(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "cunumpy._core":
                    raise ImportError("no C extension on this platform")
        sys.meta_path.insert(0, NoCore())
        from cunumpy.__main__ import main
        main(["info"])
        main(["--json"])
        """
    )
    result = _cli(code=code)
    assert result.returncode == 0, result.stderr
    text, _, raw = result.stdout.partition("\n{")
    assert "in use: pure-Python fallback (cunumpy._reference)" in text
    core = json.loads("{" + raw)["c_core"]
    assert core["in_use"] is False and core["module"] == "cunumpy._reference"


# --------------------------------------------------------------------------- the CPU emulation


def test_emulation_reports_compiler_cache_and_workers(tmp_path):
    from cunumpy.kernel_testing import emulation_compiler

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "k1.abc.so").write_bytes(b"x" * 1000)
    (cache / "k1.json").write_bytes(b"{}" * 12)
    info = _json(inherit_cunumpy=False, env={"CUNUMPY_EMULATION_CACHE": str(cache), "CUNUMPY_NUM_THREADS": "3"})
    emulation = info["emulation"]
    compiler = emulation_compiler()
    assert emulation["compiler"] == compiler
    if compiler is not None:
        assert emulation["compiler_version"] and emulation["automatic"] is True
        assert emulation["automatic_off_reason"] is None
    assert emulation["cache"] == {"path": str(cache), "exists": True, "size_bytes": 1024, "libraries": 1}
    assert (emulation["workers"], emulation["workers_from"]) == (3, "xp.threads")
    text = _cli(
        inherit_cunumpy=False, env={"CUNUMPY_EMULATION_CACHE": str(cache), "CUNUMPY_EMULATION_THREADS": "5"}
    ).stdout
    section = text[text.index("\nCUDA emulation\n") :]
    assert f"  cache:            {cache} (1 libraries, 1.0 KiB)" in section
    assert "  workers:          5 (from CUNUMPY_EMULATION_THREADS)" in section
    if compiler is not None:
        assert f"  C++ compiler:     {compiler} (" in section
        assert "launches emulate by themselves: on" in section


def test_emulation_says_why_it_cannot_run(tmp_path):
    env = {
        "CXX": "no-such-compiler++",
        "PATH": str(tmp_path),
        "CUNUMPY_EMULATION_CACHE": str(tmp_path / "none"),
        "CUNUMPY_EMULATION_THREADS": "many",
    }
    emulation = _json(inherit_cunumpy=False, env=env)["emulation"]
    assert emulation["compiler"] is None
    assert emulation["compiler_error"] == (
        "no C++ compiler: neither $CXX ('no-such-compiler++') nor c++ was found on PATH"
    )
    assert emulation["automatic"] is False and "needs a C++ compiler" in emulation["automatic_off_reason"]
    assert emulation["cache"]["exists"] is False and emulation["cache"]["size_bytes"] == 0
    assert emulation["workers"] is None and "CUNUMPY_EMULATION_THREADS" in emulation["workers_error"]
    text = _cli(inherit_cunumpy=False, env=dict(env, CUNUMPY_EMULATION="0")).stdout
    assert "  C++ compiler:     not found: no C++ compiler: neither $CXX" in text
    assert "launches emulate by themselves: off: the automatic CPU emulation is off (CUNUMPY_EMULATION=0)" in text
    assert "(not created yet)" in text


@pytest.mark.parametrize("args", [("info", "--json"), ("info",), ("--help",)])
def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(args):
    # `python -m cunumpy info --json | head -1`: the reader has gone before the output is
    # written (here: the pipe's read end is closed before the command starts)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cunumpy", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env=_environment(True),
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.stderr == "" and done.returncode in (0, 1), (done.returncode, done.stderr)
