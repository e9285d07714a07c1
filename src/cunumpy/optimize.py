"""SciPy root finding and minimisation on either backend (API.md section 11).

``newton`` is a batched Newton/secant iteration over many independent scalar problems that
runs on ``x0``'s backend with SciPy's steps. ``fsolve``, ``root`` and ``minimize`` run SciPy
on the host; with a device ``x0`` every callback receives device arrays and the results come
back on the device. All of them need SciPy (ImportError naming the function otherwise).
"""

from __future__ import annotations

import operator
import sys
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from . import _backend
from ._device_callbacks import DeviceCallbacks, check_args, import_scipy

__all__ = ["NewtonResult", "fsolve", "minimize", "newton", "root"]


class NewtonResult(NamedTuple):
    """``newton(..., full_output=True)``: roots and SciPy's per-point flags."""

    root: Any
    converged: Any
    zero_der: Any


# --------------------------------------------------------------------------- newton


def _newton_start(x0):
    """(array module, float64-or-complex copy of x0, scalar input?)."""
    if _backend.is_cupy_array(x0):
        module = sys.modules["cupy"]
    elif isinstance(x0, np.ndarray) or _backend.get_backend() == "numpy":
        module = np
    else:
        module = sys.modules["cupy"]
    if not _backend.is_cupy_array(x0) and not isinstance(
        x0, (np.ndarray, np.generic, int, float, complex, list, tuple)
    ):
        raise TypeError(f"newton(): 'x0' must be an array, a list or a number, not {type(x0).__name__}")
    try:
        start = module.asarray(x0)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"newton(): 'x0' cannot be made into a numeric array ({exc})") from None
    if start.dtype.kind not in "biufc":
        raise TypeError(f"newton(): 'x0' must be numeric, got dtype {start.dtype}")
    dtype = np.result_type(start.dtype, np.float64)
    return module, module.array(start, dtype=dtype, copy=True), start.ndim == 0


def _evaluate(function, name, module, p, args, device):
    """``function(p, *args)`` as an array of ``p``'s shape on ``p``'s backend."""
    value = function(p, *args)
    if device and not _backend.is_cupy_array(value):
        if isinstance(value, np.ndarray) and value.ndim > 0:
            raise TypeError(f"newton(): {name!r} returned a host (NumPy) array for a device 'x0'")
        try:
            value = module.asarray(value)
        except (TypeError, ValueError):  # CuPy refuses strings and objects with ValueError
            raise TypeError(f"newton(): {name!r} must return numbers, not {type(value).__name__}") from None
    elif not device:
        if _backend.is_cupy_array(value):
            raise TypeError(f"newton(): {name!r} returned a device (CuPy) array for a host 'x0'")
        value = np.asarray(value)
    if value.dtype.kind not in "biufc":
        raise TypeError(f"newton(): {name!r} must return numbers, got dtype {value.dtype}")
    if value.shape != p.shape:
        if value.ndim == 0:
            value = module.broadcast_to(value, p.shape)
        else:
            raise ValueError(
                f"newton(): {name!r} returned shape {tuple(value.shape)}, expected {tuple(p.shape)} (the shape of x0)"
            )
    return value


def _host_flags(*flags) -> list[bool]:
    """Several 0-d booleans read to the host at once: one synchronisation on CuPy."""
    first = flags[0]
    if isinstance(first, (np.ndarray, bool, np.bool_)):
        return [bool(f) for f in flags]
    return sys.modules["cupy"].stack(flags).tolist()


def newton(
    func: Callable[..., Any],
    x0: Any,
    fprime: Callable[..., Any] | None = None,
    args: tuple = (),
    tol: float = 1.48e-8,
    maxiter: int = 50,
    rtol: float = 0.0,
    full_output: bool = False,
) -> Any:
    """Find roots of many independent scalar equations ``func(x) = 0`` at once.

    Newton's method with ``fprime``, the secant method without, taking the same steps as
    ``scipy.optimize.newton`` with an array ``x0``, on ``x0``'s backend (a device ``x0``
    stays on the device; lists and numbers use the active backend; a number gives a 0-d
    result). ``func(x, *args)`` and ``fprime(x, *args)`` get the whole iterate and return
    arrays of its shape. Shapes are fixed and there is no boolean indexing: converged points
    keep taking (tiny) steps until every point converges. ``x0`` is not modified (the
    iteration runs on a float64 copy, complex stays complex).

    Parameters
    ----------
    func : callable
        ``func(x, *args)``, elementwise.
    x0 : array_like
        The starting points.
    fprime : callable, optional
        The derivative ``fprime(x, *args)``; None uses the secant method.
    args : tuple, optional
        Extra arguments of ``func`` and ``fprime``.
    tol : float, optional
        Absolute tolerance on the step.
    maxiter : int, optional
        The most iterations (at least 1).
    rtol : float, optional
        Relative tolerance: a point has converged when ``|step| < tol + rtol * |x|``;
        ``tol=0`` is accepted together with ``rtol > 0`` (a relative test only), where SciPy
        insists on ``tol > 0``.
    full_output : bool, optional
        Return a :class:`NewtonResult` instead of the roots.

    Returns
    -------
    array or NewtonResult
        The roots; with ``full_output``, ``NewtonResult(root, converged, zero_der)``.
        Without it, points that did not converge give one :class:`RuntimeWarning` with
        their count.

    Raises
    ------
    TypeError
        ``func`` or ``fprime`` is not callable, ``x0`` is not numeric, a callback returns an
        array of the other backend or non-numbers, or a tolerance is not a real number.
    ValueError
        ``maxiter`` is below 1, a tolerance is negative, or a callback returns the wrong shape.

    Notes
    -----
    On a GPU every iteration synchronises once (the convergence test).
    """
    import_scipy("scipy.optimize", "xp.optimize.newton")
    if not callable(func):
        raise TypeError(f"newton(): 'func' must be callable, not {type(func).__name__}")
    if fprime is not None and not callable(fprime):
        raise TypeError(f"newton(): 'fprime' must be callable or None, not {type(fprime).__name__}")
    tol, rtol = _positive_float(tol, "tol", strict=False), _positive_float(rtol, "rtol", strict=False)
    if tol == 0 and rtol == 0:
        # |step| < 0 can never hold. SciPy refuses tol=0 even with an rtol; cunumpy's earlier
        # releases accepted it with rtol > 0 (a purely relative test), and so does this one.
        raise ValueError("newton(): 'tol' must be > 0 when 'rtol' is 0 (got tol=0, rtol=0): no point could converge")
    try:
        maxiter = operator.index(maxiter)
    except TypeError:
        raise TypeError(f"newton(): 'maxiter' must be an int, not {type(maxiter).__name__}") from None
    if maxiter < 1:
        raise ValueError(f"newton(): 'maxiter' must be at least 1, got {maxiter}")
    module, p, scalar = _newton_start(x0)
    device = module is not np
    args = check_args(args, device, "newton")
    if fprime is not None:
        p, converged, zero_der = _newton_steps(func, fprime, module, p, args, tol, rtol, maxiter, device)
    else:
        p, converged, zero_der = _secant_steps(func, module, p, args, tol, rtol, maxiter, device)
    if scalar:  # NumPy turns 0-d results of arithmetic into scalars
        p, converged, zero_der = (module.asarray(v) for v in (p, converged, zero_der))
    if full_output:
        return NewtonResult(p, converged, zero_der)
    any_zero_der, n_failed = _host_summary(zero_der, converged)
    if n_failed:
        total = int(p.size)
        reason = " (zero derivatives)" if any_zero_der else ""
        warnings.warn(
            f"newton(): {n_failed} of {total} points did not converge after {maxiter} iteration(s){reason}",
            RuntimeWarning,
            stacklevel=2,
        )
    return p


def _positive_float(value, name, strict):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"newton(): {name!r} must be a real number, not {type(value).__name__}") from None
    if not (number > 0 if strict else number >= 0):
        bound = "> 0" if strict else ">= 0"
        raise ValueError(f"newton(): {name!r} must be {bound}, got {value!r}")
    return number


def _host_summary(zero_der, converged):
    """(any zero derivative, number not converged), read with one synchronisation."""
    if isinstance(converged, np.ndarray):
        return bool(zero_der.any()), int(converged.size - np.count_nonzero(converged))
    cupy = sys.modules["cupy"]
    any_zero, n_converged = cupy.stack([zero_der.any().astype(np.int64), cupy.count_nonzero(converged)]).tolist()
    return bool(any_zero), int(converged.size) - int(n_converged)


def _not_converged(module, step, p, tol, rtol):
    if rtol:
        return module.abs(step) >= tol + rtol * module.abs(p)
    return module.abs(step) >= tol


def _newton_steps(func, fprime, module, p, args, tol, rtol, maxiter, device):
    failures = module.ones(p.shape, dtype=bool)
    nonzero_der = module.ones(p.shape, dtype=bool)
    for _ in range(maxiter):
        fval = _evaluate(func, "func", module, p, args, device)
        fder = _evaluate(fprime, "fprime", module, p, args, device)
        new_nonzero_der = fder != 0
        if module is np and new_nonzero_der.all():
            # Host fast path: with every derivative nonzero the masks below select everything.
            step = fval / fder
            new_p = p - step
            new_failures = _not_converged(module, step, new_p, tol, rtol)
            all_roots, no_derivative, done = not fval.any(), False, not new_failures.any()
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                step = module.where(new_nonzero_der, fval / fder, 0)
            new_p = p - step
            new_failures = module.where(new_nonzero_der, _not_converged(module, step, new_p, tol, rtol), failures)
            # SciPy's three stopping tests, read together: one synchronisation.
            all_roots, no_derivative, done = _host_flags(
                ~fval.any(), ~new_nonzero_der.any(), ~(new_failures & new_nonzero_der).any()
            )
        if all_roots:
            failures = fval.astype(bool)
            break
        nonzero_der = new_nonzero_der
        if no_derivative:
            break
        p, failures = new_p, new_failures
        if done:
            break
    return p, ~failures, ~nonzero_der & failures


def _secant_steps(func, module, p, args, tol, rtol, maxiter, device):
    failures = module.ones(p.shape, dtype=bool)
    nonzero_der = module.ones(p.shape, dtype=bool)
    dx = np.finfo(np.float64).eps ** 0.33
    p1 = p * (1 + dx) + module.where(p >= 0, dx, -dx)
    q0 = _evaluate(func, "func", module, p, args, device)
    q1 = _evaluate(func, "func", module, p1, args, device)
    active = module.ones(p.shape, dtype=bool)
    for _ in range(maxiter):
        nonzero_der = q1 != q0
        if module is np and nonzero_der.all():
            # Host fast path: with all function values distinct the masks select everything.
            step = q1 * (p1 - p) / (q1 - q0)
            new_p = p1 - step
            new_failures = _not_converged(module, step, new_p, tol, rtol)
            no_derivative, done = False, not new_failures.any()
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                step = module.where(nonzero_der, q1 * (p1 - p) / (q1 - q0), 0)
            new_p = module.where(nonzero_der, p1 - step, p)
            # A point whose function values first became equal moves to the midpoint once.
            new_p = module.where(~nonzero_der & active, (p1 + p) / 2.0, new_p)
            new_failures = module.where(nonzero_der, _not_converged(module, step, new_p, tol, rtol), failures)
            # SciPy's two stopping tests, read together: one synchronisation.
            no_derivative, done = _host_flags(~nonzero_der.any(), ~(new_failures & nonzero_der).any())
            active = active & nonzero_der
        if no_derivative:
            p = (p1 + p) / 2.0
            break
        p, failures = new_p, new_failures
        if done:
            break
        p1, p = p, p1
        q0 = q1
        q1 = _evaluate(func, "func", module, p1, args, device)
    return p, ~failures, ~nonzero_der & failures


# --------------------------------------------------------------------------- SciPy on the host


def _device_x0(x0) -> bool:
    return _backend.is_cupy_array(x0)


def fsolve(
    func: Callable[..., Any], x0: Any, args: tuple = (), fprime: Callable[..., Any] | None = None, **kw: Any
) -> Any:
    """Solve ``func(x) = 0`` with ``scipy.optimize.fsolve``, with device callbacks and results.

    SciPy runs on the host; with ``x0`` on the device every callback receives device arrays
    and may return device arrays, and the results come back on the device. Each evaluation
    costs two transfers: a set-up tool, not for time loops. A host ``x0`` is exactly SciPy's
    call. An exception raised by a callback propagates unchanged; arrays in ``args`` on the
    other backend than ``x0`` are a :class:`TypeError` naming ``args[i]``.

    Parameters
    ----------
    func : callable
        ``func(x, *args)``.
    x0 : array_like
        The starting point, on the host or the device.
    args : tuple, optional
        Extra arguments of ``func`` and ``fprime``.
    fprime : callable, optional
        The Jacobian ``fprime(x, *args)``.
    **kw
        Further keywords of ``scipy.optimize.fsolve`` (``full_output=True`` returns the info
        dict's arrays on the device too).

    Returns
    -------
    array or tuple
        The root on ``x0``'s side, or SciPy's tuple with ``full_output=True``.
    """
    optimize = import_scipy("scipy.optimize", "xp.optimize.fsolve")
    if not _device_x0(x0):
        check_args(args, False, "fsolve")
        return optimize.fsolve(func, x0, args=args, fprime=fprime, **kw)
    args = check_args(args, True, "fsolve")
    bridge = DeviceCallbacks("fsolve")
    result = optimize.fsolve(
        bridge.wrap(func), _backend.device_to_host(x0, "fsolve x0"), args=args, fprime=bridge.wrap(fprime), **kw
    )
    return bridge.to_device(result)


def root(
    fun: Callable[..., Any],
    x0: Any,
    args: tuple = (),
    jac: Any = None,
    callback: Callable[..., Any] | None = None,
    **kw: Any,
) -> Any:
    """Solve ``fun(x) = 0`` with ``scipy.optimize.root``, with device callbacks and results.

    SciPy runs on the host; with ``x0`` on the device every callback receives device arrays
    and may return device arrays, and the results come back on the device. Each evaluation
    costs two transfers: a set-up tool, not for time loops. A host ``x0`` is exactly SciPy's
    call. An exception raised by a callback propagates unchanged; arrays in ``args`` on the
    other backend than ``x0`` are a :class:`TypeError` naming ``args[i]``.

    Parameters
    ----------
    fun : callable
        ``fun(x, *args)``.
    x0 : array_like
        The starting point, on the host or the device.
    args : tuple, optional
        Extra arguments of ``fun`` and ``jac``.
    jac : callable or bool, optional
        The Jacobian, as SciPy takes it.
    callback : callable, optional
        ``callback(x, f)``, called with device arrays.
    **kw
        Further keywords of ``scipy.optimize.root``.

    Returns
    -------
    scipy.optimize.OptimizeResult
        SciPy's result, its arrays on ``x0``'s side.
    """
    optimize = import_scipy("scipy.optimize", "xp.optimize.root")
    if not _device_x0(x0):
        check_args(args, False, "root")
        return optimize.root(fun, x0, args=args, jac=jac, callback=callback, **kw)
    args = check_args(args, True, "root")
    bridge = DeviceCallbacks("root")
    result = optimize.root(
        bridge.wrap(fun),
        _backend.device_to_host(x0, "root x0"),
        args=args,
        jac=bridge.wrap(jac),
        callback=bridge.wrap_progress_callback(callback),
        **kw,
    )
    return bridge.to_device(result)


def minimize(
    fun: Callable[..., Any],
    x0: Any,
    args: tuple = (),
    jac: Any = None,
    hess: Any = None,
    hessp: Any = None,
    bounds: Any = None,
    constraints: Any = (),
    callback: Callable[..., Any] | None = None,
    **kw: Any,
) -> Any:
    """Minimise ``fun`` with ``scipy.optimize.minimize``, with device callbacks and results.

    SciPy runs on the host; with ``x0`` on the device every callback receives device arrays
    and may return device arrays, and the results come back on the device. Each evaluation
    costs two transfers: a set-up tool, not for time loops. A host ``x0`` is exactly SciPy's
    call. An exception raised by a callback propagates unchanged; arrays in ``args`` on the
    other backend than ``x0`` are a :class:`TypeError` naming ``args[i]``.

    Parameters
    ----------
    fun : callable
        ``fun(x, *args)``, returning a scalar.
    x0 : array_like
        The starting point, on the host or the device.
    args : tuple, optional
        Extra arguments of the callbacks.
    jac, hess : callable, optional
        Gradient and Hessian, as SciPy takes them.
    hessp : callable, optional
        ``hessp(x, p, *args)``, the Hessian times ``p``.
    bounds : sequence or scipy.optimize.Bounds, optional
        Host data.
    constraints : dict, sequence or constraint objects, optional
        Dict ``fun``/``jac`` and ``NonlinearConstraint`` callbacks receive device arrays;
        ``LinearConstraint`` matrices are host data.
    callback : callable, optional
        ``callback(intermediate_result)`` (when that is its one parameter's name) or
        ``callback(xk)``, on the device.
    **kw
        Further keywords of ``scipy.optimize.minimize`` (``method=``, ``tol=``, ...).

    Returns
    -------
    scipy.optimize.OptimizeResult
        SciPy's result, its arrays on ``x0``'s side.
    """
    optimize = import_scipy("scipy.optimize", "xp.optimize.minimize")
    if not _device_x0(x0):
        check_args(args, False, "minimize")
        return optimize.minimize(
            fun,
            x0,
            args=args,
            jac=jac,
            hess=hess,
            hessp=hessp,
            bounds=bounds,
            constraints=constraints,
            callback=callback,
            **kw,
        )
    args = check_args(args, True, "minimize")
    bridge = DeviceCallbacks("minimize")
    result = optimize.minimize(
        bridge.wrap(fun),
        _backend.device_to_host(x0, "minimize x0"),
        args=args,
        jac=bridge.wrap(jac),
        hess=bridge.wrap(hess),
        hessp=bridge.wrap(hessp, positions=(0, 1)),
        bounds=bounds,
        constraints=bridge.wrap_constraints(constraints),
        callback=bridge.wrap_progress_callback(callback),
        **kw,
    )
    return bridge.to_device(result)
