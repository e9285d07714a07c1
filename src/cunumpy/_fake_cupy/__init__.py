"""A strict host stand-in for CuPy (API.md section 14)."""

__all__: list[str] = []
