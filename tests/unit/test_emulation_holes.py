"""The emulator's checks without holes: what a kernel gets wrong is reported, and what a GPU
runs is accepted (early exit before a barrier, neighbouring arguments, the shared-histogram
race, grouped racecheck reports, launch shapes, timeouts, warp masks)."""

import os

import numpy as np
import pytest
from _emulation_support import requires_compiler

import cunumpy.kernel_testing as kt
from cunumpy.kernels import CudaKernel

pytestmark = requires_compiler


def run(source, name, *args, **launch):
    return kt.emulate_cuda_kernel(CudaKernel(source, name), *args, **launch)


# ------------------------------------------------------------------ early exit before a barrier

EARLY_EXIT = r"""
extern "C" __global__ void block_sums(const double* x, double* sums, int n) {
    __shared__ double part[128];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;                       // the common early exit
    part[threadIdx.x] = x[i];
    __syncthreads();                          // exited threads count as arrived
    if (threadIdx.x == 0) {
        const int live = min((int)blockDim.x, n - (int)(blockIdx.x * blockDim.x));
        double s = 0.0;
        for (int k = 0; k < live; ++k) s += part[k];
        sums[blockIdx.x] = s;
    }
}
"""


@pytest.mark.parametrize("sanitize", [None, "racecheck"])
def test_threads_that_exit_before_a_barrier_count_as_arrived(sanitize):
    n = 300
    x = np.arange(n, dtype=np.float64)
    sums = np.zeros(3)
    kw = {"sanitize": sanitize} if sanitize else {}
    run(EARLY_EXIT, "block_sums", x, sums, n, grid=3, block=128, **kw)
    np.testing.assert_array_equal(sums, [x[:128].sum(), x[128:256].sum(), x[256:].sum()])


def test_syncthreads_count_after_an_early_exit_counts_the_live_threads():
    src = r"""
    extern "C" __global__ void count(int* out, int n) {
        if ((int)threadIdx.x >= n) return;
        const int c = __syncthreads_count(1);
        if (threadIdx.x == 0) out[0] = c;
    }
    """
    out = np.zeros(1, np.int32)
    run(src, "count", out, 37, grid=1, block=64)
    assert out[0] == 37


def test_threads_alive_at_two_different_barriers_are_divergence():
    src = r"""
    extern "C" __global__ void split(int* x) {
        if (threadIdx.x & 1) { x[threadIdx.x] = 1; __syncthreads(); }
        else { __syncthreads(); x[threadIdx.x] = 2; }
    }
    """
    with pytest.raises(
        RuntimeError, match=r"barrier divergence: .*line 3 .*line 4|barrier divergence: .*line 4 .*line 3"
    ):
        run(src, "split", np.zeros(64, np.int32), grid=1, block=64)


def test_a_thread_waiting_while_another_waits_in_a_warp_operation_is_still_an_error():
    src = r"""
    extern "C" __global__ void stuck(int* x) {
        if (threadIdx.x == 0) __syncthreads();
        else x[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
    }
    """
    with pytest.raises(RuntimeError, match="inconsistent warp operations or barriers"):
        run(src, "stuck", np.zeros(32, np.int32), grid=1, block=32)


# ------------------------------------------------------------------ neighbouring arguments

NEIGHBOUR = r"""
extern "C" __global__ void poke(double* a, double* b, int at) {
    if (threadIdx.x == 0 && blockIdx.x == 0) a[at] = 99.0;   // past the end of a
}
"""


def _neighbours():
    """Two small arrays the way NumPy usually places them: b a few hundred bytes after a."""
    backing = np.zeros(300)
    a, b = backing[:100], backing[102:202]
    return backing, a, b


@pytest.mark.parametrize("mode", ["shadow", "no shadow", "fake cupy"])
def test_an_access_past_one_argument_into_its_neighbour_names_the_first(mode):
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import numpy as np
        import cunumpy.kernel_testing as kt
        from cunumpy.kernels import CudaKernel
        src = {NEIGHBOUR!r}
        fake = {mode == "fake cupy"!r}
        if fake:
            import cupy
            kernel = cupy.RawKernel(src, "poke")
        caught = tried = 0
        # where NumPy puts small arrays: close together
        pool = [cupy.zeros(100) if fake else np.zeros(100) for _ in range(40)]
        address = (lambda x: x.data.ptr) if fake else (lambda x: x.__array_interface__["data"][0])
        for a in pool:
            for b in pool:
                gap = address(b) - address(a)
                if not 800 <= gap < 16384 or tried == 10:
                    continue
                tried += 1
                try:
                    if fake:
                        kernel((1,), (32,), (a, b, np.int32(gap // 8)))
                    else:
                        kt.emulate_cuda_kernel(CudaKernel(src, "poke"), a, b, gap // 8, grid=1, block=32)
                except kt.MemcheckError as e:
                    assert "'a'" in str(e) and "past its end" in str(e), str(e)
                    caught += 1
                assert int((b != 0).sum()) == 0, "b was changed"
        assert tried == 10, tried
        print("caught", caught)
        """
    )
    env = dict(os.environ, CUNUMPY_EMULATION_SHADOW="0" if mode == "no shadow" else "1")
    if mode == "fake cupy":
        env["CUNUMPY_FAKE_CUPY"] = "1"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "caught 10" in done.stdout


@pytest.mark.parametrize("at", [102, 150, 201])
def test_an_access_that_lands_in_a_neighbouring_argument_is_caught(at):
    backing, a, b = _neighbours()
    with pytest.raises(kt.MemcheckError, match=rf"write of 8 bytes to 'a' .*element {at} .*past its end"):
        run(NEIGHBOUR, "poke", a, b, at, grid=1, block=32)
    assert (b == 0).all() and (backing == 0).all()


def test_neighbouring_arguments_get_their_writes_back():
    src = r"""
    extern "C" __global__ void two(double* a, const double* b, double* c, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) { a[i] = b[i] + 1.0; c[i] = 2.0 * b[i]; }
    }
    """
    backing = np.zeros(330)
    a, b, c = backing[:100], backing[110:210], backing[220:320]
    b[:] = np.arange(100)
    run(src, "two", a, b, c, 100)
    np.testing.assert_array_equal(a, np.arange(100) + 1.0)
    np.testing.assert_array_equal(c, 2.0 * np.arange(100))
    assert (backing[100:110] == 0).all() and (backing[210:220] == 0).all() and (backing[320:] == 0).all()


def test_the_same_array_twice_stays_shared():
    src = r"""
    extern "C" __global__ void inplace(const double* x, double* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = 2.0 * x[i];
    }
    """
    x = np.arange(50.0)
    run(src, "inplace", x, x, 50)
    np.testing.assert_array_equal(x, 2.0 * np.arange(50.0))


# ------------------------------------------------------------------ the shared-histogram race

HISTOGRAM = r"""
extern "C" __global__ void histogram(const int* keys, unsigned int* counts, int n) {
    __shared__ unsigned int bins[16];
    const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    if (t < 16) bins[t] = 0;
    __syncthreads();
    if (i < n) atomicAdd(&bins[keys[i] & 15], 1u);
    BARRIER
    if (t < 16) atomicAdd(&counts[t], bins[t]);
}
"""


def test_racecheck_reports_a_plain_read_of_a_shared_histogram_that_others_still_update():
    keys = np.arange(1024, dtype=np.int32) * 7
    counts = np.zeros(16, np.uint32)
    src = HISTOGRAM.replace("BARRIER", "// the __syncthreads() before the merge is missing")
    with pytest.raises(kt.RacecheckError, match=r"hazard on __shared__ 'bins' element \d+") as info:
        run(src, "histogram", keys, counts, 1024, grid=4, block=256, sanitize="racecheck")
    msg = str(info.value)
    assert "histogram.cu:7" in msg and "histogram.cu:9" in msg  # the atomic and the plain read
    assert "__syncthreads()" in msg


def test_racecheck_accepts_the_histogram_with_its_barrier_and_a_cas_loop():
    keys = np.arange(1024, dtype=np.int32) * 7
    counts = np.zeros(16, np.uint32)
    src = HISTOGRAM.replace("BARRIER", "__syncthreads();")
    run(src, "histogram", keys, counts, 1024, grid=4, block=256, sanitize="racecheck")
    np.testing.assert_array_equal(counts, np.bincount(keys & 15, minlength=16))
    cas = r"""
    extern "C" __global__ void fmax_all(const float* x, float* out, int n) {
        __shared__ float best;
        if (threadIdx.x == 0) best = -1e30f;
        __syncthreads();
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            int* p = (int*)&best;
            int old = *p;                      // the plain read every CAS loop starts with
            while (__int_as_float(old) < x[i]) {
                const int seen = atomicCAS(p, old, __float_as_int(x[i]));
                if (seen == old) break;
                old = seen;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) out[blockIdx.x] = best;
    }
    """
    x = np.arange(512, dtype=np.float32)
    out = np.zeros(2, np.float32)
    run(cas, "fmax_all", x, out, 512, grid=2, block=256, sanitize="racecheck")
    np.testing.assert_array_equal(out, [255, 511])


# ------------------------------------------------------------------ grouped racecheck reports


def test_racecheck_groups_hazards_by_variable_kind_and_lines_largest_first():
    src = r"""
    extern "C" __global__ void reverse(const float* x, float* y) {
        __shared__ float s[256];
        const int t = threadIdx.x;
        s[t] = x[blockIdx.x * 256 + t];
        // the __syncthreads() is missing
        y[blockIdx.x * 256 + t] = s[255 - t];
    }
    """
    x, y = np.ones(2048, np.float32), np.zeros(2048, np.float32)
    with pytest.raises(kt.RacecheckError) as info:
        run(src, "reverse", x, y, grid=8, block=256, sanitize="racecheck")
    msg = str(info.value)
    head, *groups = msg.split("\n  - ")
    assert "in 2 group(s)" in head and len(groups) == 2, msg
    counts = [int(g.split(" times)")[0].rsplit("(", 1)[1]) for g in groups]
    assert counts == sorted(counts, reverse=True) and sum(counts) == int(head.split("found ")[1].split(" ")[0])
    assert all("hazard on __shared__ 's' element" in g and "reverse.cu:5" in g and "reverse.cu:7" in g for g in groups)
    # the pairs span several warps: the fix is a barrier, not __syncwarp()
    assert "__syncwarp" not in msg and msg.count("with no __syncthreads() between them") == 2


def test_racecheck_hints_syncwarp_only_when_every_pair_is_in_one_warp():
    src = r"""
    extern "C" __global__ void shift(const float* x, float* y) {
        __shared__ float s[64];
        const int t = threadIdx.x;
        s[t] = x[t];
        y[t] = s[t ^ 1];        // a neighbour in the same warp, no __syncwarp()
    }
    """
    with pytest.raises(kt.RacecheckError, match=r"each pair in one warp with no __syncwarp\(\)"):
        run(src, "shift", np.ones(64, np.float32), np.zeros(64, np.float32), grid=1, block=64, sanitize="racecheck")


# ------------------------------------------------------------------ smaller holes


@pytest.mark.parametrize("shadow", ["1", "0"])
def test_a_read_from_an_empty_array_names_the_element_size(shadow, monkeypatch):
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import numpy as np
        import cunumpy.kernel_testing as kt
        from cunumpy.kernels import CudaKernel
        src = 'extern "C" __global__ void rd(const double* x, double* y) { y[0] = x[3]; }'
        try:
            kt.emulate_cuda_kernel(CudaKernel(src, "rd"), np.zeros(0), np.zeros(1), grid=1, block=1)
        except kt.MemcheckError as e:
            print(e)
        """
    )
    env = dict(os.environ, CUNUMPY_EMULATION_SHADOW=shadow)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert "read of 8 bytes from 'x' (float64, shape 0, 0 elements) at element 3" in done.stdout, (
        done.stdout + done.stderr
    )


SPIN_FREE = r"""
extern "C" __global__ void fill(double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.0;
}
"""


def test_a_launch_that_finished_never_times_out():
    # The watcher may fire before the launch ends: a launch stopped in time says how many of
    # its blocks finished (fewer than all); one whose blocks all finished is a success (it
    # raised, saying "1 of 1 blocks finished").
    import re

    for _ in range(30):
        out = np.zeros(64)
        try:
            run(SPIN_FREE, "fill", out, 64, grid=1, block=64, timeout=1e-9)
        except kt.EmulationTimeoutError as error:
            done, total = map(int, re.search(r"with (\d+) of (\d+) blocks finished", str(error)).groups())
            assert done < total, str(error)
        else:
            assert (out == 1.0).all()


def test_an_infinite_timeout_is_no_limit(monkeypatch):
    import math

    out = np.zeros(8)
    run(SPIN_FREE, "fill", out, 8, timeout=math.inf)
    monkeypatch.setenv("CUNUMPY_EMULATION_TIMEOUT", "inf")
    run(SPIN_FREE, "fill", out, 8)
    assert (out == 1.0).all()
    with pytest.raises(ValueError, match="'timeout' must be a positive number of seconds"):
        run(SPIN_FREE, "fill", out, 8, timeout=-math.inf)


def test_an_explicit_empty_grid_is_an_error_and_an_inferred_one_launches_nothing():
    out = np.zeros(8)
    with pytest.raises(ValueError, match=r"grid \(0,\): every dimension must be at least 1"):
        run(SPIN_FREE, "fill", out, 8, grid=0, block=32)
    with pytest.raises(ValueError, match=r"grid \(2, 0\)"):
        run(SPIN_FREE, "fill", out, 8, grid=(2, 0), block=32)
    with pytest.raises(ValueError, match="block"):
        run(SPIN_FREE, "fill", out, 8, grid=1, block=(32, 0))
    run(SPIN_FREE, "fill", out, 0, n_threads=0)  # nothing to do: a no-op, as documented
    run(SPIN_FREE, "fill", np.zeros(0), 0)
    assert (out == 0).all()


@pytest.mark.parametrize(
    "call, reader, source",
    [
        ("__shfl_sync(0x0000ffffu, v, 20)", 0, 20),
        ("__shfl_down_sync(0x0000ffffu, v, 8)", 8, 16),
        ("__shfl_xor_sync(0x0000ffffu, v, 16)", 0, 16),
    ],
)
def test_a_shuffle_reading_a_lane_outside_its_mask_is_an_error(call, reader, source):
    src = rf"""
    extern "C" __global__ void k(int* y) {{
        const int v = threadIdx.x + 100;
        if (threadIdx.x < 16) y[threadIdx.x] = {call};
    }}
    """
    with pytest.raises(
        RuntimeError, match=rf"lane {reader} \(thread .*\) reads lane {source}, which the mask does not"
    ):
        run(src, "k", np.zeros(32, np.int32), grid=1, block=32)
    # a source outside the lane's segment gives the lane its own value, as on a GPU
    ok = src.replace(call, "__shfl_down_sync(0x0000ffffu, v, 8, 8)")
    y = np.zeros(32, np.int32)
    run(ok, "k", y, grid=1, block=32)
    np.testing.assert_array_equal(y[:16], np.arange(100, 116))


# ------------------------------------------------------------------ the checker's own memory

SHADOW_WRITE = r"""
extern "C" __global__ void poison(double* out) {
    // the shadow byte of out[0], written through a pointer made from an integer
    volatile unsigned char* s = (volatile unsigned char*)(0x200000000000ull + ((unsigned long long)out >> 3));
    if (threadIdx.x == 0) *s = 0xfa;
}
"""


@pytest.mark.parametrize("sanitize", [None, "racecheck"])
def test_a_write_into_the_checks_shadow_is_a_fault_and_leaves_nothing_behind(sanitize):
    out = np.zeros(64)
    kw = {"sanitize": sanitize} if sanitize else {}
    with pytest.raises(kt.KernelFaultError, match="inside the memory checks' shadow"):
        run(SHADOW_WRITE, "poison", out, grid=1, block=32, **kw)
    # a later, correct launch on the same memory sees no poison
    run(SPIN_FREE, "fill", out, 64, grid=1, block=64)
    run(SPIN_FREE, "fill", out, 64, grid=1, block=64, sanitize="racecheck")
    assert (out == 1.0).all()


SPIN = r"""
extern "C" __global__ void spin(int* flag, int fibers) {
    if (fibers) __syncthreads();
    while (*(volatile int*)flag == 0) { }   // nobody ever sets it
}
"""


@pytest.mark.parametrize("fibers", [0, 1])
def test_a_signal_handler_that_raises_stops_a_launch_as_ctrl_c_does(fibers):
    import re
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        f"""
        import signal, time
        import numpy as np
        import cunumpy.kernel_testing as kt
        from cunumpy.kernels import CudaKernel

        class Alarm(Exception):
            pass

        def on_alarm(signum, frame):
            raise Alarm()

        k = CudaKernel({SPIN!r}, "spin")
        flag = np.zeros(1, np.int32)
        kt.compile_for_emulation(k)
        signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(1)
        start = time.monotonic()
        try:
            kt.emulate_cuda_kernel(k, flag, {fibers}, grid=8, block=32, timeout=200)
        except Alarm:
            print("ALARM after %.3f s" % (time.monotonic() - start))
        flag[0] = 1
        kt.emulate_cuda_kernel(k, flag, {fibers}, grid=8, block=32)
        print("RUNS ON")
        """
    )
    env = dict(os.environ, CUNUMPY_EMULATION_THREADS="2")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # was: the handler ran when timeout= (200 s) stopped the launch; the bound is 60x the alarm
    found = re.search(r"ALARM after ([0-9.]+) s", done.stdout)
    assert found and float(found.group(1)) < 60, done.stdout + done.stderr
    assert "RUNS ON" in done.stdout
