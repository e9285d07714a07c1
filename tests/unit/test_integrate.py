"""xp.integrate (API.md section 11.3): quad and odeint with device callbacks, on NumPy and
the fake CuPy (in a fake-CuPy child when the fake is not active)."""

import sys

import numpy as np
import pytest
from _fake_support import rerun_under_fake_cupy

import cunumpy as xp

pytest.importorskip("scipy")
import scipy.integrate


def test_integrate_suite_in_fake_cupy_subprocess():
    rerun_under_fake_cupy(__file__, "not in_fake_cupy_subprocess")


def test_all():
    assert xp.integrate.__all__ == ["odeint", "quad"]


# --------------------------------------------------------------------------- quad


def test_quad_integrand_may_return_a_device_scalar(on_backend):
    weights = xp.asarray([1.0, 2.0, 3.0])
    seen = []

    def integrand(x, w):
        seen.append(type(x))
        return (w * x**2).sum()  # a 0-d array of the active backend

    value, error = xp.integrate.quad(integrand, 0.0, 2.0, args=(weights,))
    assert set(seen) == {float}
    expected = scipy.integrate.quad(lambda x: 6.0 * x**2, 0.0, 2.0)
    assert value == pytest.approx(expected[0], rel=1e-14) and error == pytest.approx(expected[1], rel=1e-6)
    assert isinstance(value, float) and isinstance(error, float)


def test_quad_passes_keywords_to_scipy(on_backend):
    value, _error, info = xp.integrate.quad(lambda x: xp.exp(xp.asarray(-x)), 0.0, np.inf, full_output=True)
    assert value == pytest.approx(1.0) and "neval" in info


def test_quad_one_copy_per_evaluation(device_only):
    calls = []

    def integrand(x):
        calls.append(x)
        return xp.sin(xp.asarray(x))

    with xp.profiling.count_transfers() as counter:
        xp.integrate.quad(integrand, 0.0, 1.0)
    assert counter.to_host == len(calls) > 0


def test_quad_bad_input():
    with pytest.raises(TypeError, match="'func'"):
        xp.integrate.quad(1.0, 0.0, 1.0)


# --------------------------------------------------------------------------- odeint


def _decay(y, t, k):
    return -k * y + xp.get_array_module(y).cos(t) * 0.0 + 0.5 * t


def _decay_jacobian(y, t, k):
    return -k * xp.get_array_module(y).eye(y.shape[0])


@pytest.mark.parametrize("with_jacobian", [False, True])
def test_odeint_state_on_y0s_backend(on_backend, with_jacobian):
    seen = set()
    k = xp.asarray([1.0, 2.0, 0.5])

    def rhs(y, t, k):
        seen.add(xp.get_array_backend(y))
        assert isinstance(t, float)
        return _decay(y, t, k)

    def jacobian(y, t, k):
        seen.add(xp.get_array_backend(y))
        return _decay_jacobian(y, t, k)

    y0 = xp.asarray([1.0, 2.0, 3.0])
    t = np.linspace(0.0, 2.0, 7)
    solution = xp.integrate.odeint(rhs, y0, t, args=(k,), Dfun=jacobian if with_jacobian else None)
    assert xp.get_array_backend(solution) == on_backend and solution.shape == (7, 3)
    assert seen == {on_backend}
    host_k = np.array([1.0, 2.0, 0.5])
    expected = scipy.integrate.odeint(
        _decay, np.array([1.0, 2.0, 3.0]), t, args=(host_k,), Dfun=_decay_jacobian if with_jacobian else None
    )
    np.testing.assert_array_equal(xp.to_numpy(solution), expected)


def test_odeint_tfirst_and_device_t(on_backend):
    seen = set()

    def rhs(t, y):
        seen.add(xp.get_array_backend(y))
        return -y

    def jacobian(t, y):
        seen.add(xp.get_array_backend(y))
        return -xp.get_array_module(y).eye(2)

    t = xp.linspace(0.0, 1.0, 5)  # t on the active backend
    solution = xp.integrate.odeint(rhs, xp.asarray([1.0, 2.0]), t, Dfun=jacobian, tfirst=True)
    assert seen == {on_backend}
    np.testing.assert_allclose(xp.to_numpy(solution)[:, 0], np.exp(-np.linspace(0.0, 1.0, 5)), rtol=1e-6)


def test_odeint_full_output_info_on_the_device(on_backend):
    solution, info = xp.integrate.odeint(lambda y, t: -y, xp.asarray([1.0]), [0.0, 1.0], full_output=True)
    assert xp.get_array_backend(solution) == on_backend
    assert xp.get_array_backend(info["hu"]) == on_backend
    assert isinstance(info["message"], str)


def test_odeint_host_y0_is_scipys_call(device_only):
    solution = xp.integrate.odeint(lambda y, t: -y, np.array([1.0]), xp.linspace(0.0, 1.0, 3))
    assert type(solution) is np.ndarray


def test_odeint_errors(on_backend):
    with pytest.raises(TypeError, match="'func'"):
        xp.integrate.odeint("rhs", xp.asarray([1.0]), [0.0, 1.0])
    with pytest.raises(TypeError, match="'Dfun'"):
        xp.integrate.odeint(lambda y, t: -y, xp.asarray([1.0]), [0.0, 1.0], Dfun=3)


def test_odeint_mixed_backends(device_only):
    with pytest.raises(TypeError, match=r"args\[0\] is a host .* 'y0'"):
        xp.integrate.odeint(lambda y, t, k: -k * y, xp.asarray([1.0, 2.0]), [0.0, 1.0], args=(np.ones(2),))
    with pytest.raises(TypeError, match=r"args\[0\] is a device"):
        xp.integrate.odeint(lambda y, t, k: -k * y, np.array([1.0, 2.0]), [0.0, 1.0], args=(xp.ones(2),))


class _CallbackError(Exception):
    pass


def test_callback_exceptions_propagate_unchanged(on_backend):
    error = _CallbackError("integrand")

    def fail(*args):
        raise error

    with pytest.raises(_CallbackError) as info:
        xp.integrate.quad(fail, 0.0, 1.0)
    assert info.value is error
    with pytest.raises(_CallbackError) as info:
        xp.integrate.odeint(fail, xp.asarray([1.0]), [0.0, 1.0])
    assert info.value is error


@pytest.mark.parametrize("name", ["quad", "odeint"])
def test_without_scipy_import_error_names_the_function(monkeypatch, name):
    monkeypatch.setitem(sys.modules, "scipy.integrate", None)
    with pytest.raises(ImportError, match=rf"{name}\(\) needs SciPy"):
        if name == "quad":
            xp.integrate.quad(lambda x: x, 0.0, 1.0)
        else:
            xp.integrate.odeint(lambda y, t: -y, np.ones(1), [0.0, 1.0])
