"""cunumpy with the real CuPy installed and no usable driver (issue 27 item 13).

CuPy 14's wheel (the ``gpu`` extra, cupy-cuda13x) imports without a driver; every device
call then raises ``CUDARuntimeError: cudaErrorInsufficientDriver``. Each check runs in a
fresh interpreter of this environment, since the backend state is per process.
"""

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

DRIVER = "cudaErrorInsufficientDriver"


def _gpu_usable() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any driver failure means no GPU
        return False


pytestmark = pytest.mark.skipif(
    _gpu_usable(),
    reason="a CUDA driver and GPU are usable here: these checks describe a machine without one",
)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    environment.update(env)
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed


def test_the_gpu_extra_is_installed_here():
    assert metadata.version("cupy-cuda13x").startswith("14.")
    requires = metadata.requires("cunumpy") or []
    assert any(r.startswith("cupy-cuda13x") and 'extra == "gpu"' in r for r in requires), requires


def test_import_and_set_backend_fall_back_with_the_driver_reason():
    out = _run("""
        import json, sys
        import cunumpy as xp
        assert "cupy" not in sys.modules, "import cunumpy imported cupy"
        assert xp.get_backend() == "numpy"
        xp.set_backend("cupy")
        import cupy
        info = xp.backend_info()
        print(json.dumps({"backend": xp.get_backend(), "available": xp.cupy_available(),
                          "reason": info["cuda_unavailable_reason"], "fake": getattr(cupy, "__cunumpy_fake__", False),
                          "zeros": type(xp.zeros(2)).__module__}))
    """).stdout
    result = json.loads(out.splitlines()[-1])
    assert result["backend"] == "numpy" and result["available"] is False and result["fake"] is False
    assert result["zeros"] == "numpy"
    assert result["reason"].startswith("CUDARuntimeError: ") and DRIVER in result["reason"]


def test_cunumpy_backend_variable_falls_back_too():
    out = _run(
        """
        import cunumpy as xp
        print(xp.get_backend(), xp.backend_info()["cuda_unavailable_reason"])
    """,
        CUNUMPY_BACKEND="cupy",
    ).stdout
    assert out.startswith("numpy CUDARuntimeError") and DRIVER in out


def test_strict_raises_the_driver_reason_and_keeps_the_backend():
    out = _run("""
        import cunumpy as xp
        for attempt in (lambda: xp.set_backend("cupy", strict=True), lambda: xp.use_backend("cupy", strict=True).__enter__()):
            try:
                attempt()
            except RuntimeError as exc:
                print("RuntimeError:", exc)
            else:
                raise SystemExit("strict=True did not raise")
        print("backend", xp.get_backend())
    """).stdout
    lines = out.splitlines()
    assert (
        len([line for line in lines if line.startswith("RuntimeError: the CuPy backend is unusable: CUDARuntimeError")])
        == 2
    ), out
    assert all(DRIVER in line for line in lines[:2]) and lines[-1] == "backend numpy"


def test_fake_cupy_is_installed_although_the_real_one_imports():
    out = _run(
        """
        import sys
        import cunumpy as xp
        import cupy
        assert cupy.__cunumpy_fake__ is True and sys.modules["cupy"] is cupy
        xp.set_backend("cupy", strict=True)
        a = xp.arange(4.0)
        print(xp.get_backend(), type(a).__module__, float(a.sum()), xp.backend_info()["fake_cupy"])
    """,
        CUNUMPY_FAKE_CUPY="1",
    ).stdout
    assert out.split() == ["cupy", "cupy", "6.0", "True"]


def test_the_fake_refuses_to_replace_an_imported_real_cupy():
    out = _run("""
        import cupy, cunumpy
        from cunumpy.kernel_testing import install_fake_cupy
        try:
            install_fake_cupy()
        except RuntimeError as exc:
            print(exc)
    """).stdout
    assert "the real 'cupy' is already imported" in out


@pytest.mark.parametrize("fake", [False, True], ids=["real", "fake"])
def test_info_reports_the_installed_cupy_and_the_backend_state(fake):
    env = {"CUNUMPY_FAKE_CUPY": "1"} if fake else {}
    report = json.loads(
        _run(
            "import runpy, sys; sys.argv = ['cunumpy', 'info', '--json']; "
            "runpy.run_module('cunumpy', run_name='__main__')",
            **env,
        ).stdout
    )
    assert report["packages"]["cupy"] == metadata.version("cupy-cuda13x")
    backend = report["backend"]
    assert backend["fake_cupy"] is fake and backend["active"] == "numpy"
    if fake:
        assert backend["cupy_available"] is True and backend["cupy_unavailable_reason"] is None
    else:
        assert backend["cupy_available"] is False and DRIVER in backend["cupy_unavailable_reason"]
    text = _run(
        "import runpy, sys; sys.argv = ['cunumpy', 'info']; runpy.run_module('cunumpy', run_name='__main__')", **env
    ).stdout
    assert f"cupy:             {metadata.version('cupy-cuda13x')}" in text
    assert ("available (the fake CuPy" in text) if fake else (f"unavailable: CUDARuntimeError: {DRIVER}" in text)
