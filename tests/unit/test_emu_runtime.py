"""The emulator's C runtime through cunumpy._core.emu_launch: kernels from
tests/c/test_emu_kernels.cpp compiled here into a shared library with the prelude (the same
ABI the emulation layer uses), loaded with ctypes and launched directly."""

import ctypes
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import cunumpy as xp
from cunumpy import _core
from cunumpy._reference import emu_warp

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "..", "c", "test_emu_kernels.cpp")


def _compiler():
    cxx = os.environ.get("CXX") or "c++"
    return shutil.which(cxx)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cxx = _compiler()
    if cxx is None:
        pytest.skip("no C++ compiler")
    import cunumpy.cuda

    prelude_dir = os.path.join(os.path.dirname(xp.__file__), "_emulation", "include")
    out = tmp_path_factory.mktemp("emu") / "kernels.so"
    cmd = [
        cxx,
        "-std=c++17",
        "-O2",
        "-fPIC",
        "-shared",
        "-Wno-unknown-pragmas",
        "-I",
        prelude_dir,
        "-I",
        cunumpy.cuda.cuda_include_dir(),
        KERNELS,
        "-o",
        str(out),
    ]
    # The sanitizer run preloads ASan into this process; the compiler must not inherit it.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return ctypes.CDLL(str(out))


def addr(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


class Args:
    """The kernelParams array: one pointer per parameter to a value kept alive here."""

    def __init__(self, *values):
        self.values = [
            v if isinstance(v, (ctypes._SimpleCData, ctypes.Structure)) else ctypes.c_void_p(v.ctypes.data)
            for v in values
        ]
        self.array = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in self.values])


def launch(lib, kernel, grid, block, args=None, **kw):
    kw.setdefault("kernel_name", kernel)
    _core.emu_launch(
        addr(lib, "cunumpy_emu_bind"),
        addr(lib, f"cunumpy_emu_thread_{kernel}"),
        addr(lib, f"cunumpy_emu_block_{kernel}"),
        grid,
        block,
        None if args is None else args.array,
        **kw,
    )


def test_abi_and_switch_figures(lib):
    assert lib.cunumpy_emu_abi_version() == _core.EMU_ABI_VERSION == 3
    assert _core.EMU_CONTEXT_SWITCH in ("x86-64 assembly", "aarch64 assembly", "ucontext")
    fiber_ns, uc_ns = _core.emu_switch_benchmark(20000)
    assert fiber_ns > 0.0 and uc_ns >= 0.0
    with pytest.raises(ValueError, match="'n'"):
        _core.emu_switch_benchmark(0)


@pytest.mark.parametrize("fibers", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
def test_axpy_matches_numpy(lib, fibers, workers):
    n = 10007
    x = np.arange(n, dtype=np.float64)
    y = np.ones(n)
    want = 2.5 * x + y
    launch(
        lib,
        "axpy",
        ((n + 127) // 128, 1, 1),
        (128, 1, 1),
        Args(ctypes.c_double(2.5), x, y, ctypes.c_longlong(n)),
        fibers=fibers,
        workers=workers,
    )
    np.testing.assert_array_equal(y, want)


def test_block_sum_with_shared_memory_barriers_and_shuffles(lib):
    n = 50000
    x = (np.arange(n) % 13).astype(np.float64)
    out = np.zeros(1)
    launch(lib, "block_sum", ((n + 255) // 256,), (256,), Args(x, out, ctypes.c_longlong(n)), fibers=True, workers=2)
    assert out[0] == x.sum()


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
@pytest.mark.parametrize(
    "mask,width", [(0xFFFFFFFF, 32), (0xFFFFFFFF, 8), (0x0000FFFF, 16), (0x5A5A5A5A, 4), (0x00000001, 32)]
)
def test_shuffles_agree_with_reference(lib, kind, mask, width):
    out = np.zeros(64, dtype=np.int64)
    arg = {0: 7, 1: 3, 2: 3, 3: 5}[kind]
    values = [1000 + lane for lane in range(32)]
    try:
        emu_warp.shfl(kind, mask, values, [arg] * 32, width)
    except RuntimeError as error:  # a lane reads one the mask does not name: undefined on a GPU
        reader, source = [int(word) for word in str(error).split(",")[0].split() if word.isdigit()]
        with pytest.raises(RuntimeError, match=rf"lane {reader} \(thread .*\) reads lane {source}, which the mask"):
            launch(
                lib,
                "shfl",
                (1,),
                (64,),
                Args(
                    ctypes.c_int(kind),
                    ctypes.c_uint(mask),
                    ctypes.c_int(arg),
                    ctypes.c_int(width),
                    ctypes.c_int(2),
                    out,
                ),
                fibers=True,
            )
        return
    launch(
        lib,
        "shfl",
        (1,),
        (64,),
        Args(ctypes.c_int(kind), ctypes.c_uint(mask), ctypes.c_int(arg), ctypes.c_int(width), ctypes.c_int(2), out),
        fibers=True,
    )
    for warp in range(2):
        values = [1000 + warp * 32 + lane for lane in range(32)]
        want = emu_warp.shfl(kind, mask, values, [arg] * 32, width)
        for lane in range(32):
            assert out[warp * 32 + lane] == want.get(lane, -1), (warp, lane)


def test_ballot_and_partial_last_warp(lib):
    out = np.zeros(4 * 64, dtype=np.uint32)
    mask = 0x0F0F00FF
    launch(lib, "vote", (1,), (64,), Args(ctypes.c_uint(mask), out), fibers=True)
    want = emu_warp.ballot(mask, [lane % 3 == 0 for lane in range(32)])
    lanes = [t for t in range(64) if mask >> (t & 31) & 1]
    assert all(out[4 * t] == want for t in lanes)
    # a partial warp (40 threads: the second has 8 lanes) shuffles within its present lanes
    res = np.zeros(40, dtype=np.int64)
    launch(
        lib,
        "shfl",
        (1,),
        (40,),
        Args(ctypes.c_int(2), ctypes.c_uint(0xFF), ctypes.c_int(1), ctypes.c_int(8), ctypes.c_int(0), res),
        fibers=True,
    )
    want2 = emu_warp.shfl(2, 0xFF, [1032 + lane for lane in range(8)], [1] * 8, 8)
    assert [res[32 + lane] for lane in range(8)] == [want2[lane] for lane in range(8)]


def test_syncthreads_count_and_or(lib):
    out = np.zeros(5 * 70, dtype=np.int32)
    launch(lib, "sync_count", (1,), (7, 5, 2), Args(out), fibers=True)
    count = emu_warp.syncthreads_count([t % 3 == 0 for t in range(70)])
    assert (out.reshape(70, 5) == [count, 1, 0, 1, 0]).all()


def test_parallel_blocks_atomics_exact(lib, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_THREADS", "3")
    assert _core.emu_workers() == 3
    blocks, threads = 300, 64
    count = blocks * threads
    cells = [
        np.zeros(1, np.uint64),
        np.array([-1], np.int32),
        np.array([1], np.int32),
        np.zeros(1, np.uint32),
        np.zeros(1, np.float64),
        np.zeros(1, np.int64),
        np.zeros(1, np.uint32),
    ]
    launch(lib, "atomics", (blocks,), (threads,), Args(*cells))
    assert int(cells[0][0]) == count * (count - 1) // 2
    assert cells[3][0] == count and cells[4][0] == count and cells[6][0] == count
    assert int(cells[5][0]) == -(count * (count - 1) // 2)


def test_shipped_headers_agree_with_python_twins(lib):
    n = 200
    u = np.zeros(n)
    keys = np.zeros(n, dtype=np.uint64)
    a = np.zeros((n, 2))
    a[:, 0] = np.arange(n)

    class View(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.c_longlong * 2), ("strides", ctypes.c_longlong * 2)]

    view = View(a.ctypes.data, (n, 2), (2, 1))
    launch(lib, "headers", (4,), (64,), Args(u, keys, view, ctypes.c_longlong(n)))
    np.testing.assert_array_equal(u, xp.rng.philox_uniform(1234, 5, np.arange(n, dtype=np.uint64)))
    i = np.arange(n, dtype=np.uint64)
    np.testing.assert_array_equal(keys, xp.algorithms.morton_encode(i, n - 1 - i))
    np.testing.assert_array_equal(a[:, 1], 2.0 * np.arange(n))


@pytest.mark.parametrize("fibers", [False, True])
def test_trap_names_kernel_block_and_thread(lib, fibers):
    with pytest.raises(RuntimeError, match=r"'trap_at' failed in block \(7, 0, 0\), thread \(3, 0, 0\): __trap"):
        launch(lib, "trap_at", (40,), (16,), Args(ctypes.c_int(7), ctypes.c_int(3)), fibers=fibers, workers=2)
    with pytest.raises(RuntimeError, match="assertion `v == 42` failed"):
        launch(lib, "assert_fail", (1,), (4,), Args(ctypes.c_int(1)))


@pytest.mark.parametrize(
    "kernel,grid,block,args,pattern",
    [
        ("barrier_divergence", (2,), (64,), (ctypes.c_int(1),), "barrier divergence"),
        ("barrier_divergence", (2,), (64,), (ctypes.c_int(62),), "barrier divergence"),
        ("deadlock", (1,), (32,), (), "inconsistent warp operations or barriers"),
        ("mask_mismatch", (2,), (32,), (), "inconsistent warp operations"),
        ("mask_exited", (1,), (32,), (), "exited"),
        ("mask_absent", (1,), (20,), (), "do not exist"),
    ],
)
def test_divergence_is_an_error_not_a_hang(lib, kernel, grid, block, args, pattern):
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=f"'{kernel}' failed in block \\(0, 0, 0\\).*{pattern}"):
        launch(lib, kernel, grid, block, Args(*args) if args else None, fibers=True, workers=1)
    assert time.monotonic() - t0 < 60.0  # found, not waited out: milliseconds expected


def test_collective_in_loop_mode_is_an_error(lib):
    a = np.zeros(4, np.int32)
    with pytest.raises(RuntimeError, match="needs fiber mode"):
        launch(lib, "reverse", (1,), (4,), Args(a, a.copy()))


@pytest.mark.parametrize("fibers", [False, True])
def test_checked_segfault_is_an_error_and_the_process_lives(lib, fibers):
    with pytest.raises(RuntimeError, match=r"'null_deref' failed in block \(\d+, 0, 0\).*null pointer") as info:
        launch(
            lib,
            "null_deref",
            (4,),
            (32,),
            Args(ctypes.c_void_p(0), ctypes.c_int(5)),
            fibers=fibers,
            checked=True,
            workers=2,
        )
    assert info.value.kind == "fault"
    if fibers:
        buf = np.zeros(32, np.int32)
        # Recursion runs into the fiber stack's guard: the error says stack overflow and names
        # the thread whose stack it was.
        with pytest.raises(RuntimeError, match=r"thread \(\d+, 0, 0\): stack overflow") as info:
            launch(lib, "overflow", (1,), (32,), Args(buf), fibers=True, checked=True)
        assert info.value.kind == "fault"
    test_axpy_matches_numpy(lib, fibers, 2)


def test_concurrent_launches_from_threads(lib):
    n = 20000
    results, errors = {}, []

    def work(k):
        try:
            x = np.full(n, float(k))
            y = np.zeros(n)
            for _ in range(5):
                launch(
                    lib,
                    "axpy",
                    ((n + 255) // 256,),
                    (256,),
                    Args(ctypes.c_double(1.0), x, y, ctypes.c_longlong(n)),
                    fibers=bool(k % 2),
                )
            results[k] = y
        except Exception as exc:  # noqa: BLE001  a worker thread's failure is asserted on below  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(4):
        assert (results[k] == 5.0 * k).all()


def test_argument_errors_name_the_argument(lib):
    bind = addr(lib, "cunumpy_emu_bind")
    tfn = addr(lib, "cunumpy_emu_thread_axpy")
    bfn = addr(lib, "cunumpy_emu_block_axpy")
    ok = Args(ctypes.c_double(1.0), np.zeros(1), np.zeros(1), ctypes.c_longlong(1))
    with pytest.raises(TypeError, match="'bind'"):
        _core.emu_launch("x", tfn, bfn, (1,), (1,), ok.array)
    with pytest.raises(ValueError, match="'bind'"):
        _core.emu_launch(-1, tfn, bfn, (1,), (1,), ok.array)
    with pytest.raises(ValueError, match="'bind'"):
        _core.emu_launch(0, tfn, bfn, (1,), (1,), ok.array)
    with pytest.raises(ValueError, match="'block_fn'"):
        _core.emu_launch(bind, tfn, 0, (1,), (1,), ok.array)
    with pytest.raises(ValueError, match="'thread_fn'"):
        _core.emu_launch(bind, 0, bfn, (1,), (1,), ok.array, fibers=True)
    with pytest.raises(TypeError, match="'grid'"):
        _core.emu_launch(bind, tfn, bfn, 3, (1,), ok.array)
    with pytest.raises(ValueError, match="'grid'"):
        _core.emu_launch(bind, tfn, bfn, (1, 2, 3, 4), (1,), ok.array)
    with pytest.raises(ValueError, match="'grid'"):
        _core.emu_launch(bind, tfn, bfn, (0,), (1,), ok.array)
    with pytest.raises(TypeError, match="'block'"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1.5,), ok.array)
    with pytest.raises(ValueError, match="block"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1025,), ok.array)
    with pytest.raises(ValueError, match="block"):
        _core.emu_launch(bind, tfn, bfn, (1,), (64, 32), ok.array)
    with pytest.raises(ValueError, match="grid"):
        _core.emu_launch(bind, tfn, bfn, (1, 70000), (1,), ok.array)
    with pytest.raises(TypeError, match="'args'"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), [1, 2])
    with pytest.raises(ValueError, match="'args'"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), b"abc")
    with pytest.raises(ValueError, match="'shared_mem'"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), ok.array, shared_mem=-1)
    with pytest.raises(ValueError, match="'workers'"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), ok.array, workers=-2)
    with pytest.raises(TypeError, match="'workers'"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), ok.array, workers="2")
    with pytest.raises(TypeError, match="'shared_mem'"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), ok.array, shared_mem=1.0)
    with pytest.raises(ValueError, match="'shared_mem'"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), ok.array, shared_mem=2**70)
    with pytest.raises(TypeError, match="kernel_name"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), ok.array, kernel_name=b"k")
    with pytest.raises(ValueError, match="'kernel_name'"):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), ok.array, kernel_name="\udc80")
    with pytest.raises(TypeError):
        _core.emu_launch(bind, tfn, bfn, (1,), (1,), ok.array, 0)  # shared_mem is keyword-only


def test_threads_variable_must_be_positive(lib, monkeypatch):
    ok = Args(ctypes.c_double(1.0), np.zeros(1), np.zeros(1), ctypes.c_longlong(1))
    for bad in ("0", "-3", "two", "1.5"):
        monkeypatch.setenv("CUNUMPY_EMULATION_THREADS", bad)
        with pytest.raises(ValueError, match="CUNUMPY_EMULATION_THREADS"):
            _core.emu_workers()
        with pytest.raises(ValueError, match="CUNUMPY_EMULATION_THREADS"):
            launch(lib, "axpy", (1,), (1,), ok)
        launch(lib, "axpy", (1,), (1,), ok, workers=1)  # an explicit count does not read it
    monkeypatch.delenv("CUNUMPY_EMULATION_THREADS")
    assert 1 <= _core.emu_workers() <= 256


def test_hostile_index_in_shape(lib):
    shape = [1, 1, 1]

    class Hostile:
        def __index__(self):
            shape.clear()  # the runtime reads a snapshot, so this cannot pull items away
            return 4

    y = np.zeros(4)
    shape[0] = Hostile()
    launch(lib, "axpy", (1,), shape, Args(ctypes.c_double(1.0), np.ones(4), y, ctypes.c_longlong(4)))
    assert (y == 1.0).all()


@pytest.mark.nosan  # the child process would load the sanitizer build without its runtime
def test_workers_start_lazily_and_are_reused(lib):
    code = f"""
import ctypes, os, numpy as np, cunumpy._core as c
def tasks(): return len(os.listdir('/proc/self/task'))
lib = ctypes.CDLL({lib._name!r})
a = lambda n: ctypes.cast(getattr(lib, n), ctypes.c_void_p).value
x, y = np.ones(64), np.zeros(64)
vals = [ctypes.c_double(1.0), ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_longlong(64)]
args = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in vals])
counts = [tasks()]
for w in (3, 3, 2, 3):
    c.emu_launch(a('cunumpy_emu_bind'), a('cunumpy_emu_thread_axpy'), a('cunumpy_emu_block_axpy'), (8,), (8,), args,
                 workers=w)
    counts.append(tasks())
print(counts, y.sum())
"""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    counts, total = out.stdout.split("]")
    counts = [int(v) for v in counts.strip(" [").split(",")]
    base = counts[0]
    assert counts[1:] == [base + 2] * 4  # two pool threads beside the caller, started once
    assert float(total) == 4 * 64.0


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.nosan  # AddressSanitizer's quarantine keeps freed memory on purpose
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_repeated_launches_and_errors_keep_memory_flat(lib):
    x, y = np.ones(64), np.zeros(64)
    ok = Args(ctypes.c_double(1.0), x, y, ctypes.c_longlong(64))
    trap = Args(ctypes.c_int(0), ctypes.c_int(1))

    def run(n):
        for k in range(n):
            launch(lib, "axpy", (2,), (32,), ok, fibers=bool(k & 1))
            with pytest.raises(RuntimeError):
                launch(lib, "trap_at", (2,), (32,), trap, fibers=bool(k & 2))

    run(300)
    refs = sys.getrefcount(ok.array)
    start = _rss_bytes()
    run(3000)
    grown = _rss_bytes() - start
    assert grown < 4 * 1024 * 1024, f"RSS grew by {grown} bytes"
    after = sys.getrefcount(ok.array)  # outside the assert: its rewriting holds references
    assert after == refs
