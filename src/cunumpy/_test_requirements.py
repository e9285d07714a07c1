"""What the test helpers need of the machine, shared by ``cunumpy.kernel_testing`` and
``cunumpy._parity``: pytest, the ``CUNUMPY_REQUIRE_CUDA`` switch, and why CUDA kernels or the
device code paths cannot run here (None when they can). ``kernel_testing`` re-exports the
public ones."""

from __future__ import annotations

import os

from ._emulation import emulation_compiler
from ._fake_cupy import fake_cupy_active

_REQUIRE_VARIABLE = "CUNUMPY_REQUIRE_CUDA"


def _pytest():
    try:
        import pytest
    except ImportError as exc:  # pragma: no cover - pytest is a test dependency
        raise ImportError("this cunumpy.kernel_testing helper needs pytest (pip install pytest)") from exc
    return pytest


def cuda_required() -> bool:
    """Tell whether ``CUNUMPY_REQUIRE_CUDA`` is set (1, true or yes, any case).

    Then the GPU markers and the ``cupy`` case of ``backend`` error instead of skipping, and
    :func:`assert_kernels_agree` fails instead of skipping.

    Returns
    -------
    bool
        The setting.
    """
    return os.environ.get(_REQUIRE_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def device_backend_available() -> bool:
    """Tell whether the device code paths can run: a GPU or the fake CuPy.

    Returns
    -------
    bool
        ``fake_cupy_active() or cupy_available()``.
    """
    from . import _backend

    return fake_cupy_active() or _backend.cupy_available()


_NO_DEVICE = "needs a GPU or the fake CuPy (set CUNUMPY_FAKE_CUPY=1)"


def _real_cupy_missing_reason() -> str | None:
    """None when CUDA kernels can launch on a real GPU, else why not."""
    from . import _backend

    if fake_cupy_active():
        return "needs CuPy on a real GPU; the fake CuPy is active (CUNUMPY_FAKE_CUPY=1)"
    if not _backend.cupy_available():
        return f"needs CuPy with a GPU ({_backend.cupy_unavailable_reason()})"
    return None


def _device_backend_missing_reason() -> str | None:
    """None when a GPU or the fake CuPy is there, else why not."""
    if device_backend_available():
        return None
    from . import _backend

    return f"{_NO_DEVICE}; CuPy: {_backend.cupy_unavailable_reason()}"


def _kernel_launch_missing_reason() -> str | None:
    """None when CUDA kernels can launch: on a GPU, or on the fake CuPy with the CPU
    emulation (a C++ compiler); else why not."""
    from . import _backend

    if fake_cupy_active():
        if emulation_compiler() is None:
            from ._emulation._launch import compiler_looked_for

            return (
                "the fake CuPy is active but the CPU emulation of CUDA kernels needs a C++ compiler: "
                f"{compiler_looked_for()}"
            )
        return None
    if _backend.cupy_available():
        return None
    return f"{_NO_DEVICE} to launch CUDA kernels; CuPy: {_backend.cupy_unavailable_reason()}"
