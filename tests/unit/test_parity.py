"""kernel_testing parity helpers (API.md 13.2, 13.3), device_function_kernel (13.4) and the
HIP-gap markers (13.1). The CUDA side runs under the fake CuPy through a stand-in for the CPU
emulation (``emulated_launches``): its hook runs a Python port of each kernel on the host
buffers of the fake arrays."""

import contextlib
import sys
import types

import numpy as np
import pytest

import cunumpy as xp
from cunumpy import _parity, kernel_testing as kt
from cunumpy.kernels import _cuda_kernel

Kernel = xp.kernels.Kernel
CudaKernel = xp.kernels.CudaKernel

AXPY_SRC = r"""
extern "C" __global__ void axpy(double alpha, const double* x, double* y, long long n) { }
"""


def axpy(alpha, x, y, n):
    y[:n] += alpha * x[:n]


def make_axpy_args(backend, seed):
    rng = np.random.default_rng(seed)
    return (2.0, xp.to_cunumpy(rng.random(16)), xp.to_cunumpy(rng.random(16)), 16)


def host_of(value):
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(value, cupy.ndarray):
        return kt.host_buffer(value)
    return value


@pytest.fixture
def emulation(monkeypatch):
    """Install an ``emulated_launches`` stand-in; returns the dict of Python ports by name."""
    ports = {}
    launches = []

    class Hook:
        def launch(self, kernel, args, grid, block, shared_mem):
            launches.append(kernel.name)
            flat = []
            for a in args:
                if hasattr(type(a), "__cuda_args__"):
                    flat.extend(a.__cuda_args__())
                else:
                    flat.append(a)
            ports[kernel.name](*[host_of(a) for a in flat])

        def compile(self, kernel):
            return None

    @contextlib.contextmanager
    def emulated_launches(*, compiler=None, options=()):
        previous = _cuda_kernel.emulation_hook
        _cuda_kernel.emulation_hook = Hook()
        try:
            yield
        finally:
            _cuda_kernel.emulation_hook = previous

    monkeypatch.setattr(_parity, "emulated_launches", emulated_launches)
    ports["launches"] = launches
    return ports


def needs_fake():
    if not kt.fake_cupy_active():
        pytest.skip("runs the CUDA side through the fake CuPy (CUNUMPY_FAKE_CUPY=1)")


# --------------------------------------------------------------------------- errors


def test_argument_errors():
    k = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy"))
    with pytest.raises(TypeError, match="Kernel"):
        kt.assert_kernels_agree(axpy, make_axpy_args)
    with pytest.raises(ValueError, match="no CUDA"):
        kt.assert_kernels_agree(Kernel(axpy), make_axpy_args)
    with pytest.raises(ValueError, match="n_calls"):
        kt.assert_kernels_agree(k, make_axpy_args, n_calls=0)
    with pytest.raises(TypeError, match="outputs"):
        kt.assert_kernels_agree(k, make_axpy_args, outputs=(True,))
    with pytest.raises(TypeError, match="outputs"):
        kt.assert_kernels_agree(k, make_axpy_args, outputs=(1.5,))
    unsized = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy", n_threads_from=None))
    with pytest.raises(TypeError, match="n_threads"):
        kt.assert_kernels_agree(unsized, make_axpy_args)


def test_skips_without_a_way_to_launch(monkeypatch):
    if xp.cupy_available() and not kt.fake_cupy_active():
        pytest.skip("a GPU is present")
    monkeypatch.setattr(_parity, "emulated_launches", None)
    monkeypatch.delenv("CUNUMPY_REQUIRE_CUDA", raising=False)
    k = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy"))
    with pytest.raises(pytest.skip.Exception, match="CuPy|emulation"):
        kt.assert_kernels_agree(k, make_axpy_args)
    monkeypatch.setenv("CUNUMPY_REQUIRE_CUDA", "1")
    with pytest.raises(pytest.fail.Exception, match="CUNUMPY_REQUIRE_CUDA"):
        kt.assert_kernels_agree(k, make_axpy_args)


# --------------------------------------------------------------------------- comparisons


def test_agreeing_kernels_return_the_host_arrays(emulation):
    needs_fake()
    emulation["axpy"] = axpy
    k = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy"), host_options={"outputs": ("y",)})
    result = kt.assert_kernels_agree(k, make_axpy_args, n_threads=16, n_calls=2)
    assert list(result) == ["y"] and isinstance(result["y"], np.ndarray)
    # The keys of earlier releases find the same array without being listed.
    assert result["argument 2"] is result["y"] and "argument 2" in result and result.get("argument 2") is result["y"]
    assert "argument 1" not in result and result.get("argument 1") is None
    with pytest.raises(KeyError):
        result["argument 1"]
    assert emulation["launches"] == ["axpy", "axpy"]
    everything = kt.assert_kernels_agree(k, make_axpy_args, n_threads=lambda args: args[3], outputs=None)
    assert list(everything) == ["y"]  # the declared outputs are the default
    k_all = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy"))
    assert sorted(kt.assert_kernels_agree(k_all, make_axpy_args)) == ["x", "y"]
    assert list(kt.assert_kernels_agree(k_all, make_axpy_args, outputs=("x",))) == ["x"]
    assert list(kt.assert_kernels_agree(k_all, make_axpy_args, outputs=(-2,))) == ["y"]


def test_a_wrong_port_fails_naming_kernel_and_path(emulation):
    needs_fake()

    def wrong(alpha, x, y, n):
        y[:n] += alpha * x[:n]
        y[3] += 1.0

    emulation["axpy"] = wrong
    k = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy"))
    with pytest.raises(
        AssertionError, match=r"'axpy'.*differ in 1 of 2 array.*\n  y: 1 of 16 differ .*: \[3\] "
    ) as info:
        kt.assert_kernels_agree(k, make_axpy_args)
    assert "x:" not in str(info.value)
    # A tolerance absorbs it.
    kt.assert_kernels_agree(k, make_axpy_args, atol=1.5)


def test_state_that_is_not_reset_is_found_with_n_calls(emulation):
    needs_fake()
    state = {"calls": 0}

    def drifting(alpha, x, y, n):
        state["calls"] += 1
        y[:n] += alpha * x[:n] * (1.0 if state["calls"] == 1 else 2.0)

    emulation["axpy"] = drifting
    k = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy"))
    kt.assert_kernels_agree(k, make_axpy_args)
    with pytest.raises(AssertionError):
        kt.assert_kernels_agree(k, make_axpy_args, n_calls=2)


STRUCT_SRC = r"""
struct Particles { double* x; long long n; };
extern "C" __global__ void push(Particles p, double dt) { }
"""


class FakeStruct:
    """The documented CudaStruct surface used by the collection: ``name`` and ``fields``."""

    name = "Particles"
    fields = (types.SimpleNamespace(name="x"), types.SimpleNamespace(name="n"))


class HostParticles:
    def __init__(self, x):
        self.x, self.n = x, x.shape[0]


class DeviceParticles:
    """Reads like a CudaStructArguments: a struct with fields, attributes of the same names."""

    struct = FakeStruct()

    def __init__(self, x):
        self.x, self.n = x, x.shape[0]

    def pack(self):
        return None

    def __cuda_args__(self):
        return (self.x, self.n)


def test_struct_and_object_arguments_are_read_by_field():
    from cunumpy._parity import _collect, _selection

    k = Kernel(lambda p, dt: None, name="push")
    x = np.arange(3.0)
    chosen = _selection(k, None, 2)
    assert list(_collect((HostParticles(x), 0.1), chosen)) == ["argument 0.x"]
    assert list(_collect((DeviceParticles(x), 0.1), chosen)) == ["argument 0.x"]
    assert list(_collect(((x, x), [x], {"a": x}), _selection(Kernel(lambda a, b, c: None), None, 3))) == [
        "argument 0[0]", "argument 0[1]", "argument 1[0]", "argument 2['a']",
    ]  # fmt: skip
    named = Kernel(lambda p, dt: None, name="push")
    assert list(_collect((HostParticles(x), 0.1), _selection(named, ("p.x",), 2))) == ["argument 0.x"]
    assert list(_collect((HostParticles(x), 0.1), _selection(named, ("0.x",), 2))) == ["argument 0.x"]
    with pytest.raises(KeyError, match="'y'"):
        _collect((HostParticles(x), 0.1), _selection(named, ("p.y",), 2))
    with pytest.raises(KeyError, match="'q'"):
        _selection(named, ("q",), 2)
    with pytest.raises(IndexError, match="5"):
        _selection(named, (5,), 2)


def test_struct_value_fields_by_item():
    from cunumpy._parity import _fields

    class Value:
        struct = FakeStruct()

        def __init__(self, **values):
            self._values = values

        def __getitem__(self, key):
            return self._values[key]

        def __cuda_args__(self):
            return (b"packed",)

    x = np.ones(2)
    assert _fields(Value(x=x, n=2)) == [(".x", x), (".n", 2)]


def test_struct_arguments_agree(emulation):
    needs_fake()

    def push_host(p, dt):
        p.x[: p.n] += dt

    def push_port(x, n, dt):
        x[:n] += dt

    emulation["push"] = push_port
    cuda = CudaKernel(STRUCT_SRC, "push", check_signature=False)
    k = Kernel(push_host, cuda, name="push", dispatch="arrays")

    def make_args(backend, seed):
        x = xp.to_cunumpy(np.arange(5.0))
        return ((DeviceParticles if backend == "cupy" else HostParticles)(x), 0.5)

    result = kt.assert_kernels_agree(k, make_args, n_threads=5)
    assert list(result) == ["p.x"] and result["argument 0.x"] is result["p.x"]
    np.testing.assert_allclose(result["p.x"], np.arange(5.0) + 0.5)


def test_different_array_sets_are_an_assertion_error(emulation):
    needs_fake()
    emulation["axpy"] = lambda *args: None

    def host(alpha, x, y, n):
        pass

    k = Kernel(host, CudaKernel(AXPY_SRC, "axpy", check_signature=False), name="axpy")

    def make_args(backend, seed):
        alpha, x, y, n = make_axpy_args(backend, seed)
        return (alpha, 1.0 if backend == "cupy" else x, y, n)

    with pytest.raises(AssertionError, match="different arrays"):
        kt.assert_kernels_agree(k, make_args)


# --------------------------------------------------------------------------- test-argument modules


def test_parity_cases_and_check_parity(emulation):
    pytest.importorskip("pytest")
    catalog = xp.kernels.KernelCatalog.from_package("kernel_pkg")
    cases = kt.parity_cases(catalog)
    assert [c.id for c in cases] == ["axpy", "norm2", "scale_rows"]
    skipped = [c for c in cases if c.marks]
    assert [c.id for c in skipped] == ["norm2"] and "norm2_test_args.py" in skipped[0].marks[0].kwargs["reason"]
    with pytest.raises(ValueError, match="test-argument module"):
        kt.check_parity(catalog["norm2"])
    with pytest.raises(ValueError, match="test-argument module"):
        kt.check_parity(catalog["smooth"])
    if not kt.fake_cupy_active():
        return
    emulation["axpy"] = axpy

    def scale_rows(a, factors):
        a *= factors[:, None]

    emulation["scale_rows"] = scale_rows
    result = kt.check_parity(catalog["axpy"])
    assert list(result) == ["y"]  # OUTPUTS of the module
    assert sorted(kt.check_parity(catalog["axpy"], outputs=None)) == ["x", "y"]
    kt.check_parity(catalog["scale_rows"])


def test_check_parity_without_make_args(monkeypatch):
    module = types.ModuleType("cn_no_make_args")
    monkeypatch.setitem(sys.modules, "cn_no_make_args", module)
    k = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy"), test_args="cn_no_make_args")
    with pytest.raises(TypeError, match="make_args"):
        kt.check_parity(k)


def test_settings_table():
    assert kt.TEST_ARGS_SETTINGS["N_THREADS"] == "n_threads" and len(kt.TEST_ARGS_SETTINGS) == 8


# --------------------------------------------------------------------------- device_function_kernel


def test_device_function_kernel_generates_the_wrapper():
    k = kt.device_function_kernel(
        "__device__ int f(const double* t, int p, double x) { return p; }",
        "int f(const double* t, int p, double x)",
        includes=("cunumpy/index.cuh", "<cmath>"),
    )
    assert k.name == "f_kernel"
    assert [(p.name, p.declaration) for p in k.signature] == [
        ("t", "double* t"), ("p", "int* p"), ("x", "double* x"), ("out", "int* out"), ("n", "int n"),
    ]  # fmt: skip
    assert '#include "cunumpy/index.cuh"' in k.source and "#include <cmath>" in k.source
    assert "out[i] = f(t, p[i], x[i]);" in k.source
    void = kt.device_function_kernel("__device__ void g(double* y, double v) { }", "void g(double* y, double v)",
                                     name="g_all", n_threads_param="count", block_size=64)  # fmt: skip
    assert void.name == "g_all" and void.block_size == 64
    assert [p.name for p in void.signature] == ["y", "v", "count"] and "g(y, v[i]);" in void.source


def test_device_function_kernel_with_structs():
    domain = types.SimpleNamespace(name="Domain")
    src = "struct Domain { double lo; double hi; };\n__device__ double g(const Domain& d, double x) { return x; }"
    k = kt.device_function_kernel(src, "double g(const Domain& d, double x)", structs=[domain], check_signature=False)
    assert "void g_kernel(Domain d, const double* x, double* out, int n)" in k.source


def test_device_function_kernel_errors():
    src = "__device__ double f(double x) { return x; }"
    for bad, pattern in [
        ("double f(double x", "parse"),
        ("double* f(double x)", "pointer"),
        ("Domain f(double x)", "unsupported return"),
        ("double f(Widget w)", "unsupported type"),
        ("double f(double& x)", "reference"),
        ("double f(double out)", "clashes"),
        ("double f(int n)", "clashes"),
    ]:
        with pytest.raises(ValueError, match=pattern):
            kt.device_function_kernel(src, bad)
    domain = types.SimpleNamespace(name="Domain")
    with pytest.raises(ValueError, match="struct"):
        kt.device_function_kernel(src, "Domain f(double x)", structs=[domain])


# --------------------------------------------------------------------------- markers


def test_hip_gap_markers():
    assert kt.warp_shuffle_available() is not xp.cuda.is_hip()
    assert kt.high_dim_cuda_views_available() == kt.bounds_check_views_available() == kt.warp_shuffle_available()
    launches = (kt.fake_cupy_active() and kt.emulation_compiler() is not None) or (
        xp.cupy_available() and not kt.fake_cupy_active()
    )
    for name in ("requires_warp_shuffle", "requires_high_dim_cuda_views", "requires_bounds_check_views"):
        mark = getattr(kt, name)
        assert mark.name == "skipif" and name in kt.__all__
        if not launches:  # neither a GPU nor the fake CuPy with the emulation: skipped, saying so
            assert mark.args[0] is not False and "CUNUMPY_FAKE_CUPY=1" in mark.kwargs["reason"]
        elif xp.cuda.is_hip():  # pragma: no cover - ROCm
            assert mark.args[0] is True and "HIP" in mark.kwargs["reason"]
        else:
            assert mark.args[0] is False


@kt.requires_warp_shuffle
def test_the_marker_decorates_a_test():
    assert kt.warp_shuffle_available()


# --------------------------------------------------------------------------- reports


def test_every_differing_array_is_listed_by_name(emulation):
    needs_fake()

    def wrong(alpha, x, y, n):
        y[:n] += alpha * x[:n]
        y[2:6] = -1.0
        x[0] = 7.0

    emulation["axpy"] = wrong
    k = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy"))
    with pytest.raises(AssertionError) as info:
        kt.assert_kernels_agree(k, make_axpy_args)
    lines = str(info.value).splitlines()
    assert lines[0] == "kernel 'axpy': CUDA and host results differ in 2 of 2 array(s) (rtol=1e-12, atol=0):"
    assert lines[1].startswith("  x: 1 of 16 differ (CUDA vs host): [0] 7.0 vs 0.") and ", ..." not in lines[1]
    assert lines[2].startswith("  y: 4 of 16 differ (CUDA vs host): [2] -1.0 vs ") and lines[2].endswith(", ...")
    assert lines[2].count(" vs ") == 4  # "CUDA vs host", then the first three indices
    assert len(lines) == 3


def test_shape_and_multidimensional_differences():
    from cunumpy._parity import _mismatch

    assert _mismatch("out", np.zeros(3), np.zeros(4), 0, 0) == "out: shape (3,) on CUDA, (4,) on the host"
    a, b = np.zeros((2, 3)), np.zeros((2, 3))
    a[1, 2] = np.nan
    assert _mismatch("grid", a, b, 0, 0) == "grid: 1 of 6 differ (CUDA vs host): [1, 2] nan vs 0.0"
    b[1, 2] = np.nan  # NaN in the same place agrees, as in numpy.testing.assert_allclose
    assert _mismatch("grid", a, b, 0, 0) is None
    assert _mismatch("flags", np.array([True, False]), np.array([True, True]), 0, 0).startswith(
        "flags: 1 of 2 differ (CUDA vs host): [1] 0 vs 1"
    )
    assert _mismatch("ids", np.array([1, 2]), np.array([1, 3]), 0.5, 0) is None  # within rtol


def test_returned_arrays_are_compared_as_return(emulation, monkeypatch):
    needs_fake()

    def host(alpha, x, y, n):
        y[:n] += alpha * x[:n]
        return y * 2.0

    class Returning:
        def launch(self, kernel, args, grid, block, shared_mem):
            alpha, x, y, n = args
            axpy(alpha, host_of(x), host_of(y), n)
            return xp.to_cunumpy(host_of(y) * 3.0)  # a different return value

        def compile(self, kernel):
            return None

    @contextlib.contextmanager
    def emulated_launches(**options):
        previous = _cuda_kernel.emulation_hook
        _cuda_kernel.emulation_hook = Returning()
        try:
            yield
        finally:
            _cuda_kernel.emulation_hook = previous

    monkeypatch.setattr(_parity, "emulated_launches", emulated_launches)
    k = Kernel(host, CudaKernel(AXPY_SRC, "axpy"), host_options={"outputs": ("y",)})
    with pytest.raises(AssertionError, match=r"\n  return: 16 of 16 differ") as info:
        kt.assert_kernels_agree(k, make_axpy_args)
    assert "y:" not in str(info.value)


def test_sanitize_goes_to_the_emulation_of_the_cuda_side(emulation, monkeypatch):
    needs_fake()
    emulation["axpy"] = axpy
    seen = []
    stand_in = _parity.emulated_launches

    def emulated_launches(**options):
        seen.append(options)
        return stand_in()

    monkeypatch.setattr(_parity, "emulated_launches", emulated_launches)
    k = Kernel(axpy, CudaKernel(AXPY_SRC, "axpy"))
    kt.assert_kernels_agree(k, make_axpy_args, sanitize=("racecheck",))
    kt.assert_kernels_agree(k, make_axpy_args)
    assert seen == [{"sanitize": ("racecheck",)}, {}]


OFF_BY_ONE = '''
import numpy as np

import cunumpy as xp
from cunumpy import _parity, kernel_testing as kt

SOURCE = r"""
extern "C" __global__ void diffuse(const double* u, double* out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < 1 || i >= n - 2) return;   /* off by one: the last interior point is missed */
    out[i] = u[i] + 0.1 * (u[i - 1] - 2.0 * u[i] + u[i + 1]);
}
"""


def diffuse(u, out, n):
    out[1:n - 1] = u[1:n - 1] + 0.1 * (u[:n - 2] - 2.0 * u[1:n - 1] + u[2:n])


kernel = xp.kernels.Kernel(diffuse, xp.kernels.CudaKernel(SOURCE, "diffuse"), host_options={"outputs": ("out",)})


def make_args(backend, seed):
    rng = np.random.default_rng(seed)
    return (xp.to_cunumpy(rng.random(64)), xp.zeros(64), 64)


def test_diffuse_parity():
    kt.assert_kernels_agree(kernel, make_args)


def make_bad_args(backend, seed):
    return (xp.zeros(64, dtype=np.float32), xp.zeros(64), 64)  # float32 for a double*


def test_a_launch_error():
    kt.assert_kernels_agree(kernel, make_bad_args)
'''


@pytest.mark.nosan
def test_an_off_by_one_fails_in_25_lines_naming_out(tmp_path):
    import os
    import subprocess

    from _emulation_support import requires_compiler  # noqa: F401 - sets the test cache

    if kt.emulation_compiler() is None:
        pytest.skip("needs a C++ compiler")
    (tmp_path / "test_diffuse.py").write_text(OFF_BY_ONE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUNUMPY_", "PYTEST_"))}
    env.update(
        CUNUMPY_FAKE_CUPY="1", CUNUMPY_BACKEND="cupy", CUNUMPY_EMULATION_CACHE=os.environ["CUNUMPY_EMULATION_CACHE"]
    )

    def run(test):
        # pytest's default output (no -q, no -v), as a user sees it.
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "--rootdir",
                str(tmp_path),
                f"{tmp_path / 'test_diffuse.py'}::{test}",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=300,
        )
        assert result.returncode == 1, result.stdout + result.stderr
        return result.stdout

    out = run("test_diffuse_parity")
    assert len(out.splitlines()) <= 25, out
    assert "kernel 'diffuse': CUDA and host results differ in 1 of 1 array(s)" in out
    assert "out: 1 of 64 differ (CUDA vs host): [62] 0.0 vs " in out
    assert "_parity.py" not in out and "def assert_kernels_agree" not in out, out
    # An error inside the launch shows the test and the message, not the library's code.
    out = run("test_a_launch_error")
    assert "TypeError: kernel 'diffuse': argument 0 (double* u): expected dtype float64" in out, out
    assert "cunumpy" + os.sep not in out.replace("plugins: cunumpy", ""), out
