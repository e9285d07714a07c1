"""The CUDA corpus of tests/unit/cuda_corpus on a GPU: each case runs its kernels through
CudaKernel with CuPy arrays and compares with the same NumPy references as the emulation
(tests/unit/test_cuda_corpus.py)."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from cuda_corpus.cases import CASES, HERE

from cunumpy.kernels import CudaKernel

_KERNELS: dict = {}


class GpuContext:
    """Runs a case on the current CUDA device."""

    def __init__(self, cp):
        self.cp = cp

    def kernel(self, file, expression):
        key = (file, expression)
        if key not in _KERNELS:
            _KERNELS[key] = CudaKernel((HERE / file).read_text(), expression)
        return _KERNELS[key]

    def launch(self, kernel, *args, **kwargs):
        kernel(*args, **kwargs)

    def array(self, host):
        host = np.array(host, copy=True)
        if host.dtype.names is not None:  # CuPy has no structured dtypes: the bytes
            host = host.view(np.uint8).reshape(*host.shape, host.dtype.itemsize)
        return self.cp.asarray(host)

    def host(self, a):
        return self.cp.asnumpy(a)  # the corpus reads back numbers only, never structs

    def set_global(self, kernel, name, value):
        kernel.set_global(name, value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_case_on_the_gpu(name, cp):
    _file, _kernels, run = CASES[name]
    run(GpuContext(cp))
    cp.cuda.runtime.deviceSynchronize()
