"""Host kernel of axpy, written for Pyccel (the annotations are Pyccel types)."""

from typing import Final


def axpy(alpha: "float", x: "Final[float[:]]", y: "float[:]", n: "int"):
    """y[i] += alpha * x[i] for i < n"""
    for i in range(n):
        y[i] = y[i] + alpha * x[i]
