"""Shared fixtures. `make test` runs tests/unit twice: on NumPy, and with
CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy on the fake CuPy."""

import os
import sys

import numpy as np
import pytest

import cunumpy as xp
from cunumpy.kernel_testing import fake_cupy_active


def device_backend_available() -> bool:
    """A GPU or the fake CuPy can run the CuPy code paths."""
    return fake_cupy_active() or (os.environ.get("CUNUMPY_FAKE_CUPY", "") == "" and xp.cupy_available())


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


@pytest.fixture
def fake_cupy():
    """The fake CuPy module; skips on a plain run (where each such file re-runs its tests in a
    fake-CuPy child, see tests/unit/_fake_support.py)."""
    if not fake_cupy_active():
        pytest.skip("needs the fake CuPy (CUNUMPY_FAKE_CUPY=1) or the stand-in plugin")
    return sys.modules["cupy"]


@pytest.fixture
def dev(fake_cupy):
    """Host data -> a device array of the fake CuPy."""
    return lambda a: fake_cupy.asarray(np.asarray(a))
