"""Running a SciPy solver on the host for a problem whose data lives on the device.

SciPy calls back with NumPy arrays; with a device ``x0`` the user's callbacks expect device
arrays and may return them. :class:`DeviceCallbacks` wraps each callback so that its array
arguments arrive on the device and its results go back to the host (two counted transfers
per evaluation), and moves SciPy's results to the device. Used by ``cunumpy.optimize`` and
``cunumpy.integrate``.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect

import numpy as np

from . import _backend

__all__ = ["DeviceCallbacks", "check_args", "import_scipy", "is_host_array"]


def import_scipy(module: str, function: str):
    """``module`` (e.g. ``scipy.optimize``); ImportError naming ``function`` and SciPy."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{function}() needs SciPy, which could not be imported ({type(exc).__name__}: {exc}); "
            "install it, e.g. pip install scipy"
        ) from exc


def is_host_array(value) -> bool:
    return isinstance(value, np.ndarray) and value.ndim > 0


def check_args(args, device: bool, function: str, reference: str = "x0"):
    """``args`` as a tuple; TypeError for an array on the other backend than ``reference``."""
    if not isinstance(args, tuple):
        args = (args,)
    for i, value in enumerate(args):
        if device and is_host_array(value):
            raise TypeError(
                f"{function}(): args[{i}] is a host (NumPy) array but {reference!r} is a device "
                "(CuPy) array; pass arrays of one backend"
            )
        if not device and _backend.is_cupy_array(value):
            raise TypeError(
                f"{function}(): args[{i}] is a device (CuPy) array but {reference!r} is on the host; "
                "pass arrays of one backend"
            )
    return args


def _callback_accepts_intermediate_result(callback) -> bool:
    """SciPy passes an ``OptimizeResult`` to callbacks whose one parameter has this name."""
    try:
        return set(inspect.signature(callback).parameters) == {"intermediate_result"}
    except (TypeError, ValueError):
        return False


class DeviceCallbacks:
    """Conversions for one SciPy call whose ``x0`` is a device array."""

    __slots__ = ("function",)

    def __init__(self, function: str):
        self.function = function

    # ------------------------------------------------------------------ values

    def to_device(self, value):
        """Host arrays in ``value`` (also inside tuples, lists, dicts, OptimizeResults) → device."""
        if isinstance(value, np.ndarray):
            if value.dtype.kind in "OSUVMm":
                return value
            return _backend.host_to_device(value, f"{self.function} result")
        if isinstance(value, dict):
            converted = copy.copy(value)  # keeps the OptimizeResult type and attribute access
            for key, item in value.items():
                converted[key] = self.to_device(item)
            return converted
        if isinstance(value, tuple):
            items = [self.to_device(v) for v in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, list):
            return [self.to_device(v) for v in value]
        return value

    def to_host(self, value):
        """Device arrays in a callback's result (also inside tuples and lists) → host."""
        if _backend.is_cupy_array(value):
            return _backend.device_to_host(value, f"{self.function} callback result")
        if isinstance(value, tuple):
            return tuple(self.to_host(v) for v in value)
        if isinstance(value, list):
            return [self.to_host(v) for v in value]
        return value

    def _argument_to_device(self, value):
        if isinstance(value, np.ndarray) and value.dtype.kind not in "OSUVMm":
            return _backend.host_to_device(value, f"{self.function} callback argument")
        return value

    # ------------------------------------------------------------------ callbacks

    def wrap(self, callback, positions=(0,)):
        """``callback`` with the host arrays at ``positions`` moved to the device and its
        result moved to the host. Non-callables (``True``, ``"2-point"``, None, update
        strategies) are returned unchanged."""
        if not callable(callback) or isinstance(callback, type):
            return callback
        to_device, to_host = self._argument_to_device, self.to_host

        @functools.wraps(callback)
        def on_device(*args, **kwargs):
            args = tuple(to_device(a) if i in positions else a for i, a in enumerate(args))
            return to_host(callback(*args, **kwargs))

        del on_device.__wrapped__  # SciPy inspects the wrapper's own signature
        return on_device

    def wrap_progress_callback(self, callback):
        """A ``minimize``/``root`` progress callback: every array argument on the device,
        keeping the ``intermediate_result`` parameter name when the user's has it."""
        if callback is None or not callable(callback):
            return callback
        to_device = self.to_device

        if _callback_accepts_intermediate_result(callback):

            def progress(intermediate_result):
                return callback(intermediate_result=to_device(intermediate_result))
        else:

            def progress(*args):  # type: ignore[misc]  # each variant keeps the user's parameters
                return callback(*(to_device(a) for a in args))

        progress.__name__ = getattr(callback, "__name__", "callback")
        return progress

    def wrap_constraints(self, constraints):
        """Constraint dicts (``fun``/``jac``) and ``NonlinearConstraint`` (``fun``/``jac``/
        ``hess``) with device callbacks; ``LinearConstraint`` and bounds stay host data."""
        if isinstance(constraints, dict):
            wrapped = dict(constraints)
            for key in ("fun", "jac"):
                if key in wrapped:
                    wrapped[key] = self.wrap(wrapped[key])
            return wrapped
        if isinstance(constraints, (list, tuple)):
            return type(constraints)(self.wrap_constraints(c) for c in constraints)
        if type(constraints).__name__ == "NonlinearConstraint":
            nonlinear = copy.copy(constraints)
            nonlinear.fun = self.wrap(constraints.fun)
            nonlinear.jac = self.wrap(constraints.jac)
            nonlinear.hess = self.wrap(constraints.hess, positions=(0, 1))
            return nonlinear
        return constraints
