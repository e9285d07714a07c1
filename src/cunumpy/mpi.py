"""MPI with one rank per GPU (API.md section 6).

Launcher detection and the serial stand-in come from the ``maybempi`` dependency; this
module adds what makes one MPI call site work on every MPI build and on both backends:

* :func:`mpi_is_cuda_aware` (a collective probe) and the recorded answer
  (:func:`set_mpi_cuda_aware`, :func:`get_mpi_cuda_aware`), :func:`require_cuda_aware_mpi`;
* :func:`synchronize_for_mpi`, the wait before MPI reads or writes device memory;
* :func:`mpi_buffer` and :class:`MPIStaging`: the buffer to hand to MPI, staged through host
  memory when the MPI cannot take device pointers;
* :func:`exchange`: many point-to-point messages posted and completed together;
* ending the job when a rank dies of an uncaught exception (:func:`set_abort_on_exception`).

Nothing here imports mpi4py at import time, and nothing imports it on the NumPy backend
unless a communicator has to be looked up (``comm=None``).
"""

from __future__ import annotations

import operator
import os
import stat
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any, SupportsIndex

try:  # the pipe check before an abort; absent on Windows, where nothing is waited for
    import fcntl
    import termios
except ImportError:  # pragma: no cover - Windows
    fcntl = termios = None  # type: ignore[assignment]  # absent on Windows

import atexit
import contextlib

import numpy as np
import numpy.typing as npt
from maybempi import (
    OVERRIDE_VARIABLE,
    SerialComm,
    SerialMPI,
    SerialRequest,
    SerialStatus,
    get_mpi,
    is_serial,
    launched_under_mpi,
    local_rank,
    set_copy_hook,
)

from . import _backend, _transfers
from ._native import core as _native_core
from ._staging import _check_host_dependency, _OnDevice, _producer_dependency, _shape_tuple, _staging_device
from ._transfers import describe, record
from .cuda import _devices

__all__ = [
    "ABORT_VARIABLE",
    "OVERRIDE_VARIABLE",
    "MPIStaging",
    "SerialComm",
    "SerialMPI",
    "SerialRequest",
    "SerialStatus",
    "exchange",
    "get_abort_on_exception",
    "get_mpi",
    "get_mpi_cuda_aware",
    "is_serial",
    "launched_under_mpi",
    "local_rank",
    "mpi_buffer",
    "mpi_is_cuda_aware",
    "require_cuda_aware_mpi",
    "set_abort_on_exception",
    "set_mpi_cuda_aware",
    "synchronize_for_mpi",
]


def _cupy():
    return sys.modules["cupy"]


def _is_device(array) -> bool:
    return _backend.is_cupy_array(array)


# --------------------------------------------------------------------------- serial stand-in


def _count_serial_copy(kind: str, host) -> None:
    """maybempi reports the host/device copies its buffer collectives make; count them."""
    if _transfers.sinks:
        record(kind, f"serial MPI stand-in copy {describe(host)}", int(host.nbytes))


# The stand-in offers this hook for exactly this purpose; installing it once at import
# makes its copies visible to count_transfers() like every other cunumpy copy.
set_copy_hook(_count_serial_copy)


def _is_host_array(value) -> bool:
    return isinstance(value, np.ndarray) and value.ndim > 0


def _explicit_upload(host):
    """One counted host-to-device copy (``to_device``), as cunumpy.to_cupy makes."""
    return _backend.host_to_device(host, "serial MPI stand-in copy")


def _copy_with_explicit_upload(copy):
    """Wrap maybempi's ``_copy(source, target, offset)``: a host source for a device target
    is uploaded first, because CuPy (and the fake) refuse ``device[a:b] = host_array``."""

    def copy_to_target(source, target, offset=0):
        if _is_host_array(source) and _is_device(target):
            source = _explicit_upload(source)
        return copy(source, target, offset)

    copy_to_target.__wrapped__ = copy  # type: ignore[attr-defined]  # as functools.wraps sets it
    return copy_to_target


def _copy_pieces_with_explicit_upload(copy_pieces):
    """Wrap maybempi's ``_copy_pieces(sources, targets)`` (receives): same rule per piece."""

    def copy_pieces_to_targets(sources, targets):
        if targets and _is_device(targets[0]):
            sources = [_explicit_upload(p) if _is_host_array(p) else p for p in sources]
        return copy_pieces(sources, targets)

    copy_pieces_to_targets.__wrapped__ = copy_pieces  # type: ignore[attr-defined]  # as functools.wraps sets it
    return copy_pieces_to_targets


def _install_explicit_uploads() -> None:
    """maybempi's stand-in copies host data into device buffers by slice assignment, which
    CuPy refuses (ValueError); its copy hook only reports a copy after it happened, so the
    copy functions themselves are wrapped (once; absent ones are left alone)."""
    import maybempi.serial as serial

    for name, wrap in (("_copy", _copy_with_explicit_upload), ("_copy_pieces", _copy_pieces_with_explicit_upload)):
        original = getattr(serial, name, None)
        if callable(original) and not hasattr(original, "__wrapped__"):
            setattr(serial, name, wrap(original))


_install_explicit_uploads()


# --------------------------------------------------------------------------- uncaught exceptions

#: Environment variable: ``0``, ``false``, ``no`` or ``off`` keeps a rank's uncaught exception
#: from aborting the job (read when the exception happens).
ABORT_VARIABLE = "CUNUMPY_MPI_ABORT_ON_EXCEPTION"

_abort_choice: bool | None = None  # set_abort_on_exception(); None: the environment decides
_hooks_installed = False
#: The status the main thread last gave sys.exit() (read by the exit hook); None: none given.
_exit_status: Any = None
_hooks_lock = threading.Lock()


def set_abort_on_exception(enabled: bool | None) -> None:
    """Choose whether a rank that dies of an uncaught exception aborts the whole MPI job.

    When a rank raises and its peers are waiting for its messages, the job would otherwise
    never end. cunumpy.mpi installs a ``sys.excepthook`` and a ``threading.excepthook`` (each
    calls the hook it replaces first, so the traceback is printed as usual) the first time it
    is given an mpi4py communicator; on an uncaught exception in a job of more than one rank
    they print a line saying so, wait (up to 2 s) for the launcher to read stdout and stderr
    when they are pipes, and call ``MPI.COMM_WORLD.Abort``. A main thread that ends with
    ``sys.exit(status)`` and a non-zero status (which never reaches ``sys.excepthook``) aborts
    the job the same way at exit, with that status (1 for a message), as ``python -m mpi4py``
    does; ``sys.exit(0)`` is a normal end. ``raise SystemExit(status)`` is not seen. Interactive
    sessions never abort.

    Parameters
    ----------
    enabled : bool or None
        True installs the hooks now; False keeps them from aborting; None leaves it to
        ``CUNUMPY_MPI_ABORT_ON_EXCEPTION`` (on unless ``0``, ``false``, ``no`` or ``off``).

    Raises
    ------
    TypeError
        ``enabled`` is neither a bool nor None.
    """
    global _abort_choice
    if enabled is not None and not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"set_abort_on_exception(): 'enabled' must be a bool or None, not {type(enabled).__name__}")
    _abort_choice = None if enabled is None else bool(enabled)
    if _abort_choice:
        _install_abort_hooks()


def get_abort_on_exception() -> bool:
    """Tell whether an uncaught exception aborts the job (once the hooks are installed).

    Returns
    -------
    bool
        The choice of :func:`set_abort_on_exception`, else what
        ``CUNUMPY_MPI_ABORT_ON_EXCEPTION`` says.
    """
    if _abort_choice is not None:
        return _abort_choice
    return os.environ.get(ABORT_VARIABLE, "").strip().lower() not in ("0", "false", "no", "off")


def _watch(comm) -> None:
    """Install the abort hooks the first time a function of this module is given an mpi4py
    communicator. Nothing is asked of ``comm`` (a malformed exchange must not touch it): the
    hooks check the size of the job when an exception arrives."""
    if _hooks_installed:
        return
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and isinstance(comm, mpi.Comm):
        _install_abort_hooks()


def _install_abort_hooks() -> None:
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        previous = sys.excepthook
        previous_thread = threading.excepthook

        def excepthook(exc_type, exc, traceback):
            try:
                previous(exc_type, exc, traceback)
            finally:
                _abort_job(exc_type)

        def thread_excepthook(args):
            try:
                previous_thread(args)
            finally:
                if args.exc_type is not SystemExit:  # a thread's sys.exit() ends the thread only
                    _abort_job(args.exc_type, getattr(args.thread, "name", None))

        previous_exit = sys.exit

        def exit_hook(status=None, /):
            # A SystemExit never reaches sys.excepthook: remember the status the main thread
            # ends with, for the exit hook below (a thread's sys.exit() ends the thread only).
            global _exit_status
            if threading.current_thread() is threading.main_thread():
                _exit_status = status
            previous_exit(status)

        excepthook.__wrapped__ = previous  # type: ignore[attr-defined]  # as functools.wraps sets it
        thread_excepthook.__wrapped__ = previous_thread  # type: ignore[attr-defined]  # as functools.wraps sets it
        exit_hook.__wrapped__ = previous_exit  # type: ignore[attr-defined]  # as functools.wraps sets it
        sys.excepthook = excepthook
        threading.excepthook = thread_excepthook
        sys.exit = exit_hook
        atexit.register(_abort_after_exit)
        _hooks_installed = True


def _abort_after_exit() -> None:
    """At interpreter exit: a main thread that ended with ``sys.exit(status)`` and a non-zero
    status aborts the job as an uncaught exception does (its peers may wait for its messages
    forever), with that status (1 for a message), as ``python -m mpi4py`` does; ``sys.exit(0)``
    and ``sys.exit()`` are a normal end."""
    global _exit_status
    status, _exit_status = _exit_status, None
    if status is None or status == 0 or (isinstance(status, bool) and not status):
        return
    code = int(status) if isinstance(status, int) and 0 < status < 256 else 1
    _abort_job(SystemExit, code=code, what=f"sys.exit({status!r})")


def _abort_job(exc_type, thread_name: str | None = None, *, code: int | None = None, what: str | None = None) -> None:
    """``MPI.COMM_WORLD.Abort`` after an uncaught exception, when enabled and MPI runs more
    than one rank; the exit status is 1 (130 for KeyboardInterrupt, as ``python -m mpi4py``).
    A line on stderr says why the job ends, and the output is handed over first
    (:func:`_hand_over_output`)."""
    if not get_abort_on_exception() or sys.flags.interactive or hasattr(sys, "ps1"):
        return
    mpi = sys.modules.get("mpi4py.MPI")
    try:
        if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized() or mpi.COMM_WORLD.Get_size() < 2:
            return
    except Exception:  # noqa: BLE001 - an exit hook must not raise; a broken MPI has no job to abort
        return
    if code is None:
        code = 130 if exc_type is KeyboardInterrupt else 1
    where = "" if thread_name is None else f" in thread {thread_name!r}"
    cause = what if what is not None else f"uncaught {_type_name(exc_type)}"
    _hand_over_output(
        f"cunumpy.mpi: {cause}{where} on {_rank_of(mpi.COMM_WORLD)}; "
        f"calling MPI_Abort(MPI_COMM_WORLD, {code}) to end the job "
        f"({ABORT_VARIABLE}=0 turns this off)"
    )
    with contextlib.suppress(Exception):
        mpi.COMM_WORLD.Abort(code)


def _type_name(exc_type) -> str:
    """``ValueError``, ``mpi4py.MPI.Exception``: as a traceback names the type."""
    name = getattr(exc_type, "__qualname__", None) or repr(exc_type)
    module = getattr(exc_type, "__module__", None)
    return name if module in (None, "builtins", "__main__") else f"{module}.{name}"


def _rank_of(comm) -> str:
    try:
        return f"rank {int(comm.Get_rank())} of {int(comm.Get_size())}"
    except Exception:  # noqa: BLE001 - only a label for a message
        return "a rank"


#: Longest wait, in seconds, for the launcher to take a rank's output before an abort.
_HAND_OVER_SECONDS = 2.0


def _hand_over_output(line: str | None = None, timeout: float = _HAND_OVER_SECONDS) -> None:
    """Write ``line`` to stderr, flush stdout and stderr, and wait (at most ``timeout``
    seconds) until whatever reads them from a pipe has taken every byte.

    MPI launchers read a rank's output from pipes and stop forwarding it once they handle an
    abort: MPICH's Hydra proxy serves the abort request before a pipe that became readable at
    the same moment, and mpiexec exits without printing what is still in flight. Flushing is
    not enough; the bytes must have left the pipe before ``Abort`` is called.
    """
    if line is not None and sys.stderr is not None:
        with contextlib.suppress(Exception):
            sys.stderr.write(line + "\n")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # None, closed or broken
            stream.flush()
    _wait_for_pipe_readers((1, 2), timeout)


def _wait_for_pipe_readers(fds, timeout: float) -> bool:
    """Wait until no byte is left unread in those of ``fds`` that are pipes; ``False`` when
    ``timeout`` seconds passed first (nobody reads), ``True`` otherwise."""
    if fcntl is None:  # pragma: no cover - Windows
        return True
    pipes = []
    for fd in fds:
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                pipes.append(fd)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while pipes:
        pending = 0
        for fd in pipes:
            with contextlib.suppress(OSError):
                pending += int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, bytes(4)), sys.byteorder)
        if not pending:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(2 * delay, 0.01)
    return True


# --------------------------------------------------------------------------- CUDA-awareness

_cuda_aware: bool | None = None

# Tag of the probe's ring exchange; unlikely to collide with application messages that are
# in flight at start-up (the probe is meant to run before any).
_PROBE_TAG = 0x6375


def set_mpi_cuda_aware(value: bool | None) -> None:
    """Record whether the MPI takes device buffers.

    Use it when you know the answer (or want host staging without a probe); the helpers
    read it through :func:`get_mpi_cuda_aware`.

    Parameters
    ----------
    value : bool or None
        The answer; None forgets it.

    Raises
    ------
    TypeError
        ``value`` is neither a bool nor None.
    """
    global _cuda_aware
    if value is not None and not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"set_mpi_cuda_aware(): 'value' must be a bool or None, not {type(value).__name__}")
    _cuda_aware = None if value is None else bool(value)


def get_mpi_cuda_aware() -> bool | None:
    """Return the recorded answer to "does the MPI take device buffers".

    Returns
    -------
    bool or None
        True, False, or None when nothing is recorded.
    """
    return _cuda_aware


def _device_path_active() -> bool:
    """True on the CuPy backend with a functional CuPy (a GPU, or the fake CuPy)."""
    return _backend.get_backend() == "cupy" and _backend.cupy_available()


def _world_comm(function: str):
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError(f"{function}: comm=None means mpi4py.MPI.COMM_WORLD, but mpi4py is not installed") from exc
    return MPI.COMM_WORLD


def _probe_pattern(rank: int, n: int = 16) -> np.ndarray:
    """Values rank ``rank`` sends in the probe: distinct per rank and per element."""
    return np.arange(n, dtype=np.int64) * 7919 + (rank + 1) * 1_000_003


def _probe_ring(comm) -> bool:
    """This rank's half of the probe: pass a device buffer to the right, check the left's.

    Each rank posts exactly one receive and one send whatever goes wrong locally, so a rank
    whose MPI refuses the device buffer does not leave its neighbours waiting: it falls back
    to a host buffer for its own message and answers False.
    """
    cupy = _cupy()
    rank, size = int(comm.Get_rank()), int(comm.Get_size())
    right, left = (rank + 1) % size, (rank - 1) % size
    expected = _probe_pattern(left)
    ok = True
    try:
        send = cupy.asarray(_probe_pattern(rank))
        received = cupy.zeros(expected.shape, expected.dtype)
        synchronize_for_mpi(send, received)
    except Exception:  # noqa: BLE001 - any failure of the probe means not CUDA-aware
        ok, send, received = False, None, None
    requests = []
    host_received = None
    try:
        requests.append(comm.Irecv(received, source=left, tag=_PROBE_TAG))
    except Exception:  # noqa: BLE001 - any failure of the probe means not CUDA-aware
        ok, received = False, None
    if received is None:
        host_received = np.zeros_like(expected)
        requests.append(comm.Irecv(host_received, source=left, tag=_PROBE_TAG))
    try:
        requests.append(comm.Isend(send, dest=right, tag=_PROBE_TAG))
    except Exception:  # noqa: BLE001 - any failure of the probe means not CUDA-aware
        ok = False
        # A message the right neighbour will reject: only a failed local send sends it.
        requests.append(comm.Isend(np.full(expected.shape, -1, expected.dtype), dest=right, tag=_PROBE_TAG))
    type(requests[0]).Waitall(requests)
    if not ok or received is None:
        return False
    return bool(np.array_equal(received.get(), expected))


def mpi_is_cuda_aware(comm: Any = None, *, method: str = "probe") -> bool:
    """Find out whether the MPI behind ``comm`` reads and writes device buffers (collective).

    Call once at start-up on every rank. Each rank sends a small device buffer to the next
    rank of a ring and checks what arrives from the previous one; the answers are combined
    with a logical AND, so every rank gets the same result, which is recorded
    (:func:`get_mpi_cuda_aware`). Any exception makes the answer False. On the NumPy backend
    or without a functional CuPy the answer is False and mpi4py is not imported. An MPI that
    is not CUDA-aware may also crash the process inside the probe instead of failing
    cleanly.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm, optional
        The communicator (default: ``mpi4py.MPI.COMM_WORLD``).
    method : {"probe"}, optional
        How to find out; only the probe exists.

    Returns
    -------
    bool
        The answer, the same on every rank.

    Raises
    ------
    ValueError
        ``method`` is not ``"probe"``.
    ImportError
        ``comm`` is None and mpi4py is not installed.
    """
    if method != "probe":
        raise ValueError(f"mpi_is_cuda_aware(): 'method' must be 'probe', got {method!r}")
    if not _device_path_active():
        set_mpi_cuda_aware(False)
        return False
    if comm is None:
        comm = _world_comm("mpi_is_cuda_aware()")
    _watch(comm)
    try:
        local = _probe_ring(comm)
    except Exception:  # noqa: BLE001 - any failure of the probe means not CUDA-aware
        local = False
    try:
        answer = all(comm.allgather(bool(local)))
    except Exception:  # noqa: BLE001 - any failure of the probe means not CUDA-aware
        answer = False
    set_mpi_cuda_aware(answer)
    return answer


_BUILD_HINTS = (
    "the MPI library cannot read or write device buffers (the CUDA-awareness probe failed). "
    "Either use an MPI built with CUDA support (Open MPI configured --with-cuda, MVAPICH2-GDR, "
    "MPICH configured --with-cuda, Cray MPICH with MPICH_GPU_SUPPORT_ENABLED=1) and rebuild mpi4py "
    "against it (pip install --no-binary=mpi4py --force-reinstall mpi4py, with MPICC pointing at that "
    "MPI's compiler wrapper), or stage device buffers through host memory: call "
    "cunumpy.mpi.set_mpi_cuda_aware(False) and pass device arrays through cunumpy.mpi.mpi_buffer(), "
    "MPIStaging or exchange() instead of calling require_cuda_aware_mpi()"
)


def require_cuda_aware_mpi(comm: Any = None) -> None:
    """Refuse to go on with an MPI that cannot read device memory.

    On the CuPy backend (with a functional CuPy) it runs the probe of
    :func:`mpi_is_cuda_aware`, collectively; a no-op otherwise.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm, optional
        The communicator (default: ``mpi4py.MPI.COMM_WORLD``).

    Raises
    ------
    RuntimeError
        The MPI is not CUDA-aware; the message gives hints for building one.
    """
    if not _device_path_active():
        return
    if not mpi_is_cuda_aware(comm):
        raise RuntimeError(f"require_cuda_aware_mpi(): {_BUILD_HINTS}")


def _resolve_cuda_aware(function: str, cuda_aware) -> bool:
    if cuda_aware is None:
        if _cuda_aware is None:
            raise RuntimeError(
                f"{function}: whether the MPI is CUDA-aware is not known; call "
                "cunumpy.mpi.mpi_is_cuda_aware() on every rank at start-up, record the answer with "
                "cunumpy.mpi.set_mpi_cuda_aware(), or pass cuda_aware=True/False"
            )
        return _cuda_aware
    if not isinstance(cuda_aware, (bool, np.bool_)):
        raise TypeError(f"{function}: 'cuda_aware' must be a bool or None, not {type(cuda_aware).__name__}")
    return bool(cuda_aware)


# --------------------------------------------------------------------------- synchronisation


def _device_ids(arrays) -> list[int]:
    ids: list[int] = []
    for array in arrays:
        device_id = int(array.device.id)
        if device_id not in ids:
            ids.append(device_id)
    return ids


def _wait_for_producer(function: str, device_arrays, stream, event) -> None:
    """Wait for the producer of ``device_arrays``; every device owning one when none is named."""
    if stream is not None:
        stream.synchronize()
        what = "stream"
    elif event is not None:
        event.synchronize()
        what = "event"
    else:
        cupy = _cupy()
        for device_id in _device_ids(device_arrays):
            cupy.cuda.Device(device_id).synchronize()
        what = "device"
    if _transfers.sinks:
        record("sync", f"{function} waits for the {what} of {len(device_arrays)} device buffer(s)")


def synchronize_for_mpi(*arrays: Any, stream: Any = None, event: Any = None) -> None:
    """Wait until the device work producing ``arrays`` is done, so that MPI sees the final data.

    Call it right before every raw MPI call that touches device buffers (not needed after
    MPI returns). None entries and host arrays are ignored, so the line is free on NumPy.

    Parameters
    ----------
    *arrays : array_like or None
        The buffers MPI will read or write.
    stream : cupy.cuda.Stream, optional
        Wait for this stream only.
    event : cupy.cuda.Event, optional
        Wait for this event only. Without ``stream`` and ``event``, every device that owns
        one of the arrays is synchronised.

    Raises
    ------
    ValueError
        Both ``stream`` and ``event`` are given.
    TypeError
        ``stream`` or ``event`` is a host stand-in while device arrays are given.
    """
    if stream is not None and event is not None:
        raise ValueError("synchronize_for_mpi(): pass at most one of 'stream' and 'event'")
    device_arrays = [a for a in arrays if a is not None and _is_device(a)]
    if not device_arrays:
        _check_host_dependency("synchronize_for_mpi()", stream, event)
        return
    _producer_dependency("synchronize_for_mpi()", stream, event)
    _wait_for_producer("synchronize_for_mpi()", device_arrays, stream, event)


# --------------------------------------------------------------------------- staging


class MPIStaging:
    """Caller-owned, reusable staging for one shape, dtype and CUDA device.

    The host buffer is allocated on first device use (page-locked when possible) and reused
    by every later call, as is the device packing buffer for non-contiguous arrays.
    ``staging.buffer(array, **kwargs)`` is ``mpi_buffer(array, staging=staging, **kwargs)``.
    One context at a time: overlapping use raises :class:`RuntimeError`; use two stagings
    for a send and a receive that are open together.

    Parameters
    ----------
    shape : int or tuple of int
        The shape of the arrays it stages.
    dtype : dtype
        Their dtype.

    Raises
    ------
    TypeError
        ``dtype`` is not a dtype or holds Python objects.
    ValueError
        ``shape`` has a negative extent.
    """

    def __init__(self, shape: SupportsIndex | Iterable[SupportsIndex], dtype: npt.DTypeLike) -> None:
        shape = _shape_tuple("MPIStaging()", shape)
        if any(n < 0 for n in shape):
            raise ValueError(f"MPIStaging(): 'shape' must not have negative extents, got {shape}")
        try:
            dtype = np.dtype(dtype)
        except TypeError as exc:
            raise TypeError(f"MPIStaging(): 'dtype' {dtype!r} is not a NumPy dtype") from exc
        if dtype.hasobject:
            raise TypeError(f"MPIStaging(): 'dtype' {dtype} holds Python objects and cannot be sent by MPI")
        self._shape = shape
        self._dtype = dtype
        self._host: np.ndarray | None = None
        self._pinned = False
        self._pack = None
        self._device_id: int | None = None
        self._in_use = threading.Lock()

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of every staged array."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """Dtype of every staged array."""
        return self._dtype

    def __repr__(self) -> str:
        if self._host is None:
            where = "host buffer not allocated"
        else:
            where = f"{'pinned' if self._pinned else 'pageable'} host buffer, device {self._device_id}"
        return f"MPIStaging(shape={self._shape}, dtype={self._dtype}, {where})"

    def buffer(self, array: Any, **kwargs: Any) -> contextlib.AbstractContextManager[Any]:
        """``mpi_buffer(array, staging=self, **kwargs)``."""
        return mpi_buffer(array, staging=self, **kwargs)

    def _check(self, function: str, array) -> None:
        if tuple(array.shape) != self._shape or array.dtype != self._dtype:
            raise ValueError(
                f"{function}: 'array' must have the staging's shape {self._shape} and dtype {self._dtype}, "
                f"got shape {tuple(array.shape)} and dtype {array.dtype}"
            )

    def _bind(self, function: str, device_id: int) -> None:
        self._device_id = _staging_device(self._device_id, device_id, function)

    def _host_buffer(self) -> np.ndarray:
        if self._host is None:
            self._host, self._pinned = _devices.pinned_empty(self._shape, self._dtype)
        return self._host

    def _pack_buffer(self):
        if self._pack is None:
            self._pack = _cupy().empty(self._shape, self._dtype)
        return self._pack

    def _acquire(self, function: str) -> None:
        if not self._in_use.acquire(blocking=False):
            raise RuntimeError(
                f"{function}: this MPIStaging is already in use by an open mpi_buffer() block; "
                "close that block first, or use one staging per simultaneous buffer"
            )


def _check_flag(function: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{function}: {name!r} must be a bool, not {type(value).__name__}")
    return bool(value)


def _check_host_buffer(function: str, argument: str, array, writable: bool = False) -> None:
    """Reject what MPI cannot take as a host buffer, before anything is posted."""
    if isinstance(array, np.ndarray):
        if array.dtype.hasobject:
            raise TypeError(f"{function}: {argument!r} holds Python objects ({array.dtype}); MPI sends raw memory")
        if writable and not array.flags.writeable:
            raise ValueError(f"{function}: {argument!r} is read-only and cannot receive")
        return
    if hasattr(array, "__cuda_array_interface__"):
        raise TypeError(
            f"{function}: {argument!r} is a {type(array).__module__}.{type(array).__name__} device buffer; "
            "cunumpy stages CuPy arrays only"
        )
    try:
        view = memoryview(array)
    except TypeError:
        raise TypeError(
            f"{function}: {argument!r} must be a NumPy or CuPy array (or a buffer), not {type(array).__name__}"
        ) from None
    with view:
        if writable and view.readonly:
            raise ValueError(f"{function}: {argument!r} is read-only and cannot receive")
        if not view.c_contiguous:
            raise ValueError(f"{function}: {argument!r} is a non-contiguous buffer; pass a NumPy array")


def _producer(stream, event):
    """The stream device copies are made on: the producer, or the current one after ``event``."""
    cupy = _cupy()
    if stream is not None:
        return stream
    current = cupy.cuda.get_current_stream()
    if event is not None:
        current.wait_event(event)
    return current


def _pack_into(function: str, pack, array, producer) -> None:
    with producer:
        pack[...] = array
    if _transfers.sinks:
        record("device_copy", f"{function} packs {describe(array)} into a C-order buffer", int(array.nbytes))


def _scatter_back(function: str, array, pack) -> None:
    array[...] = pack
    if _transfers.sinks:
        record("device_copy", f"{function} scatters {describe(array)} back into the view", int(array.nbytes))


def _copy_to_host(function: str, source, host, stream) -> None:
    source.get(stream=stream, out=host, blocking=True)
    if _transfers.sinks:
        record("to_host", f"{function} stages {describe(source)}", int(source.nbytes))


def _copy_to_device(function: str, host, target, stream) -> None:
    target.set(host, stream=stream)
    if _transfers.sinks:
        record("to_device", f"{function} unstages {describe(target)}", int(host.nbytes))


def mpi_buffer(
    array: Any,
    *,
    send: bool = True,
    recv: bool = False,
    cuda_aware: bool | None = None,
    staging: MPIStaging | None = None,
    stream: Any = None,
    event: Any = None,
) -> contextlib.AbstractContextManager[Any]:
    """Give the buffer to hand to a raw MPI call for ``array``, on every MPI and backend.

    A context manager: ``with mpi_buffer(a) as buf: comm.Send(buf, ...)``.

    * host array: yielded unchanged (a non-contiguous host view is packed into a contiguous
      copy, and received data is copied back);
    * device array with a CUDA-aware MPI: synchronised (:func:`synchronize_for_mpi`), then
      yielded;
    * device array otherwise: a host staging buffer (page-locked when possible), filled from
      the device before the block if ``send`` and copied back to the device after it if
      ``recv``; the copy-back is complete when the block exits. With ``send=False`` the
      whole staging buffer is copied back: receive the full size, or keep ``send=True``.

    Non-C-contiguous device arrays go through a C-order device buffer; received data is
    scattered back into the original view. Nothing is copied back when the block raises.
    Non-blocking MPI calls must be waited for inside the block.

    Parameters
    ----------
    array : numpy.ndarray or cupy.ndarray
        The data to send or the place to receive into.
    send : bool, optional
        The block sends ``array`` (its data is needed in the buffer); default True.
    recv : bool, optional
        The block receives into the buffer (copied back into ``array`` after it).
    cuda_aware : bool, optional
        Whether the MPI takes device buffers; None uses the recorded answer.
    staging : MPIStaging, optional
        A reused staging (default: a new host buffer per call).
    stream : cupy.cuda.Stream, optional
        The stream that produces ``array`` (wait for it only).
    event : cupy.cuda.Event, optional
        The event after which ``array`` is ready.

    Returns
    -------
    context manager
        Yields the buffer to hand to MPI.

    Raises
    ------
    RuntimeError
        A device array, ``cuda_aware=None`` and no recorded answer.
    TypeError
        An option has the wrong type, or ``array`` holds Python objects.
    ValueError
        Both ``stream`` and ``event`` are given, or a read-only array would receive.
    """
    function = "mpi_buffer()"
    send = _check_flag(function, "send", send)
    recv = _check_flag(function, "recv", recv)
    if stream is not None and event is not None:
        raise ValueError(f"{function}: pass at most one of 'stream' and 'event'")
    if staging is not None and not isinstance(staging, MPIStaging):
        raise TypeError(f"{function}: 'staging' must be an MPIStaging or None, not {type(staging).__name__}")
    if cuda_aware is not None and not isinstance(cuda_aware, (bool, np.bool_)):
        raise TypeError(f"{function}: 'cuda_aware' must be a bool or None, not {type(cuda_aware).__name__}")
    if _is_device(array):
        _producer_dependency(function, stream, event)
        aware = _resolve_cuda_aware(function, cuda_aware)
        if staging is not None:
            staging._check(function, array)
            staging._bind(function, int(array.device.id))
    else:
        _check_host_buffer(function, "array", array, writable=recv)
        _check_host_dependency(function, stream, event)
        aware = True
        if staging is not None:
            staging._check(function, array)
    return _BufferContext(array, send, recv, aware, staging, stream, event)


class _BufferContext:
    """The context manager :func:`mpi_buffer` returns (single use)."""

    __slots__ = ("_array", "_aware", "_event", "_held", "_host", "_recv", "_send", "_source", "_staging", "_stream")

    def __init__(self, array, send, recv, aware, staging, stream, event):
        self._array = array
        self._send = send
        self._recv = recv
        self._aware = aware
        self._staging = staging
        self._stream = stream
        self._event = event
        self._source: Any = None  # the contiguous array MPI (or the staging copy) works on
        self._host = None
        self._held = False

    def __enter__(self):
        staging = self._staging
        if staging is not None:
            staging._acquire("mpi_buffer()")
            self._held = True
        try:
            if _is_device(self._array):
                return self._enter_device()
            return self._enter_host()
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._held:
            self._held = False
            self._staging._in_use.release()

    def _enter_host(self):
        array = self._array
        if isinstance(array, np.ndarray) and not array.flags.c_contiguous:
            # MPI needs one contiguous block; the copy keeps the data of elements not received.
            self._source = np.ascontiguousarray(array)
            return self._source
        self._source = array
        return array

    def _enter_device(self):
        function = "mpi_buffer()"
        array, staging, stream, event = self._array, self._staging, self._stream, self._event
        with _OnDevice(int(array.device.id)):
            named = stream is not None or event is not None
            if not named:
                # No producer named: any stream of the device may still be writing the array.
                _wait_for_producer(function, [array], None, None)
            producer = _producer(stream, event)
            if array.flags.c_contiguous:
                source = array
            else:
                source = staging._pack_buffer() if staging is not None else _cupy().empty(array.shape, array.dtype)
                if self._send:
                    _pack_into(function, source, array, producer)
            self._source = source
            if self._aware:
                if named or (source is not array and self._send):
                    # The named producer (and any packing queued behind it) is done, so MPI
                    # reads final data and the copy-back after the block runs after it.
                    _sync_stream(function, producer)
                return source
            if staging is not None:
                host = staging._host_buffer()
            else:
                host = _devices.pinned_empty(array.shape, array.dtype)[0]
            if self._send:
                _copy_to_host(function, source, host, producer)
            elif named:
                _sync_stream(function, producer)
            self._host = host
            return host

    def __exit__(self, exc_type, exc, traceback) -> None:
        try:
            if exc_type is None and self._recv:
                self._copy_back()
        finally:
            self._release()

    def _copy_back(self) -> None:
        function = "mpi_buffer()"
        array, source = self._array, self._source
        if not _is_device(array):
            if source is not array:
                np.copyto(array, source)
            return
        with _OnDevice(int(array.device.id)):
            current = _cupy().cuda.get_current_stream()
            if not self._aware:
                _copy_to_device(function, self._host, source, current)
            if source is not array:
                _scatter_back(function, array, source)
            if not self._aware:
                # The host buffer may be reused (or freed) once the block has exited.
                current.synchronize()


def _sync_stream(function: str, stream) -> None:
    stream.synchronize()
    if _transfers.sinks:
        record("sync", f"{function} waits for a stream")


# --------------------------------------------------------------------------- exchange


def _proc_null(comm):
    """``PROC_NULL`` of the MPI behind ``comm`` (the stand-in's or mpi4py's), or None."""
    if is_serial(comm):
        return SerialMPI.PROC_NULL
    mpi = sys.modules.get("mpi4py.MPI")
    return None if mpi is None else mpi.PROC_NULL


def _descriptors(kind: str, items, peer: str, receiving: bool) -> tuple[list, list]:
    """Check the structure of ``(array, peer, tag)`` descriptors; return them and the special ones.

    The common case (a 3-tuple of a C-contiguous NumPy array and two ints) costs a few
    attribute reads; anything else is normalised or rejected here, and the indices of
    buffers that need preparing (device arrays, non-contiguous views, other buffers) are
    returned for the slow path.
    """
    items = list(items)  # a copy: normalised descriptors never change the caller's list
    special = []
    for index, item in enumerate(items):
        try:
            array, rank, tag = item
            plain = type(rank) is int and type(tag) is int and tag >= 0
        except Exception:  # noqa: BLE001 - not a 3-sequence, or a hostile __iter__
            plain = False
        if not plain:
            array, rank, tag = items[index] = _normalised(kind, index, item, peer)
        if type(array) is np.ndarray:
            flags = array.flags
            if flags.c_contiguous and (not receiving or flags.writeable) and not array.dtype.hasobject:
                continue
        special.append(index)
    return items, special


def _as_list(kind: str, items, peer: str) -> list:
    if type(items) is list:
        return items
    try:
        return list(items)
    except TypeError:
        raise TypeError(
            f"exchange(): {kind!r} must be an iterable of (array, {peer}, tag) tuples, not {type(items).__name__}"
        ) from None


_CONTIGUOUS = operator.attrgetter("flags.c_contiguous")
_WRITEABLE = operator.attrgetter("flags.writeable")
_HOLDS_OBJECTS = operator.attrgetter("dtype.hasobject")


def _plain_columns(items: list, receiving: bool):
    """``(arrays, ranks, tags)`` when every descriptor is the common case, else None.

    The common case is a 3-tuple of a C-contiguous NumPy array (writeable for a receive)
    and two ints, a tag >= 0. The checks run over whole columns in C-level iterators, so
    an exchange of many small host buffers costs little more than the MPI calls; any
    other descriptor sends the whole list through :func:`_descriptors`.
    """
    if not items:
        return (), (), ()
    try:
        arrays, ranks, tags = zip(*items, strict=True)
    except Exception:  # noqa: BLE001 - malformed, or a hostile __iter__: the slow path reports it
        return None
    if set(map(type, ranks)) != {int} or set(map(type, tags)) != {int} or min(tags) < 0:
        return None
    if set(map(type, arrays)) != {np.ndarray} or not all(map(_CONTIGUOUS, arrays)):
        return None
    if any(map(_HOLDS_OBJECTS, arrays)) or (receiving and not all(map(_WRITEABLE, arrays))):
        return None
    return arrays, ranks, tags


def _normalised(kind: str, index: int, item, peer: str) -> tuple:
    where = f"{kind}[{index}]"
    if not isinstance(item, (tuple, list)) or len(item) != 3:
        what = f"a {len(item)}-{type(item).__name__}" if isinstance(item, (tuple, list)) else type(item).__name__
        raise ValueError(f"exchange(): {where} must be an (array, {peer}, tag) tuple, got {what}")
    array, rank, tag = item
    rank = _integer(where, peer, rank)
    tag = _integer(where, "tag", tag)
    if tag < 0:
        raise ValueError(f"exchange(): {where}: 'tag' must be >= 0, got {tag}")
    return (array, rank, tag)


def _check_ranks(kind: str, ranks, size: int, proc_null) -> None:
    if not ranks:
        return
    if min(ranks) >= 0 and max(ranks) < size:
        return
    for index, rank in enumerate(ranks):
        if not 0 <= rank < size and rank != proc_null:
            raise ValueError(f"exchange(): {kind}[{index}]: rank {rank} is not in a communicator of size {size}")


def _integer(where: str, name: str, value) -> int:
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"exchange(): {where}: {name!r} must be an int, not bool")
    try:
        return int(operator.index(value))
    except Exception as exc:  # a hostile __index__ may raise anything
        raise ValueError(f"exchange(): {where}: {name!r} must be an int, not {type(value).__name__}") from exc


class _Entry:
    """One prepared special buffer of an exchange: what MPI gets and how to copy it back."""

    __slots__ = ("array", "buffer", "device_id", "host", "index", "is_send", "pack")

    def __init__(self, index, array, is_send):
        self.index = index
        self.array = array
        self.buffer = array  # what is handed to MPI
        self.host = None  # staged host buffer of a device array
        self.pack = None  # contiguous (device or host) stand-in for a non-contiguous view
        self.device_id = None
        self.is_send = is_send


def _abort(comm, error: BaseException) -> None:
    """``comm.Abort(1)`` after a failure in exchange(), with the error on stderr first: the
    abort ends this process before the re-raised error could be printed."""
    _hand_over_output(
        f"cunumpy.mpi: exchange() failed on {_rank_of(comm)} ({_type_name(type(error))}: {error}); "
        "calling MPI_Abort(comm, 1) because the other ranks would wait for its messages forever"
    )
    with contextlib.suppress(Exception):  # the original error is what the caller needs to see
        comm.Abort(1)


def exchange(
    comm: Any,
    sends: Iterable[tuple[Any, int, int]] = (),
    receives: Iterable[tuple[Any, int, int]] = (),
    cuda_aware: bool | None = None,
) -> None:
    """Post many point-to-point messages together and wait for all of them.

    The first choice for halo faces and particle buffers. Device, host, contiguous or strided
    arrays all work; the call returns when every message has arrived and been copied into
    place. Every descriptor is checked and every buffer prepared (device buffers
    synchronised, staged or packed) before anything is posted, so a malformed descriptor
    posts nothing. Receives are posted first, in order, then sends; then every request is
    waited for, and only then are received device (or non-contiguous) buffers copied back.
    A short message fills the start of its receive buffer and leaves the rest unchanged.
    Descriptors in the common form (a list or tuple of exact ``(array, int, int)`` tuples of
    C-contiguous host arrays, or of device arrays for a CUDA-aware MPI) are checked and
    posted in one call into the C core, at close to the cost of hand-written
    ``Irecv``/``Isend``/``Waitall``.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The communicator (or the serial stand-in).
    sends : sequence of (array, int, int), optional
        ``(array, dest, tag)`` descriptors.
    receives : sequence of (array, int, int), optional
        ``(array, source, tag)`` descriptors.
    cuda_aware : bool, optional
        Whether the MPI takes device buffers; None uses the recorded answer when device
        buffers take part.

    Raises
    ------
    ValueError
        A malformed descriptor (not a 3-tuple, a negative tag, a rank outside the
        communicator); nothing was posted.
    TypeError
        ``cuda_aware`` is neither a bool nor None.

    Notes
    -----
    A failure after posting (an MPI error while posting or waiting) prints the error to
    stderr, waits for the launcher to take the output, calls ``comm.Abort(1)``, because the
    other ranks would otherwise wait forever, and re-raises the error. The
    first call with an mpi4py communicator installs the hooks that abort the job when a
    rank dies of an uncaught exception (:func:`set_abort_on_exception`).
    """
    if not _hooks_installed:
        _watch(comm)
    if cuda_aware is not None and not isinstance(cuda_aware, (bool, np.bool_)):
        raise TypeError(f"exchange(): 'cuda_aware' must be a bool or None, not {type(cuda_aware).__name__}")
    comm_kind = _comm_kinds.get(type(comm))
    if comm_kind is None:
        comm_kind = _remember_comm_kind(comm)
    if comm_kind is not None:
        # The common case, checked in C: every descriptor an exact (array, int, int) tuple of
        # C-contiguous host arrays, checked, posted and waited for in one call (None: not the
        # common case, nothing posted); or, below, of device arrays for a CUDA-aware MPI.
        proc_null, waitall = comm_kind
        try:
            done = _exchange_host(receives, sends, comm.Get_size, proc_null, comm.Irecv, comm.Isend, waitall)
        except BaseException as error:
            _abort(comm, error)
            raise
        if done is not None:
            return
        plain = _plain_device(comm, receives, sends, cuda_aware, proc_null)
        if plain is not None:
            if plain[0] or plain[1]:
                _post_plain(comm, plain[0], plain[1])
            return
    sends = _as_list("sends", sends, "dest")
    receives = _as_list("receives", receives, "source")
    send_columns = _plain_columns(sends, receiving=False)
    recv_columns = _plain_columns(receives, receiving=True) if send_columns is not None else None
    if recv_columns is not None:
        # Host buffers only, all in the common form: nothing to prepare or copy back.
        if sends or receives:
            _check_all_ranks(comm, send_columns[1], recv_columns[1])
            _post_and_wait(comm, recv_columns, send_columns, None)
        return
    send_list, send_special = _descriptors("sends", sends, "dest", False)
    recv_list, recv_special = _descriptors("receives", receives, "source", True)
    if not send_list and not recv_list:
        return
    _check_all_ranks(comm, [item[1] for item in send_list], [item[1] for item in recv_list])
    entries: list[_Entry] = []
    any_device = False
    for kind, items, special, is_send in (
        ("sends", send_list, send_special, True),
        ("receives", recv_list, recv_special, False),
    ):
        for index in special:
            array = items[index][0]
            if _is_device(array):
                any_device = True
            else:
                _check_host_buffer("exchange()", f"{kind}[{index}]", array, writable=not is_send)
            entries.append(_Entry(index, array, is_send))
    aware = _resolve_cuda_aware("exchange()", cuda_aware) if any_device else False
    statuses = None
    for entry in entries:
        _prepare_host(entry)
    if any_device:
        _prepare_devices(entries, aware)
    send_list = _with_buffers(send_list, [e for e in entries if e.is_send])
    recv_list = _with_buffers(recv_list, [e for e in entries if not e.is_send])
    if any_device and not aware and recv_list:
        # Staged receives copy back only what arrived, as MPI leaves the rest untouched.
        status_type = _status_type(comm)
        if status_type is not None:
            statuses = [status_type() for _ in range(len(send_list) + len(recv_list))]
    _post_and_wait(comm, _columns(recv_list), _columns(send_list), statuses)
    if entries:
        _copy_back([e for e in entries if not e.is_send], aware, statuses)


_exchange_host = _native_core.exchange_host
_exchange_plain = _native_core.exchange_plain
_exchange_post = _native_core.exchange_post

#: (PROC_NULL, Request.Waitall) per communicator type (the stand-in's, mpi4py's); filled on
#: first use.
_comm_kinds: dict[type, tuple[int, Any]] = {}


def _remember_comm_kind(comm) -> tuple[int, Any] | None:
    """PROC_NULL and Waitall of a serial stand-in or an mpi4py communicator, remembered per
    type; None for anything else (a test double, another binding): it takes the slow path."""
    value: Any
    waitall: Any
    if is_serial(comm):
        value, waitall = SerialMPI.PROC_NULL, SerialRequest.Waitall
    else:
        mpi = sys.modules.get("mpi4py.MPI")
        comm_type = getattr(mpi, "Comm", None)
        if not isinstance(comm_type, type) or not isinstance(comm, comm_type):
            return None
        value = getattr(mpi, "PROC_NULL", None)
        waitall = getattr(getattr(mpi, "Request", None), "Waitall", None)
    if type(value) is not int or not callable(waitall):
        return None
    _comm_kinds[type(comm)] = (value, waitall)
    return value, waitall


def _plain_device(comm, receives, sends, cuda_aware, proc_null):
    """The common case of device buffers for a CUDA-aware MPI: ``(receives, sends)`` tuples
    after the devices owning them were synchronised, or None (the slow path takes it)."""
    array_type = _backend._device_type()
    if array_type is None:
        return None
    plain = _exchange_plain(receives, sends, array_type, False, comm.Get_size, proc_null)
    if plain is None or not _resolve_cuda_aware("exchange()", cuda_aware):
        return None
    receives, sends, checked = plain
    device_ids = []
    for items in (receives, sends):
        for array, _, _ in items:
            if not checked and not array.flags.c_contiguous:
                return None
            device_id = array.device.id
            if device_id not in device_ids:
                device_ids.append(device_id)
    if device_ids:
        cupy = _cupy()
        for device_id in device_ids:
            cupy.cuda.Device(device_id).synchronize()
        if _transfers.sinks:
            count = len(receives) + len(sends)
            record("sync", f"exchange() waits for the devices of {count} device buffer(s)")
    return receives, sends


def _post_plain(comm, receives: tuple, sends: tuple) -> None:
    """Post the checked descriptors and wait for them; abort the job on failure."""
    try:
        requests = _exchange_post(comm.Irecv, comm.Isend, receives, sends)
        type(requests[0]).Waitall(requests)
    except BaseException as error:
        _abort(comm, error)
        raise


def _columns(items: list):
    return tuple(zip(*items)) if items else ((), (), ())


def _check_all_ranks(comm, send_ranks, recv_ranks) -> None:
    size = int(comm.Get_size())
    proc_null = _proc_null(comm)
    _check_ranks("sends", send_ranks, size, proc_null)
    _check_ranks("receives", recv_ranks, size, proc_null)


def _post_and_wait(comm, recv_columns, send_columns, statuses) -> None:
    """Post every receive, then every send, then wait for all; abort the job on failure."""
    try:
        requests = list(map(comm.Irecv, *recv_columns))
        requests.extend(map(comm.Isend, *send_columns))
        type(requests[0]).Waitall(requests, statuses)
    except BaseException as error:
        # Requests may still be writing into staging buffers that are about to be freed,
        # and peers wait for messages that will never come: only ending the job is safe.
        _abort(comm, error)
        raise


def _with_buffers(items: list, prepared: list) -> list:
    for entry in prepared:
        _, rank, tag = items[entry.index]
        items[entry.index] = (entry.buffer, rank, tag)
    return items


def _prepare_host(entry: _Entry) -> None:
    array = entry.array
    if entry.device_id is None and isinstance(array, np.ndarray) and not array.flags.c_contiguous:
        # Receives too: elements a shorter message does not reach keep their values.
        entry.pack = np.ascontiguousarray(array)
        entry.buffer = entry.pack
    elif _is_device(array):
        entry.device_id = int(array.device.id)


def _prepare_devices(entries, aware) -> None:
    """Wait for producers once per device, then pack and stage every device buffer."""
    device_entries = [e for e in entries if e.device_id is not None]
    cupy = _cupy()
    for device_id in _device_ids([e.array for e in device_entries]):
        cupy.cuda.Device(device_id).synchronize()
    if _transfers.sinks:
        record("sync", f"exchange() waits for the devices of {len(device_entries)} device buffer(s)")
    packed_devices: list[int] = []
    for entry in device_entries:
        is_send = entry.is_send
        with _OnDevice(entry.device_id):
            source = entry.array
            if not source.flags.c_contiguous:
                entry.pack = cupy.empty(source.shape, source.dtype)
                # Receives too: elements a shorter message does not reach keep their values.
                _pack_into("exchange()", entry.pack, source, cupy.cuda.get_current_stream())
                if entry.device_id not in packed_devices:
                    packed_devices.append(entry.device_id)
                source = entry.pack
            if aware:
                entry.buffer = source
                continue
            entry.host = _devices.pinned_empty(source.shape, source.dtype)[0]
            if is_send:
                _copy_to_host("exchange()", source, entry.host, cupy.cuda.get_current_stream())
            entry.buffer = entry.host
    if aware and packed_devices:
        for device_id in packed_devices:
            with _OnDevice(device_id):
                cupy.cuda.get_current_stream().synchronize()


def _status_type(comm):
    if is_serial(comm):
        return SerialStatus
    mpi = sys.modules.get("mpi4py.MPI")
    return None if mpi is None else mpi.Status


def _received_items(status, entry) -> int:
    """Items of ``entry`` a completed receive filled (all of them when unknown)."""
    size = int(entry.array.size)
    if status is None:
        return size
    try:
        nbytes = int(status.Get_count())
    except Exception:  # noqa: BLE001 - without a readable status the whole buffer counts
        return size
    itemsize = int(entry.array.dtype.itemsize)
    return max(0, min(size, nbytes // itemsize)) if itemsize else size


def _copy_back(recv_entries, aware, statuses) -> None:
    streams = []
    for entry in recv_entries:
        index = entry.index
        if entry.device_id is None:
            if entry.pack is not None:
                np.copyto(entry.array, entry.pack)
            continue
        with _OnDevice(entry.device_id):
            target = entry.pack if entry.pack is not None else entry.array
            current = _cupy().cuda.get_current_stream()
            if not aware:
                count = _received_items(None if statuses is None else statuses[index], entry)
                if count == target.size:
                    _copy_to_device("exchange()", entry.host, target, current)
                elif count:
                    _copy_to_device("exchange()", entry.host.reshape(-1)[:count], target.reshape(-1)[:count], current)
                if (entry.device_id, current) not in streams:
                    streams.append((entry.device_id, current))
            if entry.pack is not None:
                _scatter_back("exchange()", entry.array, entry.pack)
    for device_id, stream in streams:
        with _OnDevice(device_id):
            stream.synchronize()
