"""Twin of _core/segment.c (filled by the issue that owns it)."""

__all__: list[str] = []
