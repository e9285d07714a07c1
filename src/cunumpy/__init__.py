"""cunumpy: one NumPy-like namespace for the CPU (NumPy) and NVIDIA GPUs (CuPy).

``import cunumpy as xp``; then ``xp.zeros``, ``xp.linalg.norm``, ... resolve on the active
backend. Backend control, inspection and explicit transfers live at the top level; every
other helper lives in its submodule (``xp.kernels``, ``xp.profiling``, ``xp.cuda``, ...).
See ``LLM_GUIDE.md`` beside this file.
"""

import os as _os
from typing import TYPE_CHECKING as _TYPE_CHECKING, Any as _Any

from . import _backend

if _os.environ.get("CUNUMPY_FAKE_CUPY", "").strip().lower() in ("1", "true", "yes"):
    from ._fake_cupy import install_fake_cupy as _install_fake_cupy

    _install_fake_cupy()

from . import (
    algorithms as algorithms,
    arguments as arguments,
    cuda as cuda,
    integrate as integrate,
    kernels as kernels,
    memory as memory,
    mpi as mpi,
    optimize as optimize,
    petsc as petsc,
    profiling as profiling,
    rng as rng,
    scipy as scipy,
    threads as threads,
)
from ._backend import (
    MIN_CUPY_VERSION as MIN_CUPY_VERSION,
    as_device_array as as_device_array,
    assert_same_backend as assert_same_backend,
    backend_info as backend_info,
    cupy_available as cupy_available,
    cupy_version_supported as cupy_version_supported,
    default_float_dtype as default_float_dtype,
    get_array_backend as get_array_backend,
    get_array_module as get_array_module,
    get_backend as get_backend,
    is_cpu as is_cpu,
    is_gpu as is_gpu,
    require_version as require_version,
    same_backend as same_backend,
    set_backend as set_backend,
    synchronize as synchronize,
    to_cunumpy as to_cunumpy,
    to_cupy as to_cupy,
    to_numpy as to_numpy,
    use_backend as use_backend,
)
from ._host_call import evaluate_on_host as evaluate_on_host, host_call as host_call, setup_on_host as setup_on_host


def to_host_async(a: _Any) -> memory.HostCopy:
    """Start a non-blocking copy of a device scalar or small array to the host.

    Parameters
    ----------
    a : array_like
        A device array (a copy on the current stream starts), or host data (ready at once).

    Returns
    -------
    cunumpy.memory.HostCopy
        ``ready()`` never waits; ``result()`` waits and returns the NumPy value.
    """
    return memory.HostCopy.start(a)


__version__ = _backend.installed_version()

# Rebound by every backend switch; read them as xp.numpy_backend / xp.cupy_backend.
numpy_backend = True
cupy_backend = False


if _TYPE_CHECKING:
    # For type checkers only: the backend's names (xp.zeros, xp.linalg, ...) are bound at run
    # time by bind_package() below and typed Any.
    def __getattr__(name: str) -> _Any: ...


# No module __getattr__: CPython only specialises attribute loads on modules without one,
# and every backend name is a real attribute here, so unknown names raise AttributeError
# by themselves (benchmarks/forwarding.py measures the difference).

_backend.bind_package(globals())
_backend.initial_backend()
