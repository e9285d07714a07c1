"""Streams and events (API.md section 4.2).

On the CuPy backend these are CuPy streams and events. On NumPy, :class:`HostStream` and
:class:`HostEvent` stand in for them: work runs in order and every event is complete, so
code written with explicit dependencies runs unchanged on the CPU.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from .. import _backend

__all__ = [
    "HostEvent",
    "HostStream",
    "create_event",
    "create_stream",
    "record_event",
    "stream",
    "wait_event",
]

# HostStreams entered with ``with``, innermost last.
_host_streams: list = []


class HostEvent:
    """A CPU stand-in for a CUDA event: always complete."""

    @property
    def done(self) -> bool:
        """Always True: work on the host is finished when it returns."""
        return True

    def record(self, stream: HostStream | None = None) -> None:
        """Record on a :class:`HostStream` (or None); a CUDA stream is a TypeError."""
        if stream is not None and not isinstance(stream, HostStream):
            raise TypeError(
                f"HostEvent.record(): 'stream' must be a HostStream or None, not {type(stream).__name__}; "
                "record CUDA streams with CUDA events (cunumpy.cuda.create_event on the CuPy backend)"
            )

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def __repr__(self) -> str:
        return "HostEvent(done=True)"


class HostStream:
    """A CPU stand-in for a CUDA stream: work runs in order, so it is always done.

    A reusable, nestable context manager (``with stream(host_stream):`` makes it current).
    """

    @property
    def done(self) -> bool:
        """Always True: work on the host runs in order and is finished."""
        return True

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def record(self, event: HostEvent | None = None) -> HostEvent:
        """Record ``event`` (a new :class:`HostEvent` if None) on this stream and return it."""
        if event is None:
            event = HostEvent()
        elif not isinstance(event, HostEvent):
            raise TypeError(f"HostStream.record(): 'event' must be a HostEvent or None, not {type(event).__name__}")
        return event

    def wait_event(self, event: HostEvent) -> None:
        """Later work waits for ``event``; a HostEvent is complete, so nothing waits."""
        if not isinstance(event, HostEvent):
            raise TypeError(
                f"HostStream.wait_event(): 'event' must be a HostEvent, not {type(event).__name__}; "
                "a host stream cannot wait for CUDA work"
            )

    def __enter__(self) -> HostStream:
        _host_streams.append(self)
        return self

    def __exit__(self, *exc) -> None:
        for i in range(len(_host_streams) - 1, -1, -1):
            if _host_streams[i] is self:
                del _host_streams[i]
                break

    def __repr__(self) -> str:
        return "HostStream()"


def current_host_stream() -> HostStream | None:
    """The innermost HostStream entered with ``with``, or None."""
    return _host_streams[-1] if _host_streams else None


def is_cuda_stream(obj) -> bool:
    """True for a CuPy stream (``cupy.cuda.Stream`` or ``ExternalStream``); never imports CuPy."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return False
    cuda = getattr(cupy, "cuda", None)
    types = tuple(
        t
        for t in (
            getattr(cuda, "Stream", None),
            getattr(cuda, "ExternalStream", None),
        )
        if isinstance(t, type)
    )
    return bool(types) and isinstance(obj, types)


def is_cuda_event(obj) -> bool:
    """True for a CuPy event; never imports CuPy."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return False
    event_type = getattr(getattr(cupy, "cuda", None), "Event", None)
    return isinstance(event_type, type) and isinstance(obj, event_type)


def _on_cupy():
    """CuPy when the CuPy backend is active, else None."""
    if _backend.get_backend() != "cupy":
        return None
    return sys.modules.get("cupy")


@contextlib.contextmanager
def stream(existing: Any = None) -> Iterator[Any]:
    """Make a stream current for a ``with`` block and yield it.

    Parameters
    ----------
    existing : cupy.cuda.Stream or HostStream, optional
        The stream to use; without it a new non-blocking CuPy stream on the CuPy backend,
        and None on NumPy.

    Yields
    ------
    cupy.cuda.Stream, HostStream or None
        The current stream of the block.

    Raises
    ------
    TypeError
        ``existing`` is neither a CuPy stream nor a HostStream.
    """
    if existing is None:
        cupy = _on_cupy()
        if cupy is None:
            yield None
            return
        existing = cupy.cuda.Stream(non_blocking=True)
    elif not isinstance(existing, HostStream) and not is_cuda_stream(existing):
        raise TypeError(
            f"stream(): 'existing' must be a CuPy stream, a HostStream or None, not {type(existing).__name__}"
        )
    with existing:
        yield existing


def create_stream(*, non_blocking: bool = True) -> Any:
    """Create a stream on the current device, or a :class:`HostStream` on NumPy.

    A CUDA stream belongs to the device current at creation; make that device current
    whenever the stream is used.

    Parameters
    ----------
    non_blocking : bool, optional
        A CUDA stream that does not synchronise with the null stream (default True).

    Returns
    -------
    cupy.cuda.Stream or HostStream
        A new CuPy stream on the CuPy backend, else a HostStream.

    Raises
    ------
    TypeError
        ``non_blocking`` is not a bool.
    """
    if not isinstance(non_blocking, bool):
        raise TypeError(f"create_stream(): 'non_blocking' must be a bool, not {type(non_blocking).__name__}")
    cupy = _on_cupy()
    if cupy is None:
        return HostStream()
    return cupy.cuda.Stream(non_blocking=non_blocking)


def create_event(*, timing: bool = False) -> Any:
    """Create an event: a CuPy event on the CuPy backend, else an always-complete :class:`HostEvent`.

    Parameters
    ----------
    timing : bool, optional
        Enable timing on the CuPy event (default False).

    Returns
    -------
    cupy.cuda.Event or HostEvent
        The new event.

    Raises
    ------
    TypeError
        ``timing`` is not a bool.
    """
    if not isinstance(timing, bool):
        raise TypeError(f"create_event(): 'timing' must be a bool, not {type(timing).__name__}")
    cupy = _on_cupy()
    if cupy is None:
        return HostEvent()
    return cupy.cuda.Event(disable_timing=not timing)


def _check_event(function: str, event, allow_none: bool) -> None:
    if event is None and allow_none:
        return
    if not isinstance(event, HostEvent) and not is_cuda_event(event):
        raise TypeError(
            f"{function}: 'event' must be a CuPy event or a HostEvent"
            + (" or None" if allow_none else "")
            + f", not {type(event).__name__}"
        )


def _check_stream(function: str, stream_) -> None:
    if stream_ is not None and not isinstance(stream_, HostStream) and not is_cuda_stream(stream_):
        raise TypeError(
            f"{function}: 'stream' must be a CuPy stream, a HostStream or None, not {type(stream_).__name__}"
        )


def record_event(event: Any = None, *, stream: Any = None) -> Any:
    """Record an event on a stream and return it.

    Re-recording moves the completion point, so every consumer must have enqueued its wait
    first.

    Parameters
    ----------
    event : cupy.cuda.Event or HostEvent, optional
        The event; a new one when None (a HostEvent for a HostStream or on NumPy, else a CuPy
        event).
    stream : cupy.cuda.Stream or HostStream, optional
        The stream (default: the current one).

    Returns
    -------
    cupy.cuda.Event or HostEvent
        The recorded event.

    Raises
    ------
    TypeError
        A CUDA event on a HostStream, or a HostEvent on a CUDA stream.
    """
    _check_event("record_event()", event, allow_none=True)
    _check_stream("record_event()", stream)
    if isinstance(stream, HostStream) or (stream is None and isinstance(event, HostEvent)):
        if event is not None and not isinstance(event, HostEvent):
            raise TypeError("record_event(): a HostStream records HostEvents only, not a CUDA event")
        return (stream or HostStream()).record(event)
    if stream is None:
        cupy = _on_cupy() if event is None else sys.modules["cupy"]
        if cupy is None:
            return HostEvent()
        stream = cupy.cuda.get_current_stream()
    if isinstance(event, HostEvent):
        raise TypeError("record_event(): a CUDA stream records CUDA events only, not a HostEvent")
    if event is None:
        event = sys.modules["cupy"].cuda.Event(disable_timing=True)
    event.record(stream)
    return event


def wait_event(event: Any, *, stream: Any = None) -> None:
    """Make future work on a stream wait for an event; the CPU does not block.

    A HostEvent is always complete: waiting for it without a stream or on a HostStream does
    nothing.

    Parameters
    ----------
    event : cupy.cuda.Event or HostEvent
        The event to wait for.
    stream : cupy.cuda.Stream or HostStream, optional
        The waiting stream (default: the current one).

    Raises
    ------
    TypeError
        A CUDA stream given a HostEvent, or a HostStream given a CUDA event.
    """
    _check_event("wait_event()", event, allow_none=False)
    _check_stream("wait_event()", stream)
    if isinstance(event, HostEvent):
        if stream is not None and not isinstance(stream, HostStream):
            raise TypeError("wait_event(): a CUDA stream cannot wait for a HostEvent (a CUDA event is needed)")
        return
    if isinstance(stream, HostStream):
        raise TypeError("wait_event(): a HostStream cannot wait for a CUDA event")
    if stream is None:
        stream = sys.modules["cupy"].cuda.get_current_stream()
    stream.wait_event(event)
