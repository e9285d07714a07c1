"""cunumpy.kernel_testing: fake-CuPy control (API.md 13.5) and markers/fixture (13.1)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cunumpy as xp
import cunumpy.kernel_testing as kt


def _run_python(code, **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=environment, capture_output=True, text=True
    )


def test_import_is_light_and_leaves_xp_testing_alone():
    result = _run_python(
        """
        import sys
        import numpy
        import cunumpy as xp
        before = xp.testing
        import cunumpy.kernel_testing as kt
        assert "pytest" not in sys.modules, "pytest imported"
        assert "cupy" not in sys.modules and "scipy" not in sys.modules
        assert xp.testing is before is numpy.testing
        kt.fake_cupy_active(), kt.MPI_LAUNCHER_PREFIXES, kt.cuda_required()
        assert "pytest" not in sys.modules, "pytest imported by a plain helper"
        kt.requires_device_backend
        assert "pytest" in sys.modules
        """
    )
    assert result.returncode == 0, result.stderr


def test_fake_cupy_active_matches_sys_modules():
    cupy = sys.modules.get("cupy")
    assert kt.fake_cupy_active() == (cupy is not None and getattr(cupy, "__cunumpy_fake__", False) is True)
    assert kt.fake_cupy_active() == xp.backend_info()["fake_cupy"]


def test_host_buffer_rejects_everything_but_fake_arrays():
    for value in (np.ones(2), [1.0], 3.0, None):
        with pytest.raises(TypeError, match="fake CuPy"):
            kt.host_buffer(value)


def test_host_buffer_shares_memory(device_only):
    if not kt.fake_cupy_active():
        pytest.skip("needs the fake CuPy")
    a = xp.zeros(3)
    h = kt.host_buffer(a)
    assert type(h) is np.ndarray
    h[1] = 5.0
    assert a.get().tolist() == [0.0, 5.0, 0.0]
    assert kt.host_buffer(a) is h


def test_install_fake_cupy_errors():
    result = _run_python(
        """
        import sys, types
        import cunumpy as xp
        from cunumpy.kernel_testing import install_fake_cupy
        xp.cupy_available()  # caches an answer
        try:
            install_fake_cupy()
        except RuntimeError as exc:
            assert "already checked" in str(exc), exc
        else:
            raise AssertionError("no RuntimeError after a cached answer")
        """
    )
    assert result.returncode == 0, result.stderr
    result = _run_python(
        """
        import sys, types
        sys.modules["cupy"] = types.ModuleType("cupy")  # stands for a real CuPy
        from cunumpy.kernel_testing import install_fake_cupy
        try:
            install_fake_cupy()
        except RuntimeError as exc:
            assert "real 'cupy'" in str(exc), exc
        else:
            raise AssertionError("installed over a real CuPy")
        """
    )
    assert result.returncode == 0, result.stderr
    result = _run_python(
        """
        import sys
        from cunumpy.kernel_testing import install_fake_cupy, fake_cupy_active
        cupy = install_fake_cupy()
        assert install_fake_cupy() is cupy is sys.modules["cupy"] and fake_cupy_active()
        import cunumpy as xp
        xp.set_backend("cupy", strict=True)
        assert type(xp.ones(2)) is cupy.ndarray
        """
    )
    assert result.returncode == 0, result.stderr


def test_subprocess_helper_environment(monkeypatch):
    launcher = {
        "OMPI_COMM_WORLD_SIZE": "2",
        "PMIX_NAMESPACE": "x",
        "PMI_SIZE": "2",
        "HYDRA_X": "1",
        "MPIR_CVAR": "1",
        "I_MPI_PIN": "1",
        "SLURM_JOB_ID": "7",
        "MV2_X": "1",
        "MPI_LOCALRANKID": "0",
        "ALPS_APP_PE": "0",
        "PALS_NODEID": "1",
    }
    for key, value in launcher.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CUNUMPY_TEST_KEEP", "kept")
    code = (
        "import os, json, cunumpy\n"
        "from cunumpy.kernel_testing import fake_cupy_active\n"
        "print(json.dumps({'env': dict(os.environ), 'fake': fake_cupy_active()}))\n"
    )
    result = kt.run_in_fake_cupy_subprocess(code, env={"EXTRA_VARIABLE": "1", "OMP_NUM_THREADS": "3"})
    import json

    report = json.loads(result.stdout.strip().splitlines()[-1])
    env = report["env"]
    assert report["fake"] is True
    assert env["CUNUMPY_FAKE_CUPY"] == "1" and env["MAYBEMPI"] == "0"
    assert env["EXTRA_VARIABLE"] == "1" and env["OMP_NUM_THREADS"] == "3"
    assert env["CUNUMPY_TEST_KEEP"] == "kept"
    for key in launcher:
        assert key not in env, key
    assert result.returncode == 0


def test_subprocess_helper_default_threads():
    result = kt.run_in_fake_cupy_subprocess("import os; print(os.environ['OMP_NUM_THREADS'])")
    assert result.stdout.strip() == "1"


def test_mpi_launcher_prefixes():
    for prefix in (
        "OMPI_",
        "PMIX_",
        "PMI_",
        "HYDRA_",
        "MPIR_",
        "I_MPI_",
        "SLURM_",
        "MV2_",
        "MPI_LOCALRANKID",
        "ALPS_APP_PE",
        "PALS_",
    ):
        assert prefix in kt.MPI_LAUNCHER_PREFIXES


def test_subprocess_helper_reports_failures():
    with pytest.raises(pytest.fail.Exception) as info:
        kt.run_in_fake_cupy_subprocess("import sys\nprint('line before')\nsys.exit(3)")
    assert "exited with code 3" in str(info.value) and "line before" in str(info.value)
    with pytest.raises(pytest.fail.Exception) as info:
        kt.run_in_fake_cupy_subprocess("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)")
    assert "SIGTERM" in str(info.value)
    with pytest.raises(pytest.fail.Exception) as info:
        kt.run_in_fake_cupy_subprocess("raise ValueError('child failure')")
    assert "ValueError: child failure" in str(info.value)
    with pytest.raises(pytest.fail.Exception) as info:
        kt.run_in_fake_cupy_subprocess("import time\nprint('started', flush=True)\ntime.sleep(30)", timeout=1)
    assert "timed out" in str(info.value)


def test_subprocess_helper_output_tail_is_limited():
    code = "import sys\nfor i in range(200): print('row', i)\nsys.exit(1)"
    with pytest.raises(pytest.fail.Exception) as info:
        kt.run_in_fake_cupy_subprocess(code)
    message = str(info.value)
    assert "row 199" in message and "row 150" in message and "row 149" not in message


def test_subprocess_helper_runs_on_rank_zero_only(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    with pytest.raises(pytest.skip.Exception):
        kt.run_in_fake_cupy_subprocess("raise SystemExit(1)")


def test_fake_cupy_session():
    previous = xp.get_backend()
    if not kt.fake_cupy_active():
        with pytest.raises(RuntimeError, match="CUNUMPY_FAKE_CUPY"), kt.fake_cupy_session():
            pass
        assert xp.get_backend() == previous
        return
    with xp.use_backend("numpy"):
        with kt.fake_cupy_session():
            assert xp.get_backend() == "cupy"
            assert kt.host_buffer(xp.ones(2)).tolist() == [1.0, 1.0]
        assert xp.get_backend() == "numpy"
    assert xp.get_backend() == previous


def test_fake_cupy_session_in_subprocess():
    code = (
        "import cunumpy as xp\n"
        "from cunumpy.kernel_testing import fake_cupy_session\n"
        "assert xp.get_backend() == 'numpy'\n"
        "try:\n"
        "    with fake_cupy_session():\n"
        "        assert xp.get_backend() == 'cupy'\n"
        "        raise KeyError('inside')\n"
        "except KeyError:\n"
        "    pass\n"
        "assert xp.get_backend() == 'numpy'\n"
    )
    kt.run_in_fake_cupy_subprocess(code, env={"CUNUMPY_BACKEND": "numpy"})


# --------------------------------------------------------------------------- markers and fixture


def test_lazy_pytest_objects():
    backends = kt.BACKENDS
    assert backends[0] == "numpy" and backends[1].values == ("cupy",)
    # The cupy case runs on a GPU or on the fake CuPy: cunumpy's pytest plugin (active in this
    # run) decides and activates the backend through the named marker.
    assert [m.name for m in backends[1].marks] == ["requires_device_backend"]
    assert kt.requires_cupy.name == "skipif" and kt.requires_device_backend.name == "requires_device_backend"
    assert kt.BACKENDS is backends
    assert "backend" in dir(kt)
    with pytest.raises(AttributeError):
        kt.no_such_helper  # noqa: B018 - the attribute read must raise


def test_requires_cupy_reason():
    mark = kt.requires_cupy
    if kt.fake_cupy_active():
        assert mark.args[0] is True and "fake CuPy is active" in mark.kwargs["reason"]
    elif not xp.cupy_available():
        assert mark.args[0] is True and "CuPy" in mark.kwargs["reason"]
    else:  # pragma: no cover - real GPU
        assert mark.args[0] is False


def test_device_backend_available():
    assert kt.device_backend_available() == (kt.fake_cupy_active() or xp.cupy_available())


def test_cuda_required(monkeypatch):
    for value, expected in (("1", True), ("TRUE", True), (" yes ", True), ("0", False), ("", False), ("on", False)):
        monkeypatch.setenv("CUNUMPY_REQUIRE_CUDA", value)
        assert kt.cuda_required() is expected
    monkeypatch.delenv("CUNUMPY_REQUIRE_CUDA")
    assert kt.cuda_required() is False


_PYTEST_FILE = """
from cunumpy.kernel_testing import backend, requires_cupy, requires_device_backend
import cunumpy as xp


def test_backend(backend):
    assert xp.get_backend() == backend


@requires_cupy
def test_gpu_only():
    pass


@requires_device_backend
def test_device_only():
    pass
"""


@pytest.mark.nosan  # a child Python running pure-Python code: nothing for the sanitizers
@pytest.mark.parametrize("fake", ["0", "1"])
@pytest.mark.parametrize("required", ["0", "1"])
def test_markers_and_fixture_in_pytest(tmp_path, fake, required):
    path = tmp_path / "test_sample.py"
    path.write_text(_PYTEST_FILE)
    env = {"CUNUMPY_REQUIRE_CUDA": required, "CUNUMPY_FAKE_CUPY": fake}
    result = _run_python(
        f"import sys, pytest; sys.exit(pytest.main(['-rA', '-p', 'no:cacheprovider', {str(path)!r}]))", **env
    )
    out = result.stdout
    if xp.cupy_available() and not kt.fake_cupy_active():  # pragma: no cover - real GPU
        pytest.skip("outcomes below describe a machine without a GPU")
    assert "PASSED" in out and "test_backend[numpy]" in out
    if required == "1":
        assert "ERROR" in out and "CUNUMPY_REQUIRE_CUDA" in out
        assert "SKIPPED" not in out
    else:
        assert "ERROR" not in out and "SKIPPED" in out
    line = [text for text in out.splitlines() if "test_device_only" in text]
    if fake == "1":
        assert any(text.startswith("PASSED") for text in line), out
        assert "fake CuPy is active" in out
    else:
        assert not any(text.startswith("PASSED") for text in line), out
