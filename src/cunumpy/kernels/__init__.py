"""The kernel layer (API.md section 2): host kernels with device data, CUDA kernels, the
pairing of the two, kernel folders and catalogs, implementation selection, array helpers
for ``dispatch="arrays"`` kernels, ``fuse`` and Metal kernels."""

from . import _arrays, _catalog, _cuda_kernel, _cuda_variants, _host_impl, _kernel, _metal, _pyccel_kernel, _selection
from ._arrays import *  # noqa: F403
from ._catalog import *  # noqa: F403
from ._cuda_kernel import *  # noqa: F403
from ._cuda_variants import *  # noqa: F403
from ._host_impl import *  # noqa: F403
from ._kernel import *  # noqa: F403
from ._metal import *  # noqa: F403
from ._pyccel_kernel import *  # noqa: F403
from ._selection import *  # noqa: F403

__all__ = [
    *_pyccel_kernel.__all__,
    *_cuda_kernel.__all__,
    *_cuda_variants.__all__,
    *_kernel.__all__,
    *_catalog.__all__,
    *_host_impl.__all__,
    *_selection.__all__,
    *_arrays.__all__,
    *_metal.__all__,
]
