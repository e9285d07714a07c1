"""The kernel layer, the argument structs and the CPU emulation together (issues 10, 11, 12).

Each part has its own tests against stand-ins of the others; these use the real classes:
``xp.kernels.Kernel`` / ``CudaKernel`` / ``KernelCatalog``, ``xp.arguments`` structs and
argument objects, and ``kernel_testing.emulated_launches`` / ``assert_kernels_agree`` /
``check_parity`` running the CUDA side through the emulation on the fake CuPy.

Tests that need fake-CuPy device arrays skip on the plain NumPy run; one subprocess test
runs the headline checks there in a fake-CuPy child. All kernels live in one source, so the
emulation compiles it once per process (the cache directory is shared with the child).
"""

import numpy as np
import pytest
from _emulation_support import requires_compiler
from _fake_support import active_fake_cupy, rerun_under_fake_cupy

import cunumpy as xp
from cunumpy import kernel_testing as kt
from cunumpy.arguments import CudaArguments, CudaStruct, CudaStructArguments

pytestmark = requires_compiler

Kernel = xp.kernels.Kernel
CudaKernel = xp.kernels.CudaKernel

BLOCK = 128

SOURCE = r"""
#include <cunumpy/array_view.cuh>
#include <cunumpy/index.cuh>
#include <cunumpy/reduce.cuh>

struct Particles {
    double* x;
    Array2D<double> v;
    long long n;
    double dt;
};

// Every field kind, with padding between them: the emulation's C++ layout must be the
// CudaStruct's dtype (the values are read back field by field).
struct Mixed {
    bool flag;
    int8_t c;
    double* out;
    int k;
    CArray1D<float> a;
    short s;
    unsigned long long u;
    float f;
    Array2D<int> v;
    char last;
};

extern "C" __global__ void read_mixed(Mixed m, double tail)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    m.out[0] = m.flag; m.out[1] = m.c; m.out[2] = m.k; m.out[3] = m.a(1); m.out[4] = m.s;
    m.out[5] = (double)m.u; m.out[6] = m.f; m.out[7] = m.v(1, 2); m.out[8] = m.last;
    m.out[9] = tail; m.out[10] = (double)sizeof(Mixed);
}

// Per-block sums: a warp reduction written with __shfl_down_sync, the warp results
// staged in shared memory, a barrier, then thread 0 adds them.
extern "C" __global__ void block_sums(const double* x, double* sums, long long n)
{
    __shared__ double partial[32];
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double v = i < n ? x[i] : 0.0;
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        for (int w = 0; w < ((int)blockDim.x + 31) / 32; ++w) s += partial[w];
        sums[blockIdx.x] = s;
    }
}

// The same through reduce.cuh: every thread gets the block's maximum; one atomic add per block.
extern "C" __global__ void total_and_max(const double* x, double* total, double* block_max, long long n)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const double v = i < n ? x[i] : 0.0;
    cunumpy_block_sum_to(total, v);
    const double m = cunumpy_block_max(i < n ? x[i] : -1e300);
    if (threadIdx.x == 0) block_max[blockIdx.x] = m;
}

// A struct with a pointer field and a strided view field, both written.
extern "C" __global__ void push(Particles p)
{
    CUNUMPY_THREAD_1D(i, p.n);
    p.x[i] += p.dt * p.v(i, 0);
    p.v(i, 1) = 2.0 * p.v(i, 0);
}

// A 2-D launch over the view field.
extern "C" __global__ void scale_v(Particles p, double factor)
{
    CUNUMPY_THREAD_2D(i, j, p.v.shape[0], p.v.shape[1]);
    p.v(i, j) *= factor * (j + 1);
}

// A struct next to plain parameters (for CudaArguments).
extern "C" __global__ void push_scaled(Particles p, const double* factor, long long n)
{
    CUNUMPY_THREAD_1D(i, n);
    p.x[i] += p.dt * factor[i];
}
"""

Mixed = CudaStruct(
    "Mixed",
    [
        ("flag", "bool"),
        ("c", "int8_t"),
        ("out", "double*"),
        ("k", "int"),
        ("a", "CArray1D<float>"),
        ("s", "short"),
        ("u", "unsigned long long"),
        ("f", "float"),
        ("v", "Array2D<int>"),
        ("last", "char"),
    ],
)
PARTICLES_FIELDS = (("x", "double*"), ("v", "Array2D<double>"), ("n", "long long"), ("dt", "double"))
Particles = CudaStruct("Particles", PARTICLES_FIELDS)


class ParticleArguments(CudaStructArguments):
    struct_name = "Particles"
    fields = PARTICLES_FIELDS

    def __init__(self, x, v, dt, host=False):
        self.x, self.v, self.n, self.dt = x, v, x.shape[0], dt
        self.pack(host_arrays=host)


# --------------------------------------------------------------------------- host kernels


def block_sums(x, sums, n):
    for b in range(sums.shape[0]):
        sums[b] = x[b * BLOCK : min(n, (b + 1) * BLOCK)].sum()


def total_and_max(x, total, block_max, n):
    total[0] += x[:n].sum()
    for b in range(block_max.shape[0]):
        block_max[b] = x[b * BLOCK : min(n, (b + 1) * BLOCK)].max()


def _field(p, name):
    return p[name] if hasattr(type(p), "__getitem__") else getattr(p, name)


def push(p):
    n = _field(p, "n")
    x, v = _field(p, "x"), _field(p, "v")
    x[:n] += _field(p, "dt") * v[:n, 0]
    v[:n, 1] = 2.0 * v[:n, 0]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def fake(fake_cupy):
    return fake_cupy


@pytest.fixture(scope="module")
def cuda():
    """The kernels of SOURCE, sharing one source (one emulation build)."""
    return {
        name: CudaKernel(SOURCE, name, block_size=BLOCK, structs=[Particles, Mixed])
        for name in ("block_sums", "total_and_max", "push", "push_scaled", "scale_v", "read_mixed")
    }


def _particle_data(seed, n=300):
    rng = np.random.default_rng(seed)
    x = rng.random(n)
    v = rng.random((n, 7))[:, 1:6:2]  # a view with non-unit strides in both axes
    return x, v


# --------------------------------------------------------------------------- 1. collectives


def _x(seed=3, n=1000):
    return np.random.default_rng(seed).standard_normal(n)


def make_reduction_args(backend, seed):
    x = _x(seed)
    n_blocks = -(-x.shape[0] // BLOCK)
    return (xp.to_cunumpy(x), xp.zeros(n_blocks), x.shape[0])


def make_total_args(backend, seed):
    x = _x(seed)
    n_blocks = -(-x.shape[0] // BLOCK)
    return (xp.to_cunumpy(x), xp.zeros(1), xp.zeros(n_blocks), x.shape[0])


def test_shared_memory_barrier_and_shuffle_kernel_agrees_with_its_host_kernel(fake, cuda):
    kernel = Kernel(block_sums, cuda["block_sums"])
    kernel.check_signature()
    results = kt.assert_kernels_agree(kernel, make_reduction_args, rtol=1e-13)
    assert sorted(results) == ["sums", "x"]  # by parameter name
    np.testing.assert_allclose(results["sums"].sum(), _x(0).sum(), rtol=1e-12)
    assert results["argument 1"] is results["sums"]  # the keys of earlier releases still work


def test_reduce_cuh_kernel_agrees_with_its_host_kernel(fake, cuda):
    kernel = Kernel(total_and_max, cuda["total_and_max"], host_options={"outputs": ("total", "block_max")})
    results = kt.assert_kernels_agree(kernel, make_total_args, rtol=1e-12, n_calls=2)
    assert sorted(results) == ["block_max", "total"]
    np.testing.assert_allclose(results["total"][0], 2 * _x(0).sum(), rtol=1e-12)


def test_the_emulated_device_path_of_a_kernel_call(fake, cuda):
    """A plain Kernel call on the CuPy backend inside emulated_launches() (no parity helper)."""
    kernel = Kernel(block_sums, cuda["block_sums"])
    x = _x(7, 300)
    with xp.use_backend("cupy", strict=True), kt.emulated_launches():
        sums = xp.zeros(3)
        kernel(xp.to_cunumpy(x), sums, 300)
        got = sums.get()
    np.testing.assert_allclose(got, [x[:128].sum(), x[128:256].sum(), x[256:].sum()], rtol=1e-13)


# --------------------------------------------------------------------------- 2. structs


def _device_particles(fake, seed, n=300):
    x, v = _particle_data(seed, n)
    x_dev = fake.asarray(x)
    v_dev = fake.asarray(np.random.default_rng(seed).random((n, 7)))[:, 1:6:2]
    v_dev[...] = fake.asarray(v)
    assert not v_dev.flags.c_contiguous
    return x, v, x_dev, v_dev


def _expected_push(x, v, dt):
    x, v = x.copy(), v.copy()
    x += dt * v[:, 0]
    v[:, 1] = 2.0 * v[:, 0]
    return x, v


@pytest.mark.parametrize("form", ["struct value", "struct arguments", "struct value in CudaArguments"])
def test_struct_parameter_fields_are_written_back_to_the_callers_arrays(fake, cuda, form):
    x, v, x_dev, v_dev = _device_particles(fake, 11)
    fields = {"x": x_dev, "v": v_dev, "n": 300, "dt": 0.5}
    if form == "struct value":
        argument = Particles(**fields)
    elif form == "struct arguments":
        argument = ParticleArguments(x_dev, v_dev, 0.5)
    else:
        argument = CudaArguments(Particles(**fields))
    kernel = cuda["push"]
    assert kernel.launch_shape(args=(argument,)) == ((3,), (BLOCK,))  # inferred from field x
    with kt.emulated_launches():
        kernel(argument)
    want_x, want_v = _expected_push(x, v, 0.5)
    np.testing.assert_array_equal(kt.host_buffer(x_dev), want_x)
    np.testing.assert_array_equal(kt.host_buffer(v_dev), want_v)  # the strided view, in place


def test_struct_and_plain_arguments_in_one_argument_object(fake, cuda):
    x, _v, x_dev, v_dev = _device_particles(fake, 12)
    factor = np.linspace(0.0, 1.0, 300)
    args = CudaArguments(ParticleArguments(x_dev, v_dev, 2.0), fake.asarray(factor), 300)
    kernel = cuda["push_scaled"]
    assert kernel.launch_shape(args=(args,)) == ((3,), (BLOCK,))
    with kt.emulated_launches():
        kernel(args)
    np.testing.assert_array_equal(kt.host_buffer(x_dev), x + 2.0 * factor)


def test_a_launch_takes_packed_structs_only_also_when_emulated(fake, cuda):
    """Inside emulated_launches() a CudaKernel launch is as strict as on a GPU: a mapping is
    not a packed struct (emulate_cuda_kernel takes mappings)."""
    x, _v, x_dev, v_dev = _device_particles(fake, 13)
    with kt.emulated_launches(), pytest.raises(TypeError, match="packed value of the struct"):
        cuda["push"]({"x": x_dev, "v": v_dev, "n": 300, "dt": 1.0}, n_threads=300)
    np.testing.assert_array_equal(kt.host_buffer(x_dev), x)


class Owner:
    """Not a CudaStructArguments: any object with one attribute per field."""

    def __init__(self, x, v, dt):
        self.x, self.v, self.n, self.dt = x, v, x.shape[0], dt


@pytest.mark.parametrize("device", [False, True], ids=["numpy arrays", "fake arrays"])
@pytest.mark.parametrize("form", ["mapping", "struct value", "struct arguments", "object"])
def test_emulate_cuda_kernel_with_real_struct_classes(cuda, form, device):
    if device:
        cupy = active_fake_cupy()
        if cupy is None:
            pytest.skip("fake arrays need the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
        x, v, x_arg, v_arg = _device_particles(cupy, 15)
        result = kt.host_buffer
    else:
        x, v = _particle_data(15)
        x_arg, v_arg = x.copy(), np.random.default_rng(1).random((300, 7))[:, 1:6:2]
        v_arg[...] = v
        result = np.asarray
    fields = {"x": x_arg, "v": v_arg, "n": 300, "dt": 0.5}
    if form == "mapping":
        argument = fields
    elif form == "struct value":
        argument = Particles(**fields) if device else Particles.pack(fields, host_arrays=True)
    elif form == "struct arguments":
        argument = ParticleArguments(x_arg, v_arg, 0.5, host=not device)
    else:
        argument = Owner(x_arg, v_arg, 0.5)
    kt.emulate_cuda_kernel(cuda["push"], argument)  # the launch size comes from field x
    want_x, want_v = _expected_push(x, v, 0.5)
    np.testing.assert_array_equal(result(x_arg), want_x)
    np.testing.assert_array_equal(result(v_arg), want_v)


def test_a_missing_struct_field_is_a_type_error_naming_it(cuda):
    x, v = _particle_data(16)
    kernel = cuda["push"]
    with pytest.raises(TypeError, match="no field 'dt'"):
        kt.emulate_cuda_kernel(kernel, {"x": x, "v": v, "n": 300})
    owner = Owner(x, v, 1.0)
    del owner.v
    with pytest.raises(TypeError, match="no field 'v'"):
        kt.emulate_cuda_kernel(kernel, owner, n_threads=300)
    np.testing.assert_array_equal(x, _particle_data(16)[0])  # nothing ran


def test_struct_fields_are_checked_like_kernel_arguments(cuda):
    x, v = _particle_data(17)
    kernel = cuda["push"]
    with pytest.raises(TypeError, match="field 'v'"):
        kt.emulate_cuda_kernel(kernel, {"x": x, "v": v.astype(np.float32), "n": 300, "dt": 1.0})
    with pytest.raises(TypeError, match="field 'n'"):
        kt.emulate_cuda_kernel(kernel, {"x": x, "v": v, "n": 1.5, "dt": 1.0}, n_threads=300)
    with pytest.raises(AttributeError, match="'dt'"):

        class Incomplete(ParticleArguments):
            def __init__(self, x, v):
                self.x, self.v, self.n = x, v, x.shape[0]
                self.pack(host_arrays=True)

        Incomplete(x, v)


def make_struct_value_args(backend, seed):
    x, v = _particle_data(seed)
    fields = {"x": xp.to_cunumpy(x), "v": xp.to_cunumpy(v), "n": x.shape[0], "dt": 0.25}
    if backend == "numpy":
        return (Particles.pack(fields, host_arrays=True),)
    return (Particles(**fields),)


def make_struct_arguments_args(backend, seed):
    x, v = _particle_data(seed)
    return (ParticleArguments(xp.to_cunumpy(x), xp.to_cunumpy(v), 0.25, host=backend == "numpy"),)


@pytest.mark.parametrize("make_args", [make_struct_value_args, make_struct_arguments_args])
def test_kernels_agree_through_struct_fields(fake, cuda, make_args):
    kernel = Kernel(push, cuda["push"])
    results = kt.assert_kernels_agree(kernel, make_args)
    assert sorted(results) == ["p.v", "p.x"]
    x, v = _particle_data(0)
    want_x, want_v = _expected_push(x, v, 0.25)
    np.testing.assert_array_equal(results["p.x"], want_x)
    np.testing.assert_array_equal(results["argument 0.v"], want_v)
    only_x = kt.assert_kernels_agree(kernel, make_args, outputs=("p.x",))
    assert sorted(only_x) == ["p.x"]
    with pytest.raises(KeyError, match="'w'"):
        kt.assert_kernels_agree(kernel, make_args, outputs=("p.w",))


def test_2d_launch_shape_inference_takes_struct_fields_in_order(fake, cuda):
    x, v, x_dev, v_dev = _device_particles(fake, 18)
    value = Particles(x=x_dev, v=v_dev, n=300, dt=1.0)
    kernel = CudaKernel(SOURCE, "scale_v", block_size=(16, 2), structs=[Particles, Mixed])
    # The first array field is the 1-D x: too few dimensions for a 2-D block.
    with pytest.raises(ValueError):
        kernel.launch_shape(args=(value, 2.0))
    assert kernel.launch_shape((300, 3), args=(value, 2.0)) == ((19, 2), (16, 2))
    with kt.emulated_launches():
        kernel(value, 2.0, n_threads=(300, 3))
    np.testing.assert_array_equal(kt.host_buffer(v_dev), v * 2.0 * np.arange(1, 4))
    np.testing.assert_array_equal(kt.host_buffer(x_dev), x)


class ScaledPush(CudaArguments):
    """An argument object with named members (the host kernel reads them by name)."""

    def __init__(self, p, factor, n):
        super().__init__(p, factor, n)
        self.p, self.factor, self.n = p, factor, n


def push_scaled(args):
    """Host kernel of push_scaled taking the argument object as it is passed."""
    p, factor, n = args.values
    x = _field(p, "x")
    x[:n] += _field(p, "dt") * factor[:n]


def make_argument_object_args(backend, seed, cls=ScaledPush):
    x, v = _particle_data(seed)
    factor = np.random.default_rng(seed + 1).random(x.shape[0])
    p = ParticleArguments(xp.to_cunumpy(x), xp.to_cunumpy(v), 2.0, host=backend == "numpy")
    return (cls(p, xp.to_cunumpy(factor), x.shape[0]),)


def test_kernels_agree_through_argument_objects(fake, cuda):
    kernel = Kernel(push_scaled, cuda["push_scaled"])
    results = kt.assert_kernels_agree(kernel, make_argument_object_args)
    assert sorted(results) == ["args.factor"]  # one level deep: the struct's arrays are not listed
    x, _ = _particle_data(0)
    factor = np.random.default_rng(1).random(300)
    inner = kt.assert_kernels_agree(kernel, make_argument_object_args, outputs=("0.p",))
    assert sorted(inner) == ["args.p.v", "args.p.x"]
    np.testing.assert_array_equal(inner["args.p.x"], x + 2.0 * factor)


def test_kernels_agree_through_plain_cuda_arguments(fake, cuda):
    kernel = Kernel(push_scaled, cuda["push_scaled"])

    def make_args(backend, seed):
        return make_argument_object_args(backend, seed, CudaArguments)

    results = kt.assert_kernels_agree(kernel, make_args)
    assert sorted(results) == ["args.1"]
    inner = kt.assert_kernels_agree(kernel, make_args, outputs=("0.0",))
    assert sorted(inner) == ["args.0.v", "args.0.x"]


def test_kernels_agree_detects_a_wrong_cuda_port(fake, cuda):
    """The comparison is real: a host kernel that differs from the CUDA port fails."""

    def push(p):
        x = _field(p, "x")
        x[:] += 1.0

    with pytest.raises(AssertionError, match=r"\n  p\.x: 300 of 300 differ"):
        kt.assert_kernels_agree(Kernel(push, cuda["push"]), make_struct_arguments_args)


# --------------------------------------------------------------------------- 3. catalog and parity


@pytest.fixture(scope="module")
def catalog():
    return xp.kernels.KernelCatalog.from_package("kernel_pkg")


def _parity_params():
    return kt.parity_cases(xp.kernels.KernelCatalog.from_package("kernel_pkg"))


@pytest.mark.parametrize("kernel", _parity_params())
def test_parity_of_the_example_package_through_the_emulation(fake, kernel):
    results = kt.check_parity(kernel)
    assert results


def test_parity_cases_mark_kernels_without_test_arguments(catalog):
    cases = {c.id: c for c in kt.parity_cases(catalog)}
    assert sorted(cases) == ["axpy", "norm2", "scale_rows"]  # smooth has no CUDA port
    assert [m.name for m in cases["norm2"].marks] == ["skip"]
    assert not cases["axpy"].marks and not cases["scale_rows"].marks


@pytest.mark.parametrize("jobs", [1, 2])
def test_catalog_compile_all_builds_the_emulation(catalog, jobs):
    with kt.emulated_launches():
        compiled = catalog.compile_all(jobs=jobs)
    assert sorted(compiled) == ["axpy", "norm2", "scale_rows"]


def test_catalog_compile_all_reports_compile_errors_under_emulation():
    broken = xp.kernels.KernelCatalog()
    source = 'extern "C" __global__ void block_sums(double* x) { x[0] = ; }'
    broken.register(Kernel(block_sums, CudaKernel(source, "block_sums")))
    with kt.emulated_launches(), pytest.raises(RuntimeError, match="block_sums"):
        broken.compile_all()


# --------------------------------------------------------------------------- struct objects over time


class Swarm:
    """An owner whose arrays are reallocated; the argument object follows them by properties."""

    def __init__(self, fake, n):
        self.fake = fake
        self.resize(n, 1.0)

    def resize(self, n, speed):
        self.x = self.fake.zeros(n)
        self.v = self.fake.full((n, 2), speed)


class SwarmArguments(CudaStructArguments):
    struct_name = "Particles"
    fields = PARTICLES_FIELDS

    def __init__(self, swarm, dt):
        self.swarm, self.dt = swarm, dt
        self.pack()

    x = property(lambda self: self.swarm.x)
    v = property(lambda self: self.swarm.v)
    n = property(lambda self: self.swarm.x.shape[0])


def test_struct_arguments_follow_reallocated_arrays_in_emulated_launches(fake, cuda):
    swarm = Swarm(fake, 100)
    args = SwarmArguments(swarm, 0.5)
    with kt.emulated_launches():
        cuda["push"](args)
        assert (kt.host_buffer(swarm.x) == 0.5).all()
        swarm.resize(300, 2.0)
        cuda["push"](args)  # re-packed; the launch size follows the new x
    assert (kt.host_buffer(swarm.x) == 1.0).all()
    assert (kt.host_buffer(swarm.v)[:, 1] == 4.0).all()


def test_one_kernel_and_struct_class_from_many_threads(fake, cuda):
    import threading

    errors = []

    def work(n):
        try:
            for _ in range(4):
                swarm = Swarm(fake, n)
                cuda["push"](SwarmArguments(swarm, 1.0))
                assert (kt.host_buffer(swarm.x) == 1.0).all()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with kt.emulated_launches():
        workers = [threading.Thread(target=work, args=(500 + 37 * t,)) for t in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert errors == []


def test_debug_bounds_check_of_a_struct_view_field_is_a_runtime_error(fake):
    kernel = CudaKernel(SOURCE, "push", block_size=BLOCK, structs=[Particles, Mixed], debug=True)
    x = fake.zeros(10)
    short_v = fake.ones((5, 2))  # the kernel reads v(i, 0) for i < n = 10
    with kt.emulated_launches(), pytest.raises(RuntimeError, match="push"):
        kernel(Particles(x=x, v=short_v, n=10, dt=1.0))


# --------------------------------------------------------------------------- the plain NumPy run


@pytest.mark.nosan
def test_the_fake_cupy_checks_in_a_subprocess():
    """On the NumPy run the checks above that need fake-CuPy arrays run in a fake-CuPy child."""
    rerun_under_fake_cupy(__file__, "agree or parity or struct_parameter or argument_object or threads", backend=None)


@pytest.mark.parametrize("wrap", [False, True], ids=["struct arguments", "inside CudaArguments"])
def test_check_finite_scans_struct_fields_of_emulated_launches(fake, wrap):
    kernel = CudaKernel(SOURCE, "push", block_size=BLOCK, structs=[Particles, Mixed], check_finite=True)
    _x, _v, x_dev, v_dev = _device_particles(fake, 19)
    argument = ParticleArguments(x_dev, v_dev, float("nan"))
    if wrap:
        argument = CudaArguments(argument)
    path = "0.0.x" if wrap else "0.x"
    with kt.emulated_launches(), pytest.raises(RuntimeError, match=f"argument {path} "):
        kernel(argument)


def test_device_function_kernel_with_a_struct_parameter_runs_emulated(fake):
    domain = CudaStruct("Domain", [("lo", "double"), ("hi", "double"), ("outside", "double*")])
    header = (
        domain.declaration
        + r"""
    __device__ double clamp_or_flag(const Domain& d, double x)
    {
        return x < d.lo ? d.outside[0] : (x > d.hi ? d.outside[1] : x);
    }
    """
    )
    kernel = kt.device_function_kernel(header, "double clamp_or_flag(const Domain& d, double x)", structs=[domain])
    x = np.linspace(-2.0, 2.0, 9)
    out = fake.zeros(9)
    with kt.emulated_launches():
        kernel(domain(lo=-1.0, hi=1.0, outside=fake.asarray([-10.0, 10.0])), fake.asarray(x), out, 9, n_threads=9)
    np.testing.assert_array_equal(kt.host_buffer(out), np.where(x < -1, -10.0, np.where(x > 1, 10.0, x)))


@pytest.mark.parametrize("device", [False, True], ids=["numpy arrays", "fake arrays"])
def test_padded_struct_layout_matches_the_emulations_cpp_layout(cuda, device):
    cupy = active_fake_cupy()
    if device and cupy is None:
        pytest.skip("fake arrays need the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    to_array = cupy.asarray if device else np.asarray
    out = to_array(np.zeros(11))
    v = to_array(np.arange(12, dtype=np.int32).reshape(3, 4))[:, ::-1]
    fields = dict(
        flag=True,
        c=-7,
        out=out,
        k=-123456,
        a=to_array(np.array([1.5, 2.5], np.float32)),
        s=-300,
        u=2**40 + 3,
        f=0.25,
        v=v,
        last=65,
    )
    if device:
        with kt.emulated_launches():
            cuda["read_mixed"](Mixed(**fields), 9.5, n_threads=1)
        got = kt.host_buffer(out)
    else:
        kt.emulate_cuda_kernel(cuda["read_mixed"], Mixed.pack(fields, host_arrays=True), 9.5, n_threads=1)
        got = out
    assert Mixed.dtype.itemsize == 112
    np.testing.assert_array_equal(got, [1, -7, -123456, 2.5, -300, 2**40 + 3, 0.25, 5, 65, 9.5, 112])
