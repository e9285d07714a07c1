"""What published client codes of cunumpy reached and the fake CuPy lacked (issue 33 items 2,
3, 5, 6, 9, 10 and 11): SciPy special functions and ``histogramdd`` with a sequence of bins on
device arrays, ``ndarray.flat``, the earlier name ``is_active``, host reads counted as copies,
the skip when launches cannot run on the fake, and the NumPy backend's message for a
``CudaKernel`` given NumPy arrays.

Tests that need the fake CuPy skip in a plain run; ``test_fake_suite_in_subprocess`` then runs
them in a fake-CuPy child.
"""

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from _fake_support import rerun_under_fake_cupy

import cunumpy as xp
from cunumpy.kernel_testing import fake_cupy_active
from cunumpy.profiling import assert_no_transfers, count_transfers


@pytest.fixture
def cp(device_only):
    if not fake_cupy_active():
        pytest.skip("needs the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    import cupy

    return cupy


def test_fake_suite_in_subprocess():
    rerun_under_fake_cupy(__file__, "not in_subprocess")


# --------------------------------------------------------------------------- item 2: SciPy ufuncs


def _special_ufuncs():
    special = pytest.importorskip("scipy.special")
    from cunumpy._fake_cupy import _scipy_names

    return sorted(
        name for name in _scipy_names.CUPYX_SCIPY["special"] if isinstance(getattr(special, name, None), np.ufunc)
    )


def test_scipy_special_erfinv_on_device_arrays_dispatches_to_cupyx(cp):
    special = pytest.importorskip("scipy.special")
    x = cp.asarray([0.0, 0.5, -0.5])
    result = special.erfinv(x)
    assert type(result) is cp.ndarray
    np.testing.assert_allclose(result.get(), special.erfinv(np.array([0.0, 0.5, -0.5])))
    out = cp.empty(3)
    assert special.erfinv(x, out=out) is out


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::RuntimeWarning")  # SciPy's, on both sides
def test_every_special_ufunc_of_cupyx_dispatches(cp):
    """Each ufunc the fake's cupyx.scipy.special has, applied to device arrays through SciPy,
    runs there and matches SciPy on the host copies (or fails the same way)."""
    special = pytest.importorskip("scipy.special")
    import cupyx.scipy.special as cupyx_special

    names = _special_ufuncs()
    assert len(names) > 50
    for name in names:
        ufunc = getattr(special, name)
        assert hasattr(cupyx_special, name), name
        host_args = [np.array([0.25, 0.5]) for _ in range(ufunc.nin)]
        try:
            expected = ufunc(*host_args)
        except TypeError:  # e.g. integer-only loops: the device call fails alike
            with pytest.raises(TypeError):
                ufunc(*[cp.asarray(a) for a in host_args])
            continue
        got = ufunc(*[cp.asarray(a) for a in host_args])
        for e, g in zip(
            expected if isinstance(expected, tuple) else (expected,), got if isinstance(got, tuple) else (got,)
        ):
            assert type(g) is cp.ndarray, name
            np.testing.assert_allclose(g.get(), e, equal_nan=True, err_msg=name)


def test_a_special_ufunc_cupy_lacks_is_still_declined(cp):
    special = pytest.importorskip("scipy.special")
    assert "jv" not in dir(__import__("cupyx.scipy.special").scipy.special)
    with pytest.raises(TypeError, match="jv"):
        special.jv(1, cp.asarray([0.5]))


def test_scipy_special_on_numpy_arrays_unchanged():
    special = pytest.importorskip("scipy.special")
    with xp.use_backend("numpy"):
        np.testing.assert_allclose(special.erfinv(xp.asarray([0.0, 0.5])), [0.0, 0.4769362762044699])


# --------------------------------------------------------------------------- item 3: histogramdd


@pytest.mark.parametrize(
    "bins",
    [
        "edges-tuple",
        "edges-list",
        (4, 2),
        [4, 2],
        "mixed",
        3,
    ],
)
def test_histogramdd_takes_a_sequence_of_bins(cp, bins):
    rng = np.random.default_rng(0)
    host = rng.random((50, 2))
    edges = {
        "edges-tuple": (np.linspace(0, 1, 5), np.linspace(0, 1, 3)),
        "edges-list": [np.linspace(0, 1, 5), np.linspace(0, 1, 3)],
        "mixed": (np.linspace(0, 1, 5), 3),
    }
    host_bins = edges.get(bins, bins) if isinstance(bins, str) else bins
    device_bins = (
        type(host_bins)(cp.asarray(b) if isinstance(b, np.ndarray) else b for b in host_bins)
        if isinstance(host_bins, (list, tuple))
        else host_bins
    )
    hist, got_edges = cp.histogramdd(cp.asarray(host), bins=device_bins)
    expected, expected_edges = np.histogramdd(host, bins=host_bins)
    assert type(hist) is cp.ndarray and all(type(e) is cp.ndarray for e in got_edges)
    np.testing.assert_array_equal(hist.get(), expected)
    for g, e in zip(got_edges, expected_edges):
        np.testing.assert_allclose(g.get(), e)


def test_histogramdd_sample_as_a_sequence_and_histogram2d(cp):
    x, y = cp.linspace(0, 1, 20), cp.linspace(1, 0, 20)
    hist, _ = cp.histogramdd((x, y), bins=(2, 4))
    np.testing.assert_array_equal(hist.get(), np.histogramdd((x.get(), y.get()), bins=(2, 4))[0])
    hist2, xe, _ = cp.histogram2d(x, y, bins=(cp.linspace(0, 1, 3), cp.linspace(0, 1, 5)))
    assert type(xe) is cp.ndarray
    np.testing.assert_array_equal(hist2.get(), np.histogram2d(x.get(), y.get(), bins=(2, 4))[0])


def test_histogramdd_refuses_host_edges_as_cupy(cp):
    with pytest.raises(ValueError, match="array-like bins not supported"):
        cp.histogramdd(cp.ones((3, 2)), bins=(np.linspace(0, 1, 3), 2))
    with pytest.raises(TypeError, match="sample"):
        cp.histogramdd(np.ones((3, 2)), bins=2)


# --------------------------------------------------------------------------- item 5: ndarray.flat


def test_flat_reads_writes_and_iterates(cp):
    a = cp.arange(6).reshape(2, 3)
    flat = a.flat
    assert type(flat) is cp.flatiter and flat.base is a and len(flat) == 6
    assert type(flat[4]) is cp.ndarray and flat[4].shape == () and int(flat[4]) == 4 and int(flat[-1]) == 5
    assert flat[1:4].get().tolist() == [1, 2, 3] and flat[...].get().tolist() == list(range(6))
    a.flat[2] = 10
    a.flat[3:5] = cp.asarray([7, 8])
    a.flat[::5] = -1
    assert a.get().tolist() == [[-1, 1, 10], [7, 8, -1]]
    assert [int(v) for v in a.T.flat] == [-1, 7, 1, 8, 10, -1]
    assert flat.copy().get().tolist() == [-1, 1, 10, 7, 8, -1]


def test_flat_refuses_what_cupy_refuses(cp):
    a = cp.arange(4)
    for index in [(1,), True, cp.asarray([1, 2])]:
        with pytest.raises(IndexError, match="unsupported iterator index"):
            a.flat[index]
    with pytest.raises(IndexError):
        a.flat[4]
    with pytest.raises(ValueError, match="flat"):
        a.flat[:2] = np.ones(2)


# --------------------------------------------------------------------------- item 6: is_active


def test_is_active_is_the_deprecated_earlier_name_in_a_child():
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("error", DeprecationWarning)
        try:
            from cunumpy._fake_cupy import is_active
        except DeprecationWarning as w:
            print("warned:", w)
        warnings.simplefilter("ignore", DeprecationWarning)
        import cunumpy._fake_cupy as fake
        from cunumpy._fake_cupy import is_active
        assert is_active is fake.fake_cupy_active
        print(is_active())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert "fake_cupy_active" in first and "earlier releases" in first
    assert second == str(fake_cupy_active())


def test_other_missing_names_stay_attribute_errors():
    import cunumpy._fake_cupy as fake

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert fake.is_active() is fake_cupy_active()
    with pytest.raises(AttributeError, match="no_such_name"):
        fake.no_such_name  # noqa: B018 - the attribute access must raise


# --------------------------------------------------------------------------- item 9: host reads


HOST_READS = [
    ("float(x[0])", lambda x: float(x[0])),
    ("x[0].item()", lambda x: x[0].item()),
    ("int(x[0])", lambda x: int(x[0])),
    ("bool(x[0] > 1)", lambda x: bool(x[0] > 1)),
    ("x.tolist()", lambda x: x.tolist()),
    ("if x[0] > 1:", lambda x: 1 if x[0] > 1 else 0),
]


@pytest.mark.parametrize("read", [r for _, r in HOST_READS], ids=[i for i, _ in HOST_READS])
def test_host_reads_fail_assert_no_transfers_by_default(cp, read):
    x = cp.arange(4.0)
    with pytest.raises(AssertionError, match=r"to_host"), assert_no_transfers():
        read(x)
    with count_transfers() as counter:
        read(x)
    assert counter.to_host == 1 and counter.syncs == 1
    assert all(e.implicit for e in counter.events)


@pytest.mark.parametrize("read", [r for _, r in HOST_READS], ids=[i for i, _ in HOST_READS])
def test_host_reads_of_numpy_arrays_are_not_transfers(read):
    with xp.use_backend("numpy"):
        x = xp.arange(4.0)
        with assert_no_transfers(syncs=True):
            read(x)


# --------------------------------------------------------------------------- item 10: skips

LAUNCHING_TESTS = '''
    import pytest

    import cunumpy as xp
    from cunumpy.kernels import CudaKernel

    SOURCE = r"""extern "C" __global__ void fill(double* a, int n)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = i; }"""


    def _launch():
        a = xp.zeros(4)
        CudaKernel(SOURCE, "fill")(a, 4)
        return a


    def test_fixture(backend):
        if backend == "cupy":
            assert xp.to_numpy(_launch()).tolist() == [0, 1, 2, 3]


    @pytest.mark.requires_device_backend
    def test_marked():
        _launch()


    def test_unmarked_under_the_fake():
        with xp.use_backend("cupy", strict=True):
            with pytest.raises(NotImplementedError) as info:
                _launch()
        from cunumpy.kernel_testing import EmulationUnavailable

        assert type(info.value) is EmulationUnavailable and info.value.reason in str(info.value)
        raise info.value  # a test outside the device-backend fixture and marker still fails
'''


def _run_pytest(root, env):
    import os
    import re

    environment = {k: v for k, v in os.environ.items() if not k.startswith(("CUNUMPY_", "PYTEST_"))}
    environment.update(env)
    quiet = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-rs",
            *quiet,
            "-c",
            str(root / "pytest.ini"),
            "--rootdir",
            str(root),
            str(root),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        env=environment,
        timeout=300,
    )
    outcomes = dict(re.findall(r"^\S*?(test_\w+(?:\[\w+\])?) (PASSED|FAILED|SKIPPED|ERROR)", result.stdout, re.M))
    return outcomes, result.stdout + result.stderr


@pytest.mark.nosan
@pytest.mark.parametrize("why", ["emulation-off", "no-compiler"])
def test_launches_the_fake_cannot_run_skip_tests_that_need_a_device_backend(tmp_path, why):
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\n")
    (tmp_path / "test_user.py").write_text(textwrap.dedent(LAUNCHING_TESTS))
    env = {"CUNUMPY_FAKE_CUPY": "1"}
    if why == "emulation-off":
        env["CUNUMPY_EMULATION"] = "0"
        expected_reason = "CUNUMPY_EMULATION=0"
    else:
        empty = tmp_path / "bin"
        empty.mkdir()
        env.update(CXX="no-such-compiler", PATH=str(empty))
        expected_reason = "needs a C++ compiler"
    outcomes, output = _run_pytest(tmp_path, env)
    assert outcomes == {
        "test_fixture[numpy]": "PASSED",
        "test_fixture[cupy]": "SKIPPED",
        "test_marked": "SKIPPED",
        "test_unmarked_under_the_fake": "FAILED",
    }, output
    skips = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 2 and all(
        "CUDA kernels cannot launch on the fake CuPy" in line and expected_reason in line for line in skips
    ), output
    assert "EmulationUnavailable" in output


def test_emulation_unavailable_is_a_not_implemented_error():
    from cunumpy.kernel_testing import EmulationUnavailable

    exc = EmulationUnavailable("kernel 'k': cannot launch: off; do this", "off")
    assert isinstance(exc, NotImplementedError) and exc.reason == "off"
    import pickle

    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is EmulationUnavailable and again.reason == "off" and str(again) == str(exc)


# --------------------------------------------------------------------------- item 11: the message

FILL = r"""extern "C" __global__ void fill(double* a, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = i; }"""


def test_numpy_arrays_on_the_numpy_backend_name_the_cpu_ways():
    from cunumpy.kernels import CudaKernel

    kernel = CudaKernel(FILL, "fill")
    with xp.use_backend("numpy"), pytest.raises(TypeError) as info:
        kernel(np.zeros(4), 4)
    message = str(info.value)
    assert "argument 0 (double* a): expected a device array" in message
    assert "kernel_testing.emulate_cuda_kernel" in message and "CUNUMPY_FAKE_CUPY=1" in message
    assert "to_cupy" not in message


def test_the_twin_packer_gives_the_same_advice():
    from cunumpy import _reference
    from cunumpy._native import core
    from cunumpy.kernels import CudaKernel, _cuda_kernel as ck

    k = CudaKernel(FILL, "fill")
    specs = tuple(ck._spec(i, p) for i, p in enumerate(k.signature))
    messages = []
    for impl in (core, _reference):
        plan = impl.launch_plan("fill", specs, np.void, np.generic)
        with xp.use_backend("numpy"), pytest.raises(TypeError) as info:
            plan.pack(np.zeros(4), 4)
        messages.append(str(info.value).split("expected a device array")[1])
    assert messages[0] == messages[1] and "emulate_cuda_kernel" in messages[0]


def test_emulate_cuda_kernel_runs_what_the_message_names():
    from cunumpy.kernel_testing import emulate_cuda_kernel, emulation_compiler
    from cunumpy.kernels import CudaKernel

    if emulation_compiler() is None:
        pytest.skip("the CPU emulation needs a C++ compiler")
    a = np.zeros(4)
    emulate_cuda_kernel(CudaKernel(FILL, "fill"), a, 4)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_host_arrays_on_the_device_backend_keep_the_device_advice(cp):
    from cunumpy.kernels import CudaKernel

    with pytest.raises(TypeError, match=r"xp\.to_cupy") as info:
        CudaKernel(FILL, "fill")(np.zeros(4), 4)
    assert "emulate_cuda_kernel" not in str(info.value)


def test_reads_of_a_cupy_ndarray_class_are_recorded_once_a_counter_starts():
    """The real-CuPy path (tests/realcupy has it with CuPy itself): the methods of the imported
    ``cupy.ndarray`` are wrapped when the first counter starts; a class's inherited
    ``object`` methods are left alone."""
    code = textwrap.dedent(
        """
        import sys, types
        import numpy as np

        class ndarray:
            def __init__(self, a):
                self._a = np.asarray(a)
            shape = property(lambda self: self._a.shape)
            dtype = property(lambda self: self._a.dtype)
            nbytes = property(lambda self: self._a.nbytes)
            def __getitem__(self, key):
                return ndarray(self._a[key])
            def __gt__(self, other):
                return ndarray(self._a > other)
            def __float__(self):
                return float(self._a)
            def __bool__(self):
                return bool(self._a)
            def item(self):
                return self._a.item()
            def tolist(self):
                return self._a.tolist()

        cupy = types.ModuleType("cupy")
        cupy.ndarray = ndarray
        sys.modules["cupy"] = cupy
        from cunumpy.profiling import assert_no_transfers, count_transfers

        x = ndarray([1.0, 2.0, 3.0])
        assert float(x[0]) == 1.0  # before any counter: the class is untouched
        assert "item" in vars(ndarray) and not hasattr(ndarray.item, "__wrapped__")
        with count_transfers() as counter:
            float(x[0]); x[0].item(); bool(x[0] > 1); x.tolist(); repr(x)
        print([(e.kind, e.nbytes) for e in counter.events])
        try:
            with assert_no_transfers():
                if x[1] > 1:
                    pass
        except AssertionError as exc:
            print("caught", "to_host" in str(exc))
        print(ndarray.__repr__ is object.__repr__)
        """
    )
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}  # no fake CuPy there
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    events, caught, repr_untouched = out.stdout.splitlines()
    assert events == str(
        [("to_host", 8), ("sync", None)] * 2 + [("to_host", 1), ("sync", None), ("to_host", 24), ("sync", None)]
    )
    assert caught == "caught True" and repr_untouched == "True"
