"""CPU emulation: rewrites inside the kernel's headers and macros (inline PTX, extern
__shared__), line markers that keep compile errors on the user's file and line, the mode
choice on the preprocessed text, and the build key following header edits."""

import textwrap

import numpy as np
import pytest
from _emulation_support import requires_compiler

from cunumpy import kernel_testing as kt
from cunumpy._emulation import _build
from cunumpy._emulation._source import rewrite_preprocessed
from cunumpy.kernels import CudaKernel

emulate = kt.emulate_cuda_kernel


# ------------------------------------------------------------------ the rewrite (no compiler)


def test_preprocessed_rewrite_covers_user_files_only(tmp_path):
    clean = tmp_path / "clean"
    text = textwrap.dedent(f"""\
        # 1 "/usr/include/stdio.h" 1 3 4
        extern int remove (const char *) __asm__ ("" "remove");
        # 1 "{clean}/prelude.h" 1
        static inline void spin() {{ asm volatile("pause"); }}
        # 1 "k.cu"
        void f(unsigned &l) {{
          asm volatile("mov.u32 %0, %%laneid;"
                       : "=r"(l));
          extern static thread_local __attribute__((aligned(16))) double s[];
        }}
        extern static thread_local float file_scope[];
        const char *t = "asm(1)";
        # 1 "/home/me/inc/mine.cuh" 1
        inline void g() {{ __asm__ __volatile__("trap;"); }}
        """)
    out = rewrite_preprocessed(text, [clean])
    assert '__asm__ ("" "remove")' in out  # a system header: untouched
    assert 'asm volatile("pause")' in out  # a clean directory: untouched
    assert "laneid" not in out and "trap;" not in out
    assert out.count("cunumpy_emu_inline_ptx(") == 2
    assert "double* const s = static_cast<double*>(cunumpy_emu_dynamic_shared());" in out
    assert "static const cunumpy_emu_extern_shared<float> file_scope;" in out
    assert '"asm(1)"' in out
    # Line numbers are kept: every line marker stays on its line.
    assert out.count("\n") == text.count("\n")
    assert [i for i, line in enumerate(out.splitlines()) if line.startswith("#")] == [
        i for i, line in enumerate(text.splitlines()) if line.startswith("#")
    ]


def test_brace_depth_follows_a_file_across_its_includes():
    text = textwrap.dedent("""\
        # 1 "k.cu"
        __global__ void k() {
        # 1 "/u/inner.cuh" 1
        int unrelated;
        # 3 "k.cu" 2
          extern static thread_local int buf[];
        }
        """)
    out = rewrite_preprocessed(text)
    assert "int* const buf" in out


# ------------------------------------------------------------------ end to end

HEADER_PTX = """\
#pragma once
__device__ inline unsigned lane_id() {
    unsigned lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}
"""

HEADER_SHARED = """\
#pragma once
extern __shared__ __align__(8) double header_buffer[];
#define DECLARE_SCRATCH(name) extern __shared__ int name[]
#define READ_LANE(v) asm("mov.u32 %0, %%laneid;" : "=r"(v))
"""

SOURCE = r"""
#include "ptx_header.cuh"
#include <shared_header.cuh>

extern "C" __global__ void header_ptx(unsigned* out) {
    out[threadIdx.x] = lane_id();
}

extern "C" __global__ void macro_ptx(unsigned* out) {
    unsigned v = 0;
    READ_LANE(v);
    out[threadIdx.x] = v;
}

extern "C" __global__ void no_ptx(unsigned* out) {
    out[threadIdx.x] = threadIdx.x;
}

extern "C" __global__ void header_shared(const double* x, double* y) {
    const int t = threadIdx.x, n = blockDim.x;
    header_buffer[t] = x[blockIdx.x * n + t];
    __syncthreads();
    y[blockIdx.x * n + t] = header_buffer[n - 1 - t];
}

extern "C" __global__ void macro_shared(const int* x, int* y) {
    DECLARE_SCRATCH(scratch);
    const int t = threadIdx.x, n = blockDim.x;
    scratch[t] = x[blockIdx.x * n + t];
    __syncthreads();
    y[blockIdx.x * n + t] = scratch[(t + 1) % n];
}
"""


@pytest.fixture(scope="module")
def header_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("emu_headers")
    (d / "ptx_header.cuh").write_text(HEADER_PTX)
    (d / "shared_header.cuh").write_text(HEADER_SHARED)
    return d


def kernel(name, header_dir, source=SOURCE, **kw):
    return CudaKernel(source, name, include_dirs=[header_dir], **kw)


@requires_compiler
def test_inline_ptx_in_a_user_header_is_a_trap(header_dir):
    out = np.zeros(4, np.uint32)
    with pytest.raises(RuntimeError, match="inline PTX") as info:
        emulate(kernel("header_ptx", header_dir), out, grid=1, block=4)
    assert "header_ptx" in str(info.value)
    # The other kernels of the same source are not affected.
    emulate(kernel("no_ptx", header_dir), out, grid=1, block=4)
    np.testing.assert_array_equal(out, np.arange(4))


@requires_compiler
def test_macro_expanding_to_inline_ptx_is_a_trap(header_dir):
    with pytest.raises(RuntimeError, match="inline PTX"):
        emulate(kernel("macro_ptx", header_dir), np.zeros(4, np.uint32), grid=1, block=4)


@requires_compiler
def test_extern_shared_declared_in_a_header_is_sized_by_shared_mem(header_dir):
    x = np.arange(3 * 64, dtype=np.float64)
    y = np.zeros_like(x)
    emulate(kernel("header_shared", header_dir), x, y, grid=3, block=64, shared_mem=64 * 8)
    np.testing.assert_array_equal(y, x.reshape(3, 64)[:, ::-1].ravel())


@requires_compiler
def test_extern_shared_declared_by_a_macro(header_dir):
    x = np.arange(2 * 50, dtype=np.int32)
    y = np.zeros_like(x)
    emulate(kernel("macro_shared", header_dir), x, y, grid=2, block=50, shared_mem=50 * 4)
    np.testing.assert_array_equal(y, np.roll(x.reshape(2, 50), -1, axis=1).ravel())


@requires_compiler
def test_compile_errors_name_the_users_file_and_line(tmp_path):
    (tmp_path / "broken.cuh").write_text(
        "#pragma once\n\n__device__ int broken() {\n    return missing_in_header;\n}\n"
    )
    src = '#include "broken.cuh"\n\nextern "C" __global__ void k(int* x) {\n    x[0] = broken();\n}\n'
    with pytest.raises(RuntimeError, match="missing_in_header") as info:
        kt.compile_for_emulation(CudaKernel(src, "k", include_dirs=[tmp_path]))
    assert f"{tmp_path / 'broken.cuh'}:4:" in str(info.value)
    # An error after a multi-line asm statement still names its own line.
    src2 = (
        'extern "C" __global__ void k2(unsigned* x) {\n    unsigned v;\n    asm volatile("mov.u32 %0, 1;"\n'
        '                 : "=r"(v));\n    x[0] = v + missing_in_source;\n}\n'
    )
    with pytest.raises(RuntimeError, match="missing_in_source") as info:
        kt.compile_for_emulation(CudaKernel(src2, "k2"))
    assert "k2.cu:5:" in str(info.value)


@requires_compiler
def test_barrier_hidden_in_a_header_or_macro_selects_fiber_mode(tmp_path):
    from cunumpy._emulation import _launch

    (tmp_path / "hidden.cuh").write_text(
        "#pragma once\n__device__ inline void wait_all() { __syncthreads(); }\n#define BLOCK_WAIT() wait_all()\n"
    )
    src = r"""
    #include "hidden.cuh"
    extern "C" __global__ void hidden_barrier(const int* x, int* y) {
        __shared__ int s[128];
        const int t = threadIdx.x, n = blockDim.x;
        s[t] = x[t];
        BLOCK_WAIT();
        y[t] = s[n - 1 - t];
    }
    """
    k = CudaKernel(src, "hidden_barrier", include_dirs=[tmp_path])
    kt.compile_for_emulation(k)
    assert _launch.library_for(k, None, ()).fibers
    x = np.arange(128, dtype=np.int32)
    y = np.zeros_like(x)
    emulate(k, x, y, grid=1, block=128)
    np.testing.assert_array_equal(y, x[::-1])


@requires_compiler
def test_angle_bracket_header_edit_rebuilds(tmp_path, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    (tmp_path / "angle_value.cuh").write_text("#define ANGLE_VALUE 1\n")
    src = '#include <angle_value.cuh>\nextern "C" __global__ void av(double* x) { x[0] = ANGLE_VALUE; }'
    x = np.zeros(1)
    emulate(CudaKernel(src, "av", include_dirs=[tmp_path]), x, grid=1, block=1)
    assert x[0] == 1
    before = _build.build_count()
    (tmp_path / "angle_value.cuh").write_text("#define ANGLE_VALUE 2\n")
    emulate(CudaKernel(src, "av", include_dirs=[tmp_path]), x, grid=1, block=1)
    assert x[0] == 2 and _build.build_count() == before + 1


@requires_compiler
def test_preprocessed_text_is_kept_only_for_failed_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path))
    kt.compile_for_emulation(CudaKernel('extern "C" __global__ void fine(int* x) { x[0] = 1; }', "fine"))
    assert not list(tmp_path.glob("*.ii")) and len(list(tmp_path.glob("*.so"))) == 1
    with pytest.raises(RuntimeError, match=r"\.ii"):
        kt.compile_for_emulation(CudaKernel('extern "C" __global__ void bad(int* x) { x[0] = nope; }', "bad"))
    assert len(list(tmp_path.glob("*.ii"))) == 1
