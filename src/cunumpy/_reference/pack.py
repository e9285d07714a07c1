"""Twin of _core/pack.c (filled by the issue that owns it)."""

__all__: list[str] = []
