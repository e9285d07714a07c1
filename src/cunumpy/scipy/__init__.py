"""SciPy on either backend (API.md section 10): SciPy on NumPy, cupyx.scipy on CuPy."""

__all__: list[str] = []
