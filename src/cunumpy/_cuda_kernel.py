"""Compatibility path of earlier releases: ``from cunumpy._cuda_kernel import CudaKernel``.

Deprecated: import ``CudaKernel`` and ``CudaKernelVariants`` from ``cunumpy.kernels`` and
``CudaParameter`` from ``cunumpy.cuda``. Importing this module warns once (a
``DeprecationWarning``); it re-exports those three classes and nothing else.
"""

import warnings

from .cuda import CudaParameter
from .kernels import CudaKernel, CudaKernelVariants

__all__ = ["CudaKernel", "CudaKernelVariants", "CudaParameter"]

warnings.warn(
    "cunumpy._cuda_kernel is a private path kept for code written for earlier releases; import "
    "CudaKernel and CudaKernelVariants from cunumpy.kernels and CudaParameter from cunumpy.cuda instead",
    DeprecationWarning,
    stacklevel=2,
)
