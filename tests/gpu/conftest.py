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


#: CUNUMPY_GPU_PARITY_DRY_RUN=1 on the fake CuPy: the emulator-versus-GPU cases run with the
#: "GPU" side emulated too (checks the cases on machines without a GPU; nothing else runs).
DRY_RUN = os.environ.get("CUNUMPY_GPU_PARITY_DRY_RUN", "") == "1" and getattr(
    sys.modules.get("cupy"), "__cunumpy_fake__", False
)


def pytest_collection_modifyitems(config, items):
    if REAL_GPU:
        return
    skip = pytest.mark.skip(reason="needs CuPy on a real CUDA GPU")
    for item in items:
        if DRY_RUN and item.fspath.basename == "test_emulator_parity_gpu.py":
            continue
        item.add_marker(skip)


@pytest.fixture
def cp():
    import cupy

    return cupy
