"""NumPy implementation of axpy."""


def axpy(alpha, x, y, n):
    y[:n] += alpha * x[:n]
