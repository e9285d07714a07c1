"""Part of cunumpy.cuda (filled by the issue that owns it)."""

__all__: list[str] = []
