"""Tests of the plasma kernel package, with cunumpy's pytest plugin (installed with cunumpy:
the `backend` fixture and the markers need no conftest).

    pytest examples/kernel_folder                                            # NumPy; cupy cases skip
    CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy pytest examples/kernel_folder   # CUDA ports emulated
"""

import sys
from pathlib import Path

import numpy as np
import pytest

import cunumpy as xp
from cunumpy import kernel_testing

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plasma import catalog


def test_host_and_cuda_kernels_take_the_same_parameters():
    catalog.check_signatures()


@pytest.mark.parametrize("kernel", kernel_testing.parity_cases(catalog))
def test_cuda_port_agrees_with_the_host_kernel(kernel):
    kernel_testing.check_parity(kernel)


def test_push_keeps_particles_in_the_box(backend):
    x = xp.to_cunumpy(np.array([0.05, 0.5, 0.95]))
    v = xp.to_cunumpy(np.array([-1.0, 0.0, 1.0]))
    catalog["push"](x, v, 0.1, 1.0, 3)  # on the fake CuPy the CUDA port runs emulated
    np.testing.assert_allclose(xp.to_numpy(x), [0.95, 0.5, 0.05])
