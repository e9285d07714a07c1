"""Shared set-up of the CPU-emulation tests.

Every test process uses one fresh emulation cache directory (created at import, removed at
exit), so a test run never reuses libraries of an earlier run and compiles each shared
source once. Tests that compile need a C++ compiler (``requires_compiler``).
"""

import atexit
import os
import shutil
import tempfile
import threading

import pytest

from cunumpy.kernel_testing import emulation_compiler

if "CUNUMPY_EMULATION_TEST_CACHE" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="cunumpy-emulation-tests-")
    os.environ["CUNUMPY_EMULATION_TEST_CACHE"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, True)
os.environ["CUNUMPY_EMULATION_CACHE"] = os.environ["CUNUMPY_EMULATION_TEST_CACHE"]

requires_compiler = pytest.mark.skipif(emulation_compiler() is None, reason="needs a C++ compiler (c++ or $CXX)")


def finishes_within(seconds, function, *args, **kwargs):
    """Run ``function`` in a daemon thread; its exception (or None) if it finished in time,
    else fail the test (a hang must not hang the test run)."""
    outcome = {}

    def target():
        try:
            function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc
        else:
            outcome["error"] = None

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"the emulated launch did not finish within {seconds} s (a hang)")
    return outcome["error"]
