"""Part of cunumpy.kernels (filled by the issue that owns it)."""

__all__: list[str] = []
