"""Twin of _core/morton.c (filled by the issue that owns it)."""

__all__: list[str] = []
