"""Twin of _core/scan.c: device-array detection."""

import sys

__all__ = ["device_type"]


def device_type():
    cupy = sys.modules.get("cupy")
    return getattr(cupy, "ndarray", None) if cupy is not None else None
