"""The copies of entry kernels (_emulation/_source.py, add_entry_copies): beside each exported
kernel the translation unit gets a copy that receives the built-ins as values, the stubs call
it, and the kernel's own body is emptied. Every form a kernel can take must keep working:
with a copy, or (lambdas and local classes using a built-in) without one.
"""

import numpy as np
import pytest
from _emulation_support import requires_compiler

from cunumpy import kernel_testing as kt
from cunumpy._emulation._source import STUBS_FILE, add_entry_copies
from cunumpy.kernels import CudaKernel

emulate = kt.emulate_cuda_kernel

# ------------------------------------------------------------------ the rewrite itself

# A preprocessed translation unit as the compiler writes it: line markers, the prelude's
# expansion of __global__ and of threadIdx, then the stubs.
UNIT = (
    '# 1 "k.cu"\n'
    "namespace ns {\n"
    'template <typename T, int N = (3 > 2)> __attribute__((visibility("hidden"))) void scale(T *y, long long n)\n'
    "{\n"
    "    const long long i = (cunumpy_emu_threadIdx()).x;\n"
    '    if (i < n) { y[i] *= N; printf("%s\\n", __func__); }\n'
    "}\n"
    "}\n"
    'extern "C" __attribute__((visibility("hidden"))) void none(void) { }\n'
    'extern "C" __attribute__((visibility("hidden"))) void lambda(int *y) {\n'
    "    auto f = [](int v) { return v + (int)(cunumpy_emu_threadIdx()).x; };\n"
    "    y[0] = f(1);\n"
    "}\n"
    "int after_them;\n"
    f'# 1 "{STUBS_FILE}"\n'
    "void s0(void *const *a) { cunumpy_emu::run_thread<&ns::scale<float, 2>>(a); }\n"
    "void b0(cunumpy_emu_worker *w, void *const *a) { cunumpy_emu::run_block<&ns::scale<float, 2>>(w, a); }\n"
    "void s1(void *const *a) { cunumpy_emu::run_thread<&none>(a); }\n"
    "void s2(void *const *a) { cunumpy_emu::run_thread<&lambda>(a); }\n"
)


def _lines(text):
    """(file, line) of every line of a preprocessed text, from its line markers."""
    out, name, line = [], None, 0
    for row in text.split("\n"):
        if row.startswith("# ") and '"' in row:
            line, name = int(row.split()[1]), row.split('"')[1]
            continue
        out.append((name, line, row))
        line += 1
    return out


def test_a_copy_is_added_beside_the_kernel_and_the_stubs_call_it():
    out = add_entry_copies(UNIT, (), (STUBS_FILE,))
    assert "run_thread_copy<&ns::scale<float, 2>, &ns::cunumpy_emu_loop_scale<float, 2>>(a)" in out
    assert "run_block_copy<&ns::scale<float, 2>, &ns::cunumpy_emu_loop_scale<float, 2>>(w, a)" in out
    assert "run_thread_copy<&none, &cunumpy_emu_loop_none>(a)" in out
    # the copy: the kernel's template header, the built-ins first, its body verbatim, in the
    # kernel's namespace (before the namespace's closing brace)
    copy = out[out.index('extern "C++"') : out.index("int after_them")]
    assert copy.startswith('extern "C++" { template <typename T, int N = (3 > 2)> static')
    assert "(::cunumpy_emu::builtins cunumpy_emu_b_, T *y, long long n)" in copy
    assert out.index("cunumpy_emu_loop_scale(") < out.index("}\n", out.index("cunumpy_emu_loop_scale(") + 400)
    assert 'printf("%s\\n", "scale")' in out  # __func__ is the kernel's name, not the copy's
    assert "void cunumpy_emu_loop_none(::cunumpy_emu::builtins cunumpy_emu_b_)" in out  # (void)


def test_the_copy_keeps_the_kernels_lines_and_the_lines_after_it():
    out = add_entry_copies(UNIT, (), (STUBS_FILE,))
    lines = _lines(out)
    where = {row.strip(): (name, line) for name, line, row in lines if row.strip()}
    # the body's lines are where the user wrote them, in the copy
    assert where["const long long i = (cunumpy_emu_threadIdx()).x;"] == ("k.cu", 4)
    assert where["int after_them;"] == ("k.cu", 13)
    assert where["y[0] = f(1);"] == ("k.cu", 11)
    # the kernel's own body is emptied: its statements are in the copy only
    assert out.count("const long long i = (cunumpy_emu_threadIdx()).x;") == 1


def test_no_copy_where_a_lambda_without_default_capture_uses_a_built_in():
    out = add_entry_copies(UNIT, (), (STUBS_FILE,))
    assert "cunumpy_emu_loop_lambda" not in out
    assert "run_thread<&lambda>(a)" in out


@pytest.mark.parametrize(
    "body, copied",
    [
        ("auto f = [&](int v) { return v + (int)(cunumpy_emu_threadIdx()).x; }; y[0] = f(1);", True),
        ("auto f = [=, &y](int v) { return v + (int)(cunumpy_emu_threadIdx()).x; }; y[0] = f(1);", True),
        ("auto f = [y](int v) { return v + (int)(cunumpy_emu_threadIdx()).x; }; y[0] = f(1);", False),
        ("auto f = [](int v) { return v + 1; }; y[(cunumpy_emu_threadIdx()).x] = f(1);", False),
        ("auto f = [](int v) { return v + 1; }; y[0] = f(1);", True),  # no built-in at all
        ("struct S { int g() { return (cunumpy_emu_threadIdx()).x; } }; y[0] = S().g();", False),
        ("int a[4] = {1, 2, 3, 4}; y[a[0]] = a[1] + (int)(cunumpy_emu_threadIdx()).x;", True),
        ("y['a' - 97 + 1'0 - 10] = (cunumpy_emu_threadIdx()).x;", True),
    ],
)
def test_which_bodies_get_a_copy(body, copied):
    unit = (
        '# 1 "k.cu"\n'
        f'extern "C" __attribute__((visibility("hidden"))) void k(int *y) {{ {body} }}\n'
        f'# 1 "{STUBS_FILE}"\n'
        "void s(void *const *a) { cunumpy_emu::run_thread<&k>(a); }\n"
    )
    out = add_entry_copies(unit, (), (STUBS_FILE,))
    assert ("cunumpy_emu_loop_k" in out) is copied


def test_calls_and_declarations_are_not_copied():
    unit = (
        '# 1 "k.cu"\n'
        'extern "C" __attribute__((visibility("hidden"))) void k(int *y);\n'
        "static void helper(int *y) { k(y); }\n"
        'extern "C" __attribute__((visibility("hidden"))) void k(int *y) { y[0] = 1; }\n'
        f'# 1 "{STUBS_FILE}"\n'
        "void s(void *const *a) { cunumpy_emu::run_thread<&k>(a); }\n"
    )
    out = add_entry_copies(unit, (), (STUBS_FILE,))
    assert out.count("cunumpy_emu_loop_k(") == 1
    assert "static void helper(int *y) { k(y); }" in out


# ------------------------------------------------------------------ kernels end to end

KERNELS = r"""
#include <cunumpy/index.cuh>

__device__ int global_x() { return blockIdx.x * blockDim.x + threadIdx.x; }

template <typename T, int N>
__global__ void scale(T* y, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    y[i] *= N;
}

extern "C" {
__global__ void in_block(int* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = i;
}
}

#define BODY(V) int i = global_x(); if (i < n) y[i] = V + threadIdx.y;
extern "C" { __global__ void made_one(int* y, int n) { BODY(1) } __global__ void made_two(int* y, int n) { BODY(2) } }

extern "C" __global__ void lambdas(int* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    auto by_ref = [&](int v) { return v + (int)threadIdx.x; };
    auto none = [](int v) { return v + (int)(blockDim.x * 0); };
    if (i < n) y[i] = by_ref(0) + none(0) - (int)threadIdx.x + i;
}

extern "C" __global__ void local_class(int* y, int n) {
    struct Where { int at() const { return blockIdx.x * blockDim.x + threadIdx.x; } };
    int i = Where().at();
    if (i < n) y[i] = 3 * i;
}

extern "C" __global__ void device_function(int* y, int n) {
    int i = global_x();
    if (i < n) y[i] = i + 1;
}

extern "C" __global__ void named(void) {
    if (threadIdx.x == 0 && blockIdx.x == 0) printf("kernel %s\n", __func__);
}
"""


@requires_compiler
@pytest.mark.parametrize("memcheck", [True, False])
def test_kernels_of_every_form_compute_their_results(memcheck):
    n = 1000
    y = np.ones(n, np.float32)
    emulate(CudaKernel(KERNELS, "scale", template_args=("float", 3)), y, n, memcheck=memcheck)
    assert (y == 3).all()
    for name, want in (
        ("in_block", np.arange(n)),
        ("lambdas", np.arange(n)),
        ("local_class", 3 * np.arange(n)),
        ("device_function", np.arange(n) + 1),
        ("made_one", np.full(n, 1)),
        ("made_two", np.full(n, 2)),
    ):
        out = np.zeros(n, np.int32)
        emulate(CudaKernel(KERNELS, name), out, n, memcheck=memcheck)
        assert (out == want).all(), name


@requires_compiler
def test_func_names_the_kernel(capfd):
    emulate(CudaKernel(KERNELS, "named"), n_threads=4)
    assert "kernel named" in capfd.readouterr().out


@requires_compiler
def test_compiler_errors_are_reported_once_at_the_users_line():
    src = (
        'extern "C" __global__ void k(int* y) {\n'
        "    y[threadIdx.x] = undeclared_name;\n"
        "}\n"
        "__device__ int after() { return also_undeclared; }\n"
    )
    with pytest.raises(RuntimeError) as info:
        kt.compile_for_emulation(CudaKernel(src, "k"))
    message = str(info.value).replace("\u2018", "'").replace("\u2019", "'")
    assert message.count("'undeclared_name' was not declared") == 1
    assert "k.cu:2" in message and "k.cu:4" in message


@requires_compiler
def test_the_block_loop_reads_no_thread_local_per_thread():
    # The point of the copies: in loop mode the built-ins are loop variables, so the block
    # function makes no thread-local lookup (a __tls_get_addr call in a dlopen'ed library).
    import shutil
    import subprocess

    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("needs objdump")
    src = r"""
    #include <cunumpy/index.cuh>
    extern "C" __global__ void axpy(double a, const double* x, double* y, long long n) {
        CUNUMPY_THREAD_1D(i, n);
        y[i] = a * x[i] + y[i];
    }
    """
    for memcheck in (True, False):
        k = CudaKernel(src, "axpy")
        x, y = np.ones(300), np.ones(300)
        emulate(k, 2.0, x, y, 300, memcheck=memcheck)
        assert (y == 3).all()
        from cunumpy._emulation._launch import checks_mode, library_for

        lib = library_for(k, None, (), checks=checks_mode(frozenset(), memcheck))
        text = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", str(lib.path)], capture_output=True, text=True, check=True
        ).stdout
        block = text[text.index("<cunumpy_emu_block_0>:") :]
        block = block[: block.index("\n\n")]
        assert "call" in block  # the parameters are loaded by calls
        assert "__tls_get_addr" not in block


# ------------------------------------------------------------------ a kernel calling a kernel
#
# nvcc rejects a call of a __global__ function from device code, but codes use the pattern to
# unit-test a kernel in emulation (a wrapper kernel calling the kernel under test). The called
# kernel keeps its own body, so the call runs it on the calling thread; an emptied body would
# make the call a silent no-op (issue 33, item 1: 0 of 129 elements written).


def test_a_kernel_called_from_a_function_keeps_its_body_and_the_call_is_recorded():
    from cunumpy._emulation._source import RewriteFindings

    unit = (
        '# 1 "k.cu"\n'
        'extern "C" __attribute__((visibility("hidden"))) void inner(int *y) { y[0] = 1; }\n'
        'extern "C" __attribute__((visibility("hidden"))) void outer(int *y) {\n'
        "    inner(y);\n"
        "}\n"
        f'# 1 "{STUBS_FILE}"\n'
        "void s0(void *const *a) { cunumpy_emu::run_thread<&inner>(a); }\n"
        "void s1(void *const *a) { cunumpy_emu::run_thread<&outer>(a); }\n"
    )
    found = RewriteFindings()
    out = add_entry_copies(unit, (), (STUBS_FILE,), found)
    assert "void inner(int *y) { y[0] = 1; }" in out  # the called kernel's own body stays
    assert "void outer(int *y) {\n\n}" in out  # the uncalled one is emptied (lines kept)
    assert out.count("cunumpy_emu_loop_inner(") == 1 and out.count("cunumpy_emu_loop_outer(") == 1
    assert found.kernel_calls == [("inner", "k.cu", 3)]


WRAPPERS = r"""
extern "C" __global__ void inner(double dt, double* m, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) m[i] = dt * i;
}
extern "C" __global__ void outer(double dt, double* m, int n) {
    inner(dt, m, n);
}

__global__ void reverse_tile(double* m, int n) {
    __shared__ double tile[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? m[i] : 0.0;
    __syncthreads();
    int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);
    if (i < n && j < n) m[i] = tile[blockDim.x - 1 - threadIdx.x] + 0 * j;
}
extern "C" __global__ void outer_with_barrier(double* m, int n) { reverse_tile(m, n); }
"""


@requires_compiler
@pytest.mark.parametrize("memcheck", [True, False])
def test_a_wrapper_kernel_runs_the_kernel_it_calls(memcheck):
    import warnings

    m = np.empty(129)  # garbage unless every element is written
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        emulate(CudaKernel(WRAPPERS, "outer"), 0.5, m, np.int32(129), n_threads=129, block=64, memcheck=memcheck)
    np.testing.assert_array_equal(m, 0.5 * np.arange(129))
    assert all(issubclass(w.category, kt.CudaPortabilityWarning) for w in caught)


@requires_compiler
def test_a_wrapper_kernel_runs_a_kernel_with_barriers_in_fiber_mode():
    m = np.arange(128, dtype=np.float64)
    emulate(CudaKernel(WRAPPERS, "outer_with_barrier"), m, np.int32(128), grid=2, block=64)
    want = np.concatenate([np.arange(64)[::-1], 64 + np.arange(64)[::-1]]).astype(np.float64)
    np.testing.assert_array_equal(m, want)


@requires_compiler
def test_the_call_of_a_kernel_warns_once_per_process_at_the_calling_line(tmp_path):
    import subprocess
    import sys

    code = (
        "import warnings, numpy as np\n"
        "from cunumpy import kernel_testing as kt\n"
        "from cunumpy.kernels import CudaKernel\n"
        f"SRC = {WRAPPERS!r}\n"
        "for _ in range(3):\n"
        "    m = np.empty(10)\n"
        "    kt.emulate_cuda_kernel(CudaKernel(SRC, 'outer'), 1.0, m, np.int32(10), n_threads=10)\n"
        "    assert (m == np.arange(10)).all()\n"
    )
    env = {**__import__("os").environ, "CUNUMPY_EMULATION_CACHE": str(tmp_path), "PYTHONWARNINGS": "always"}
    for _ in range(2):  # built, then loaded from the disk cache: both warn
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr
        assert run.stderr.count("function 'inner' is called") == 1, run.stderr
        assert run.stderr.count("function 'reverse_tile' is called") == 1, run.stderr
        assert (
            ":7: CudaPortabilityWarning: the __global__ function 'inner' is called like a device function" in run.stderr
        )
        assert "nvcc rejects the call" in run.stderr


@requires_compiler
def test_a_wrapper_kernel_on_the_fake_cupy(dev):
    import warnings

    k = CudaKernel(WRAPPERS, "outer")
    m = dev(np.full(129, -1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kt.CudaPortabilityWarning)
        with kt.emulated_launches():
            k(0.5, m, np.int32(129), n_threads=129)
    np.testing.assert_array_equal(kt.host_buffer(m), 0.5 * np.arange(129))
