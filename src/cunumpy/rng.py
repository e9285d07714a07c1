"""Reproducible random numbers (API.md section 8)."""

__all__: list[str] = []
