"""Real-GPU tests: collected everywhere, skipped unless CuPy runs on a real CUDA device."""

import os
import sys

import pytest

import cunumpy as xp


def _real_gpu() -> bool:
    if os.environ.get("CUNUMPY_FAKE_CUPY", "").strip().lower() in ("1", "true", "yes"):
        return False
    if not xp.cupy_available():
        return False
    return not getattr(sys.modules.get("cupy"), "__cunumpy_fake__", False)


REAL_GPU = _real_gpu()


def pytest_collection_modifyitems(config, items):
    if REAL_GPU:
        return
    skip = pytest.mark.skip(reason="needs CuPy on a real CUDA GPU")
    for item in items:
        item.add_marker(skip)


@pytest.fixture
def cp():
    import cupy

    return cupy
