"""Twin of _core/scan.c: device-array detection."""

import sys

__all__ = ["any_device", "device_type"]


def device_type():
    cupy = sys.modules.get("cupy")
    return getattr(cupy, "ndarray", None) if cupy is not None else None


def _contains(obj, depth, t):
    if isinstance(obj, t):
        return True
    if depth > 0 and isinstance(obj, (tuple, list)):
        return any(_contains(item, depth - 1, t) for item in obj)
    return False


def any_device(args, kwargs=None, depth=1):
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"any_device(): 'args' must be a tuple or list, not {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"any_device(): 'kwargs' must be a dict or None, not {type(kwargs).__name__}")
    if not 0 <= depth <= 64:
        raise ValueError(f"any_device(): 'depth' must be in [0, 64], got {depth}")
    t = device_type()
    if t is None:
        return False
    values = list(args) + (list(kwargs.values()) if kwargs else [])
    return any(_contains(v, depth, t) for v in values)
