"""CPU emulation of CUDA kernels (API.md section 15): the Python layer.

CUDA source is compiled by the host C++ compiler against the prelude
(``include/cunumpy_emu/prelude.h``) into a cached shared library; the C runtime in
``cunumpy._core`` (``emu_launch``) schedules its threads. The public names live in
``cunumpy.kernel_testing``.
"""

from ._analysis import KernelAnalysis, LineAnalysis, analyzed_launches
from ._build import build_count, emulation_cache_dir, emulation_compiler
from ._errors import (
    CudaPortabilityWarning,
    EmulationError,
    EmulationTimeoutError,
    EmulationUnavailable,
    InitcheckError,
    KernelFaultError,
    MemcheckError,
    RacecheckError,
)
from ._launch import analyze_kernel, compile_for_emulation, emulate_cuda_kernel, emulated_launches

__all__ = [
    "CudaPortabilityWarning",
    "EmulationError",
    "EmulationTimeoutError",
    "EmulationUnavailable",
    "InitcheckError",
    "KernelAnalysis",
    "KernelFaultError",
    "LineAnalysis",
    "MemcheckError",
    "RacecheckError",
    "analyze_kernel",
    "analyzed_launches",
    "build_count",
    "compile_for_emulation",
    "emulate_cuda_kernel",
    "emulated_launches",
    "emulation_cache_dir",
    "emulation_compiler",
]
