"""The top level: forwarding, backend selection, inspection, conversions, versions (API.md §1)."""

import json
import os
import subprocess
import sys
import warnings

import array_api_compat.numpy as compat_numpy
import numpy as np
import pytest

import cunumpy as xp
from cunumpy import _backend

FAKE = os.environ.get("CUNUMPY_FAKE_CUPY", "") != ""


def run_python(code, **env):
    """Run code in a fresh interpreter with the given environment additions."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    full_env.update(env)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


# --------------------------------------------------------------------------- forwarding


def test_forwarded_names_are_the_backend_functions():
    with xp.use_backend("numpy"):
        assert xp.zeros is compat_numpy.zeros
        assert xp.add is np.add
        assert xp.linalg is compat_numpy.linalg
        assert xp.fft is compat_numpy.fft
        assert xp.random is np.random
        assert xp.testing is np.testing
        assert xp.float64 is np.float64
        assert isinstance(xp.zeros(3), np.ndarray)


def test_forwarded_names_are_real_attributes_listed_by_dir():
    with xp.use_backend("numpy"):
        assert "zeros" in vars(xp)
        listing = dir(xp)
        for name in ("zeros", "linalg", "set_backend", "to_numpy", "kernels", "profiling"):
            assert name in listing


def test_unknown_name_raises_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="definitely_not_a_numpy_name"):
        xp.definitely_not_a_numpy_name  # noqa: B018


@pytest.mark.parametrize(
    "name",
    [
        "CudaKernel",
        "PyccelKernel",
        "Kernel",
        "CudaStruct",
        "DeviceMirror",
        "mpi_buffer",
        "count_transfers",
        "get_rng",
        "device_count",
        "set_device",
        "memory_info",
        "free_memory",
        "stream",
        "pin_memory",
        "set_device_for_rank",
    ],
)
def test_names_that_must_not_exist_at_top_level(name):
    with pytest.raises(AttributeError):
        getattr(xp, name)


def test_cuda_has_no_cuda_kernel():
    with pytest.raises(AttributeError):
        xp.cuda.CudaKernel  # noqa: B018


@pytest.mark.parametrize("module", ["testing", "kernel", "dispatch", "cuda_kernel", "main"])
def test_modules_that_must_not_exist(module):
    code = f"import cunumpy.{module}"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env)
    assert result.returncode != 0
    assert "ModuleNotFoundError" in result.stderr


@pytest.mark.parametrize(
    "name", ["algorithms", "arguments", "cuda", "kernels", "memory", "mpi", "petsc", "profiling", "rng"]
)
def test_submodules_are_attributes_and_do_not_collide_with_numpy(name):
    import importlib

    assert not hasattr(np, name)
    assert getattr(xp, name) is importlib.import_module(f"cunumpy.{name}")


def test_scipy_optimize_integrate_attributes_and_all():
    assert xp.scipy.__name__ == "cunumpy.scipy"
    assert xp.optimize.__name__ == "cunumpy.optimize"
    assert xp.integrate.__name__ == "cunumpy.integrate"
    assert "integrate" in xp.__all__


def test_own_names_win_over_backend_names(on_backend):
    assert xp.cuda.__name__ == "cunumpy.cuda"
    assert xp.get_array_module.__module__ == "cunumpy._backend"


def test_backend_switch_rebinds_names_and_listing(device_only):
    import array_api_compat.cupy as compat_cupy

    assert xp.zeros is compat_cupy.zeros
    assert xp.get_array_backend(xp.zeros(2)) == "cupy"
    with xp.use_backend("numpy"):
        assert xp.zeros is compat_numpy.zeros
        assert isinstance(xp.zeros(2), np.ndarray)
    assert xp.zeros is compat_cupy.zeros


def test_from_import_binds_the_function_of_that_moment(device_only):
    from cunumpy import zeros

    with xp.use_backend("numpy"):
        assert zeros is not xp.zeros
        assert xp.get_array_backend(zeros(1)) == "cupy"


def test_asarray_accepts_device_none(on_backend):
    a = xp.asarray([1.0, 2.0], device=None)
    assert xp.get_array_backend(a) == on_backend


# --------------------------------------------------------------------------- selection


def test_set_backend_rejects_unknown_names_and_keeps_state():
    before = xp.get_backend()
    zeros = xp.zeros
    for bad in ("NumPy", "torch", "", None, 3):
        with pytest.raises(ValueError, match="'numpy' or 'cupy'"):
            xp.set_backend(bad)
        assert xp.get_backend() == before
        assert xp.zeros is zeros


def test_use_backend_rejects_unknown_names():
    with pytest.raises(ValueError, match="'numpy' or 'cupy'"):
        xp.use_backend("jax")


def test_use_backend_restores_on_exception_and_nests():
    before = xp.get_backend()
    with pytest.raises(KeyError), xp.use_backend("numpy"):
        with xp.use_backend("numpy"):
            assert xp.numpy_backend and not xp.cupy_backend
        raise KeyError("boom")
    assert xp.get_backend() == before


def test_use_backend_as_decorator():
    @xp.use_backend("numpy")
    def where():
        return xp.get_backend()

    assert where() == "numpy"


def test_backend_flags_follow_switches(on_backend):
    assert xp.get_backend() == on_backend
    assert xp.numpy_backend is (on_backend == "numpy")
    assert xp.cupy_backend is (on_backend == "cupy")


@pytest.mark.skipif(FAKE, reason="CuPy is available under the fake")
def test_cupy_request_falls_back_silently_without_cupy():
    code = (
        "import cunumpy as xp; xp.set_backend('cupy'); print(xp.get_backend(), xp.cupy_available());"
        "import sys; print('cupy' in sys.modules and not getattr(sys.modules['cupy'], '__cunumpy_fake__', False))"
    )
    out = run_python(code).split()
    assert out[:2] == ["numpy", "False"]


@pytest.mark.skipif(FAKE, reason="CuPy is available under the fake")
def test_strict_cupy_request_raises_with_reason_and_keeps_previous_backend():
    code = """
import cunumpy as xp
zeros = xp.zeros
try:
    xp.set_backend("cupy", strict=True)
except RuntimeError as exc:
    print("raised", "cupy" in str(exc).lower() or "cuda" in str(exc).lower())
print(xp.get_backend(), xp.zeros is zeros)
ran = False
try:
    with xp.use_backend("cupy", strict=True):
        ran = True
except RuntimeError:
    pass
print(ran, xp.get_backend())
"""
    assert run_python(code).split() == ["raised", "True", "numpy", "True", "False", "numpy"]


@pytest.mark.skipif(FAKE, reason="CuPy is available under the fake")
def test_cupy_available_is_cached_with_reason():
    assert xp.cupy_available() is False
    reason = _backend.cupy_unavailable_reason()
    assert isinstance(reason, str) and reason
    assert xp.cupy_available() is False
    assert _backend.cupy_unavailable_reason() == reason


@pytest.mark.parametrize(
    "value, expected",
    [("cupy", "cupy"), ("CuPy", "cupy"), ("CUPY", "cupy"), ("numpy", "numpy"), ("torch", "numpy"), ("", "numpy")],
)
def test_cunumpy_backend_variable_is_read_at_import(value, expected):
    out = run_python("import cunumpy as xp; print(xp.get_backend())", CUNUMPY_BACKEND=value, CUNUMPY_FAKE_CUPY="1")
    assert out == expected


def test_cunumpy_backend_variable_is_read_only_once():
    code = "import os, cunumpy as xp; os.environ['CUNUMPY_BACKEND'] = 'cupy'; import importlib; print(xp.get_backend())"
    assert run_python(code, CUNUMPY_FAKE_CUPY="1") == "numpy"


@pytest.mark.parametrize("variable", ["ARRAY_BACKEND", "CUNUMPY_MPI", "CUNUMPY_KERNEL_IMPLEMENTATION"])
def test_ignored_environment_variables(variable):
    out = run_python("import cunumpy as xp; print(xp.get_backend())", **{variable: "cupy", "CUNUMPY_FAKE_CUPY": "1"})
    assert out == "numpy"


@pytest.mark.parametrize(
    "version, supported",
    [
        ("13.6.0", False),
        ("14.0.0rc1", False),
        ("14.0.0", True),
        ("14.2.0", True),
        ("15.0.0a1", True),
        ("14.0.0.post1", True),
        ("14", True),
        ("9.9.9", False),
    ],
)
def test_cupy_version_supported(version, supported):
    assert xp.cupy_version_supported(version) is supported
    assert xp.MIN_CUPY_VERSION == "14.0.0"


def test_cupy_version_supported_bad_input():
    with pytest.raises(TypeError, match="version"):
        xp.cupy_version_supported(14)
    with pytest.raises(ValueError, match="version"):
        xp.cupy_version_supported("not a version")


def test_backend_info_is_json_and_has_the_keys():
    info = xp.backend_info()
    json.dumps(info)
    for key in (
        "backend",
        "cupy_available",
        "cuda_unavailable_reason",
        "versions",
        "device",
        "cuda_visible_devices",
        "min_cupy_version",
    ):
        assert key in info
    assert set(info["versions"]) >= {"cunumpy", "numpy", "array-api-compat", "cupy"}
    assert info["versions"]["numpy"] == np.__version__
    assert info["backend"] == xp.get_backend()
    if info["cupy_available"]:
        assert info["cuda_unavailable_reason"] is None
    else:
        assert info["cuda_unavailable_reason"]


@pytest.mark.nosan  # a child Python running pure-Python code: nothing for the sanitizers
def test_backend_info_never_imports_mpi_and_never_switches():
    code = "import sys, cunumpy as xp; b = xp.get_backend(); xp.backend_info(); print('mpi4py' in sys.modules, xp.get_backend() == b)"
    assert run_python(code).split() == ["False", "True"]
    assert run_python(code, CUNUMPY_FAKE_CUPY="1", CUNUMPY_BACKEND="cupy").split() == ["False", "True"]


def test_default_float_dtype(on_backend):
    assert xp.default_float_dtype() == np.float64
    assert xp.default_float_dtype() is xp.float64


# --------------------------------------------------------------------------- inspection


def test_get_array_backend_on_host_values():
    class DictLike(dict):
        def get(self, *a):  # a `.get` method must not make it a device array
            return None

    for value in (np.zeros(2), [1, 2], 3.0, np.float64(1), DictLike(), None):
        assert xp.get_array_backend(value) == "numpy"
        assert xp.is_cpu(value) and not xp.is_gpu(value)
        assert xp.get_array_module(value) is compat_numpy


def test_inspection_of_device_arrays(device_only):
    import array_api_compat.cupy as compat_cupy

    d = xp.zeros(3)
    assert xp.get_array_backend(d) == "cupy"
    assert xp.is_gpu(d) and not xp.is_cpu(d)
    assert xp.get_array_module(d) is compat_cupy
    assert xp.same_backend(d, d)
    assert not xp.same_backend(d, np.zeros(3))
    with pytest.raises(TypeError, match="cupy") as info:
        xp.assert_same_backend(np.zeros(1), d)
    assert "numpy" in str(info.value)


def test_same_backend_trivial_cases():
    assert xp.same_backend()
    assert xp.same_backend(np.zeros(1))
    assert xp.same_backend(np.zeros(1), [1], 2.0)
    xp.assert_same_backend()
    xp.assert_same_backend(np.zeros(1), np.ones(2))


# --------------------------------------------------------------------------- conversions


def test_to_numpy_identity_for_host_arrays_and_views():
    a = np.arange(10.0)
    view = a[::2]
    assert xp.to_numpy(a) is a
    assert xp.to_numpy(view) is view
    out = xp.to_numpy([1, 2, 3])
    assert isinstance(out, np.ndarray) and out.tolist() == [1, 2, 3]
    assert xp.to_numpy(2.5) == np.asarray(2.5)


def test_to_cunumpy_on_numpy_returns_the_view_itself():
    with xp.use_backend("numpy"):
        a = np.zeros(6)
        view = a[1:4]
        same = xp.to_cunumpy(view)
        assert same is view
        same[:] = 7
        assert a[1:4].tolist() == [7, 7, 7]


@pytest.mark.skipif(FAKE, reason="CuPy is available under the fake")
def test_to_cupy_without_cupy_raises_import_error():
    with pytest.raises(ImportError, match="CuPy"):
        xp.to_cupy(np.zeros(2))


def test_round_trip_keeps_c_and_f_order(device_only):
    host_c = np.arange(12.0).reshape(3, 4)
    host_f = np.asfortranarray(host_c)
    for host in (host_c, host_f):
        device = xp.to_cupy(host)
        assert xp.is_gpu(device)
        assert device.flags.c_contiguous == host.flags.c_contiguous
        assert device.flags.f_contiguous == host.flags.f_contiguous
        back = xp.to_numpy(device)
        assert isinstance(back, np.ndarray)
        np.testing.assert_array_equal(back, host)
        assert back.flags.f_contiguous == host.flags.f_contiguous
        assert back.flags.c_contiguous == host.flags.c_contiguous


def test_strided_device_arrays_arrive_c_contiguous(device_only):
    device = xp.to_cupy(np.arange(20.0).reshape(4, 5))[:, ::2]
    back = xp.to_numpy(device)
    assert back.flags.c_contiguous
    np.testing.assert_array_equal(back, np.arange(20.0).reshape(4, 5)[:, ::2])


def test_to_cupy_returns_device_arrays_unchanged(device_only):
    d = xp.zeros(4)
    assert xp.to_cupy(d) is d
    assert xp.to_cunumpy(d) is d


def test_to_cupy_takes_cuda_array_interface_without_host_round_trip(device_only):
    d = xp.arange(5.0)

    class Exposer:
        def __init__(self, array):
            self.__cuda_array_interface__ = array.__cuda_array_interface__
            self._keep = array

    got = xp.to_cupy(Exposer(d))
    assert xp.is_gpu(got)
    assert xp.to_numpy(got).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_to_cunumpy_follows_the_active_backend(device_only):
    host = np.ones(3)
    assert xp.is_gpu(xp.to_cunumpy(host))
    with xp.use_backend("numpy"):
        assert xp.to_cunumpy(host) is host
        d = xp.to_cupy(host)
        back = xp.to_cunumpy(d)
        assert isinstance(back, np.ndarray)


def test_conversions_are_counted(device_only):
    host = np.ones((4, 2))
    with xp.profiling.count_transfers() as counter:
        d = xp.to_cupy(host)
        xp.to_numpy(d)
        xp.to_numpy(host)  # no copy, not counted
        xp.to_cupy(d)  # no copy, not counted
    assert counter.to_device == 1 and counter.to_host == 1
    assert counter.bytes_to_device == host.nbytes
    assert counter.bytes_to_host == host.nbytes


def test_as_device_array_on_numpy_backend_raises():
    with xp.use_backend("numpy"), pytest.raises(RuntimeError, match="NumPy"):
        xp.as_device_array(np.zeros(3))


def test_as_device_array_returns_fitting_arrays_unchanged(device_only):
    d = xp.zeros(5, dtype=xp.float32)
    assert xp.as_device_array(d) is d
    assert xp.as_device_array(d, dtype=np.float32) is d
    assert xp.as_device_array(d, np.float32, 1, name="d") is d


def test_as_device_array_converts_once(device_only):
    with xp.profiling.count_transfers() as counter:
        a = xp.as_device_array([1, 2, 3], dtype=np.float64)
    assert xp.is_gpu(a) and a.dtype == np.float64 and a.flags.c_contiguous
    assert counter.to_device == 1

    strided = xp.arange(10.0)[::2]
    with xp.profiling.count_transfers() as counter:
        b = xp.as_device_array(strided)
    assert b.flags.c_contiguous and counter.device_copies == 1 and counter.to_device == 0
    assert xp.to_numpy(b).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]

    f_order = xp.to_cupy(np.asfortranarray(np.ones((2, 3))))
    c = xp.as_device_array(f_order, dtype=np.float32)
    assert c.flags.c_contiguous and c.dtype == np.float32


def test_as_device_array_ndim_mismatch_names_the_argument(device_only):
    with pytest.raises(ValueError, match="'positions'.*2 dimension"):
        xp.as_device_array(np.zeros(3), ndim=2, name="positions")
    with pytest.raises(ValueError, match="2 dimension"):
        xp.as_device_array(xp.zeros(3), ndim=2)
    with pytest.raises(TypeError, match="ndim"):
        xp.as_device_array(xp.zeros(3), ndim="1")


def test_synchronize_is_a_no_op_on_numpy():
    with xp.use_backend("numpy"):
        with xp.profiling.count_transfers() as counter:
            assert xp.synchronize() is None
        assert counter.syncs == 0


def test_synchronize_records_a_sync_on_the_device(device_only):
    with xp.profiling.count_transfers() as counter:
        xp.synchronize()
    assert counter.syncs == 1 and counter.total == 0


# --------------------------------------------------------------------------- versions


def test_version_is_the_installed_metadata():
    from importlib.metadata import version

    assert xp.__version__ == version("cunumpy")


def test_require_version():
    xp.require_version("0.0.1")
    xp.require_version(xp.__version__)
    major, minor, patch = (int(p) for p in xp.__version__.split(".")[:3])
    xp.require_version(f"{major}.{minor}.{patch}.dev1")  # only three numbers are compared
    with pytest.raises(ImportError, match="upgrade"):
        xp.require_version(f"{major + 1}.0.0")
    with pytest.raises(TypeError, match="minimum"):
        xp.require_version(1)
    with pytest.raises(ValueError, match="minimum"):
        xp.require_version("latest")


def test_require_version_checks_nothing_when_unknown(monkeypatch):
    monkeypatch.setattr(_backend, "installed_version", lambda: "0.0.0+unknown")
    xp.require_version("99.0.0")


def test_old_cupy_warns_once(monkeypatch):
    class FakeRuntime:
        @staticmethod
        def getDeviceCount():
            return 0

    class FakeCuda:
        runtime = FakeRuntime

    class OldCupy:
        __version__ = "13.0.0"
        cuda = FakeCuda

    monkeypatch.setitem(sys.modules, "cupy", OldCupy)
    monkeypatch.setattr(_backend._state, "version_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok, reason = _backend._probe_cupy()
        _backend._probe_cupy()
    relevant = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(relevant) == 1
    assert "13.0.0" in str(relevant[0].message) and "14.0.0" in str(relevant[0].message)
    assert ok is False and "device" in reason
