"""Host kernel of smooth."""


def smooth(field, out):
    n = field.shape[0]
    for i in range(1, n - 1):
        out[i] = 0.25 * field[i - 1] + 0.5 * field[i] + 0.25 * field[i + 1]
    out[0] = field[0]
    out[n - 1] = field[n - 1]
