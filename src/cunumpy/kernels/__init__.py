"""The kernel layer (API.md section 2): host kernels with device data, CUDA kernels, and
the pairing of the two."""

from . import _cuda_kernel, _pyccel_kernel
from ._cuda_kernel import *  # noqa: F401,F403
from ._pyccel_kernel import *  # noqa: F401,F403

__all__ = [*_pyccel_kernel.__all__, *_cuda_kernel.__all__]
