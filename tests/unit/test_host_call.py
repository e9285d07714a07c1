"""host_call, evaluate_on_host and setup_on_host (API.md section 1.5) on both backends."""

import sys

import numpy as np
import pytest
from _events import Events

import cunumpy as xp


def device(x, order="C"):
    return sys.modules["cupy"].array(np.asarray(x, dtype=float), order=order)


def host(a):
    return a.get() if xp.is_gpu(a) else a


def test_bad_arguments_are_type_errors():
    with pytest.raises(TypeError, match="fun"):
        xp.host_call(3)
    with pytest.raises(TypeError, match="method"):
        xp.evaluate_on_host(3)
    with pytest.raises(TypeError, match="init"):
        xp.setup_on_host(None)


def test_plain_call_on_numpy_without_device_arguments():
    a = np.zeros(2)
    with xp.use_backend("numpy"), Events() as ev:
        assert xp.host_call(lambda x, y=None: x, a, y=[a]) is a
        with pytest.raises(ZeroDivisionError):
            xp.host_call(lambda: 1 / 0)
    assert ev.events == []


def test_cupy_backend_without_device_arguments_stays_on_the_host(device_only):
    seen = []

    def fun(n):
        seen.append(xp.get_backend())
        return np.arange(n)

    r = xp.host_call(fun, 3)
    assert isinstance(r, np.ndarray) and seen == ["numpy"] and xp.get_backend() == "cupy"


def test_device_arguments_are_copied_once_and_results_come_back(device_only):
    d = device([1.0, 2.0])
    e = device(np.arange(6.0).reshape(2, 3), order="F")
    seen = []

    def fun(a, group, *, table):
        seen.append((xp.get_backend(), a, group, table))
        return a * 2, [group[1]], {"raw": a}, 5

    with Events() as ev:
        doubled, listed, raw, five = xp.host_call(fun, d, (d, e), table={"x": [d]})
    backend, a, group, table = seen[0]
    assert backend == "numpy" and isinstance(a, np.ndarray) and group[0] is a and table["x"][0] is a
    assert group[1].flags.f_contiguous and not group[1].flags.c_contiguous
    assert xp.is_gpu(doubled) and xp.is_gpu(listed[0]) and isinstance(raw["raw"], np.ndarray) and five == 5
    np.testing.assert_array_equal(host(doubled), [2.0, 4.0])
    np.testing.assert_array_equal(host(listed[0]), np.arange(6.0).reshape(2, 3))
    assert len(ev.kinds("to_host")) == 2 and len(ev.kinds("to_device")) == 2
    assert ev.kinds("kernel_conversion") == []
    # Nothing is written back: host_call has no outputs.
    np.testing.assert_array_equal(host(d), [1.0, 2.0])


def test_evaluate_on_host_passes_self_unchanged(device_only):
    class Model:
        def __init__(self):
            self.scale = device([3.0])

        @xp.evaluate_on_host
        def apply(self, x):
            """Scale x."""
            return self, x * 2

    m = Model()
    me, r = m.apply(device([1.0, 2.0]))
    assert me is m and xp.is_gpu(m.scale) and xp.is_gpu(r)
    np.testing.assert_array_equal(host(r), [2.0, 4.0])
    assert Model.apply.__name__ == "apply" and Model.apply.__doc__ == "Scale x."


def test_evaluate_on_host_on_the_numpy_backend():
    class Model:
        @xp.evaluate_on_host
        def apply(self, x):
            return x

    a = np.ones(2)
    with xp.use_backend("numpy"):
        assert Model().apply(a) is a


@pytest.mark.parametrize("fails", [False, True])
def test_setup_on_host_runs_init_under_numpy(on_backend, fails):
    class Grid:
        @xp.setup_on_host
        def __init__(self, n):
            """Make the grid."""
            self.backend = xp.get_backend()
            self.x = xp.linspace(0.0, 1.0, n)
            if fails:
                raise RuntimeError("init failed")

    if fails:
        with pytest.raises(RuntimeError):
            Grid(4)
    else:
        g = Grid(4)
        assert g.backend == "numpy" and isinstance(g.x, np.ndarray)
    assert xp.get_backend() == on_backend
    assert Grid.__init__.__doc__ == "Make the grid."
