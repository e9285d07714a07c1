"""Arguments for the host/CUDA parity test of scale_rows."""

import numpy as np

import cunumpy as xp

BLOCK = (16, 8)


def make_args(backend, seed):
    rng = np.random.default_rng(seed)
    a = xp.to_cunumpy(rng.random((37, 21)))
    factors = xp.to_cunumpy(rng.random(37))
    return (a, factors)
