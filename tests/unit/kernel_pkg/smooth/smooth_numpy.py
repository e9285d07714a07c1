"""NumPy implementation of smooth."""


def smooth(field, out):
    out[1:-1] = 0.25 * field[:-2] + 0.5 * field[1:-1] + 0.25 * field[2:]
    out[0] = field[0]
    out[-1] = field[-1]
