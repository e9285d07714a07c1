"""Implementation selection (API.md 2.8), HostImplementations (2.9) and CompiledHostKernel
(2.10)."""

import os
import subprocess
import sys
import threading
import time
import types
import warnings

import numpy as np
import pytest

import cunumpy as xp

kernels = xp.kernels
HostImplementations = kernels.HostImplementations
CompiledHostKernel = kernels.CompiledHostKernel


@pytest.fixture(autouse=True)
def automatic_selection():
    """Every test starts and ends in automatic mode."""
    host, device = kernels.get_host_kernel_implementation(), kernels.get_device_kernel_implementation()
    kernels.set_host_kernel_implementation(None)
    kernels.set_device_kernel_implementation(None)
    yield
    kernels.set_host_kernel_implementation(host)
    kernels.set_device_kernel_implementation(device)


def tagged(tag):
    def fn(out):
        out.append(tag)

    return fn


def failing():
    raise ImportError("no compiler here")


# --------------------------------------------------------------------------- selectors


def test_constants():
    assert kernels.HOST_IMPLEMENTATIONS == ("pyccel", "numba", "numpy", "python")
    assert kernels.DEVICE_IMPLEMENTATIONS == ("cuda",)


def test_host_setter_getter_and_context_manager():
    assert kernels.get_host_kernel_implementation() is None
    kernels.set_host_kernel_implementation("numpy")
    assert kernels.get_host_kernel_implementation() == "numpy"
    with kernels.use_host_kernel_implementation("python"):
        assert kernels.get_host_kernel_implementation() == "python"
    assert kernels.get_host_kernel_implementation() == "numpy"
    with pytest.raises(RuntimeError), kernels.use_host_kernel_implementation("numba"):
        raise RuntimeError("body")
    assert kernels.get_host_kernel_implementation() == "numpy"
    for bad in ("NumPy", "cuda", "", 3):
        with pytest.raises(ValueError, match="host kernel implementation"):
            kernels.set_host_kernel_implementation(bad)
    assert kernels.get_host_kernel_implementation() == "numpy"


def test_device_setter_is_strict():
    kernels.set_device_kernel_implementation("cuda")
    assert kernels.get_device_kernel_implementation() == "cuda"
    for bad in ("CUDA", "", "cupy", "numba", 1):
        with pytest.raises(ValueError, match="device kernel implementation"):
            kernels.set_device_kernel_implementation(bad)
    assert kernels.get_device_kernel_implementation() == "cuda"
    kernels.set_device_kernel_implementation(None)
    ran = []
    with pytest.raises(ValueError), kernels.use_device_kernel_implementation("cupy"):
        ran.append(1)
    assert not ran and kernels.get_device_kernel_implementation() is None
    with kernels.use_device_kernel_implementation("cuda"):
        assert kernels.get_device_kernel_implementation() == "cuda"
    assert kernels.get_device_kernel_implementation() is None


def _import_with(env):
    code = (
        "import cunumpy.kernels as k; print(k.get_host_kernel_implementation(), k.get_device_kernel_implementation())"
    )
    child = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=child, capture_output=True, text=True, timeout=120)


@pytest.mark.nosan
def test_environment_variables_read_at_import():
    done = _import_with(
        {"CUNUMPY_HOST_KERNEL_IMPLEMENTATION": " NumPy ", "CUNUMPY_DEVICE_KERNEL_IMPLEMENTATION": " CuDa "}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["numpy", "cuda"]
    done = _import_with({"CUNUMPY_HOST_KERNEL_IMPLEMENTATION": "", "CUNUMPY_DEVICE_KERNEL_IMPLEMENTATION": ""})
    assert done.stdout.split() == ["None", "None"]
    done = _import_with({"CUNUMPY_HOST_KERNEL_IMPLEMENTATION": "fortran"})
    assert done.returncode != 0
    assert "ValueError" in done.stderr and "CUNUMPY_HOST_KERNEL_IMPLEMENTATION" in done.stderr
    done = _import_with({"CUNUMPY_DEVICE_KERNEL_IMPLEMENTATION": "cupy"})
    assert done.returncode != 0
    assert "ValueError" in done.stderr and "device kernel implementation" in done.stderr


def test_read_environment_directly():
    from cunumpy.kernels import _selection

    with pytest.raises(ValueError, match="CUNUMPY_DEVICE_KERNEL_IMPLEMENTATION"):
        _selection.read_environment({"CUNUMPY_DEVICE_KERNEL_IMPLEMENTATION": "numba"})
    assert kernels.get_device_kernel_implementation() is None


# --------------------------------------------------------------------------- HostImplementations


def test_host_implementations_validation():
    with pytest.raises(ValueError, match="python"):
        HostImplementations("k", {"numpy": lambda: tagged("numpy")})
    with pytest.raises(ValueError, match="fortran"):
        HostImplementations("k", {"python": lambda: tagged("python"), "fortran": lambda: None})
    with pytest.raises(TypeError, match="loaders"):
        HostImplementations("k", 3)
    with pytest.raises(TypeError, match="not callable"):
        HostImplementations("k", {"python": "nope"})


def test_host_implementations_automatic_choice_and_errors():
    impls = HostImplementations(
        "k", {"python": lambda: tagged("python"), "pyccel": failing, "numpy": lambda: tagged("numpy")}
    )
    assert impls.names == ("pyccel", "numpy", "python")
    assert impls.selected() == "numpy"  # pyccel failed to load
    assert not impls.available("pyccel") and isinstance(impls.errors["pyccel"], ImportError)
    assert not impls.available("numba")
    out = []
    impls(out)
    assert out == ["numpy"]
    with pytest.raises(LookupError, match="pyccel") as info:
        impls.get("pyccel")
    assert isinstance(info.value.__cause__, ImportError)
    with pytest.raises(LookupError, match="numba"):
        impls.get("numba")
    impls.python(out)
    assert out[-1] == "python"
    assert impls.build() is impls.get("numpy")


def test_host_implementations_python_only_warns_once():
    impls = HostImplementations("lonely", {"python": lambda: tagged("python"), "pyccel": failing})
    with pytest.warns(RuntimeWarning, match="lonely"):
        assert impls.selected() == "python"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert impls.selected() == "python"


def test_explicit_selection_never_silently_switches():
    impls = HostImplementations("k", {"python": lambda: tagged("python"), "numpy": lambda: tagged("numpy")})
    k = kernels.Kernel(impls)
    out = []
    with xp.use_backend("numpy"):
        k(out)
        assert out == ["numpy"] and k.selected() == "numpy"
        with kernels.use_host_kernel_implementation("python"):
            k(out)
            assert k.selected() == "python"
        assert out == ["numpy", "python"]
        k(out)
        assert out[-1] == "numpy"
        with kernels.use_host_kernel_implementation("numba"):
            with pytest.raises(LookupError, match="numba"):
                k(out)
            with pytest.raises(LookupError, match="numba"):
                k.selected()
            with pytest.raises(LookupError, match="numba"):
                k.get_kernel()
        k(out)
        assert out[-1] == "numpy"
        assert k.implementations == ("numpy", "python")


def test_plain_host_kernels_ignore_the_host_selection():
    out = []
    k = kernels.Kernel(tagged("plain"))
    with xp.use_backend("numpy"), kernels.use_host_kernel_implementation("numba"):
        k(out)
    assert out == ["plain"] and k.selected() == "host"


# --------------------------------------------------------------------------- CompiledHostKernel


def host_module():
    module = types.ModuleType("cn_compiled_host")

    def push(x):
        x[0] += 1.0

    module.push = push
    return module


def compiled_module(module):
    result = types.SimpleNamespace()

    def push(x):
        x[0] += 10.0

    result.push = push
    return result


def test_compiled_host_kernel_compiles_on_first_call_only():
    calls = []

    def compiler(module):
        calls.append(module)
        return compiled_module(module)

    k = CompiledHostKernel(host_module(), "push", compiler)
    assert not calls  # nothing at construction
    x = np.zeros(1)
    k(x)
    k(x)
    assert x[0] == 20.0 and len(calls) == 1
    assert k.compiled and k.error is None and k.build() is not None
    assert k.python.__name__ == "push" and k.fallback is None


def test_compiled_host_kernel_accepts_a_compiled_function():
    k = CompiledHostKernel(host_module(), "push", lambda m: compiled_module(m).push)
    x = np.zeros(1)
    k(x)
    assert x[0] == 10.0


def test_compiled_host_kernel_falls_back_with_one_warning():
    def broken(module):
        raise RuntimeError("gfortran missing")

    k = CompiledHostKernel(host_module(), "push", broken)
    x = np.zeros(1)
    with pytest.warns(RuntimeWarning, match="gfortran missing"):
        k(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k(x)
    assert x[0] == 2.0  # the uncompiled Python function
    assert not k.compiled and isinstance(k.error, RuntimeError) and k.build() is None

    def fallback(x):
        x[0] -= 5.0

    k = CompiledHostKernel(host_module(), "push", broken, fallback=fallback)
    with pytest.warns(RuntimeWarning, match="fallback"):
        k(x)
    assert x[0] == -3.0


def test_compiled_host_kernel_module_by_name(monkeypatch):
    monkeypatch.setitem(sys.modules, "cn_compiled_host", host_module())
    k = CompiledHostKernel("cn_compiled_host", "push", compiled_module)
    assert k.module is sys.modules["cn_compiled_host"]
    with pytest.raises(TypeError, match="compiler"):
        CompiledHostKernel("cn_compiled_host", "push", None)
    with pytest.raises(TypeError, match="module"):
        CompiledHostKernel(3, "push", compiled_module)


def test_compiled_host_kernel_two_threads_compile_once():
    calls = []
    gate = threading.Barrier(2)

    def slow(module):
        calls.append(1)
        time.sleep(0.2)
        return compiled_module(module)

    k = CompiledHostKernel(host_module(), "push", slow)
    xs = [np.zeros(1), np.zeros(1)]

    def work(x):
        gate.wait()
        k(x)

    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert [x[0] for x in xs] == [10.0, 10.0]


def test_selection_changes_while_threads_call():
    """The plan is rebuilt under concurrent calls: every call runs one of the two
    implementations, none fails."""

    def python(out):
        out.append("python")

    def numpy_version(out):
        out.append("numpy")

    k = kernels.Kernel(HostImplementations("k", {"python": lambda: python, "numpy": lambda: numpy_version}))
    outs = [[] for _ in range(4)]
    errors = []
    stop = threading.Event()

    def call(out):
        try:
            while not stop.is_set():
                k(out)
        except Exception as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(exc)

    with xp.use_backend("numpy"):
        threads = [threading.Thread(target=call, args=(o,)) for o in outs]
        for t in threads:
            t.start()
        for i in range(200):
            kernels.set_host_kernel_implementation("python" if i % 2 else "numpy")
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert all(set(o) <= {"python", "numpy"} and o for o in outs)
