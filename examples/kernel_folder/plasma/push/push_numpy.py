"""NumPy implementation of push: the same arguments, vectorised."""


def push(x, v, dt, length, n):
    moved = x[:n] + v[:n] * dt
    moved[moved >= length] -= length
    moved[moved < 0.0] += length
    x[:n] = moved
