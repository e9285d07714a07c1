"""The C core, or its pure-Python twins where the extension is not available (Pyodide)."""

try:
    from . import _core as core

    HAVE_C_CORE = True
except ImportError:  # pragma: no cover - exercised by the twin tests, not by imports
    from . import _reference as core

    HAVE_C_CORE = False

__all__ = ["core", "HAVE_C_CORE"]
