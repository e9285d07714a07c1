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

__all__ = ["KINDS", "TransferEvent", "caller_location", "record", "sinks"]

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
        True for scalar reads the fake CuPy recorded (``float(a)``, ``a.item()``).
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
