"""An example kernel package for the KernelCatalog tests: one folder per kernel.

axpy        host (Pyccel-compilable), NumPy implementation, CUDA port, test arguments
scale_rows  host, Numba implementation, CUDA port with an Array2D view, test arguments
norm2       host, CUDA port (per-row norms), no test arguments
smooth      host and NumPy implementations only: not ported to CUDA yet
"""
