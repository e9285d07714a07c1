"""Tests against the real CuPy without a GPU (``make test-real-cupy``: tests/realcupy/run.sh
makes build/venv-cupy with the ``gpu`` extra and runs them there).

Collected anywhere, they skip unless the real CuPy imports and the fake is not active; the
no-driver checks also skip where a GPU is usable (they describe a machine without one).
"""

import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # surface.py


def _real_cupy_reason():
    if os.environ.get("CUNUMPY_FAKE_CUPY", "").strip().lower() in ("1", "true", "yes"):
        return "needs the real CuPy (CUNUMPY_FAKE_CUPY is set)"
    if importlib.util.find_spec("cupy") is None:
        return "needs the real CuPy installed (make test-real-cupy makes build/venv-cupy with it)"
    return None


REAL_CUPY_MISSING = _real_cupy_reason()


def pytest_collection_modifyitems(config, items):
    if REAL_CUPY_MISSING is None:
        return
    skip = pytest.mark.skip(reason=REAL_CUPY_MISSING)
    for item in items:
        if "realcupy" in str(item.fspath):
            item.add_marker(skip)
