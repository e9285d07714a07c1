"""A strict host stand-in for CuPy (API.md section 14).

``install_fake_cupy()`` registers fake ``cupy``, ``cupy.*`` and ``cupyx`` modules in
``sys.modules``; from then on ``import cupy`` gets the fake, whose arrays keep NumPy
buffers but follow CuPy's rules (no implicit host conversion, host arrays refused, scalar
reads reported as implicit syncs). Kernel objects construct but refuse to run.

Only this file is imported by ``import cunumpy``; the rest loads on installation.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["fake_cupy_active", "host_buffer", "install_fake_cupy"]


def fake_cupy_active() -> bool:
    """Tell whether the imported ``cupy`` is cunumpy's fake CuPy.

    Returns
    -------
    bool
        True after ``CUNUMPY_FAKE_CUPY=1`` or :func:`install_fake_cupy`.
    """
    cupy = sys.modules.get("cupy")
    return cupy is not None and getattr(cupy, "__cunumpy_fake__", False) is True


def __getattr__(name: str) -> Any:
    # Earlier releases called fake_cupy_active() is_active(); code written for them imports it.
    if name == "is_active":
        import warnings

        warnings.warn(
            "cunumpy._fake_cupy.is_active is the name of earlier releases; use "
            "cunumpy._fake_cupy.fake_cupy_active instead",
            DeprecationWarning,
            stacklevel=2,
        )
        return fake_cupy_active
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def install_fake_cupy() -> ModuleType:
    """Install the fake ``cupy`` module and return it (idempotent).

    Call it before any backend use; ``CUNUMPY_FAKE_CUPY=1`` does it at import.

    Returns
    -------
    module
        The fake ``cupy``.

    Raises
    ------
    RuntimeError
        The real CuPy is already imported, or cunumpy already cached an answer to "is CuPy
        available?".
    """
    if fake_cupy_active():
        return sys.modules["cupy"]
    for name in ("cupy", "cupyx"):
        if sys.modules.get(name) is not None:
            raise RuntimeError(
                f"cannot install the fake CuPy: the real {name!r} is already imported "
                "(set CUNUMPY_FAKE_CUPY=1 before importing cunumpy, in a fresh process)"
            )
    from .. import _backend

    if _backend._state.cupy_ok is not None:
        raise RuntimeError(
            "cannot install the fake CuPy: cunumpy already checked for CuPy "
            f"(cupy_available() answered {_backend._state.cupy_ok}); install it before any "
            "backend use, or set CUNUMPY_FAKE_CUPY=1 before importing cunumpy"
        )
    from . import _modules

    modules = _modules.build()
    sys.modules.update(modules)
    return modules["cupy"]


def host_buffer(a: Any) -> np.ndarray:
    """Return the NumPy array behind a fake CuPy array (not a copy: writes change the device array).

    Parameters
    ----------
    a : cupy.ndarray
        A fake CuPy array.

    Returns
    -------
    numpy.ndarray
        Its host buffer.

    Raises
    ------
    TypeError
        ``a`` is not a fake CuPy array (also when the fake is not active).
    """
    from ._ndarray import ndarray

    if not fake_cupy_active() or type(a) is not ndarray:
        what = (
            "the fake CuPy is not active" if not fake_cupy_active() else f"got {type(a).__module__}.{type(a).__name__}"
        )
        raise TypeError(f"host_buffer() takes an array of the fake CuPy ({what})")
    return a._a
