"""Host kernel of push, written for Pyccel: the annotations are Pyccel types."""

from typing import Final


def push(x: "float[:]", v: "Final[float[:]]", dt: "float", length: "float", n: "int"):
    """x[i] += v[i] * dt, wrapped into [0, length) (|v dt| < length)."""
    for i in range(n):
        xi = x[i] + v[i] * dt
        if xi >= length:
            xi = xi - length
        if xi < 0.0:
            xi = xi + length
        x[i] = xi
