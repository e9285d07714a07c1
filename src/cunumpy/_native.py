"""The C core, or its pure-Python twins where the extension is not available (Pyodide)."""

try:
    from . import _core as core

    HAVE_C_CORE = True
except ImportError:  # pragma: no cover - exercised by the twin tests, not by imports
    from . import _reference as core  # type: ignore[no-redef]  # the pure-Python twins stand in

    HAVE_C_CORE = False

__all__ = ["HAVE_C_CORE", "core"]


def _register_ndarray_type():
    """Let the C packer read NumPy arrays from their C struct, after checking on probe arrays
    (strided, empty, read-only) that it reads what NumPy reports."""
    import numpy as np

    read_only = np.arange(3.0)
    read_only.flags.writeable = False
    probes = (np.zeros((3, 4))[:, ::2], np.zeros((2, 0, 3), np.float32), read_only, np.ones((2, 3), order="F"))
    return core.register_ndarray_type(
        np.ndarray,
        tuple((a, (a.__array_interface__["data"][0], a.shape, a.strides, a.flags.num)) for a in probes),
    )


_register_ndarray_type()
