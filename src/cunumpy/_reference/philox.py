"""Twin of _core/philox.c (filled by the issue that owns it)."""

__all__: list[str] = []
