"""Small kernels compiled by Pyccel in the tests (`pyccel --language c`); also plain Python."""

from typing import Final


def axpy(alpha: "float", x: "Final[float[:]]", y: "float[:]"):
    """y += alpha * x"""
    for i in range(x.shape[0]):
        y[i] = y[i] + alpha * x[i]


def column_sums(a: "Final[float[:,:](order=F)]", out: "float[:]"):  # noqa: F821 - a pyccel type annotation, not a Python name
    """out[j] = sum of column j of an F-ordered matrix"""
    for j in range(a.shape[1]):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i, j]
        out[j] = s


def dot(x: "Final[float[:]]", y: "Final[float[:]]") -> "float":
    """The dot product (a scalar result)."""
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y[i]
    return s
