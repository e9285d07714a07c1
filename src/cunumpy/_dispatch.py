"""Compatibility path of earlier releases: ``from cunumpy._dispatch import Kernel``.

Deprecated: import ``Kernel`` from ``cunumpy.kernels``. Importing this module warns once
(a ``DeprecationWarning``); it re-exports that one class and nothing else.
"""

import warnings

from .kernels import Kernel

__all__ = ["Kernel"]

warnings.warn(
    "cunumpy._dispatch is a private path kept for code written for earlier releases; "
    "import Kernel from cunumpy.kernels (xp.kernels.Kernel) instead",
    DeprecationWarning,
    stacklevel=2,
)
