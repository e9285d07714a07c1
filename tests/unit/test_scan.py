"""_core.any_device against its pure-Python twin."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cunumpy as xp
from cunumpy import _reference
from cunumpy._native import HAVE_C_CORE, core


def test_the_c_core_is_built():
    assert HAVE_C_CORE, "cunumpy._core did not import: the package was installed without its extension"


def _structures(leaf):
    return st.recursive(
        leaf,
        lambda children: st.lists(children, max_size=3) | st.lists(children, max_size=3).map(tuple),
        max_leaves=8,
    )


@pytest.mark.parametrize("depth", [0, 1, 2, 5])
def test_any_device_matches_twin_on_host_data(depth):
    args = (np.zeros(2), [1, [np.ones(1)]], (3.0,), "text", None)
    assert core.any_device(args, {"k": [np.zeros(1)]}, depth) is False
    assert _reference.any_device(args, {"k": [np.zeros(1)]}, depth) is False


def test_any_device_bad_input_names_the_argument():
    for fn in (core.any_device, _reference.any_device):
        with pytest.raises(TypeError, match="args"):
            fn(np.zeros(2))
        with pytest.raises(TypeError, match="kwargs"):
            fn((), [1])
        with pytest.raises(ValueError, match="depth"):
            fn((), None, -1)
        with pytest.raises(ValueError, match="depth"):
            fn((), None, 65)


def test_any_device_with_device_arrays(device_only):
    d = xp.zeros(2)
    assert core.device_type() is type(d)
    cases = [
        ((d,), None, 0, True),
        (([d],), None, 0, False),
        (([d],), None, 1, True),
        (([[d]],), None, 1, False),
        (([[d]],), None, 2, True),
        ((), {"x": d}, 0, True),
        ((), {"x": (1, d)}, 1, True),
        ((np.zeros(1), 2), {"x": 3}, 3, False),
    ]
    for args, kwargs, depth, expected in cases:
        assert core.any_device(args, kwargs, depth) is expected
        assert _reference.any_device(args, kwargs, depth) is expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_device_property_against_twin(data, device_only):
    d = xp.zeros(1)
    leaf = st.sampled_from([d, np.zeros(1), 1, None, "s"])
    args = tuple(data.draw(st.lists(_structures(leaf), max_size=4)))
    kwargs = data.draw(st.none() | st.dictionaries(st.text(max_size=3), _structures(leaf), max_size=3))
    depth = data.draw(st.integers(0, 4))
    assert core.any_device(args, kwargs, depth) is _reference.any_device(args, kwargs, depth)


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
assert core.any_device(([ndarray()],), None, 1) is True
print('ok')
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.stdout.strip() == "ok", result.stderr


def test_many_calls_keep_memory_flat(device_only):
    d = xp.zeros(1)
    args = ([d, np.zeros(1)], {"a": 1})

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    for _ in range(2000):
        core.any_device(args, {"k": d}, 2)
    before = rss()
    for _ in range(200000):
        core.any_device(args, {"k": d}, 2)
    assert rss() - before < 4 * 1024 * 1024
