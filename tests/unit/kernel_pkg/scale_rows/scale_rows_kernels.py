"""Host kernel of scale_rows (plain Python loops)."""


def scale_rows(a, factors):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = a[i, j] * factors[i]
