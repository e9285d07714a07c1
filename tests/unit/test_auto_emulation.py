"""Launches emulate by themselves on the fake CuPy (issue 23, item 1); the emulation hook is
per thread and per context (issue 22, item 3); the emulator's workers follow ``xp.threads``
(issue 23, item 4).

The fake-CuPy tests run in this process under ``make test-fake``; a plain run re-runs them
in a fake-CuPy child.
"""

import contextvars
import os
import subprocess
import sys
import textwrap
import threading
import types

import numpy as np
import pytest
from _emulation_support import requires_compiler
from _fake_support import rerun_under_fake_cupy

import cunumpy as xp
from cunumpy import kernel_testing as kt
from cunumpy._emulation import _launch
from cunumpy.kernels import CudaKernel, CudaKernelVariants, Kernel, _cuda_kernel

SOURCE = r"""
#include <cunumpy/index.cuh>

struct Shift {
    double* x;
    long long n;
    double by;
};

extern "C" __global__ void scale(double* x, double a, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    x[i] *= a;
}

extern "C" __global__ void shift(Shift s) {
    CUNUMPY_THREAD_1D(i, s.n);
    s.x[i] += s.by;
}

template <typename T> __global__ void fill(T* x, T value, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    x[i] = value;
}
"""

in_fake = pytest.mark.skipif(not kt.fake_cupy_active(), reason="runs on the fake CuPy (CUNUMPY_FAKE_CUPY=1)")


def scale_host(x, a, n):
    x[:n] *= a


@pytest.fixture
def automatic(monkeypatch):
    """The automatic emulation as a user gets it: no CUNUMPY_EMULATION, the compiler found."""
    monkeypatch.delenv("CUNUMPY_EMULATION", raising=False)
    if kt.emulation_compiler() is None:
        pytest.skip("needs a C++ compiler")


def test_under_the_fake_cupy():
    rerun_under_fake_cupy(__file__, "not test_under_the_fake_cupy")


# --------------------------------------------------------------------------- every launch form


@in_fake
@requires_compiler
def test_every_launch_form_emulates_without_emulated_launches(automatic):
    with xp.use_backend("cupy", strict=True):
        x = xp.to_cunumpy(np.arange(8.0))
        k = CudaKernel(SOURCE, "scale")
        assert k.compile() is None  # builds the emulation library, as inside emulated_launches()
        k(x, 2.0, 8)
        np.testing.assert_array_equal(xp.to_numpy(x), 2 * np.arange(8.0))
        # Through Kernel on the CuPy backend.
        Kernel(scale_host, CudaKernel(SOURCE, "scale"), name="scale")(x, 0.5, 8, n_threads=8)
        np.testing.assert_array_equal(xp.to_numpy(x), np.arange(8.0))
        # Argument objects and structs.
        k(xp.arguments.CudaArguments(x, 3.0, 8))
        np.testing.assert_array_equal(xp.to_numpy(x), 3 * np.arange(8.0))
        Shift = xp.arguments.CudaStruct("Shift", [("x", "double*"), ("n", "long long"), ("by", "double")])
        shift = CudaKernel(SOURCE, "shift", structs=[Shift])
        shift(Shift(x=x, n=8, by=1.0))
        np.testing.assert_array_equal(xp.to_numpy(x), 3 * np.arange(8.0) + 1)
        # Variants and catalogs compile (on worker threads) and launch.
        variants = CudaKernelVariants(lambda t: CudaKernel(SOURCE, "fill", template_args=(t,)))
        variants.compile_all(["double", "int"], jobs=2)
        ints = xp.zeros(4, dtype=np.int32)
        variants.get("int")(ints, 7, 4)
        assert xp.to_numpy(ints).tolist() == [7] * 4
        catalog = xp.kernels.KernelCatalog()
        catalog.register(Kernel(scale_host, CudaKernel(SOURCE, "scale"), name="scale"))
        assert catalog.compile_all(jobs=2) == ["scale"]
        catalog["scale"](x, 0.0, 8, n_threads=8)
        assert not xp.to_numpy(x).any()


@in_fake
@requires_compiler
def test_raw_kernels_and_modules_of_the_fake_emulate(automatic):
    import cupy

    x = cupy.ones(10)
    raw = cupy.RawKernel(SOURCE, "scale")
    raw.compile()
    raw((1,), (32,), (x, np.float64(4.0), np.int64(10)))
    module = cupy.RawModule(code=SOURCE)
    module.compile()
    module.get_function("scale")((1,), (32,), (x, np.float64(0.5), np.int64(10)))
    assert (x.get() == 2.0).all()
    with pytest.raises(NotImplementedError, match="ElementwiseKernel"):
        cupy.ElementwiseKernel("T x", "T y", "y = x", "copy")(x, x)


@in_fake
@requires_compiler
def test_the_fake_devices_limits_are_checked_before_emulating(automatic):
    import cupy

    k = CudaKernel(SOURCE, "scale")
    x = cupy.ones(4)
    with pytest.raises(ValueError, match=r"kernel 'scale' on device 0 .*block\[2\] = 128"):
        k(x, 2.0, 4, grid=(1, 1, 1), block=(1, 1, 128))
    with pytest.raises(ValueError, match=r"grid\[1\] = 70000"):
        k(x, 2.0, 0, grid=(0, 70000))
    with kt.emulated_launches(), pytest.raises(ValueError, match=r"block\[2\] = 128"):
        k(x, 2.0, 4, grid=(1, 1, 1), block=(1, 1, 128))
    assert k(x, 2.0, 0, n_threads=0) is None  # an empty launch: nothing to emulate
    assert (x.get() == 1.0).all()


# --------------------------------------------------------------------------- turning it off


@in_fake
def test_cunumpy_emulation_0_restores_the_refusal(monkeypatch):
    import cupy

    monkeypatch.setenv("CUNUMPY_EMULATION", "0")
    k = CudaKernel(SOURCE, "scale")
    x = cupy.ones(4)
    # CudaKernel takes the device path, which the fake refuses when it compiles the module.
    for call, what in ((lambda: k(x, 2.0, 4), "RawModule of kernel 'scale'"), (k.compile, "RawModule of kernel 'scale'"),
                       (lambda: cupy.RawKernel(SOURCE, "scale")((1,), (4,), (x, 2.0, 4)), "RawKernel 'scale'"),
                       (lambda: cupy.RawModule(code=SOURCE).compile(), "RawModule of kernel 'scale', 'shift', 'fill'")):  # fmt: skip
        with pytest.raises(NotImplementedError) as info:
            call()
        message = str(info.value)
        assert type(info.value) is kt.EmulationUnavailable and "CUNUMPY_EMULATION=0" in info.value.reason
        assert message.startswith(what) and "CUNUMPY_EMULATION=0" in message, message
        assert "emulated_launches()" in message
    assert (x.get() == 1.0).all()
    # An explicit block still emulates (when a compiler is there).
    if kt.emulation_compiler() is not None:
        with kt.emulated_launches():
            k(x, 2.0, 4)
        assert (x.get() == 2.0).all()
    for off in ("false", " NO ", "off"):
        monkeypatch.setenv("CUNUMPY_EMULATION", off)
        with pytest.raises(NotImplementedError, match="CUNUMPY_EMULATION"):
            k(x, 2.0, 4)
    monkeypatch.setenv("CUNUMPY_EMULATION", "sometimes")
    with pytest.raises(ValueError, match="CUNUMPY_EMULATION must be 1 or 0.*'sometimes'"):
        k(x, 2.0, 4)


@in_fake
def test_without_a_compiler_the_error_names_the_compiler_looked_for(monkeypatch, tmp_path):
    import cupy

    monkeypatch.delenv("CUNUMPY_EMULATION", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no c++ there
    monkeypatch.delenv("CXX", raising=False)
    k = CudaKernel(SOURCE, "scale")
    with pytest.raises(
        NotImplementedError,
        match=r"kernel 'scale'.*needs a C\+\+ compiler: c\+\+ was not found on PATH \(\$CXX is not set\)",
    ):
        k(cupy.ones(4), 2.0, 4)
    monkeypatch.setenv("CXX", "my-clang++")
    with pytest.raises(NotImplementedError, match=r"neither \$CXX \('my-clang\+\+'\) nor c\+\+ was found on PATH"):
        k.compile()
    ok, why = _launch.automatic_emulation_status()
    assert not ok and "my-clang++" in why


def test_no_hook_outside_the_fake_cupy():
    if kt.fake_cupy_active():
        assert isinstance(_launch.current_hook(), (_launch.EmulationHook, _launch.RefusingHook))
    else:  # NumPy run (or a GPU): launches go to CuPy unless a block is open here
        assert _launch.current_hook() is None and _cuda_kernel._emulation_hook() is None
        with kt.emulated_launches():
            assert isinstance(_cuda_kernel._emulation_hook(), _launch.EmulationHook)
        assert _cuda_kernel._emulation_hook() is None


# --------------------------------------------------------------------------- per thread, per context


@pytest.fixture
def recorded(monkeypatch):
    """Record the options of each emulated launch and build instead of running them."""
    runs, builds = [], []

    def run(kernel, marshalled, grid, block, shared_mem, **settings):
        runs.append(
            (
                threading.current_thread().name,
                kernel.name,
                settings["compiler"],
                settings["options"],
                settings["checked"],
            )
        )

    def library_for(kernel, compiler, options, *args, **kwargs):
        builds.append((threading.current_thread().name, kernel.name, compiler, options))

    monkeypatch.setattr(_launch, "_run", run)
    monkeypatch.setattr(_launch, "library_for", library_for)
    return types.SimpleNamespace(runs=runs, builds=builds)


def test_blocks_apply_to_their_own_thread_only(recorded):
    """Thread A in emulated_launches(checked=True), thread B entering emulated_launches():
    A's launches stay checked, with A's compiler and options (issue 22, item 3)."""
    k = CudaKernel(SOURCE, "scale")
    a_inside, b_inside, b_left = threading.Event(), threading.Event(), threading.Event()
    errors = []

    def thread_a():
        try:
            with kt.emulated_launches(checked=True, compiler="g++", options=("-DA=1",)):
                a_inside.set()
                b_inside.wait(60)
                _cuda_kernel._emulation_hook().launch(k, (np.ones(2), 2.0, 2), (1,), (2,), 0)
                b_left.wait(60)
                _cuda_kernel._emulation_hook().launch(k, (np.ones(2), 2.0, 2), (1,), (2,), 0)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def thread_b():
        try:
            a_inside.wait(60)
            with kt.emulated_launches(compiler="clang++"):
                b_inside.set()
                _cuda_kernel._emulation_hook().launch(k, (np.ones(2), 2.0, 2), (1,), (2,), 0)
            b_left.set()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            b_inside.set()
            b_left.set()

    threads = [threading.Thread(target=thread_a, name="A"), threading.Thread(target=thread_b, name="B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sorted(recorded.runs) == [
        ("A", "scale", "g++", ("-DA=1",), True),
        ("A", "scale", "g++", ("-DA=1",), True),
        ("B", "scale", "clang++", (), False),
    ]


def test_a_block_is_invisible_to_other_threads_and_contexts():
    with kt.emulated_launches(checked=True):
        inside = _cuda_kernel._emulation_hook()
        seen = {}
        worker = threading.Thread(target=lambda: seen.setdefault("thread", _cuda_kernel._emulation_hook()))
        worker.start()
        worker.join()
        assert seen["thread"] is not inside  # None on NumPy, the automatic hook on the fake
        # A copied context carries the block into another thread.
        context = contextvars.copy_context()
        worker = threading.Thread(target=lambda: seen.setdefault("copied", context.run(_cuda_kernel._emulation_hook)))
        worker.start()
        worker.join()
        assert seen["copied"] is inside
        # An empty context does not.
        assert contextvars.Context().run(_cuda_kernel._emulation_hook) is not inside
    assert inside.settings == _launch.LaunchOptions(checked=True)


def test_compile_all_workers_see_the_block_of_the_caller(recorded):
    variants = CudaKernelVariants(lambda t: CudaKernel(SOURCE, "fill", template_args=(t,)))
    with kt.emulated_launches(compiler="g++", options=("-DV=2",)):
        variants.compile_all(["double", "int", "float"], jobs=3)
    assert len(recorded.builds) == 3
    assert {(compiler, options) for _, _, compiler, options in recorded.builds} == {("g++", ("-DV=2",))}


def test_launch_options_are_keywords_of_run():
    settings = _launch.LaunchOptions(compiler="c++", options=("-DX",), checked=True)
    keywords = settings.run_keywords()
    assert {k: keywords[k] for k in ("compiler", "options", "checked")} == {
        "compiler": "c++",
        "options": ("-DX",),
        "checked": True,
    }
    with pytest.raises(TypeError, match="LaunchOptions"):
        _launch.EmulationHook(("c++", (), True))
    with pytest.raises(AttributeError):
        settings.checked = False  # frozen: one object per block, shared safely by threads


# --------------------------------------------------------------------------- worker count


def test_workers_follow_xp_threads(monkeypatch):
    monkeypatch.delenv("CUNUMPY_EMULATION_THREADS", raising=False)
    assert _launch.emulation_workers() == xp.threads.get_num_threads()
    with xp.threads.num_threads(3):
        assert _launch.emulation_workers() == 3
    monkeypatch.setenv("CUNUMPY_EMULATION_THREADS", " 5 ")
    with xp.threads.num_threads(3):
        assert _launch.emulation_workers() == 5  # the override
    monkeypatch.setenv("CUNUMPY_EMULATION_THREADS", "100000")
    assert _launch.emulation_workers() == 256
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv("CUNUMPY_EMULATION_THREADS", bad)
        with pytest.raises(ValueError, match=f"CUNUMPY_EMULATION_THREADS must be a whole number >= 1.*{bad!r}"):
            _launch.emulation_workers()


@requires_compiler
def test_launches_pass_the_worker_count(monkeypatch):
    from cunumpy._native import core

    seen = []

    def emu_launch(*args, **kwargs):
        seen.append(kwargs["workers"])
        return core.emu_launch(*args, **kwargs)

    monkeypatch.setattr(
        _launch,
        "core",
        types.SimpleNamespace(
            EMU_ABI_VERSION=core.EMU_ABI_VERSION, emu_launch=emu_launch, emu_shadow_available=core.emu_shadow_available
        ),
    )
    monkeypatch.delenv("CUNUMPY_EMULATION_THREADS", raising=False)
    x = np.ones(64)
    k = CudaKernel(SOURCE, "scale")
    with xp.threads.num_threads(2):
        kt.emulate_cuda_kernel(k, x, 2.0, 64, block=16)
    monkeypatch.setenv("CUNUMPY_EMULATION_THREADS", "1")
    kt.emulate_cuda_kernel(k, x, 2.0, 64, block=16)
    assert seen == [2, 1] and (x == 4.0).all()


@pytest.mark.nosan
def test_cunumpy_num_threads_sets_the_workers():
    code = "from cunumpy._emulation._launch import emulation_workers; print(emulation_workers())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    env["CUNUMPY_NUM_THREADS"] = "3"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.stdout.strip() == "3", result.stderr


# --------------------------------------------------------------------------- a whole program


@pytest.mark.nosan
@requires_compiler
def test_a_program_runs_unchanged_under_the_fake_cupy(tmp_path):
    """`CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy python program.py`: no emulated_launches() in it."""
    program = tmp_path / "program.py"
    program.write_text(
        textwrap.dedent(f"""
        import numpy as np
        import cunumpy as xp
        from cunumpy.kernels import CudaKernel

        k = CudaKernel({SOURCE!r}, "scale")
        x = xp.to_cunumpy(np.arange(5.0))
        k(x, 3.0, 5)
        print(xp.get_backend(), xp.to_numpy(x).tolist())
    """)
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    env.update(
        CUNUMPY_FAKE_CUPY="1",
        CUNUMPY_BACKEND="cupy",
        CUNUMPY_EMULATION_CACHE=os.environ.get("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache")),
    )
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "cupy [0.0, 3.0, 6.0, 9.0, 12.0]"
    env["CUNUMPY_EMULATION"] = "0"
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, env=env, timeout=300)
    # a NotImplementedError named as kernel_testing exports it (issue 33 item 10)
    assert (
        result.returncode == 1 and "kernel_testing.EmulationUnavailable: RawModule of kernel 'scale'" in result.stderr
    )
    assert "CUNUMPY_EMULATION=0" in result.stderr
