"""Twin of _core/sort.c (filled by the issue that owns it)."""

__all__: list[str] = []
