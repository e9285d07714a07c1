"""SciPy integration on either backend (API.md section 11.3)."""

__all__: list[str] = []
