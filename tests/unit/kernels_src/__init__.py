"""Host kernels the PyccelKernel tests compile (Pyccel) or jit (Numba)."""
