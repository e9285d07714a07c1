"""PETSc vectors over device arrays (API.md section 12)."""

__all__: list[str] = []
