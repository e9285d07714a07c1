"""The one line a slow emulation build prints: which kernel is compiled, and where it is cached.

A build that is still running after ``CUNUMPY_EMULATION_NOTICE_AFTER`` seconds (1 by default)
logs one line on the ``cunumpy.emulation`` logger at level WARNING, which Python's logging shows
on stderr when the program configured no logging. A program silences it with
``logging.getLogger("cunumpy.emulation").setLevel(logging.ERROR)``; ``0`` for the variable
logs every build, ``off`` none.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger("cunumpy.emulation")

_DEFAULT_AFTER = 1.0


def _notice_after() -> float | None:
    raw = os.environ.get("CUNUMPY_EMULATION_NOTICE_AFTER", "").strip()
    if not raw:
        return _DEFAULT_AFTER
    if raw.lower() in ("off", "never", "none"):
        return None
    try:
        after = float(raw)
    except ValueError:
        raise ValueError(f"CUNUMPY_EMULATION_NOTICE_AFTER must be a number of seconds or 'off', got {raw!r}") from None
    if not after >= 0:
        raise ValueError(f"CUNUMPY_EMULATION_NOTICE_AFTER must be 0 or more seconds, got {raw!r}")
    return after


@contextlib.contextmanager
def slow_build_notice(name: str, directory: Path) -> Iterator[None]:
    """Log one line if the block (the build of kernel ``name`` into ``directory``) takes longer
    than the notice threshold; nothing for a quick build."""
    after = _notice_after()
    if after is None or not logger.isEnabledFor(logging.WARNING):
        yield
        return

    def notice() -> None:
        logger.warning(
            "cunumpy: compiling the CPU emulation of CUDA kernel '%s' (once: it is cached in %s; "
            "silence this with logging.getLogger('cunumpy.emulation').setLevel(logging.ERROR))",
            name,
            directory,
        )

    if after == 0:
        notice()
        yield
        return
    timer = threading.Timer(after, notice)
    timer.daemon = True
    timer.name = f"cunumpy-build-notice-{name}"
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
