"""Every shipped CUDA header (alone and together) and every CUDA source in tests/ and
examples/ compiles for sm_90 with the CUDA toolkit, also on machines without a GPU.

Two batched nvcc invocations run in parallel; the headers are also compiled with NVRTC, the
compiler CuPy uses, through the toolkit's library. Skipped only where no toolkit exists.
"""

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import cunumpy as xp

pytestmark = pytest.mark.nosan  # spawns compilers

REPO = Path(__file__).resolve().parents[2]
INCLUDE = Path(xp.cuda.cuda_include_dir())
HEADERS = sorted((INCLUDE / "cunumpy").glob("*.cuh"))
SOURCES = sorted(p for d in ("tests", "examples") for p in (REPO / d).rglob("*.cu"))
ARCH = "sm_90"


def _cuda_home():
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if candidate and (Path(candidate) / "bin" / "nvcc").is_file():
            return Path(candidate)
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent if nvcc else None


CUDA_HOME = _cuda_home()
_FAKE_RUN = os.environ.get("CUNUMPY_FAKE_CUPY", "").strip().lower() in ("1", "true", "yes")
needs_toolkit = pytest.mark.skipif(CUDA_HOME is None, reason="no CUDA toolkit (nvcc) on this machine")
# The compilers do not depend on the backend: `make test` compiles once, in the plain run.
once_per_ci = pytest.mark.skipif(_FAKE_RUN, reason="compiled in the plain run of the same CI job")


def _wrappers(tmp: Path):
    """Translation units: one per header, all headers together, and one per source file."""
    units = {}
    for h in HEADERS:
        units[f"header_{h.stem}"] = f"#include <cunumpy/{h.name}>\n"
    units["all_headers"] = "".join(f"#include <cunumpy/{h.name}>\n" for h in HEADERS)
    groups = ([], [])
    for i, (name, text) in enumerate(sorted(units.items())):
        path = tmp / f"{name}.cu"
        path.write_text(text)
        groups[i % 2].append(path)
    for i, src in enumerate(SOURCES):
        # Include the file by absolute path so its own quoted includes resolve beside it.
        path = tmp / f"src{i}_{src.stem}.cu"
        path.write_text(f'#include "{src}"\n')
        groups[i % 2].append(path)
    return groups


@needs_toolkit
@once_per_ci
def test_headers_and_sources_compile_with_nvcc(tmp_path):
    assert HEADERS, "no shipped headers found"
    nvcc = str(CUDA_HOME / "bin" / "nvcc")
    procs = []
    for k, (group, extra) in enumerate(zip(_wrappers(tmp_path), ((), ("-DCUNUMPY_BOUNDS_CHECK",)))):
        # Debug definitions on one batch, plain on the other; each file is in exactly one batch.
        out = tmp_path / f"out{k}"
        out.mkdir()
        cmd = [nvcc, f"-arch={ARCH}", "-std=c++17", "-cubin", f"-I{INCLUDE}", *extra, "-odir", str(out)]
        procs.append(
            (
                cmd + [str(p) for p in group],
                subprocess.Popen(
                    cmd + [str(p) for p in group], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
                ),
            )
        )
    failures = []
    for cmd, proc in procs:
        output, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            failures.append(f"$ {' '.join(cmd)}\n{output}")
    assert not failures, "\n\n".join(failures)


def _nvrtc():
    if CUDA_HOME is None:
        return None
    for name in ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"):
        for d in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            path = CUDA_HOME / d / name
            if path.exists():
                try:
                    return ctypes.CDLL(str(path))
                except OSError:
                    continue
    return None


@needs_toolkit
@once_per_ci
def test_headers_compile_with_nvrtc():
    lib = _nvrtc()
    if lib is None:
        pytest.skip("the toolkit has no loadable NVRTC library")
    source = "".join(f"#include <cunumpy/{h.name}>\n" for h in HEADERS) + (
        'extern "C" __global__ void k(Array2D<double> v, CArray1D<float> c, double* out) {\n'
        "    CUNUMPY_THREAD_1D(i, 1);\n"
        "    double s = cunumpy_block_sum(v(i, 0)) + cunumpy_block_inclusive_sum((double)c(i));\n"
        "    cunumpy_atomic_add(out, s + cunumpy_warp_max(s, 3u));\n"
        "}\n"
    )
    for extra in ((), ("-DCUNUMPY_BOUNDS_CHECK", "-lineinfo")):
        opts = [f"-arch={ARCH}", "-std=c++17", f"-I{INCLUDE}", *extra]
        prog = ctypes.c_void_p()
        assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"headers.cu", 0, None, None) == 0
        try:
            arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
            status = lib.nvrtcCompileProgram(prog, len(opts), arr)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))
        assert status == 0, log.value.decode(errors="replace")


def test_every_cuda_source_in_the_repository_is_checked():
    # The sources the compile check covers parse as checked CudaKernels, too.
    for src in SOURCES:
        names = xp.cuda.cuda_kernel_names(src.read_text())
        assert names, f"{src} has no __global__ function"
