"""A kernel package: one folder per kernel, ported to CUDA one kernel at a time.

push      host kernel (Pyccel-compilable), NumPy implementation, CUDA port, test arguments
deposit   host kernel and NumPy implementation only: not ported yet, so on the device
          path it falls back to the host (one RuntimeWarning, counted as `fallback`)
"""

import cunumpy as xp


def make_catalog(compile_host=None):
    """The catalog of this package. Building it imports the host modules and parses the
    CUDA sources; it compiles nothing. outputs="annotations": what a host kernel writes is
    read from its Pyccel annotations (every parameter that is not Final and not a scalar),
    so a host fallback copies back only that. compile_host(module), when given, compiles
    the <name>_kernels.py modules on first call (the "pyccel" implementation)."""
    return xp.kernels.KernelCatalog.from_package(
        __name__, missing_cuda="fallback", outputs="annotations", compile_host=compile_host
    )


catalog = make_catalog()
