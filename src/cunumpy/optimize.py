"""SciPy root finding and minimisation on either backend (API.md section 11)."""

__all__: list[str] = []
