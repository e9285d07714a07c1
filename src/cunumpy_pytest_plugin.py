"""cunumpy's pytest plugin, loaded by pytest through the ``pytest11`` entry point.

Any project with cunumpy installed gets, without a conftest:

* the ``backend`` fixture of ``cunumpy.kernel_testing`` (API.md section 13.1): each test
  that asks for it runs once on ``"numpy"`` and once on ``"cupy"``, the ``cupy`` case
  skipped unless CUDA kernels can really launch;
* the markers ``@pytest.mark.requires_cupy`` and ``@pytest.mark.requires_device_backend``,
  with the skip rules (and the ``CUNUMPY_REQUIRE_CUDA`` errors) of the objects of the same
  names in ``cunumpy.kernel_testing``.

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

import pytest

__all__ = ["MARKERS", "backend", "pytest_configure", "pytest_runtest_setup"]

#: The markers this plugin registers, with the line ``pytest --markers`` shows.
MARKERS = {
    "requires_cupy": "skip unless CUDA kernels can really launch (a functional CuPy that is not the "
    "fake); an error instead when CUNUMPY_REQUIRE_CUDA is set",
    "requires_device_backend": "skip unless a GPU or the fake CuPy (CUNUMPY_FAKE_CUPY=1) can run the "
    "CuPy code paths; an error instead when CUNUMPY_REQUIRE_CUDA is set",
}


def pytest_configure(config) -> None:
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


def _missing(marker: str) -> tuple[str, str | None]:
    """(what the marker needs, why it is missing or None); imports cunumpy on first use."""
    from cunumpy import kernel_testing

    if marker == "requires_cupy":
        return "a functional CuPy", kernel_testing._real_cupy_missing_reason()
    if kernel_testing.device_backend_available():
        return "a device backend", None
    return "a device backend", "needs a GPU or the fake CuPy (set CUNUMPY_FAKE_CUPY=1)"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    # tryfirst: the decision comes before fixtures are set up, so the ``cupy`` case of
    # ``backend`` never tries to activate a backend that is not there.
    for marker in MARKERS:
        if item.get_closest_marker(marker) is None:
            continue
        what, reason = _missing(marker)
        if reason is None:
            continue
        from cunumpy import kernel_testing

        if kernel_testing.cuda_required():
            kernel_testing._requirement_failed(what, reason)  # raises: the test errors
        pytest.skip(reason)


@pytest.fixture(params=["numpy", pytest.param("cupy", marks=pytest.mark.requires_cupy)])
def backend(request):
    """Activate each backend for the test (strictly when CUNUMPY_REQUIRE_CUDA is set); yield its name."""
    from cunumpy import use_backend
    from cunumpy.kernel_testing import cuda_required

    with use_backend(request.param, strict=cuda_required()):
        yield request.param
