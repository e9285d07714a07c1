"""The emulator's memory checks on a corpus of buggy kernels, one per bug class and position.

Every case asserts the class of the error, the variable and the index in its message, that
no memory outside the launch's arguments changed, and (by running on) that the process lives.
Memcheck is always on; racecheck and initcheck are asked for with ``sanitize=``.
"""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _emulation_support import requires_compiler

import cunumpy.kernel_testing as kt
from cunumpy.kernels import CudaKernel

pytestmark = requires_compiler


def run(source, name, *args, **launch):
    return kt.emulate_cuda_kernel(CudaKernel(source, name), *args, **launch)


def guarded(n, dtype=np.float64):
    """An array of n elements inside a larger one whose other elements are canaries: a stray
    write that memcheck missed would change them."""
    outer = np.full(n + 64, -7, dtype)
    return outer, outer[32 : 32 + n]


def assert_canaries(outer, n):
    assert (outer[:32] == -7).all() and (outer[32 + n :] == -7).all()


# ------------------------------------------------------------------ memcheck: global memory

ONE_PAST = r"""
extern "C" __global__ void fill(double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = 1.0;   // off by one: <= instead of <
}
"""


@pytest.mark.parametrize("fibers", [False, True])
def test_one_past_the_end_write(fibers):
    src = ONE_PAST if not fibers else ONE_PAST.replace("out[i] = 1.0;", "out[i] = 1.0; __syncthreads();")
    outer, out = guarded(100)
    with pytest.raises(kt.MemcheckError) as info:
        run(src, "fill", out, 100, n_threads=128)
    msg = str(info.value)
    assert "write of 8 bytes to 'out'" in msg and "element 100 " in msg and "0 bytes past its end" in msg
    assert "thread (100, 0, 0)" in msg and "kernel 'fill'" in msg and "fill.cu:4" in msg
    assert_canaries(outer, 100)
    assert (out == 1.0).all()  # every in-bounds write happened


def test_one_past_the_end_read_through_a_raw_pointer():
    src = r"""
    extern "C" __global__ void push(const double* efield, double* v, int n) {
        int c = blockIdx.x * blockDim.x + threadIdx.x;
        if (c < n) v[c] += 0.5 * (efield[c] + efield[c + 1]);   // reads one past the end
    }
    """
    e, v = np.ones(64), np.zeros(64)
    with pytest.raises(kt.MemcheckError, match=r"read of 8 bytes from 'efield' .*element 64 .*0 bytes past its end"):
        run(src, "push", e, v, 64)


def test_one_before_the_start():
    src = r"""
    extern "C" __global__ void diff(const float* x, float* d, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) d[i] = x[i] - x[i - 1];   // i = 0 reads x[-1]
    }
    """
    x, d = np.arange(50, dtype=np.float32), np.zeros(50, np.float32)
    with pytest.raises(kt.MemcheckError, match=r"read of 4 bytes from 'x' .*element -1 .*4 bytes before its start"):
        run(src, "diff", x, d, 50)


def test_far_past_the_end_and_negative():
    src = r"""
    extern "C" __global__ void far(double* a, int n, int offset) {
        if (threadIdx.x == 0 && blockIdx.x == 0) a[n + offset] = 2.0;
    }
    """
    outer, a = guarded(100)
    with pytest.raises(kt.MemcheckError, match=r"'a' .*element 1100 .*8000 bytes past its end"):
        run(src, "far", a, 100, 1000, n_threads=1)
    with pytest.raises(kt.MemcheckError, match=r"'a' .*element -101 .*808 bytes before its start"):
        run(src, "far", a, 100, -201, n_threads=1)
    assert_canaries(outer, 100)


def test_an_atomic_out_of_bounds():
    src = r"""
    extern "C" __global__ void hist(const int* keys, int* counts, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&counts[keys[i]], 1);
    }
    """
    keys = np.array([0, 1, 2, 3, 4], np.int32)  # 4 is one past the 4 bins
    counts = np.zeros(4, np.int32)
    with pytest.raises(kt.MemcheckError, match=r"'counts' .*element 4 "):
        run(src, "hist", keys, counts, 5)


def test_a_struct_pointer_field():
    from cunumpy.arguments import CudaStruct

    S = CudaStruct("PushArgs", [("efield", "double*"), ("n", "int")])
    src = (
        S.declaration
        + r"""
    extern "C" __global__ void push(PushArgs args, double* v) {
        int c = blockIdx.x * blockDim.x + threadIdx.x;
        if (c < args.n) v[c] = args.efield[c + 2];
    }
    """
    )
    e, v = np.ones(32), np.zeros(32)
    k = CudaKernel(src, "push", structs=[S])
    with pytest.raises(kt.MemcheckError, match=r"read of 8 bytes from 'args.efield' .*element 32 "):
        kt.emulate_cuda_kernel(k, {"efield": e, "n": 32}, v)


def test_a_strided_view_past_its_extent():
    src = r"""
    #include <cunumpy/array_view.cuh>
    extern "C" __global__ void scale(Array1D<double> a) {
        long long i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i <= a.shape[0]) a.data[i * a.strides[0]] *= 2.0;   // one past the view
    }
    """
    base = np.arange(20.0)
    view = base[::2]  # its element 10 would be base[20]: outside the view and the array
    with pytest.raises(kt.MemcheckError, match=r"'a' .*element 20 "):
        run(src, "scale", view, n_threads=16)
    np.testing.assert_array_equal(base[::2], np.arange(0.0, 20.0, 2) * 2)
    np.testing.assert_array_equal(base[1::2], np.arange(1.0, 20.0, 2))  # the gaps are not touched


def test_an_output_sized_for_another_block_size():
    # Per-block partial sums sized for 256-thread blocks, launched with the inferred block
    # (128 threads): twice as many blocks as the output has room for.
    src = r"""
    extern "C" __global__ void partial(const double* x, double* sums, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (threadIdx.x == 0 && i < n) sums[blockIdx.x] = x[i];
    }
    """
    x = np.ones(1024)
    outer, sums = guarded(1024 // 256)
    with pytest.raises(kt.MemcheckError, match=r"block \(4, 0, 0\).*write of 8 bytes to 'sums' .*element 4 "):
        run(src, "partial", x, sums, 1024)
    assert_canaries(outer, 4)


def test_a_fault_in_one_block_while_others_run_in_parallel():
    src = r"""
    extern "C" __global__ void fill(double* out, int bad_block) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        out[i + (blockIdx.x == bad_block ? 8192 : 0)] = 1.0;
    }
    """
    outer, out = guarded(64 * 128)
    with pytest.raises(kt.MemcheckError, match=r"block \(37, 0, 0\).*'out' .*element 12928 "):
        run(src, "fill", out, 37, grid=64, block=128)
    assert_canaries(outer, 64 * 128)
    assert (out[: 37 * 128] == 1).all()  # the blocks before the failing one all ran


def test_an_empty_array_is_a_null_pointer():
    src = r"""
    extern "C" __global__ void first(const double* x, double* y) { y[0] = x[0]; }
    """
    with pytest.raises(kt.MemcheckError, match=r"'x' .*the array is empty, so the kernel got a null pointer"):
        run(src, "first", np.zeros(0), np.zeros(1), n_threads=1)


def test_a_wild_pointer_is_a_fault_and_the_process_lives():
    src = r"""
    extern "C" __global__ void wild(double* x, unsigned long long address) {
        *(double*)address = x[0];
    }
    """
    with pytest.raises(kt.KernelFaultError, match=r"invalid write at address 0x10.*not near any argument"):
        run(src, "wild", np.zeros(4), 0x10000000, n_threads=1)
    with pytest.raises(kt.KernelFaultError, match=r"null pointer write"):
        run(src, "wild", np.zeros(4), 8, n_threads=1)


# ------------------------------------------------------------------ memcheck: shared memory

TILE = r"""
extern "C" __global__ void tiled(const double* x, double* out, int offset) {
    __shared__ double tile[128];
    int t = threadIdx.x;
    tile[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = tile[t + offset];
}
"""


@pytest.mark.parametrize(
    "offset, element, where", [(1, 128, "0 bytes past its end"), (-1, -1, "8 bytes before its start")]
)
def test_static_shared_out_of_bounds(offset, element, where):
    x, out = np.arange(256.0), np.zeros(256)
    with pytest.raises(kt.MemcheckError) as info:
        run(TILE, "tiled", x, out, offset, grid=2, block=128)
    msg = str(info.value)
    assert "__shared__ 'tile' (128 elements, 1024 bytes)" in msg and f"element {element} " in msg and where in msg


DYNAMIC = r"""
extern "C" __global__ void reverse(const double* x, double* y, int n) {
    extern __shared__ double buffer[];
    int t = threadIdx.x;
    buffer[t] = x[t];
    __syncthreads();
    y[t] = buffer[n - 1 - t];
}
"""


def test_extern_shared_without_shared_mem():
    x, y = np.arange(256.0), np.zeros(256)
    with pytest.raises(
        kt.MemcheckError,
        match=r"write of 8 bytes to extern __shared__ 'buffer' at byte offset 0, "
        r"but the launch gave no dynamic shared memory \(shared_mem=0\)",
    ):
        run(DYNAMIC, "reverse", x, y, 256, grid=1, block=256)


def test_extern_shared_too_small():
    x, y = np.arange(256.0), np.zeros(256)
    with pytest.raises(
        kt.MemcheckError,
        match=r"extern __shared__ 'buffer' at byte offset 1024, 0 bytes past its end: "
        r"the launch gave shared_mem=1024 bytes",
    ):
        run(DYNAMIC, "reverse", x, y, 256, grid=1, block=256, shared_mem=1024)
    run(DYNAMIC, "reverse", x, y, 256, grid=1, block=256, shared_mem=2048)
    np.testing.assert_array_equal(y, x[::-1])


# ------------------------------------------------------------------ faults named for what they are


@pytest.mark.parametrize("fibers", [False, True])
@pytest.mark.parametrize("a, b", [(7, 0), (-(2**31), -1)])
def test_integer_division_by_zero_is_an_error(fibers, a, b):
    src = r"""
    extern "C" __global__ void divide(int* out, int a, int b) {
        out[threadIdx.x] = a / (b + (int)threadIdx.x * 0);
        %s
    }
    """ % ("__syncthreads();" if fibers else "")
    with pytest.raises(
        kt.KernelFaultError,
        match=r"kernel 'divide' failed in block \(0, 0, 0\), thread \(0, 0, 0\): "
        r"integer division by zero",
    ):
        run(src, "divide", np.zeros(4, np.int32), a, b, n_threads=4)


def test_large_local_arrays_run_in_fiber_mode():
    # CUDA gives a thread 512 KiB of local memory: 136 KB of locals and a 160 KB helper frame
    # run correctly, without touching another fiber's stack.
    src = r"""
    __device__ __noinline__ double helper(int t) {
        volatile double big[20000];
        big[0] = t; big[19999] = 2.0 * t;
        return big[0] + big[19999];
    }
    extern "C" __global__ void locals(double* out) {
        volatile double local[17000];
        int t = threadIdx.x;
        for (int k = 0; k < 17000; k += 1000) local[k] = t;
        __syncthreads();
        double s = 0;
        for (int k = 0; k < 17000; k += 1000) s += local[k];
        out[t] = s + helper(t);
    }
    """
    out = np.zeros(64)
    run(src, "locals", out, n_threads=64, block=64)
    t = np.arange(64.0)
    np.testing.assert_array_equal(out, 17 * t + 3 * t)


def test_a_frame_larger_than_cuda_allows_is_a_stack_overflow():
    src = r"""
    extern "C" __global__ void huge(double* out) {
        volatile double local[90000];   // 720 KB: more than CUDA's 512 KiB per thread
        local[threadIdx.x] = 1.0;
        __syncthreads();
        out[threadIdx.x] = local[threadIdx.x];
    }
    """
    with pytest.raises(kt.KernelFaultError, match=r"thread \(0, 0, 0\): stack overflow: .*512 KiB"):
        run(src, "huge", np.zeros(32), n_threads=32, block=32)


def test_bounds_checked_views_put_their_message_in_the_exception():
    src = r"""
    #include <cunumpy/array_view.cuh>
    extern "C" __global__ void get(Array1D<double> a, double* out) {
        int i = threadIdx.x;
        out[i] = a(i + 1);
    }
    """
    k = CudaKernel(src, "get", debug=True)
    with pytest.raises(kt.EmulationError, match=r"thread \(63, 0, 0\): index 64 out of bounds for axis 0 with size 64"):
        kt.emulate_cuda_kernel(k, np.zeros(64), np.zeros(64), n_threads=64)


# ------------------------------------------------------------------ racecheck

RACES = {
    "missing barrier between a shared write and read": (
        r"""
        extern "C" __global__ void k(const float* x, float* y) {
            __shared__ float s[64];
            int t = threadIdx.x;
            s[t] = x[t];
            y[t] = s[63 - t];      // no __syncthreads() before reading another thread's element
        }
        """,
        r"read-after-write hazard on __shared__ 's' element \d+",
    ),
    "write-after-read in a reduction tree": (
        r"""
        extern "C" __global__ void k(const float* x, float* y) {
            __shared__ float s[64];
            int t = threadIdx.x;
            s[t] = x[t];
            __syncthreads();
            for (int h = 32; h > 0; h >>= 1) {
                if (t < h) s[t] += s[t + h];   // the barrier after this line is missing
            }
            if (t == 0) y[0] = s[0];
        }
        """,
        r"hazard on __shared__ 's' element \d+",
    ),
    "warp-synchronous reduction without __syncwarp": (
        r"""
        extern "C" __global__ void k(const float* x, float* y) {
            __shared__ float s[64];
            int t = threadIdx.x;
            s[t] = x[t];
            __syncthreads();
            if (t < 32) {
                volatile float* v = s;
                v[t] += v[t + 32];
                v[t] += v[t + 16];
                v[t] += v[t + 8];
            }
            __syncthreads();
            if (t == 0) y[0] = s[0];
        }
        """,
        r"each pair in one warp with no __syncwarp\(\) between them",
    ),
    "two blocks writing one global element": (
        r"""
        extern "C" __global__ void k(const float* x, float* y) {
            if (threadIdx.x == 0) y[0] = x[blockIdx.x];
        }
        """,
        r"write-after-write hazard on 'y' element 0 .*in different blocks",
    ),
    "a non-atomic += from many threads": (
        r"""
        extern "C" __global__ void k(const float* x, float* y) {
            y[0] += x[threadIdx.x];
        }
        """,
        r"hazard on 'y' element 0 ",
    ),
}


@pytest.mark.parametrize("case", list(RACES))
def test_racecheck_finds(case):
    src, pattern = RACES[case]
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    with pytest.raises(kt.RacecheckError, match=pattern) as info:
        run(textwrap.dedent(src), "k", x, y, grid=2 if "blocks" in case else 1, block=64, sanitize=("racecheck",))
    msg = str(info.value)
    assert msg.count("thread (") >= 2 and "k.cu:" in msg  # both threads, and source lines


def test_racecheck_accepts_the_correct_versions():
    src = r"""
    extern "C" __global__ void k(const float* x, float* y, float* total) {
        __shared__ float s[64];
        int t = threadIdx.x;
        s[t] = x[blockIdx.x * 64 + t];
        __syncthreads();
        y[blockIdx.x * 64 + t] = s[63 - t];
        __syncthreads();
        for (int h = 32; h > 0; h >>= 1) {
            if (t < h) s[t] += s[t + h];
            __syncthreads();
        }
        if (t < 32) {
            float v = s[t];
            __syncwarp();
            if (t == 0) atomicAdd(total, v);
        }
    }
    """
    x, y, total = np.ones(128, np.float32), np.zeros(128, np.float32), np.zeros(1, np.float32)
    run(src, "k", x, y, total, grid=2, block=64, sanitize="racecheck,initcheck")
    assert total[0] == 128


# ------------------------------------------------------------------ initcheck


def test_initcheck_uninitialised_shared_read():
    src = r"""
    extern "C" __global__ void k(float* y) {
        __shared__ float s[64];
        if (threadIdx.x < 32) s[threadIdx.x] = 1.0f;
        __syncthreads();
        y[threadIdx.x] = s[threadIdx.x];   // threads 32..63 read what nobody wrote
    }
    """
    with pytest.raises(
        kt.InitcheckError,
        match=r"read of 4 bytes of __shared__ 's' element (3[2-9]|[4-5]\d|6[0-3]) "
        r".*which no thread of block 0 wrote in this launch",
    ):
        run(src, "k", np.zeros(64, np.float32), n_threads=64, block=64, sanitize=("initcheck",))


def test_initcheck_shared_values_of_an_earlier_block_are_unwritten():
    src = r"""
    extern "C" __global__ void k(float* y) {
        __shared__ float s[64];
        if (blockIdx.x == 0) s[threadIdx.x] = 1.0f;
        __syncthreads();
        y[blockIdx.x * 64 + threadIdx.x] = s[threadIdx.x];
    }
    """
    with pytest.raises(kt.InitcheckError, match=r"__shared__ 's' element \d+ .*which no thread of block 1 wrote"):
        run(src, "k", np.zeros(128, np.float32), grid=2, block=64, sanitize=("initcheck",))


def test_initcheck_output_read_before_written():
    src = r"""
    extern "C" __global__ void k(const float* x, float* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] += x[i];   // reads out, an output-only argument
    }
    """
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    with pytest.raises(kt.InitcheckError, match=r"output-only argument 'out' element 0 .*before any thread"):
        run(src, "k", x, out, 16, sanitize=("initcheck",), outputs=("out",))
    run(src, "k", x, out, 16, sanitize=("initcheck",))  # not declared output-only: fine


# ------------------------------------------------------------------ switches


def test_sanitize_names_are_checked():
    k = CudaKernel(ONE_PAST, "fill")
    with pytest.raises(ValueError, match="unknown sanitizer 'thread'"):
        kt.emulate_cuda_kernel(k, np.zeros(4), 4, sanitize=("thread",))
    with pytest.raises(TypeError, match="'sanitize' must be a str or a sequence of str"):
        kt.emulate_cuda_kernel(k, np.zeros(4), 4, sanitize=3)
    kt.emulate_cuda_kernel(k, np.zeros(4), 3, sanitize="memcheck")  # accepted, always on


def test_the_environment_variable_switches_racecheck_on():
    code = textwrap.dedent(f"""
        import numpy as np
        import cunumpy.kernel_testing as kt
        from cunumpy.kernels import CudaKernel
        src = {RACES["two blocks writing one global element"][0]!r}
        try:
            kt.emulate_cuda_kernel(CudaKernel(src, "k"), np.ones(4, np.float32), np.zeros(4, np.float32), grid=2, block=4)
        except kt.RacecheckError as exc:
            print("RACE", exc.kind)
    """)
    env = dict(os.environ, CUNUMPY_EMULATION_SANITIZE="racecheck")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "RACE racecheck" in done.stdout
    env["CUNUMPY_EMULATION_SANITIZE"] = "racecheck,bogus"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "CUNUMPY_EMULATION_SANITIZE: unknown sanitizer 'bogus'" in done.stderr


def test_memcheck_off_is_the_explicit_performance_option():
    src = r"""
    extern "C" __global__ void add(const double* x, double* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] += x[i];
    }
    """
    k = CudaKernel(src, "add")
    x, y = np.ones(1000), np.zeros(1000)
    kt.emulate_cuda_kernel(k, x, y, 1000, memcheck=False)
    assert (y == 1).all()
    with pytest.raises(TypeError, match="'memcheck' must be True, False or None"):
        kt.emulate_cuda_kernel(k, x, y, 1000, memcheck="no")


def test_the_fallback_without_shadow_memory_checks_each_access():
    # Where the shadow cannot be mapped (a small address space), every access is checked by a
    # call instead: the same errors, slower.
    code = textwrap.dedent(f"""
        import numpy as np
        import cunumpy._core as core
        import cunumpy.kernel_testing as kt
        from cunumpy.kernels import CudaKernel
        assert not core.emu_shadow_available()
        try:
            kt.emulate_cuda_kernel(CudaKernel({ONE_PAST!r}, "fill"), np.zeros(100), 100, n_threads=128)
        except kt.MemcheckError as exc:
            print(exc)
        y = np.zeros(100)
        kt.emulate_cuda_kernel(CudaKernel({TILE!r}, "tiled"), np.arange(256.0), np.zeros(256), 0, grid=2, block=128)
        print("OK")
    """)
    env = dict(os.environ, CUNUMPY_EMULATION_SHADOW="0")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "write of 8 bytes to 'out'" in done.stdout and "element 100 " in done.stdout and "OK" in done.stdout


# ------------------------------------------------------------------ kernel names


@pytest.mark.parametrize("name", ["w", "args", "exit", "abort", "time"])
def test_kernels_named_like_the_stubs_or_the_c_library_compile(name):
    src = f'extern "C" __global__ void {name}(double* x, int n) {{ int i = threadIdx.x; if (i < n) x[i] = i; }}'
    x = np.zeros(8)
    kt.emulate_cuda_kernel(CudaKernel(src, name), x, 8, n_threads=8)
    np.testing.assert_array_equal(x, np.arange(8.0))


@pytest.mark.parametrize("name", ["std", "main", "sqrt", "printf", "atomicAdd", "cunumpy_emu", "cunumpy_emu_bind"])
def test_kernels_named_like_builtins_are_refused_before_compiling(name):
    src = f'extern "C" __global__ void {name}(double* x) {{ x[0] = 1; }}'
    from cunumpy._emulation import build_count

    before = build_count()
    with pytest.raises(ValueError, match=rf"kernel '{name}': the name '{name}' is taken .* rename the kernel"):
        kt.emulate_cuda_kernel(CudaKernel(src, name), np.zeros(1), n_threads=1)
    assert build_count() == before


# ------------------------------------------------------------------ stopping a launch

SPIN = r"""
extern "C" __global__ void spin(int* flag, int fibers) {
    if (fibers) __syncthreads();
    while (*(volatile int*)flag == 0) { }   // nobody ever sets it
}
"""


@pytest.mark.parametrize("fibers", [0, 1])
def test_a_timeout_stops_a_spinning_kernel(fibers):
    import time

    flag = np.zeros(1, np.int32)
    start = time.monotonic()
    with pytest.raises(
        kt.EmulationTimeoutError,
        match=r"kernel 'spin' timed out: it ran longer than timeout=0.3 s "
        r"and was stopped after .* with 0 of 4 blocks finished",
    ):
        run(SPIN, "spin", flag, fibers, grid=4, block=32, timeout=0.3)
    # The kernel never ends by itself, so returning at all is the behaviour; the bound (200x
    # the timeout) only keeps a broken watchdog from passing, never a busy machine from failing.
    assert time.monotonic() - start < 60
    flag[0] = 1  # the runtime works on
    run(SPIN, "spin", flag, fibers, grid=4, block=32, timeout=60)


def test_the_timeout_variable_and_its_checks(monkeypatch):
    k = CudaKernel(SPIN, "spin")
    flag = np.zeros(1, np.int32)
    monkeypatch.setenv("CUNUMPY_EMULATION_TIMEOUT", "0.2")
    with pytest.raises(kt.EmulationTimeoutError):
        kt.emulate_cuda_kernel(k, flag, 0, grid=1, block=1)
    with pytest.raises(kt.EmulationTimeoutError), kt.emulated_launches():
        from cunumpy._emulation._launch import EmulationHook  # noqa: F401

        kt.emulate_cuda_kernel(k, flag, 0, grid=1, block=1)
    monkeypatch.setenv("CUNUMPY_EMULATION_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="CUNUMPY_EMULATION_TIMEOUT must be a number of seconds, got 'soon'"):
        kt.emulate_cuda_kernel(k, flag, 0, grid=1, block=1)
    monkeypatch.delenv("CUNUMPY_EMULATION_TIMEOUT")
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="'timeout' must be a positive number of seconds"):
            kt.emulate_cuda_kernel(k, flag, 0, grid=1, block=1, timeout=bad)
    with pytest.raises(TypeError, match="'timeout' must be a number of seconds or None"):
        kt.emulate_cuda_kernel(k, flag, 0, grid=1, block=1, timeout="1")


_CHECK_MODES = {
    "memcheck": {},
    # every access a call into the runtime, where the cancel signal does not stop a thread:
    # the runtime's access check is a check point (it was not: these spun on)
    "outlined memcheck": {"CUNUMPY_EMULATION_SHADOW": "0"},
    "racecheck": {"CUNUMPY_EMULATION_SANITIZE": "racecheck"},
}


@pytest.mark.parametrize("mode", list(_CHECK_MODES))
@pytest.mark.parametrize("fibers", [0, 1])
def test_ctrl_c_stops_a_spinning_kernel(fibers, mode):
    # SIGINT while a kernel spins on every worker: KeyboardInterrupt, promptly.
    code = textwrap.dedent(f"""
        import os, signal, threading, time
        import numpy as np
        import cunumpy.kernel_testing as kt
        from cunumpy.kernels import CudaKernel
        k = CudaKernel({SPIN!r}, "spin")
        flag = np.zeros(1, np.int32)
        kt.compile_for_emulation(k)
        stop = threading.Event()
        def press():  # Ctrl-C, and again every 0.5 s until it works, as a user would
            while not stop.wait(0.5):
                os.kill(os.getpid(), signal.SIGINT)
        sender = threading.Thread(target=press)
        sender.start()
        start = time.monotonic()
        try:
            kt.emulate_cuda_kernel(k, flag, {fibers}, grid=8, block=32)
        except KeyboardInterrupt:
            print("INTERRUPTED after %.3f s" % (time.monotonic() - start))
        try:  # a press sent while the sender stopped is ignored
            stop.set()
            sender.join()
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        flag[0] = 1
        kt.emulate_cuda_kernel(k, flag, {fibers}, grid=8, block=32)
        print("RUNS ON")
    """)
    env = dict(os.environ, CUNUMPY_EMULATION_THREADS="2", **_CHECK_MODES[mode])
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # The kernel spins forever, so being interrupted at all is the behaviour; the first SIGINT
    # comes at 0.5 s and the bound is 100x that, so a busy machine never fails it (it did at
    # 1 s). SIGINT is sent again every 0.5 s: a single one that arrives while the launch is
    # being set up (C code without the GIL, before the runtime's SIGINT handler and launch are
    # in place: emu_runtime.c, emu_launch_run) is recorded by Python but never stops the
    # launch; on a loaded machine that window was hit and the child spun until killed.
    found = re.search(r"INTERRUPTED after ([0-9.]+) s", done.stdout)
    assert found and float(found.group(1)) < 60, done.stdout
    assert "RUNS ON" in done.stdout


# ------------------------------------------------------------------ arguments copied and written back


def test_a_const_strided_view_is_never_written_back():
    # The kernel writes x; its second parameter is const and gets a copy of x[::2]: writing
    # that copy back used to undo the kernel's writes.
    src = r"""
    extern "C" __global__ void twice(double* x, const double* every_other, int n) {
        int i = threadIdx.x;
        if (i < n) x[i] = 2.0 * i;
    }
    """
    x = np.arange(6.0)
    run(src, "twice", x, x[::2], 6, n_threads=6)
    np.testing.assert_array_equal(x, [0, 2, 4, 6, 8, 10])


def test_a_written_copy_changes_only_the_elements_the_kernel_wrote():
    src = r"""
    extern "C" __global__ void both(double* x, double* every_other) {
        int i = threadIdx.x;
        if (i == 0) every_other[1] = -1.0;   // x[2] through the copy of x[::2]
        x[5] = 50.0;                        // directly
    }
    """
    x = np.arange(6.0)
    run(src, "both", x, x[::2], n_threads=1)
    np.testing.assert_array_equal(x, [0, 1, -1, 3, 4, 50])


def test_a_read_only_array_for_a_parameter_the_kernel_may_write_is_refused():
    src = r"""
    extern "C" __global__ void scale(double* x, const double* y) {
        if (threadIdx.x < 4) x[threadIdx.x] *= y[threadIdx.x];
    }
    """
    x, y = np.ones(4), np.ones(4)
    x.flags.writeable = False
    with pytest.raises(
        TypeError,
        match=r"argument 0 \(double\* x\): the array is read-only, but the parameter is not "
        r"const",
    ):
        run(src, "scale", x, y, n_threads=4)
    y.flags.writeable = False
    run(src, "scale", np.ones(4), y, n_threads=4)  # a read-only array for a const parameter is fine


def test_a_masked_array_is_refused():
    src = r"""extern "C" __global__ void fill(double* x) { if (threadIdx.x < 4) x[threadIdx.x] = 1; }"""
    with pytest.raises(TypeError, match=r"argument 0 \(double\* x\): a masked array cannot be passed"):
        run(src, "fill", np.ma.masked_array(np.zeros(4), mask=[0, 1, 0, 0]), n_threads=4)


# ------------------------------------------------------------------ fiber stacks and memory mappings


def test_many_workers_keep_the_fiber_stacks_within_the_mapping_limit():
    # 64 workers launching blocks of 1024, 256 and 512 threads: each worker used to keep the
    # largest stack set it ever had, and the third launch ran out of memory mappings.
    code = textwrap.dedent("""
        import numpy as np
        import cunumpy.kernel_testing as kt
        from cunumpy.kernels import CudaKernel
        src = r'''
        extern "C" __global__ void k(int* out) {
            __syncthreads();
            out[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x;
        }'''
        k = CudaKernel(src, "k")
        for block in (1024, 256, 512, 1024):
            out = np.zeros(64 * block, np.int32)
            kt.emulate_cuda_kernel(k, out, grid=64, block=block)
            assert (out.reshape(64, block) == np.arange(block)).all()
        maps = sum(1 for _ in open("/proc/self/maps"))
        print("OK", maps)
    """)
    env = dict(os.environ, CUNUMPY_EMULATION_THREADS="64")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("OK")
    assert int(done.stdout.split()[1]) < 40000


def test_a_block_shape_the_runtime_refuses_names_the_kernel():
    src = r"""extern "C" __global__ void k(double* x) { x[0] = 1; }"""
    with pytest.raises(ValueError, match=r"kernel 'k': block: dimensions are limited to \(1024, 1024, 64\)"):
        run(src, "k", np.zeros(1), grid=1, block=(1, 1, 65))


def test_parity_checks_take_sanitize(fake_cupy):
    # assert_kernels_agree runs the CUDA side in the emulation with the checks asked for.
    import cunumpy as xp
    from cunumpy.kernels import Kernel

    src = RACES["two blocks writing one global element"][0]

    def host(x, y):
        y[0] = x[1]

    kernel = Kernel(host, CudaKernel(textwrap.dedent(src), "k"))

    def make_args(backend, seed):
        return xp.to_cunumpy(np.ones(4, np.float32)), xp.zeros(4, dtype=np.float32)

    kt.assert_kernels_agree(kernel, make_args, grid=2, block=4, atol=1e9)  # no race report without it
    with pytest.raises(kt.RacecheckError, match="write-after-write hazard on 'y' element 0"):
        kt.assert_kernels_agree(kernel, make_args, grid=2, block=4, atol=1e9, sanitize=("racecheck",))


def test_a_child_forked_during_a_launch_starts_with_a_clean_shadow():
    # Another thread forks while a launch has poisoned the redzones of its arrays: the child,
    # where that launch never ends, must not report accesses next to those arrays' memory.
    code = textwrap.dedent(f"""
        import os, threading, time
        import numpy as np
        import cunumpy.kernel_testing as kt
        from cunumpy.kernels import CudaKernel
        spin = CudaKernel({SPIN!r}, "spin")
        raw = np.zeros(1024, np.uint8)
        flag = raw[:4].view(np.int32)
        neighbour = raw[512:].view(np.float64)  # 508 bytes past flag: inside its redzone
        kt.compile_for_emulation(spin)
        t = threading.Thread(target=lambda: kt.emulate_cuda_kernel(spin, flag, 0, grid=1, block=1, timeout=20))
        t.start()
        time.sleep(0.5)                     # the launch runs, its redzones poisoned
        pid = os.fork()
        if pid == 0:
            add = CudaKernel('extern "C" __global__ void add(double* x) {{ x[threadIdx.x] += 1; }}', "add")
            kt.emulate_cuda_kernel(add, neighbour, n_threads=64, block=64)
            os._exit(0 if (neighbour == 1).all() else 3)
        _, status = os.waitpid(pid, 0)
        flag[0] = 1
        t.join()
        print("CHILD", os.waitstatus_to_exitcode(status))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "CHILD 0" in done.stdout
