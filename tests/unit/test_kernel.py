"""Kernel (API.md section 2.5): construction, host and device dispatch, missing CUDA,
signatures and introspection. Device paths run under the fake CuPy, with a recording
emulation hook standing in for the launch."""

import sys
import threading
import warnings

import numpy as np
import pytest
from _events import Events
from _unsigned import Unsigned

import cunumpy as xp
from cunumpy.kernels import _cuda_kernel

Kernel = xp.kernels.Kernel
CudaKernel = xp.kernels.CudaKernel
PyccelKernel = xp.kernels.PyccelKernel

SCALE_SRC = r"""
extern "C" __global__ void scale(double* x, double a, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


def scale(x, a, n):
    x[:n] *= a


def scale_cuda(**kw):
    return CudaKernel(SCALE_SRC, "scale", **kw)


class RecordingHook:
    """Takes over CudaKernel launches (as the CPU emulation does) and records them."""

    def __init__(self):
        self.launches = []
        self.compiled = []

    def launch(self, kernel, args, grid, block, shared_mem):
        self.launches.append((kernel.name, args, grid, block, shared_mem))

    def compile(self, kernel):
        self.compiled.append(kernel.name)
        return kernel.name


@pytest.fixture
def hook(monkeypatch):
    recording = RecordingHook()
    monkeypatch.setattr(_cuda_kernel, "emulation_hook", recording)
    return recording


def cupy():
    return sys.modules["cupy"]


# --------------------------------------------------------------------------- construction


def test_constructor_validation():
    with pytest.raises(ValueError, match="missing_cuda"):
        Kernel(scale, missing_cuda="ignore")
    with pytest.raises(ValueError, match="dispatch"):
        Kernel(scale, dispatch="device")
    with pytest.raises(TypeError, match="cuda_kernel"):
        Kernel(scale, SCALE_SRC)
    with pytest.raises(TypeError, match="host_kernel"):
        Kernel(42)
    with pytest.raises(ValueError, match="host_options"):
        Kernel(PyccelKernel(scale), host_options={"outputs": (0,)})
    with pytest.raises(TypeError, match="host_options"):
        Kernel(scale, host_options=[("outputs", (0,))])
    with pytest.raises(TypeError, match="name"):
        Kernel(scale, name=3)


def test_properties_and_repr():
    cuda = scale_cuda()
    k = Kernel(scale, cuda, missing_cuda="fallback", cuda_path="a/scale_cuda.cu", host_options={"outputs": ("x",)})
    assert k.name == "scale"
    assert isinstance(k.host_kernel, PyccelKernel) and k.host_kernel.kernel is scale
    assert k.host_kernel.outputs == ("x",)
    assert k.cuda_kernel is cuda and k.has_cuda
    assert k.missing_cuda == "fallback" and k.dispatch == "backend"
    assert str(k.cuda_path).endswith("scale_cuda.cu")
    assert k.test_args_module is None and k.test_args is None
    assert "scale" in repr(k)
    ready = PyccelKernel(scale, outputs=(0,))
    assert Kernel(ready).host_kernel is ready
    assert Kernel(scale, name="other").name == "other"


def test_introspection():
    k = Kernel(scale, scale_cuda())
    assert k.implementations == ("host", "cuda")
    assert Kernel(scale).implementations == ("host",)
    assert k.selected() == "host" and k.selected(device=True) == "cuda"
    assert k.host_parameters() == ("x", "a", "n")
    assert Kernel(Unsigned(scale)).host_parameters() is None
    assert Kernel(scale, missing_cuda="fallback").selected(device=True) == "host"
    with pytest.raises(NotImplementedError, match="scale"):
        Kernel(scale).selected(device=True)
    with xp.kernels.use_device_kernel_implementation("cuda"), pytest.raises(LookupError, match="scale"):
        Kernel(scale, missing_cuda="fallback").selected(device=True)


def test_compile_without_cuda_is_false_and_with_cuda_compiles(hook):
    assert Kernel(scale).compile() is False
    assert Kernel(scale, scale_cuda()).compile() is True
    assert hook.compiled == ["scale"]


# --------------------------------------------------------------------------- signatures


def test_check_signature_against_cuda():
    Kernel(scale, scale_cuda()).check_signature()

    def renamed(y, a, n):
        pass

    with pytest.raises(ValueError, match=r"'scale'.*\(y, a, n\).*\(x, a, n\)"):
        Kernel(renamed, scale_cuda(), name="scale").check_signature()

    def reordered(x, n, a):
        pass

    with pytest.raises(ValueError, match="differ"):
        Kernel(reordered, scale_cuda()).check_signature()
    # Sides without a known signature are skipped.
    Kernel(Unsigned(scale), scale_cuda()).check_signature()
    Kernel(renamed, CudaKernel(SCALE_SRC, "scale", check_signature=False)).check_signature()


def test_check_signature_against_other_host_implementations():
    def python(x, a, n):
        pass

    def numpy_version(x, factor, n):
        pass

    impls = xp.kernels.HostImplementations("scale", {"python": lambda: python, "numpy": lambda: numpy_version})
    with pytest.raises(ValueError, match="numpy implementation"):
        Kernel(impls).check_signature()
    good = xp.kernels.HostImplementations("scale", {"python": lambda: python, "numpy": lambda: python})
    Kernel(good, scale_cuda()).check_signature()


def test_check_signature_reads_compiled_host_kernel_fallback():
    import types

    module = types.ModuleType("cn_fake_host_module")
    module.scale = scale

    def fallback(x, b, n):
        pass

    compiled = xp.kernels.CompiledHostKernel(module, "scale", lambda m: m, fallback=fallback)
    with pytest.raises(ValueError, match="fallback"):
        Kernel(compiled).check_signature()


def test_host_parameters_from_a_pyccel_stub(tmp_path, monkeypatch):
    """A compiled function without a Python signature: the names come from the .pyi stub."""
    import types

    (tmp_path / "__pyccel__").mkdir()
    (tmp_path / "__pyccel__" / "cn_stub_module.pyi").write_text(
        "def push(markers : 'float[:,:]', dt : 'float') -> None:\n    ...\n"
    )
    module = types.ModuleType("cn_stub_module")
    module.__file__ = str(tmp_path / "cn_stub_module.cpython-311-x86_64-linux-gnu.so")
    monkeypatch.setitem(sys.modules, "cn_stub_module", module)

    class Compiled:
        __signature__ = "not inspectable"
        __module__ = "cn_stub_module"
        __name__ = "push"

        def __call__(self, *args):
            return None

    fn = Compiled()
    fn.__name__ = "push"
    assert Kernel(fn).host_parameters() == ("markers", "dt")


# --------------------------------------------------------------------------- host path


def test_host_call_on_numpy_backend_is_direct():
    seen = []

    def kernel(a, b, c, d, x, n):
        seen.append((a, b, c, d, x, n))
        return "result"

    with xp.use_backend("numpy"):
        arrays = [np.zeros(3) for _ in range(4)]
        for dispatch in ("backend", "arrays"):
            k = Kernel(kernel, scale_cuda() if False else None, dispatch=dispatch)
            assert k(*arrays, 1.5, 3) == "result"
            assert all(s is a for s, a in zip(seen[-1], arrays))
            # Launch keywords are accepted and ignored by host kernels.
            assert k(*arrays, 1.5, 3, n_threads=3, grid=None, block=(32,), shared_mem=0, stream=None) == "result"
            with pytest.raises(TypeError, match="'bogus'"):
                k(*arrays, 1.5, 3, bogus=1)


def test_host_exceptions_propagate():
    def broken(x):
        x[0] = 7.0
        raise KeyError("inside")

    with xp.use_backend("numpy"):
        x = np.zeros(2)
        with pytest.raises(KeyError, match="inside"):
            Kernel(broken)(x)
        assert x[0] == 7.0


def test_get_kernel_on_numpy_backend():
    with xp.use_backend("numpy"):
        k = Kernel(scale, scale_cuda())
        assert isinstance(k.get_kernel(), PyccelKernel)
        assert Kernel(scale, dispatch="arrays").get_kernel() is scale


def test_one_kernel_from_many_threads():
    def add(out, value):
        out[0] += value

    k = Kernel(add)
    outs = [np.zeros(1) for _ in range(8)]
    errors = []

    def work(out):
        try:
            with warnings.catch_warnings():
                for _ in range(500):
                    k(out, 1.0)
        except Exception as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(exc)

    with xp.use_backend("numpy"):
        threads = [threading.Thread(target=work, args=(o,)) for o in outs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert all(o[0] == 500.0 for o in outs)


# --------------------------------------------------------------------------- device path


def test_device_path_launches_cuda(device_only, hook):
    k = Kernel(scale, scale_cuda())
    x = cupy().ones(100)
    k(x, 2.0, 100)
    name, args, grid, block, _shared = hook.launches[-1]
    assert name == "scale" and args[0] is x and grid == (1,) and block == (128,)
    k(x, 2.0, 100, n_threads=300, block=64, shared_mem=16)
    assert hook.launches[-1][2:] == ((5,), (64,), 16)
    assert k.get_kernel() is k.cuda_kernel


def test_device_path_needs_n_threads_when_inference_is_off(device_only, hook):
    k = Kernel(scale, scale_cuda(n_threads_from=None))
    x = cupy().ones(10)
    with pytest.raises(ValueError, match="n_threads"):
        k(x, 2.0, 10)
    k(x, 2.0, 10, n_threads=10)
    assert hook.launches


def test_dispatch_arrays_follows_the_arguments(device_only, hook):
    """CuPy backend active: host arrays still go to the host function, directly."""
    calls = []

    def host(x, a, n):
        calls.append(x)

    k = Kernel(host, scale_cuda(), dispatch="arrays")
    h = np.ones(4)
    k(h, 2.0, 4)
    assert calls[-1] is h and not hook.launches
    k(cupy().ones(4), 2.0, 4)
    assert len(hook.launches) == 1


def test_dispatch_arrays_argument_objects_are_device_arguments(hook):
    """An object with __cuda_args__ takes the device path even on the NumPy backend."""

    class Args:
        def __init__(self, x):
            self.x = x

        def __cuda_args__(self):
            return (self.x,)

    calls = []

    def host(args, a, n):
        calls.append(args)

    k = Kernel(host, None, dispatch="arrays")
    with xp.use_backend("numpy"):
        with pytest.raises(NotImplementedError, match="host"):
            k(Args(np.ones(2)), 2.0, 2)
        k(np.ones(2), 2.0, 2)
        assert len(calls) == 1


def test_dispatch_arrays_nested_device_arrays_stay_host(device_only):
    calls = []

    def host(items, n):
        calls.append(items)

    k = Kernel(host, None, dispatch="arrays")
    items = [cupy().ones(2)]
    with xp.use_backend("numpy"):
        k(items, 2)
    assert calls[-1] is items


def test_missing_cuda_raise_names_kernel_and_path(device_only):
    k = Kernel(scale, cuda_path="pkg/scale/scale_cuda.cu")
    with pytest.raises(NotImplementedError, match=r"'scale'.*scale_cuda\.cu"):
        k(cupy().ones(3), 2.0, 3)
    with pytest.raises(NotImplementedError):
        k.get_kernel()


def test_missing_cuda_fallback_warns_once_and_counts_each_call(device_only):
    k = Kernel(scale, missing_cuda="fallback", host_options={"outputs": (0,)})
    x = cupy().ones(4)
    with pytest.warns(RuntimeWarning, match="scale"):
        k(x, 2.0, 4)
    np.testing.assert_array_equal(x.get(), 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Events() as events:
            k(x, 3.0, 4)
            k(x, 0.5, 4)
    assert len(events.kinds("fallback")) == 2
    np.testing.assert_array_equal(x.get(), 3.0)
    assert isinstance(k.get_kernel(), PyccelKernel)


def test_explicit_cuda_device_implementation_rejects_fallback(device_only):
    k = Kernel(scale, missing_cuda="fallback")
    with xp.kernels.use_device_kernel_implementation("cuda"), pytest.raises(LookupError, match="scale"):
        k(cupy().ones(3), 2.0, 3)
    # Host calls are not affected.
    with xp.use_backend("numpy"), xp.kernels.use_device_kernel_implementation("cuda"):
        x = np.ones(3)
        k(x, 2.0, 3)
        assert x[0] == 2.0


def test_backend_dispatch_with_device_array_on_numpy_backend_converts(device_only):
    """dispatch="backend" on NumPy: the host kernel (a PyccelKernel) converts device arrays."""
    k = Kernel(scale, host_options={"outputs": (0,)})
    x = cupy().ones(3)
    with xp.use_backend("numpy"), Events() as events:
        k(x, 4.0, 3)
    np.testing.assert_array_equal(x.get(), 4.0)
    assert events.kinds("kernel_conversion")
