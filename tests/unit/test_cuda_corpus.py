"""The corpus of CUDA kernels in tests/unit/cuda_corpus (the CUDA samples' style, kept as nvcc
compiles them): each case runs in the CPU emulation under memcheck and racecheck against its
NumPy reference, and each file compiles with nvcc for sm_90 where nvcc is installed. The same
cases run on a GPU in tests/gpu/test_cuda_corpus_gpu.py."""

import os
import shutil
import subprocess

import numpy as np
import pytest
from _emulation_support import requires_compiler
from cuda_corpus.cases import CASES, FILES, HERE

from cunumpy import kernel_testing as kt
from cunumpy.kernels import CudaKernel

_KERNELS: dict = {}


class EmulationContext:
    """Runs a case on the CPU emulation: NumPy arrays, every launch under racecheck."""

    def kernel(self, file, expression):
        key = (file, expression)
        if key not in _KERNELS:
            _KERNELS[key] = CudaKernel((HERE / file).read_text(), expression)
        return _KERNELS[key]

    def launch(self, kernel, *args, **kwargs):
        kt.emulate_cuda_kernel(kernel, *args, sanitize="racecheck", **kwargs)

    def array(self, host):
        return np.array(host, copy=True)

    def host(self, a):
        return np.asarray(a)

    def set_global(self, kernel, name, value):
        kernel.set_global(name, value)


def test_corpus_size():
    kernels = {k for _f, ks, _fn in CASES.values() for k in ks}
    assert len(kernels) >= 30 and len(FILES) >= 8


@requires_compiler
@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_case_in_emulation(name):
    _file, _kernels, run = CASES[name]
    run(EmulationContext())


_NVCC = shutil.which("nvcc") or (os.path.exists("/usr/local/cuda/bin/nvcc") and "/usr/local/cuda/bin/nvcc") or None


@pytest.mark.nosan  # nvcc's own tools crash with AddressSanitizer's runtime preloaded (make test-asan)
@pytest.mark.skipif(not _NVCC, reason="needs nvcc")
@pytest.mark.parametrize("file", FILES)
def test_corpus_file_compiles_with_nvcc(file, tmp_path):
    done = subprocess.run(
        [_NVCC, "-arch=sm_90", "-std=c++17", "-c", str(HERE / file), "-o", str(tmp_path / "k.o")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout
