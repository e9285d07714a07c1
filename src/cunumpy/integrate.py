"""SciPy integration on either backend (API.md section 11.3).

``quad`` and ``odeint`` run SciPy's QUADPACK and LSODA on the host. Integrands may compute
with device data: ``quad``'s ``func`` may return a 0-d device array, and ``odeint`` with a
device ``y0`` hands ``func``/``Dfun`` the state on the device and returns the solution there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _backend
from ._device_callbacks import DeviceCallbacks, check_args, import_scipy

__all__ = ["odeint", "quad"]


def quad(func: Callable[..., Any], a: float, b: float, args: tuple = (), **kw: Any) -> tuple[Any, ...]:
    """Integrate ``func`` from ``a`` to ``b`` with ``scipy.integrate.quad``.

    ``func(x, *args)`` gets a Python float and may return a 0-d device array: it is copied to
    the host, one synchronisation per evaluation. A set-up tool, not for time loops.

    Parameters
    ----------
    func : callable
        The integrand.
    a, b : float
        The limits.
    args : tuple, optional
        Extra arguments of ``func``.
    **kw
        Further keywords of ``scipy.integrate.quad``.

    Returns
    -------
    tuple
        SciPy's result tuple (value, error estimate, ...), on the host.

    Raises
    ------
    TypeError
        ``func`` is not callable.
    ImportError
        SciPy is not installed.
    """
    integrate = import_scipy("scipy.integrate", "xp.integrate.quad")
    if not callable(func):
        raise TypeError(f"quad(): 'func' must be callable, not {type(func).__name__}")
    if not isinstance(args, tuple):
        args = (args,)
    to_host = DeviceCallbacks("quad").to_host

    def integrand(x, *extra):
        return to_host(func(x, *extra))

    return integrate.quad(integrand, a, b, args=args, **kw)


def odeint(
    func: Callable[..., Any], y0: Any, t: Any, args: tuple = (), Dfun: Callable[..., Any] | None = None, **kw: Any
) -> Any:
    """Integrate an ODE system with ``scipy.integrate.odeint``, the state on ``y0``'s backend.

    With ``y0`` on the device, ``func(y, t, *args)`` and ``Dfun`` (``func(t, y, ...)`` with
    ``tfirst=True``) receive ``y`` on the device and may return device arrays. ``t`` may be on
    either backend. A host ``y0`` is SciPy's call (``t`` is copied to the host if it is a
    device array). Each evaluation costs two transfers.

    Parameters
    ----------
    func : callable
        The right-hand side.
    y0 : array_like
        The initial state.
    t : array_like
        The times of the solution.
    args : tuple, optional
        Extra arguments of ``func`` and ``Dfun``.
    Dfun : callable, optional
        The Jacobian.
    **kw
        Further keywords of ``scipy.integrate.odeint``.

    Returns
    -------
    array or tuple
        The solution, shape ``(len(t), len(y0))``, on ``y0``'s side (with
        ``full_output=True`` also the info dict, its arrays on that side).

    Raises
    ------
    TypeError
        ``func`` or ``Dfun`` is not callable.
    ImportError
        SciPy is not installed.
    """
    integrate = import_scipy("scipy.integrate", "xp.integrate.odeint")
    if not callable(func):
        raise TypeError(f"odeint(): 'func' must be callable, not {type(func).__name__}")
    if Dfun is not None and not callable(Dfun):
        raise TypeError(f"odeint(): 'Dfun' must be callable or None, not {type(Dfun).__name__}")
    if _backend.is_cupy_array(t):
        t = _backend.device_to_host(t, "odeint t")
    device = _backend.is_cupy_array(y0)
    args = check_args(args, device, "odeint", reference="y0")
    if not device:
        return integrate.odeint(func, y0, t, args=args, Dfun=Dfun, **kw)
    bridge = DeviceCallbacks("odeint")
    state = (1,) if kw.get("tfirst", False) else (0,)
    solution = integrate.odeint(
        bridge.wrap(func, positions=state),
        _backend.device_to_host(y0, "odeint y0"),
        t,
        args=args,
        Dfun=bridge.wrap(Dfun, positions=state),
        **kw,
    )
    return bridge.to_device(solution)
