"""CPU emulation through emulated_launches(): CudaKernel launches and compilation on the fake
CuPy, argument objects and struct parameters, hook nesting and threads, and the Python
layer against a serial reference launcher."""

import textwrap
import threading
import types

import numpy as np
import pytest
from _emulation_support import requires_compiler
from _fake_support import active_fake_cupy
from _serial_launcher import serial_emu_launch

from cunumpy import kernel_testing as kt
from cunumpy._emulation import _launch
from cunumpy.kernels import CudaKernel, CudaKernelVariants, _cuda_kernel

pytestmark = requires_compiler

SOURCE = r"""
#include <cunumpy/index.cuh>
#include <cunumpy/reduce.cuh>

struct Particles {
    double* x;
    long long n;
    double scale;
};

extern "C" __global__ void scale(double* x, double a, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    x[i] *= a;
}

extern "C" __global__ void push(Particles p, double dt) {
    CUNUMPY_THREAD_1D(i, p.n);
    p.x[i] += dt * p.scale;
}

extern "C" __global__ void tiled_sum(const double* x, double* out, long long n) {
    __shared__ double partial[128];
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double v = i < n ? x[i] : 0.0;
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        for (int w = 0; w < (int)blockDim.x / 32; ++w) s += partial[w];
        out[blockIdx.x] = s;
    }
}

template <typename T> __global__ void fill(T* x, T value, long long n) {
    CUNUMPY_THREAD_1D(i, n);
    x[i] = value;
}
"""


class ParticlesStruct:
    """A duck-typed CudaStruct (name and dtype), as CudaKernel accepts."""

    name = "Particles"
    dtype = np.dtype([("x", "<u8"), ("n", "<i8"), ("scale", "<f8")], align=True)


def kernel(name, **kw):
    return CudaKernel(SOURCE, name, **kw)


# ------------------------------------------------------------------ the Python layer alone


def test_the_packed_table_runs_under_a_serial_reference_launcher(monkeypatch):
    """The marshalled arguments follow the ABI: a ctypes loop launcher runs them too."""
    monkeypatch.setattr(
        _launch,
        "core",
        types.SimpleNamespace(
            EMU_ABI_VERSION=_launch.core.EMU_ABI_VERSION,
            emu_launch=serial_emu_launch,
            emu_shadow_available=lambda: False,
        ),
    )
    monkeypatch.setenv("CUNUMPY_EMULATION_MEMCHECK", "0")  # the serial launcher has no runtime checks
    monkeypatch.delenv("CUNUMPY_EMULATION_SANITIZE", raising=False)
    loops = SOURCE.split("extern", 1)[0].replace("#include <cunumpy/reduce.cuh>", "") + textwrap.dedent("""
        extern "C" __global__ void shift(Particles p, double* y, const double* x, long long n) {
            CUNUMPY_THREAD_1D(i, n);
            y[i] = p.scale * x[i] + (double)p.n;
        }
        template <typename T> __global__ void fill(T* x, T value, long long n) {
            CUNUMPY_THREAD_1D(i, n);
            x[i] = value;
        }
    """)
    x = np.arange(10.0)
    y = np.zeros(10)
    k = CudaKernel(loops, "shift", structs=[ParticlesStruct()])
    kt.emulate_cuda_kernel(k, {"x": x, "n": 5, "scale": 3.0}, y, x, 10)
    np.testing.assert_array_equal(y, 3 * x + 5)
    z = np.zeros(7, np.int32)
    kt.emulate_cuda_kernel(CudaKernel(loops, "fill", template_args=(np.int32,)), z, 5, 7)
    assert (z == 5).all()


# ------------------------------------------------------------------ struct parameters


def test_struct_parameters_as_mapping_object_and_packed_value():
    k = kernel("push", structs=[ParticlesStruct()])
    x = np.zeros(50)
    kt.emulate_cuda_kernel(k, {"x": x, "n": 50, "scale": 2.0}, 0.5)
    assert (x == 1.0).all()
    owner = types.SimpleNamespace(x=x, n=50, scale=4.0)
    kt.emulate_cuda_kernel(k, owner, 0.5)  # launch size inferred from the struct's array
    assert (x == 3.0).all()
    strided = np.zeros(100)[::2]  # a pointer field of a strided array: copied in and back
    kt.emulate_cuda_kernel(k, {"x": strided, "n": 50, "scale": 1.0}, 1.0)
    assert (strided == 1.0).all()
    with pytest.raises(TypeError, match="field 'scale'"):
        kt.emulate_cuda_kernel(k, {"x": x, "n": 50}, 0.5)
    with pytest.raises(TypeError, match="field 'n'"):
        kt.emulate_cuda_kernel(k, {"x": x, "n": 1.5, "scale": 1.0}, 0.5)
    packed = np.zeros((), ParticlesStruct.dtype)
    packed["x"], packed["n"], packed["scale"] = x.ctypes.data, 50, 1.0
    kt.emulate_cuda_kernel(k, packed[()], 1.0, n_threads=50)
    assert (x == 4.0).all()


class StructValueLike:
    """The protocol of xp.arguments.CudaStructValue: ``struct``, ``value["field"]`` and a packed
    value (holding device addresses) behind ``__cuda_args__``."""

    def __init__(self, struct, **values):
        self.struct = struct
        self._values = values

    def __getitem__(self, field):
        return self._values[field]

    def __cuda_args__(self):
        return (np.zeros((), self.struct.dtype)[()],)  # never read by the emulation


class StructArgumentsLike:
    """The protocol of xp.arguments.CudaStructArguments: fields are attributes, ``pack()``."""

    struct = ParticlesStruct()

    def __init__(self, x):
        self.x, self.n, self.scale = x, x.shape[0], 10.0

    def pack(self):
        return None

    def __cuda_args__(self):
        return (np.zeros((), self.struct.dtype)[()],)


def test_struct_values_and_struct_arguments_are_read_through_their_fields():
    k = kernel("push", structs=[ParticlesStruct()])
    x = np.zeros(40)
    kt.emulate_cuda_kernel(k, StructValueLike(ParticlesStruct(), x=x, n=40, scale=1.0), 2.0)
    assert (x == 2.0).all()
    kt.emulate_cuda_kernel(k, StructArgumentsLike(x), 0.5)  # inferred from the field array
    assert (x == 7.0).all()
    with pytest.raises(TypeError, match="has no field 'scale'"):
        kt.emulate_cuda_kernel(k, StructValueLike(ParticlesStruct(), x=x, n=40), 2.0)


def test_argument_objects_are_flattened():
    class Args:
        def __init__(self, x, n):
            self.x, self.n = x, n

        def __cuda_args__(self):
            return (self.x, 2.0, self.n)

    x = np.ones(20)
    kt.emulate_cuda_kernel(kernel("scale"), Args(x, 20))
    assert (x == 2.0).all()


def test_templates_run_through_their_name_expression():
    y = np.zeros(33, np.float32)
    kt.emulate_cuda_kernel(kernel("fill", template_args=("float",)), y, np.float32(1.5), 33)
    assert (y == 1.5).all()


def test_shared_memory_barriers_and_shuffles_agree_with_numpy():
    rng = np.random.default_rng(5)
    x = rng.integers(-100, 100, 1000).astype(float)
    out = np.zeros(8)
    kt.emulate_cuda_kernel(kernel("tiled_sum"), x, out, 1000, block=128)
    np.testing.assert_array_equal(out, np.concatenate([x, np.zeros(24)]).reshape(8, 128).sum(axis=1))


# ------------------------------------------------------------------ hooks


def test_emulated_launches_installs_and_restores_the_hooks():
    from cunumpy._fake_cupy import _kernels as fake_kernels

    before = _cuda_kernel._emulation_hook()  # None on NumPy, the automatic emulation on the fake
    with kt.emulated_launches():
        outer = _cuda_kernel._emulation_hook()
        assert outer is not None and outer is not before and _launch.fake_cupy_hook() is outer
        with pytest.raises(ZeroDivisionError), kt.emulated_launches(options=("-ffp-contract=off",)):
            assert _cuda_kernel._emulation_hook().settings.options == ("-ffp-contract=off",)
            raise ZeroDivisionError
        assert _cuda_kernel._emulation_hook() is outer
    assert _cuda_kernel._emulation_hook() is before
    assert (_cuda_kernel.emulation_hook, fake_kernels._launch_hook) == (None, None)  # nothing global
    with pytest.raises(TypeError, match="options"), kt.emulated_launches(options="-O3"):
        pass


def test_threads_leaving_in_any_order_restore_the_outside_hook():
    before = _cuda_kernel._emulation_hook()
    entered = threading.Barrier(2)
    leave_first = threading.Event()

    def worker(first):
        with kt.emulated_launches():
            entered.wait()
            if not first:
                leave_first.wait()
        if first:
            leave_first.set()

    threads = [threading.Thread(target=worker, args=(f,)) for f in (True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _cuda_kernel._emulation_hook() is before


def test_compile_builds_the_emulation_and_returns_none():
    k = kernel("scale")
    with kt.emulated_launches():
        assert k.compile() is None
        assert k.recompile() is None
    variants = CudaKernelVariants(lambda t: kernel("fill", template_args=(t,)))
    with kt.emulated_launches():
        variants.compile_all(["double", "int", "float"], jobs=2)
    assert len(variants) == 3
    broken = CudaKernelVariants(
        lambda t: CudaKernel('extern "C" __global__ void broken(double* x) { x[0] = nope; }', "broken")
    )
    with kt.emulated_launches(), pytest.raises(RuntimeError, match="nope"):
        broken.compile_all([1])


def test_cuda_kernel_launches_on_fake_arrays(dev):
    x = dev(np.arange(100.0))
    k = kernel("scale")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CUNUMPY_EMULATION", "0")  # the automatic emulation off: refused outside a block
        with pytest.raises(NotImplementedError, match="CUNUMPY_EMULATION=0.*emulated_launches"):
            k(x, 2.0, 100)
        with kt.emulated_launches():
            k(x, 2.0, 100)
    k(x, 2.0, 50, n_threads=50)  # emulated by itself
    np.testing.assert_array_equal(kt.host_buffer(x), np.concatenate([4 * np.arange(50.0), 2 * np.arange(50.0, 100)]))
    out = dev(np.zeros(8))
    with kt.emulated_launches():
        kernel("tiled_sum")(dev(np.ones(1000)), out, 1000, block=128)
    np.testing.assert_array_equal(kt.host_buffer(out), [128.0] * 7 + [104.0])


def test_raw_kernels_of_the_fake_cupy_launch_too(dev):
    cupy = active_fake_cupy()
    raw = cupy.RawKernel(SOURCE, "scale")
    x = dev(np.ones(10))
    with kt.emulated_launches():
        raw.compile()
        raw((1,), (32,), (x, np.float64(3.0), np.int64(10)))
    assert (kt.host_buffer(x) == 3.0).all()
    with kt.emulated_launches(), pytest.raises(NotImplementedError, match="ElementwiseKernel"):
        cupy.ElementwiseKernel("T x", "T y", "y = x", "copy")(x, x)


def test_fake_cupy_session_emulates_launches(dev):
    k = kernel("scale")
    with kt.fake_cupy_session():
        x = dev(np.ones(10))
        k(x, 5.0, 10)
    assert (kt.host_buffer(x) == 5.0).all()


def test_check_finite_scans_the_host_buffers(dev):
    k = kernel("scale", check_finite=True)
    x = dev(np.ones(4))
    with kt.emulated_launches(), pytest.raises(RuntimeError, match="NaN or inf in argument 0"):
        k(x, float("inf"), 4)


def test_concurrent_launches_from_threads(dev):
    k = kernel("scale")
    arrays = [dev(np.ones(1000)) for _ in range(4)]
    errors = []

    def work(a):
        try:
            for _ in range(5):
                k(a, 2.0, 1000)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    with kt.emulated_launches():
        threads = [threading.Thread(target=work, args=(a,)) for a in arrays]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    for a in arrays:
        assert (kt.host_buffer(a) == 32.0).all()


@pytest.mark.nosan
def test_cuda_kernel_path_in_a_fake_cupy_subprocess():
    """The plain (NumPy) run covers the fake-CuPy launch path in a child process."""
    code = textwrap.dedent(f"""
        import numpy as np
        from cunumpy import kernel_testing as kt
        import cupy
        from cunumpy.kernels import CudaKernel
        k = CudaKernel({SOURCE!r}, "tiled_sum")
        x = cupy.asarray(np.arange(1000.0))
        out = cupy.zeros(8)
        with kt.emulated_launches():
            k(x, out, 1000, block=128)
        expected = np.concatenate([np.arange(1000.0), np.zeros(24)]).reshape(8, 128).sum(axis=1)
        assert np.array_equal(out.get(), expected), out.get()
        print("ok")
    """)
    result = kt.run_in_fake_cupy_subprocess(code, timeout=300)
    assert "ok" in result.stdout
