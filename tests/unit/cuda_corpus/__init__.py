"""A corpus of CUDA kernels written in the style of the CUDA samples and common GPU benchmark
suites, each kept as nvcc compiles it (no edits for the CPU emulation), with NumPy references:
see cases.py. Run by tests/unit/test_cuda_corpus.py (emulation under memcheck and racecheck,
and an nvcc compile check for sm_90) and tests/gpu/test_cuda_corpus_gpu.py (on a GPU)."""
