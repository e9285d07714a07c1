"""Twin of _core/compact.c (filled by the issue that owns it)."""

__all__: list[str] = []
