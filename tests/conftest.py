"""Shared fixtures. `make test` runs tests/unit twice: on NumPy, and with
CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy on the fake CuPy."""

import os
import sys

import pytest

import cunumpy as xp


def device_backend_available() -> bool:
    """A GPU or the fake CuPy can run the CuPy code paths."""
    cupy = sys.modules.get("cupy")
    return (cupy is not None and getattr(cupy, "__cunumpy_fake__", False)) or (
        os.environ.get("CUNUMPY_FAKE_CUPY", "") == "" and xp.cupy_available()
    )


@pytest.fixture(params=["numpy", "cupy"])
def on_backend(request):
    """Run the test once per backend; the cupy case needs a GPU or the fake CuPy."""
    if request.param == "cupy" and not device_backend_available():
        pytest.skip("needs a GPU or the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    with xp.use_backend(request.param, strict=True):
        yield request.param


@pytest.fixture
def device_only():
    """Activate the CuPy backend (GPU or fake) for a test that only makes sense there."""
    if not device_backend_available():
        pytest.skip("needs a GPU or the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    with xp.use_backend("cupy", strict=True):
        yield "cupy"
