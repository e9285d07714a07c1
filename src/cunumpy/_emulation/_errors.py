"""The exceptions of an emulated launch, and the source lines in their messages.

The runtime fails a launch with a ``RuntimeError`` whose ``kind`` attribute says why; its message names code
addresses as ``<pc:/path/lib.so+0x1234>``, which become ``file.cu:12`` here (``addr2line`` on
the kernel library, built with line tables), or ``lib.so+0x1234`` where that cannot be had.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading

__all__ = [
    "CudaPortabilityWarning",
    "EmulationError",
    "EmulationTimeoutError",
    "EmulationUnavailable",
    "InitcheckError",
    "KernelFaultError",
    "MemcheckError",
    "RacecheckError",
    "emulation_error",
]


class EmulationUnavailable(NotImplementedError):
    """A launch or compilation on the fake CuPy that the CPU emulation cannot run here.

    Raised at the first launch (or compilation) of a CUDA kernel with the fake CuPy active
    when the automatic emulation is off (``CUNUMPY_EMULATION=0``) or no C++ compiler is
    found. A ``NotImplementedError`` as before; cunumpy's pytest plugin reports it as a skip
    naming ``reason`` in tests that need a device backend (the ``cupy`` case of the
    ``backend`` fixture, ``requires_device_backend``), unless ``CUNUMPY_REQUIRE_CUDA`` is set.

    Parameters
    ----------
    message : str
        The full message (what could not run, why, and what to do).
    reason : str
        Why the emulation cannot run, e.g. ``the automatic CPU emulation is off
        (CUNUMPY_EMULATION=0)``.
    """

    __module__ = "cunumpy.kernel_testing"  # where it is public (tracebacks name it so)

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):
        return (type(self), (str(self), self.reason))


class EmulationError(RuntimeError):
    """An emulated kernel failed.

    A trap, a failed assertion, barrier divergence, a warp operation that cannot complete,
    or one of the subclasses' reasons; the message names the kernel, the block and the
    thread, and the source line where the line tables have it.

    Parameters
    ----------
    message : str
        What failed, where.
    kernel : str, optional
        The kernel's name (also the attribute ``kernel``).
    kind : str, optional
        Why (also the attribute ``kind``): ``"error"``, ``"memcheck"``, ``"fault"``,
        ``"racecheck"``, ``"initcheck"`` or ``"timeout"``.
    """

    def __init__(self, message: str, *, kernel: str | None = None, kind: str = "error"):
        super().__init__(message)
        self.kernel = kernel
        self.kind = kind


class CudaPortabilityWarning(UserWarning):
    """Code that the CPU emulation runs but nvcc would not compile.

    Issued once per process for each place: for example a ``__global__`` function called
    like a device function from another kernel, which the emulation runs on the calling
    thread. Silence it with :func:`warnings.filterwarnings` where the pattern is intended
    (a wrapper kernel that exists only to unit-test another kernel in emulation).
    """


class MemcheckError(EmulationError):
    """An access outside the memory the launch gave the kernel.

    An argument, a struct's pointer field, a ``__shared__`` variable or the dynamic shared
    memory; the access did not happen.

    Parameters
    ----------
    message : str
        What failed, where.
    kernel : str, optional
        The kernel's name.
    kind : str, optional
        Why (see :class:`EmulationError`).
    """


class KernelFaultError(EmulationError):
    """A fault outside every argument of the launch.

    A wild or null pointer, a stack overflow, an integer division by zero. Parameters as for
    :class:`EmulationError`.

    Parameters
    ----------
    message : str
        What failed, where.
    kernel : str, optional
        The kernel's name.
    kind : str, optional
        Why (see :class:`EmulationError`).
    """


class RacecheckError(EmulationError):
    """Racecheck found conflicting accesses that nothing orders.

    Asked for with ``sanitize=("racecheck",)``; the message lists the hazards with both
    threads and both source lines.

    Parameters
    ----------
    message : str
        What failed, where.
    kernel : str, optional
        The kernel's name.
    kind : str, optional
        Why (see :class:`EmulationError`).
    """


class InitcheckError(EmulationError):
    """Initcheck found reads of memory nothing wrote.

    Asked for with ``sanitize=("initcheck",)``.

    Parameters
    ----------
    message : str
        What failed, where.
    kernel : str, optional
        The kernel's name.
    kind : str, optional
        Why (see :class:`EmulationError`).
    """


class EmulationTimeoutError(EmulationError):
    """The launch ran longer than its ``timeout`` and was stopped.

    Parameters
    ----------
    message : str
        What failed, where.
    kernel : str, optional
        The kernel's name.
    kind : str, optional
        Why (see :class:`EmulationError`).
    """


_CLASSES = {
    "memcheck": MemcheckError,
    "fault": KernelFaultError,
    "racecheck": RacecheckError,
    "initcheck": InitcheckError,
    "timeout": EmulationTimeoutError,
}

_PC = re.compile(r"<pc:(.*?)\+0x([0-9a-f]+)>")
_lines: dict = {}
_lines_lock = threading.Lock()


def _source_lines(pcs: list[tuple[str, int]], skip_dirs: tuple) -> dict:
    """{(library, offset): "file:line"} from addr2line, one run per library."""
    found: dict = {}
    by_lib: dict = {}
    with _lines_lock:
        for lib, off in pcs:
            if (lib, off) in _lines:
                found[(lib, off)] = _lines[(lib, off)]
            else:
                by_lib.setdefault(lib, []).append(off)
    tool = shutil.which("addr2line")
    for lib, offsets in by_lib.items():
        texts = {}
        if tool is not None and lib != "?":
            try:
                done = subprocess.run(
                    [tool, "-e", lib, "-i", "-a"] + [hex(o) for o in offsets],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                    timeout=30,
                )
                texts = _parse_addr2line(done.stdout, skip_dirs)
            except (OSError, subprocess.SubprocessError):
                texts = {}
        for off in offsets:
            text = texts.get(off) or f"{lib.rsplit('/', 1)[-1]}+{off:#x}"
            found[(lib, off)] = text
            with _lines_lock:
                _lines[(lib, off)] = text
    return found


def _parse_addr2line(out: str, skip_dirs: tuple) -> dict:
    """addr2line -i -a output: an address line, then file:line lines from the innermost inlined
    frame outwards. The first frame in the user's code wins (not the prelude, not headers)."""
    result: dict = {}
    current = None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("0x"):
            current = int(line, 16)
            continue
        if current is None or current in result or line.startswith("??"):
            continue
        path, _, lineno = line.rpartition(":")
        lineno = lineno.split(" ", 1)[0]
        if not path or lineno in ("", "?", "0") or path.startswith(skip_dirs):
            continue
        if not os.path.exists(path):
            path = os.path.basename(path)  # a kernel given as a string: its pseudo file name
        result[current] = f"{path}:{lineno}"
    return result


def with_source_lines(message: str, skip_dirs: tuple = ()) -> str:
    """``message`` with every ``<pc:lib+0xoff>`` replaced by the source line where known."""
    pcs = [(m.group(1), int(m.group(2), 16)) for m in _PC.finditer(message)]
    if not pcs:
        return message
    lines = _source_lines(pcs, tuple(skip_dirs))
    return _PC.sub(lambda m: lines[(m.group(1), int(m.group(2), 16))], message)


def emulation_error(exc: RuntimeError, kernel_name: str, skip_dirs: tuple = ()) -> BaseException:
    """The exception to raise for the runtime's ``RuntimeError`` (with its ``kind``)."""
    kind = getattr(exc, "kind", None)
    if not isinstance(kind, str) or len(exc.args) != 1:
        return exc
    message = str(exc.args[0])
    cls = _CLASSES.get(kind, EmulationError)
    return cls(with_source_lines(message, skip_dirs), kernel=kernel_name, kind=kind)
