"""Transfer events: the one hook every copy made by cunumpy reports to.

`cunumpy.profiling` builds counters, budgets and reports on top of this module. Producers
call :func:`record` (or test :data:`sinks` first when the description is costly to build);
with no active counter that is one truth test.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import FrameType

__all__ = ["KINDS", "TransferEvent", "caller_location", "instrument_cupy_reads", "record", "sinks"]

#: Event kinds in report order; ``sync`` is reported in its own section.
KINDS = ("to_host", "to_device", "kernel_conversion", "fallback", "device_copy", "sync")

#: Objects with a ``_receive(event)`` method, innermost last. Empty: nothing is recorded.
sinks: list = []

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(frozen=True)
class TransferEvent:
    """One host/device copy, conversion marker or synchronisation seen by a counter.

    Parameters
    ----------
    kind : str
        ``"to_host"``, ``"to_device"``, ``"device_copy"``, ``"kernel_conversion"``,
        ``"fallback"`` or ``"sync"``.
    description : str
        What was copied (function, shape, dtype).
    where : str
        ``"file:line"`` of the user's code that caused it (the innermost frame outside
        cunumpy).
    nbytes : int, optional
        Bytes moved; None for markers and waits.
    blocking : bool
        Whether the host waited for it (False for background copies).
    implicit : bool
        True for host reads of device arrays (``float(a)``, ``a.item()``, ``print(a)``),
        recorded on the fake CuPy and, through ``cupy.ndarray``'s methods, on a GPU.
    """

    kind: str
    description: str
    where: str
    nbytes: int | None = None
    blocking: bool = True
    implicit: bool = False

    def __str__(self) -> str:
        return f"{self.where}: {self.kind}: {self.description}"


def caller_location() -> str:
    """``"file:line"`` of the innermost frame outside the cunumpy package."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>:0"


def record(
    kind: str,
    description: str,
    nbytes: int | None = None,
    *,
    blocking: bool = True,
    implicit: bool = False,
) -> None:
    """Report one event to every active sink (no-op when none is active)."""
    if not sinks:
        return
    event = TransferEvent(kind, description, caller_location(), nbytes, blocking, implicit)
    seen: set[int] = set()
    for sink in tuple(sinks):
        if id(sink) not in seen:
            seen.add(id(sink))
            sink._receive(event)


def describe(array) -> str:
    """Shape and dtype of an array for event descriptions, e.g. ``(3, 4) float64``."""
    return f"{tuple(array.shape)} {array.dtype}"


#: ``cupy.ndarray`` methods that copy the array (or its one element) to the host and wait:
#: CuPy implements each as a ``get()`` followed by the host operation. The fake CuPy records
#: the same reads itself (``_fake_cupy._ndarray``).
_CUPY_READS = (
    "__float__",
    "__int__",
    "__bool__",
    "__complex__",
    "item",
    "tolist",
    "tobytes",
    "__repr__",
    "__str__",
    "__format__",
)
_READ_NAMES = {"__float__": "float()", "__int__": "int()", "__bool__": "bool()", "__complex__": "complex()"}


def _recording_read(name: str, original):
    what = _READ_NAMES.get(name, f"{name.strip('_')}()")

    def read(self, *args, **kwargs):
        if sinks:
            try:
                description, nbytes = f"{what} of {describe(self)}", int(self.nbytes)
            except Exception:  # noqa: BLE001 - an array-like without shape/dtype/nbytes: described by name
                description, nbytes = f"{what} of a {type(self).__name__}", None
            record("to_host", description, nbytes, implicit=True)
            record("sync", description, implicit=True)
        return original(self, *args, **kwargs)

    read.__name__ = name
    read.__qualname__ = f"ndarray.{name}"
    read.__doc__ = getattr(original, "__doc__", None)
    read.__wrapped__ = original  # type: ignore[attr-defined]  # functools' convention
    return read


def instrument_cupy_reads() -> bool:
    """Make the real CuPy's host reads of device arrays report to the sinks (idempotent).

    ``float(a)``, ``int(a)``, ``bool(a)``, ``complex(a)``, ``a.item()``, ``a.tolist()``,
    ``a.tobytes()``, ``repr``/``str``/``format`` (so ``print``) each copy to the host with
    ``get()`` and wait; once instrumented, each records an implicit ``to_host`` event of the
    array's bytes and an implicit ``sync`` while a counter is active (one truth test
    otherwise). Called when a counter starts; does nothing without CuPy, on the fake CuPy
    (which records these itself), or where ``cupy.ndarray`` cannot take attributes.

    Returns
    -------
    bool
        Whether the imported CuPy's reads are recorded.
    """
    cupy = sys.modules.get("cupy")
    if cupy is None or getattr(cupy, "__cunumpy_fake__", False):
        return False
    cls = getattr(cupy, "ndarray", None)
    if not isinstance(cls, type):
        return False
    if cls.__dict__.get("__cunumpy_reads_recorded__", False):
        return True
    try:
        for name in _CUPY_READS:
            original = getattr(cls, name, None)
            if original is not None and original is not getattr(object, name, None):  # CuPy's own methods only
                setattr(cls, name, _recording_read(name, original))
        cls.__cunumpy_reads_recorded__ = True  # type: ignore[attr-defined]  # marks the instrumented class
    except (TypeError, AttributeError):  # a static type (CuPy before 13): nothing to hook
        return False
    return True
