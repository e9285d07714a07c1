"""xp.optimize (API.md sections 11.1, 11.2) on NumPy and the fake CuPy.

``newton`` is compared step for step with ``scipy.optimize.newton`` on an array ``x0``;
``fsolve``/``root``/``minimize`` with SciPy's own results, checking that every callback
sees device arrays when ``x0`` is on the device. In a plain run the fake-CuPy cases skip
and ``test_optimize_suite_in_fake_cupy_subprocess`` runs this file in a fake-CuPy child.
"""

import sys
import warnings

import numpy as np
import pytest
from _fake_support import rerun_under_fake_cupy

import cunumpy as xp

pytest.importorskip("scipy")
import scipy.optimize


def test_optimize_suite_in_fake_cupy_subprocess():
    rerun_under_fake_cupy(__file__, "not in_fake_cupy_subprocess")


def test_all():
    assert xp.optimize.__all__ == ["NewtonResult", "fsolve", "minimize", "newton", "root"]


# --------------------------------------------------------------------------- newton


def _scipy_newton(func, x0, fprime, args, **kw):
    """SciPy's result with full_output, its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return scipy.optimize.newton(func, x0, fprime, args=args, full_output=True, **kw)


def _ns(x):
    """The namespace of ``x``'s backend: the same formulas run on host and device arrays."""
    return xp.get_array_module(x)


# (func, fprime, x0, args)
NEWTON_CASES = {
    "cube roots": (lambda x, a: x**3 - a, lambda x, a: 3 * x**2, np.linspace(0.5, 3.0, 9), (np.linspace(1.0, 8.0, 9),)),
    "zero derivative at some points": (
        lambda x, a: x**2 - a,
        lambda x, a: 2 * x,
        np.array([0.0, 1.0, 2.0, 0.0, -1.5]),
        (np.array([2.0, 3.0, 4.0, 5.0, 6.0]),),
    ),
    "no real root for some points": (
        lambda x, a: x**2 + a,
        lambda x, a: 2 * x,
        np.array([0.5, 1.0, 2.0, 3.0]),
        (np.array([-1.0, 1.0, -4.0, 0.5]),),
    ),
    "already roots": (
        lambda x, a: x - a,
        lambda x, a: _ns(x).ones_like(x),
        np.array([1.0, 2.0]),
        (np.array([1.0, 2.0]),),
    ),
    "flat function (all derivatives zero)": (
        lambda x, a: x * 0 + a,
        lambda x, a: x * 0,
        np.array([1.0, 2.0]),
        (np.array([1.0, 2.0]),),
    ),
    "Kepler": (
        lambda E, e: E - e * _ns(E).sin(E) - 1.0,
        lambda E, e: 1.0 - e * _ns(E).cos(E),
        np.linspace(0.0, 3.0, 11),
        (np.linspace(0.0, 0.9, 11),),
    ),
    "two dimensional": (
        lambda x, a: x**3 - a,
        lambda x, a: 3 * x**2,
        np.linspace(0.5, 3.0, 12).reshape(3, 4),
        (np.linspace(1.0, 8.0, 12).reshape(3, 4),),
    ),
}


@pytest.mark.parametrize("method", ["newton", "secant"])
@pytest.mark.parametrize("case", sorted(NEWTON_CASES))
def test_newton_takes_scipys_steps(on_backend, case, method):
    func, fprime, x0, args = NEWTON_CASES[case]
    if method == "secant":
        fprime = None
    expected = _scipy_newton(func, x0, fprime, args)
    device_args = tuple(xp.asarray(a) for a in args)
    result = xp.optimize.newton(func, xp.asarray(x0), fprime, args=device_args, full_output=True)
    assert isinstance(result, xp.optimize.NewtonResult)
    for field in ("root", "converged", "zero_der"):
        ours = getattr(result, field)
        assert xp.get_array_backend(ours) == on_backend
        np.testing.assert_array_equal(xp.to_numpy(ours), getattr(expected, field), err_msg=field)


def test_newton_tol_and_maxiter_as_scipy(on_backend):
    func, fprime, x0, args = NEWTON_CASES["Kepler"]
    for tol, maxiter in ((1e-3, 50), (1e-12, 3), (1e-8, 2)):
        for derivative in (fprime, None):
            expected = _scipy_newton(func, x0, derivative, args, tol=tol, maxiter=maxiter)
            ours = xp.optimize.newton(
                func,
                xp.asarray(x0),
                derivative,
                args=tuple(xp.asarray(a) for a in args),
                tol=tol,
                maxiter=maxiter,
                full_output=True,
            )
            np.testing.assert_array_equal(xp.to_numpy(ours.root), expected.root)
            np.testing.assert_array_equal(xp.to_numpy(ours.converged), expected.converged)


def test_newton_accepts_tol_zero_with_rtol(on_backend):
    """tol=0 with rtol > 0 is a purely relative test (issue 27 item 6; earlier releases took it,
    SciPy 1.17 refuses any tol <= 0): the same steps as a negligible tol with that rtol."""
    func, fprime, x0, args = NEWTON_CASES["Kepler"]
    device_args = tuple(xp.asarray(a) for a in args)
    for derivative in (fprime, None):
        ours = xp.optimize.newton(
            func, xp.asarray(x0), derivative, args=device_args, tol=0, rtol=1e-9, full_output=True
        )
        tiny = xp.optimize.newton(
            func, xp.asarray(x0), derivative, args=device_args, tol=1e-300, rtol=1e-9, full_output=True
        )
        assert bool(xp.all(ours.converged))
        np.testing.assert_array_equal(xp.to_numpy(ours.root), xp.to_numpy(tiny.root))
    root = xp.optimize.newton(lambda x: x * x - 2.0, 1.0, lambda x: 2 * x, tol=0.0, rtol=1e-12)
    assert root.shape == () and abs(float(root) - 2.0**0.5) < 1e-12


def test_newton_rtol_loosens_convergence(on_backend):
    x0 = xp.asarray([1.0e6, 2.0e6])
    strict = xp.optimize.newton(lambda x: x**2 - 4.0e12, x0, lambda x: 2 * x, tol=1e-300, maxiter=100, full_output=True)
    loose = xp.optimize.newton(
        lambda x: x**2 - 4.0e12, x0, lambda x: 2 * x, tol=1e-300, rtol=1e-3, maxiter=100, full_output=True
    )
    assert bool(xp.all(loose.converged))
    np.testing.assert_allclose(xp.to_numpy(loose.root), [2.0e6, 2.0e6], rtol=1e-3)
    np.testing.assert_allclose(xp.to_numpy(strict.root), [2.0e6, 2.0e6], rtol=1e-12)


def test_newton_result_lives_on_x0s_backend(on_backend):
    result = xp.optimize.newton(lambda x: x * x - 2.0, 1.0, lambda x: 2 * x)
    assert xp.get_array_backend(result) == on_backend and result.ndim == 0
    assert float(result) == pytest.approx(2**0.5)
    result = xp.optimize.newton(lambda x: x * x - 2.0, [1.0, 3.0])
    assert xp.get_array_backend(result) == on_backend and result.shape == (2,)
    host = xp.optimize.newton(lambda x: x * x - 2.0, np.array([1.0, 3.0]))
    assert type(host) is np.ndarray


def test_newton_scalar_full_output_is_0d(on_backend):
    result = xp.optimize.newton(lambda x: x * x - 2.0, 1.0, full_output=True)
    assert result.root.ndim == 0 and result.converged.ndim == 0 and bool(result.converged)
    assert xp.get_array_backend(result.root) == on_backend


def test_newton_copies_x0_to_float64(on_backend):
    for x0 in (xp.asarray([1, 2, 3]), xp.asarray([1.0, 2.0, 3.0], dtype=xp.float32)):
        before = xp.to_numpy(x0).copy()
        result = xp.optimize.newton(lambda x: x * x - 2.0, x0, lambda x: 2 * x)
        assert result.dtype == np.float64
        np.testing.assert_array_equal(xp.to_numpy(x0), before)
        assert x0.dtype == before.dtype
    x0 = xp.asarray([1.0, 2.0])
    result = xp.optimize.newton(lambda x: x * x - 2.0, x0, lambda x: 2 * x)
    assert result is not x0
    np.testing.assert_array_equal(xp.to_numpy(x0), [1.0, 2.0])


def test_newton_complex_roots(on_backend):
    x0 = np.array([1.0 + 1.0j, -1.0 + 0.5j])
    expected = _scipy_newton(lambda x: x**2 + 1, x0, lambda x: 2 * x, ())
    ours = xp.optimize.newton(lambda x: x**2 + 1, xp.asarray(x0), lambda x: 2 * x, full_output=True)
    assert ours.root.dtype == np.complex128
    np.testing.assert_array_equal(xp.to_numpy(ours.root), expected.root)


def test_newton_warns_with_counts(on_backend):
    func, fprime, x0, args = NEWTON_CASES["no real root for some points"]
    with pytest.warns(RuntimeWarning, match=r"2 of 4 points did not converge after 50 iteration") as record:
        xp.optimize.newton(func, xp.asarray(x0), fprime, args=tuple(xp.asarray(a) for a in args))
    assert len(record) == 1
    func, fprime, x0, args = NEWTON_CASES["flat function (all derivatives zero)"]
    with pytest.warns(RuntimeWarning, match=r"2 of 2 points .*zero derivatives"):
        xp.optimize.newton(func, xp.asarray(x0), fprime, args=tuple(xp.asarray(a) for a in args))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xp.optimize.newton(func, xp.asarray(x0), fprime, args=tuple(xp.asarray(a) for a in args), full_output=True)
        xp.optimize.newton(lambda x: x * x - 2.0, xp.asarray([1.0, 2.0]))


def test_newton_synchronises_once_per_iteration(device_only):
    calls = []

    def func(x, a):
        calls.append(1)
        return x**3 - a

    x0, a = xp.linspace(0.5, 3.0, 9), xp.linspace(1.0, 8.0, 9)
    for fprime in (lambda x, a: 3 * x**2, None):
        calls.clear()
        with xp.profiling.count_transfers() as counter:
            xp.optimize.newton(func, x0, fprime, args=(a,), full_output=True)
        # secant: two starting values, and no evaluation after the last step
        iterations = len(calls) if fprime is not None else len(calls) - 1
        assert counter.syncs == iterations > 3
        # each wait reads one flag to the host, a to_host copy of it (issue 33 item 9)
        assert counter.total == counter.to_host == iterations
        calls.clear()
        with xp.profiling.count_transfers() as counter:
            xp.optimize.newton(func, x0, fprime, args=(a,))
        assert counter.syncs == iterations + 1  # plus the convergence summary


def test_newton_bad_input(on_backend):
    f = lambda x: x * x - 2.0  # noqa: E731
    x0 = xp.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match="'func'"):
        xp.optimize.newton(3, x0)
    with pytest.raises(TypeError, match="'fprime'"):
        xp.optimize.newton(f, x0, fprime="derivative")
    with pytest.raises(ValueError, match="'tol' must be > 0 when 'rtol' is 0"):
        xp.optimize.newton(f, x0, tol=0.0)
    with pytest.raises(ValueError, match="'tol'"):
        xp.optimize.newton(f, x0, tol=-1e-8, rtol=1e-6)
    with pytest.raises(TypeError, match="'tol'"):
        xp.optimize.newton(f, x0, tol="small")
    with pytest.raises(ValueError, match="'rtol'"):
        xp.optimize.newton(f, x0, rtol=-1.0)
    with pytest.raises(ValueError, match="'maxiter'"):
        xp.optimize.newton(f, x0, maxiter=0)
    with pytest.raises(TypeError, match="'maxiter'"):
        xp.optimize.newton(f, x0, maxiter=2.5)
    with pytest.raises(TypeError, match="'x0'"):
        xp.optimize.newton(f, "1.0")
    with pytest.raises(TypeError, match="'x0'"):
        xp.optimize.newton(f, np.array([object(), object()]))
    with pytest.raises(TypeError, match="'x0'"):
        xp.optimize.newton(f, {"x": 1.0})
    with pytest.raises(TypeError, match="'func' must return numbers"):
        xp.optimize.newton(lambda x: None, x0)
    with pytest.raises(TypeError, match="'fprime' must return numbers"):
        xp.optimize.newton(lambda x: x, x0, lambda x: "slope")
    with pytest.raises(ValueError, match=r"'func' returned shape \(3,\)"):
        xp.optimize.newton(lambda x: xp.ones(3), x0)


def test_newton_mixed_backends(device_only):
    f = lambda x, a: x * x - a  # noqa: E731
    with pytest.raises(TypeError, match=r"args\[0\] is a host"):
        xp.optimize.newton(f, xp.asarray([1.0, 2.0]), args=(np.array([2.0, 3.0]),))
    with pytest.raises(TypeError, match=r"args\[1\] is a device"):
        xp.optimize.newton(f, np.array([1.0, 2.0]), args=(2.0, xp.asarray([2.0, 3.0])))
    with pytest.raises(TypeError, match="'func' returned a host"):
        xp.optimize.newton(lambda x: np.ones(2), xp.asarray([1.0, 2.0]))
    with pytest.raises(TypeError, match="'fprime' returned a device"):
        xp.optimize.newton(lambda x: x - 1.0, np.array([1.5, 2.0]), lambda x: xp.ones(2))


class _CallbackError(Exception):
    pass


def test_newton_callback_exception_propagates_unchanged(on_backend):
    error = _CallbackError("from the callback")
    calls = []

    def func(x):
        calls.append(1)
        if len(calls) == 3:
            raise error
        return x * x - 2.0

    with pytest.raises(_CallbackError) as info:
        xp.optimize.newton(func, xp.asarray([1.0, 5.0]))
    assert info.value is error


# --------------------------------------------------------------------------- SciPy on the host


class _Recorder:
    """Records the backend of every array a callback receives."""

    def __init__(self):
        self.backends = set()

    def see(self, *values):
        for v in values:
            if isinstance(v, np.ndarray) or xp.is_gpu(v):
                self.backends.add(xp.get_array_backend(v))


A = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
B = np.array([1.0, 2.0, 3.0])


def _problem(recorder):
    A_, B_ = xp.asarray(A), xp.asarray(B)

    def residual(x):
        recorder.see(x)
        return A_ @ x + 0.1 * x**3 - B_

    def jacobian(x):
        recorder.see(x)
        return A_ + xp.diag(0.3 * x**2)

    return residual, jacobian


def _host_problem():
    return (lambda x: A @ x + 0.1 * x**3 - B), (lambda x: A + np.diag(0.3 * x**2))


def test_fsolve_device_callbacks_and_results(on_backend):
    recorder = _Recorder()
    residual, jacobian = _problem(recorder)
    x0 = xp.zeros(3)
    x = xp.optimize.fsolve(residual, x0, fprime=jacobian)
    assert xp.get_array_backend(x) == on_backend
    assert recorder.backends == {on_backend}
    expected = scipy.optimize.fsolve(*_host_problem()[:1], np.zeros(3), fprime=_host_problem()[1])
    np.testing.assert_array_equal(xp.to_numpy(x), expected)
    x, info, ier, message = xp.optimize.fsolve(residual, x0, fprime=jacobian, full_output=True)
    assert ier == 1 and isinstance(message, str)
    assert xp.get_array_backend(info["fvec"]) == on_backend and xp.get_array_backend(info["fjac"]) == on_backend
    assert isinstance(info["nfev"], int)


def test_fsolve_args_reach_the_callback(on_backend):
    x = xp.optimize.fsolve(lambda x, a: x**2 - a, xp.ones(2), args=(xp.asarray([4.0, 9.0]),))
    np.testing.assert_allclose(xp.to_numpy(x), [2.0, 3.0])


def test_root_device_callbacks_and_result(on_backend):
    recorder = _Recorder()
    residual, jacobian = _problem(recorder)
    result = xp.optimize.root(residual, xp.zeros(3), jac=jacobian, method="hybr")
    assert isinstance(result, scipy.optimize.OptimizeResult)
    assert xp.get_array_backend(result.x) == on_backend and xp.get_array_backend(result.fun) == on_backend
    assert recorder.backends == {on_backend}
    expected = scipy.optimize.root(*_host_problem()[:1], np.zeros(3), jac=_host_problem()[1], method="hybr")
    np.testing.assert_array_equal(xp.to_numpy(result.x), expected.x)
    assert result.success and result.nfev == expected.nfev


def test_root_progress_callback_gets_x_and_f_on_the_device(on_backend):
    recorder = _Recorder()
    residual, _ = _problem(recorder)
    seen = []

    def callback(x, f):
        seen.append((xp.get_array_backend(x), xp.get_array_backend(f)))

    result = xp.optimize.root(residual, xp.zeros(3), method="broyden1", callback=callback, tol=1e-10)
    assert seen and set(seen) == {(on_backend, on_backend)}
    assert xp.get_array_backend(result.x) == on_backend


def test_root_with_jac_true_returns_both_from_fun(on_backend):
    recorder = _Recorder()
    residual, jacobian = _problem(recorder)
    result = xp.optimize.root(lambda x: (residual(x), jacobian(x)), xp.zeros(3), jac=True)
    np.testing.assert_allclose(xp.to_numpy(residual(result.x)), 0.0, atol=1e-10)


def _rosen(x):
    return ((1.0 - x[:-1]) ** 2).sum() + 100.0 * ((x[1:] - x[:-1] ** 2) ** 2).sum()


def _rosen_grad(x):
    namespace = xp.get_array_module(x)
    g = namespace.zeros_like(x)
    g[:-1] = -2.0 * (1.0 - x[:-1]) - 400.0 * x[:-1] * (x[1:] - x[:-1] ** 2)
    g[1:] = g[1:] + 200.0 * (x[1:] - x[:-1] ** 2)
    return g


def _rosen_hessp(x, p):
    namespace = xp.get_array_module(x)
    hp = namespace.zeros_like(x)
    hp[0] = (1200 * x[0] ** 2 - 400 * x[1] + 2) * p[0] - 400 * x[0] * p[1]
    hp[1:-1] = -400 * x[:-2] * p[:-2] + (202 + 1200 * x[1:-1] ** 2 - 400 * x[2:]) * p[1:-1] - 400 * x[1:-1] * p[2:]
    hp[-1] = -400 * x[-2] * p[-2] + 200 * p[-1]
    return hp


def _recorded(recorder, function):
    def recording(*args):
        recorder.see(*args)
        return function(*args)

    return recording


@pytest.mark.parametrize("style", ["intermediate_result", "xk"])
def test_minimize_device_callbacks_and_result(on_backend, style):
    recorder = _Recorder()
    progress = []
    if style == "intermediate_result":

        def callback(intermediate_result):
            progress.append(xp.get_array_backend(intermediate_result.x))
            assert isinstance(intermediate_result, scipy.optimize.OptimizeResult)
    else:

        def callback(xk):
            progress.append(xp.get_array_backend(xk))

    x0 = xp.asarray([-1.2, 1.0, 0.5])
    result = xp.optimize.minimize(
        _recorded(recorder, _rosen), x0, jac=_recorded(recorder, _rosen_grad), method="BFGS", callback=callback
    )
    assert recorder.backends == {on_backend}
    assert progress and set(progress) == {on_backend}
    assert xp.get_array_backend(result.x) == on_backend and xp.get_array_backend(result.jac) == on_backend
    expected = scipy.optimize.minimize(_rosen, np.array([-1.2, 1.0, 0.5]), jac=_rosen_grad, method="BFGS")
    np.testing.assert_array_equal(xp.to_numpy(result.x), expected.x)
    assert result.nit == expected.nit
    np.testing.assert_array_equal(xp.to_numpy(x0), [-1.2, 1.0, 0.5])


def test_minimize_hessp_receives_x_and_p_on_the_device(on_backend):
    recorder = _Recorder()
    result = xp.optimize.minimize(
        _rosen,
        xp.asarray([-1.2, 1.0, 0.5]),
        jac=_rosen_grad,
        hessp=_recorded(recorder, _rosen_hessp),
        method="Newton-CG",
    )
    assert recorder.backends == {on_backend}
    np.testing.assert_allclose(xp.to_numpy(result.x), [1.0, 1.0, 1.0], rtol=1e-4)


def test_minimize_hess_receives_x_on_the_device(on_backend):
    recorder = _Recorder()

    def hess(x):
        recorder.see(x)
        return xp.asarray([[2.0, 0.0], [0.0, 8.0]])

    result = xp.optimize.minimize(
        lambda x: (x[0] - 1) ** 2 + 4 * (x[1] + 2) ** 2,
        xp.zeros(2),
        jac=lambda x: xp.stack([2 * (x[0] - 1), 8 * (x[1] + 2)]),
        hess=hess,
        method="trust-exact",
    )
    assert recorder.backends == {on_backend}
    np.testing.assert_allclose(xp.to_numpy(result.x), [1.0, -2.0], atol=1e-8)


def test_minimize_constraint_dicts_and_bounds(on_backend):
    recorder = _Recorder()
    constraints = [
        {
            "type": "eq",
            "fun": _recorded(recorder, lambda x: x.sum() - 1.0),
            "jac": _recorded(recorder, lambda x: xp.get_array_module(x).ones((1, x.size))),
        },
        {"type": "ineq", "fun": _recorded(recorder, lambda x: x[0] - 0.1)},
    ]
    result = xp.optimize.minimize(
        lambda x: (x**2).sum(),
        xp.asarray([0.5, 0.3, 0.2]),
        method="SLSQP",
        constraints=constraints,
        bounds=[(0.0, 1.0)] * 3,
    )
    assert recorder.backends == {on_backend}
    assert xp.get_array_backend(result.x) == on_backend
    np.testing.assert_allclose(xp.to_numpy(result.x), [1 / 3, 1 / 3, 1 / 3], atol=1e-6)
    assert callable(constraints[0]["fun"]) and "args" not in constraints[0]  # the caller's dicts are untouched


def test_minimize_nonlinear_and_linear_constraints(on_backend):
    recorder = _Recorder()
    nonlinear = scipy.optimize.NonlinearConstraint(
        _recorded(recorder, lambda x: x[0] ** 2 + x[1] ** 2),
        0.0,
        1.0,
        jac=_recorded(recorder, lambda x: 2 * x[None, :]),
        hess=_recorded(recorder, lambda x, v: 2 * v[0] * xp.get_array_module(x).eye(2)),
    )
    linear = scipy.optimize.LinearConstraint(np.array([[1.0, -1.0]]), -np.inf, 0.5)  # host data
    result = xp.optimize.minimize(
        lambda x: -(x[0] + x[1]),
        xp.asarray([0.1, 0.1]),
        method="trust-constr",
        jac=lambda x: -xp.get_array_module(x).ones(2),
        hess=lambda x: xp.get_array_module(x).zeros((2, 2)),
        constraints=[nonlinear, linear],
    )
    assert recorder.backends == {on_backend}
    assert xp.get_array_backend(result.x) == on_backend
    np.testing.assert_allclose(xp.to_numpy(result.x), [2**-0.5, 2**-0.5], atol=1e-4)
    assert nonlinear.fun.__name__ == "recording"  # the caller's constraint is not rewritten


def test_host_x0_is_exactly_scipys_call(device_only):
    seen = []
    result = xp.optimize.minimize(lambda x: (seen.append(type(x)), ((x - 1.0) ** 2).sum())[1], np.zeros(2))
    assert set(seen) == {np.ndarray} and type(result.x) is np.ndarray
    assert type(xp.optimize.fsolve(lambda x: x - 1.0, np.zeros(2))) is np.ndarray
    assert type(xp.optimize.root(lambda x: x - 1.0, np.zeros(2)).x) is np.ndarray


def test_two_transfers_per_evaluation(device_only):
    calls = []

    def fun(x):
        calls.append(1)
        return ((x - 1.0) ** 2).sum()

    with xp.profiling.count_transfers() as counter:
        xp.optimize.minimize(fun, xp.zeros(2), method="Nelder-Mead", options={"maxiter": 20})
    arguments = [e for e in counter.events if e.kind == "to_device" and "callback argument" in e.description]
    results = [e for e in counter.events if e.kind == "to_host" and "callback result" in e.description]
    assert len(arguments) == len(calls) and len(results) == len(calls)


def test_optimize_mixed_backends(device_only):
    with pytest.raises(TypeError, match=r"args\[0\] is a host"):
        xp.optimize.fsolve(lambda x, a: x - a, xp.zeros(2), args=(np.ones(2),))
    with pytest.raises(TypeError, match=r"args\[0\] is a device"):
        xp.optimize.minimize(lambda x, a: ((x - a) ** 2).sum(), np.zeros(2), args=(xp.ones(2),))
    with pytest.raises(TypeError, match=r"args\[0\] is a host"):
        xp.optimize.root(lambda x, a: x - a, xp.zeros(2), args=(np.ones(2),))


@pytest.mark.parametrize("solver", ["fsolve", "root", "minimize"])
def test_callback_exception_propagates_unchanged(on_backend, solver):
    error = _CallbackError(solver)

    def fun(x):
        raise error

    with pytest.raises(_CallbackError) as info:
        getattr(xp.optimize, solver)(fun, xp.zeros(2))
    assert info.value is error


@pytest.mark.parametrize("name", ["newton", "fsolve", "root", "minimize"])
def test_without_scipy_import_error_names_the_function(monkeypatch, name):
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    with pytest.raises(ImportError, match=rf"{name}\(\) needs SciPy"):
        getattr(xp.optimize, name)(lambda x: x, np.ones(2))
