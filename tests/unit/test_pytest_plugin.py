"""The pytest plugin (entry point ``pytest11``): the ``backend`` fixture and the
``requires_cupy`` / ``requires_device_backend`` markers in a project without a conftest.

Each test writes a throw-away project under tmp_path and runs ``python -m pytest -v`` on it
in a fresh interpreter, once with the NumPy environment and once with the fake CuPy's.
"""

import functools
import os
import re
import subprocess
import sys
import textwrap

import pytest

# Child processes running pure-Python code (plugin loading, CLI output): nothing for the
# sanitizer build to check, and slow under its preloaded runtime.
pytestmark = pytest.mark.nosan

FAKE_ENV = {"CUNUMPY_FAKE_CUPY": "1", "CUNUMPY_BACKEND": "cupy"}
ENVIRONMENTS = {"numpy": {}, "fake_cupy": FAKE_ENV}

USER_TESTS = """
    import pytest

    import cunumpy as xp

    INITIAL_BACKEND = xp.get_backend()


    def test_backend(backend):
        assert xp.get_backend() == backend
        assert xp.get_array_backend(xp.zeros(3)) == backend


    @pytest.mark.requires_device_backend
    def test_device_path():
        with xp.use_backend("cupy", strict=True):
            assert xp.get_array_backend(xp.ones(2)) == "cupy"


    @pytest.mark.requires_cupy
    def test_real_gpu():
        assert xp.cupy_available()


    def test_the_backend_is_restored_afterwards():
        assert xp.get_backend() == INITIAL_BACKEND
"""


def _clean_environment(extra) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CUNUMPY_", "PYTEST_")) and k != "COVERAGE_PROCESS_START"
    }
    env.update(extra)
    return env


@functools.cache
def _real_gpu() -> bool:
    """A functional (not fake) CuPy in this environment; asked in a clean interpreter."""
    code = "import cunumpy as xp; print(xp.cupy_available())"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_clean_environment({}), timeout=120
    )
    return result.stdout.strip() == "True"


def _project(root, tests=USER_TESTS, conftest=None, name="test_user.py"):
    root.mkdir(exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\n")
    (root / name).write_text(textwrap.dedent(tests))
    if conftest is not None:
        (root / "conftest.py").write_text(textwrap.dedent(conftest))
    return root


def _pytest(root, *args, env=None):
    """Run pytest on the project; (return code, {test id: outcome}, output)."""
    # Hypothesis's plugin (installed with the test extra) takes seconds to load and has
    # nothing to do with this one.
    quiet = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            *quiet,
            "-c",
            str(root / "pytest.ini"),
            "--rootdir",
            str(root),
            *args,
            str(root),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        env=_clean_environment(env or {}),
        timeout=300,
    )
    outcomes = dict(re.findall(r"^\S*?(test_\w+(?:\[\w+\])?) (PASSED|FAILED|SKIPPED|ERROR)", result.stdout, re.M))
    return result.returncode, outcomes, result.stdout + result.stderr


def _expected(env_name: str) -> dict:
    fake = env_name == "fake_cupy"
    real = not fake and _real_gpu()
    return {
        "test_backend[numpy]": "PASSED",
        "test_backend[cupy]": "PASSED" if (fake or real) else "SKIPPED",
        "test_device_path": "PASSED" if (fake or real) else "SKIPPED",
        "test_real_gpu": "PASSED" if real else "SKIPPED",
        "test_the_backend_is_restored_afterwards": "PASSED",
    }


SESSION_ENV = "fake_cupy" if os.environ.get("CUNUMPY_FAKE_CUPY") == "1" else "numpy"


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_fixture_and_markers_work_without_a_conftest(tmp_path, env_name):
    code, outcomes, output = _pytest(_project(tmp_path), "-rs", env=ENVIRONMENTS[env_name])
    assert code == 0, output
    assert outcomes == _expected(env_name), output
    # The skip reasons are those of cunumpy.kernel_testing.
    if env_name == "fake_cupy":
        assert "needs CuPy on a real GPU; the fake CuPy is active (CUNUMPY_FAKE_CUPY=1)" in output
    elif not _real_gpu():
        assert "needs a GPU or the fake CuPy (set CUNUMPY_FAKE_CUPY=1)" in output
        assert "needs CuPy with a GPU" in output


def test_require_cuda_turns_the_skips_into_errors(tmp_path):
    env_name = SESSION_ENV
    env = dict(ENVIRONMENTS[env_name], CUNUMPY_REQUIRE_CUDA="1")
    code, outcomes, output = _pytest(_project(tmp_path), env=env)
    if _real_gpu() and env_name == "numpy":
        pytest.skip("a functional CuPy is installed: nothing is missing")
    assert code == 1, output
    assert outcomes["test_backend[numpy]"] == "PASSED"
    assert outcomes["test_backend[cupy]"] == ("PASSED" if env_name == "fake_cupy" else "ERROR")
    assert outcomes["test_real_gpu"] == "ERROR"
    assert outcomes["test_device_path"] == ("PASSED" if env_name == "fake_cupy" else "ERROR")
    assert "CUNUMPY_REQUIRE_CUDA is set, but a functional CuPy is unavailable" in output


def test_the_markers_are_registered(tmp_path):
    code, _, output = _pytest(_project(tmp_path), "--markers", env=ENVIRONMENTS[SESSION_ENV])
    assert code == 0, output
    for marker in (
        "requires_cupy",
        "requires_device_backend",
        "requires_warp_shuffle",
        "requires_high_dim_cuda_views",
        "requires_bounds_check_views",
    ):
        assert f"@pytest.mark.{marker}:" in output


def test_without_the_entry_point_the_fixture_is_missing(tmp_path):
    # The control: the same project with plugin autoloading off finds no `backend`.
    # (-o addopts= drops --strict-markers, which would stop the run at the unknown markers.)
    code, _outcomes, output = _pytest(_project(tmp_path), "-o", "addopts=", env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert code != 0
    assert "fixture 'backend' not found" in output


def test_loading_the_plugin_imports_nothing_heavy(tmp_path):
    # A conftest may set the CUNUMPY_* variables before its first `import cunumpy`; the
    # plugin, loaded before any conftest, must not have imported cunumpy (or NumPy) already.
    conftest = """
        import os
        import sys

        LOADED_AT_CONFTEST = {m for m in ("cunumpy", "numpy", "cupy", "scipy") if m in sys.modules}
        os.environ["CUNUMPY_FAKE_CUPY"] = "1"
        os.environ["CUNUMPY_BACKEND"] = "cupy"
    """
    tests = """
        import conftest


        def test_nothing_heavy_before_the_conftest():
            assert conftest.LOADED_AT_CONFTEST == set()


        def test_the_conftest_settings_took_effect():
            import cunumpy as xp

            assert xp.backend_info()["fake_cupy"] is True
            assert xp.get_backend() == "cupy"
    """
    root = _project(tmp_path, tests=tests, conftest=conftest)
    code, outcomes, output = _pytest(root)
    assert code == 0, output
    assert set(outcomes.values()) == {"PASSED"} and len(outcomes) == 2, output


CONFTESTS = {
    "star_import": "from cunumpy.kernel_testing import *  # noqa: F401,F403\n",
    "kernel_testing_as_plugin": 'pytest_plugins = ["cunumpy.kernel_testing"]\n',
    "plugin_listed_again": 'pytest_plugins = ["cunumpy_pytest_plugin"]\n',
}


@pytest.mark.parametrize("conftest", CONFTESTS)
def test_a_conftest_that_also_registers_the_helpers(tmp_path, conftest):
    env_name = SESSION_ENV
    root = _project(tmp_path, conftest=CONFTESTS[conftest])
    code, outcomes, output = _pytest(root, env=ENVIRONMENTS[env_name])
    assert code == 0, output
    assert outcomes == _expected(env_name), output


def test_the_plugin_named_on_the_command_line_too(tmp_path):
    env_name = SESSION_ENV
    code, outcomes, output = _pytest(_project(tmp_path), "-p", "cunumpy_pytest_plugin", env=ENVIRONMENTS[env_name])
    assert code == 0, output
    assert outcomes == _expected(env_name), output


def test_the_library_is_imported_without_assertion_rewriting(tmp_path):
    # pytest would rewrite (parse and compile from source) every module of a distribution
    # with a pytest11 entry point; the plugin takes the library off that list.
    tests = """
        import sys

        import cunumpy.kernel_testing


        def test_loaders():
            library = type(sys.modules["cunumpy._parity"].__loader__).__name__
            assert library != "AssertionRewritingHook", library
            assert type(sys.modules[__name__].__loader__).__name__ == "AssertionRewritingHook"
            assert "cunumpy_pytest_plugin" in sys.modules
    """
    code, outcomes, output = _pytest(_project(tmp_path, tests=tests), env=ENVIRONMENTS[SESSION_ENV])
    assert code == 0 and outcomes == {"test_loaders": "PASSED"}, output
