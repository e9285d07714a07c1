"""Numba implementation of scale_rows."""

import numba


@numba.njit(cache=False)
def scale_rows(a, factors):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = a[i, j] * factors[i]
