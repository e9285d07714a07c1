"""cunumpy's pytest plugin, loaded by pytest through the ``pytest11`` entry point.

Any project with cunumpy installed gets, without a conftest:

* the ``backend`` fixture of ``cunumpy.kernel_testing`` (API.md section 13.1): each test
  that asks for it runs once with NumPy active and once with CuPy active, the ``cupy``
  case on a GPU or on the fake CuPy (``CUNUMPY_FAKE_CUPY=1``; CUDA kernels then run in the
  CPU emulation) and skipped otherwise;
* the markers ``requires_cupy`` (CuPy on a real GPU), ``requires_device_backend`` (a GPU
  or the fake CuPy; the test runs with the CuPy backend active) and the HIP-gap markers
  ``requires_warp_shuffle``, ``requires_high_dim_cuda_views``,
  ``requires_bounds_check_views`` (CUDA kernels can launch, and not on HIP/ROCm), with the
  skip rules (and the ``CUNUMPY_REQUIRE_CUDA`` errors) of the objects of the same names in
  ``cunumpy.kernel_testing``;
* with ``CUNUMPY_EMULATION_ANALYZE=1`` (or an arch name; ``--cunumpy-analysis=PATH`` sets it
  to 1 when unset), every emulated launch of the run is analysed (performance analysis): a
  short table of the costliest lines (excess sectors, bank conflicts, divergence) at the end
  of the session, and all the analyses as JSON in PATH (under pytest-xdist each worker writes
  its own file, PATH.gwN).

This module sits beside the package, not inside it, because importing ``cunumpy.<anything>``
runs ``cunumpy/__init__``: NumPy, the C core, and CuPy itself under CUNUMPY_BACKEND=cupy.
pytest loads entry-point plugins before any conftest, so a plugin inside the package would
also read CUNUMPY_FAKE_CUPY and CUNUMPY_BACKEND before a conftest could set them. Here
cunumpy is imported only when a test that uses the fixture or a marker is set up.

The entry point has this module's name, so ``-p cunumpy_pytest_plugin`` or
``pytest_plugins = ["cunumpy_pytest_plugin"]`` next to the autoloaded plugin registers
it once. A conftest that imports ``backend`` from ``cunumpy.kernel_testing`` (or lists
that module in ``pytest_plugins``) overrides this fixture with the equivalent one.
"""

from __future__ import annotations

import os
import sys

import pytest

__all__ = [
    "MARKERS",
    "backend",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_makereport",
    "pytest_runtest_setup",
    "pytest_terminal_summary",
    "pytest_unconfigure",
]

#: The markers this plugin registers, with the line ``pytest --markers`` shows.
MARKERS = {
    "requires_cupy": "skip unless CUDA kernels can launch on a real GPU (a functional CuPy that is "
    "not the fake); an error instead when CUNUMPY_REQUIRE_CUDA is set",
    "requires_device_backend": "run with the CuPy backend active, on a GPU or on the fake CuPy "
    "(CUNUMPY_FAKE_CUPY=1, CUDA kernels emulated); skip otherwise (an error when CUNUMPY_REQUIRE_CUDA "
    "is set); never runs with NumPy active",
    "requires_warp_shuffle": "skip unless CUDA kernels can launch (a GPU, or the fake CuPy with a C++ "
    "compiler) and warp shuffles compile (not on HIP/ROCm)",
    "requires_high_dim_cuda_views": "skip unless CUDA kernels can launch (a GPU, or the fake CuPy with a "
    "C++ compiler) and array views of 5 or more dimensions compile (not on HIP/ROCm)",
    "requires_bounds_check_views": "skip unless CUDA kernels can launch (a GPU, or the fake CuPy with a "
    "C++ compiler) and array_view.cuh with CUNUMPY_BOUNDS_CHECK compiles (not on HIP/ROCm)",
}


def _import_the_package_as_usual() -> bool:
    """Take the ``cunumpy`` package off pytest's list of modules to assertion-rewrite.

    pytest rewrites the asserts of every module of a distribution that has a ``pytest11``
    entry point, so with this plugin installed it would parse and compile the whole library
    from source on import, at each run where bytecode cannot be cached (read-only
    installations, ``PYTHONDONTWRITEBYTECODE``): a large part of the collection time of a
    test file that imports cunumpy. Only this module is a plugin, and the library raises its
    own exceptions; so its modules are imported as usual. (This reads the private state of
    pytest's import hook; where that is missing, nothing changes.)
    """
    changed = False
    for finder in sys.meta_path:
        if type(finder).__name__ != "AssertionRewritingHook":
            continue
        names = getattr(finder, "_must_rewrite", None)
        if isinstance(names, set) and "cunumpy" in names:
            names.discard("cunumpy")
            cache = getattr(finder, "_marked_for_rewrite_cache", None)
            if isinstance(cache, dict):
                cache.clear()
            changed = True
    return changed


_import_the_package_as_usual()

#: How many pytest configurations (in this process) have this plugin registered; the
#: objects of ``cunumpy.kernel_testing`` use the named markers while it is above 0.
_configured = 0


def pytest_addoption(parser) -> None:
    group = parser.getgroup("cunumpy")
    group.addoption(
        "--cunumpy-analysis",
        metavar="PATH",
        default=None,
        help="write the performance analysis of every emulated launch as JSON to PATH "
        "(sets CUNUMPY_EMULATION_ANALYZE=1 when unset)",
    )


def pytest_configure(config) -> None:
    global _configured
    _configured += 1
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    path = config.getoption("cunumpy_analysis", None)
    if path and not os.environ.get("CUNUMPY_EMULATION_ANALYZE", "").strip():
        os.environ["CUNUMPY_EMULATION_ANALYZE"] = "1"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The analysis table of the session's emulated launches (CUNUMPY_EMULATION_ANALYZE)."""
    analysis = sys.modules.get("cunumpy._emulation._analysis")
    path = config.getoption("cunumpy_analysis", None)
    if analysis is None:
        if not path:
            return
        try:
            from cunumpy._emulation import _analysis as analysis
        except ImportError:
            return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if path and worker:
        path = f"{path}.{worker}"
    text = analysis.session_report(path)
    if text:
        terminalreporter.write_sep("=", "cunumpy kernel analysis")
        terminalreporter.write_line(text)


def pytest_unconfigure(config) -> None:
    global _configured
    _configured = max(0, _configured - 1)


def _emulation_unavailable(exc: BaseException) -> str | None:
    """The reason of a ``cunumpy.kernel_testing.EmulationUnavailable``, else None (the class is
    looked up where it lives, never imported here: it exists once a launch could raise it)."""
    errors = sys.modules.get("cunumpy._emulation._errors")
    cls = getattr(errors, "EmulationUnavailable", None)
    if cls is None or not isinstance(exc, cls):
        return None
    return str(getattr(exc, "reason", "") or exc)


def _needs_a_device_backend(item) -> bool:
    return any(item.get_closest_marker(marker) is not None for marker in MARKERS)


def _skip_reason(item, excinfo) -> str | None:
    """Why a failed setup or call of ``item`` is a skip: a test that needs a device backend
    reached a launch the fake CuPy cannot run (``CUNUMPY_EMULATION=0``, no C++ compiler);
    None otherwise, and with ``CUNUMPY_REQUIRE_CUDA`` set (then it fails)."""
    reason = _emulation_unavailable(excinfo.value)
    if reason is None or not _needs_a_device_backend(item):
        return None
    from cunumpy.kernel_testing import cuda_required

    if cuda_required():
        return None
    return f"CUDA kernels cannot launch on the fake CuPy: {reason}"


def _skip_by_marker(item) -> None:
    # Before fixtures are set up (the setup wrapper calls it first), so the ``cupy`` case of
    # ``backend`` never tries to activate a backend that is not there.
    for marker in MARKERS:
        if item.get_closest_marker(marker) is None:
            continue
        from cunumpy import kernel_testing

        what, reason, required = kernel_testing._missing(marker)
        if reason is None:
            continue
        if required and kernel_testing.cuda_required():
            kernel_testing._requirement_failed(what, reason)  # raises: the test errors
        pytest.skip(reason)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    _skip_by_marker(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """An ``EmulationUnavailable`` in the setup or call of a test that needs a device backend
    is reported as a skip naming the reason (as pytest reports ``pytest.skip``)."""
    outcome = yield
    if call.excinfo is None or call.when == "teardown":
        return
    reason = _skip_reason(item, call.excinfo)
    if reason is None:
        return
    report = outcome.get_result()
    path, lineno, _ = item.reportinfo()
    report.outcome = "skipped"
    report.longrepr = (str(path), (lineno or 0) + 1, f"Skipped: {reason}")


@pytest.fixture(autouse=True)
def _cunumpy_device_backend(request):
    """Tests marked ``requires_device_backend`` run with the CuPy backend active."""
    if request.node.get_closest_marker("requires_device_backend") is None:
        yield
        return
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "numpy":
        pytest.skip("requires_device_backend: the numpy case of the backend fixture does not run")
    from cunumpy import use_backend

    with use_backend("cupy", strict=True):
        yield


@pytest.fixture(params=["numpy", pytest.param("cupy", marks=pytest.mark.requires_device_backend)])
def backend(request):
    """Activate each backend for the test and yield its name: ``numpy`` on NumPy, ``cupy`` on
    a GPU or on the fake CuPy (CUDA kernels emulated)."""
    from cunumpy import use_backend
    from cunumpy.kernel_testing import cuda_required

    with use_backend(request.param, strict=cuda_required()):
        yield request.param
