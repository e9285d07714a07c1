"""Arguments of the host/CUDA parity test of push (read by kernel_testing.check_parity)."""

import numpy as np

import cunumpy as xp

N = 1000
N_THREADS = N  # the launch size of the CUDA side
OUTPUTS = ("x",)  # compare only what the kernel writes
RTOL = 1e-14


def make_args(backend, seed):
    """The arguments, built with `backend` active: seeded host data, converted once."""
    rng = np.random.default_rng(seed)
    x = xp.to_cunumpy(rng.uniform(0.0, 1.0, N))
    v = xp.to_cunumpy(rng.normal(0.0, 1.0, N))
    return (x, v, 0.1, 1.0, N)
