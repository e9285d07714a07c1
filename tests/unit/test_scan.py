"""_core.device_type: the device array type found through sys.modules, never imported."""

import os
import subprocess
import sys

import cunumpy as xp
from cunumpy import _reference
from cunumpy._native import HAVE_C_CORE, core


def test_the_c_core_is_built():
    assert HAVE_C_CORE, "cunumpy._core did not import: the package was installed without its extension"


def test_device_type_matches_the_twin(on_backend):
    assert core.device_type() is _reference.device_type()
    if on_backend == "cupy":
        assert core.device_type() is type(xp.zeros(1))


def test_device_type_is_found_through_sys_modules_without_importing_cupy():
    code = """
import sys, types
import cunumpy
from cunumpy._native import core
assert core.device_type() is None and 'cupy' not in sys.modules
fake = types.ModuleType('cupy')
class ndarray: pass
fake.ndarray = ndarray
sys.modules['cupy'] = fake
assert core.device_type() is ndarray
print('ok')
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.stdout.strip() == "ok", result.stderr
