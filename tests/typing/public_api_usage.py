"""Public API used as a user's code uses it; `make lint` type-checks this file with mypy.

It is never run: it must type-check, through the package's ``py.typed``, the way a user's
type checker sees cunumpy. The lines marked ``type: ignore[...]`` must be errors (mypy's
warn_unused_ignores reports one that no longer is), so the annotations also reject misuse.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from typing_extensions import assert_type

import cunumpy as xp
from cunumpy import kernel_testing, memory


# The backend-agnostic pattern of the guide (rule 7): a function asks its arguments for
# their namespace and checks that they agree, instead of reading the global setting.
def axpy(alpha: float, x: Any, y: Any) -> Any:
    xp.assert_same_backend(x, y)
    m = xp.get_array_module(x)
    assert_type(m, ModuleType)
    return alpha * x + m.asarray(y)


def main() -> None:
    xp.set_backend("numpy")
    backend: str = xp.get_backend()
    with xp.use_backend(backend):
        x = xp.ones(4)  # a backend name: typed Any, bound at run time
        y = xp.to_cunumpy(np.arange(4.0))
        z = axpy(2.0, x, y)
        assert_type(xp.to_numpy(z), np.ndarray)
        assert_type(xp.is_gpu(z), bool)
        assert_type(xp.get_array_backend(z), str)
        handle = xp.to_host_async(z.sum())
        assert_type(handle, memory.HostCopy)
        assert_type(handle.ready(), bool)
        device = xp.as_device_array([1.0, 2.0], np.float64, 1, name="values")
        xp.assert_same_backend(device, z)

    @xp.evaluate_on_host
    def host_only(self: object, a: np.ndarray) -> float:
        return float(a.sum())

    kept: Callable[[object, np.ndarray], float] = host_only  # the decorator keeps the signature
    assert_type(kept(object(), np.zeros(2)), float)
    assert_type(kernel_testing.fake_cupy_active(), bool)

    xp.set_backend(7)  # type: ignore[arg-type]
    xp.as_device_array([1.0], ndim="one")  # type: ignore[arg-type]
    xp.get_array_backend()  # type: ignore[call-arg]
