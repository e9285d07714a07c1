"""Twin of _core/traverse.c (filled by the issue that owns it)."""

__all__: list[str] = []
