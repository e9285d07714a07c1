"""Arguments for the host/CUDA parity test of axpy."""

import numpy as np

import cunumpy as xp

N_THREADS = 1000
OUTPUTS = ("y",)
RTOL = 1e-14


def make_args(backend, seed):
    rng = np.random.default_rng(seed)
    x = xp.to_cunumpy(rng.random(1000))
    y = xp.to_cunumpy(rng.random(1000))
    return (2.5, x, y, 1000)
