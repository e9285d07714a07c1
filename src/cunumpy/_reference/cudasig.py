"""Twin of _core/cudasig.c (filled by the issue that owns it)."""

__all__: list[str] = []
