"""Host kernel of norm2."""

import math
from typing import Final


def norm2(a: "Final[float[:,:]]", out: "float[:]", n_rows: int, n_cols: int):
    for i in range(n_rows):
        s = 0.0
        for j in range(n_cols):
            s += a[i, j] * a[i, j]
        out[i] = math.sqrt(s)
