"""Host kernel of deposit (no CUDA port yet: several particles add to one cell, which a
CUDA port does with atomics)."""

from typing import Final


def deposit(x: "Final[float[:]]", rho: "float[:]", dx: "float", n: "int"):
    """rho[cell of x[i]] += 1 for every particle."""
    for i in range(n):
        cell = int(x[i] / dx)
        rho[cell] = rho[cell] + 1.0
