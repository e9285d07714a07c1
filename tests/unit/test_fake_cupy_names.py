"""The fake CuPy's names against a real CuPy release (API.md section 14).

``tests/data/cupy_names.json`` lists the public names of CuPy 14.2.0 (written by
``tests/data/make_cupy_names.py`` with the real CuPy; not regenerated in CI). Here: every
public name the fake exposes exists in that CuPy, names CuPy lacks are absent from the fake
exactly when CuPy lacks them, and the calls cunumpy makes on the device path use names and
keywords both the real CuPy and the fake accept.

The tests need the fake active (``CUNUMPY_FAKE_CUPY=1``); in a plain run
``test_names_suite_in_subprocess`` runs this file once in a fake-CuPy child instead.
"""

import importlib
import inspect
import json
import pathlib

import numpy as np
import pytest
from _fake_support import rerun_under_fake_cupy

from cunumpy.kernel_testing import fake_cupy_active

DATA = json.loads((pathlib.Path(__file__).parents[1] / "data" / "cupy_names.json").read_text())
REAL = {name: frozenset(names) for name, names in DATA["modules"].items()}
CLASSES = {name: frozenset(names) for name, names in DATA["classes"].items()}

#: Instance attributes CuPy sets in ``__init__`` (so ``dir()`` of the class misses them).
INSTANCE_ATTRIBUTES = {"cupy.random.Generator": {"bit_generator"}}

#: ``(module, name)`` pairs whose presence on the fake must match CuPy 14.2 exactly: SciPy
#: and NumPy names CuPy lacks (absent) next to neighbours it has (present).
IMPORTANT = [
    ("cupyx.scipy.special", "jv"),
    ("cupyx.scipy.special", "hyp2f1"),
    ("cupyx.scipy.special", "struve"),
    ("cupyx.scipy.special", "erf"),
    ("cupyx.scipy.special", "gammaln"),
    ("cupyx.scipy.special", "i0"),
    ("cupyx.scipy.linalg", "inv"),
    ("cupyx.scipy.linalg", "solve"),
    ("cupyx.scipy.linalg", "solve_circulant"),
    ("cupyx.scipy.linalg", "pascal"),
    ("cupyx.scipy.linalg", "lu_factor"),
    ("cupyx.scipy.linalg", "solve_triangular"),
    ("cupyx.scipy.linalg", "bandwidth"),
    ("cupyx.scipy.interpolate", "RectBivariateSpline"),
    ("cupyx.scipy.interpolate", "splrep"),
    ("cupyx.scipy.interpolate", "make_smoothing_spline"),
    ("cupyx.scipy.interpolate", "CubicSpline"),
    ("cupyx.scipy.interpolate", "RegularGridInterpolator"),
    ("cupyx.scipy.signal", "bessel"),
    ("cupyx.scipy.signal", "butter"),
    ("cupyx.scipy.stats", "skew"),
    ("cupyx.scipy.stats", "entropy"),
    ("cupyx.scipy.spatial.distance", "squareform"),
    ("cupyx.scipy.spatial.distance", "cdist"),
    ("cupyx.scipy.sparse.linalg", "expm_multiply"),
    ("cupyx.scipy.sparse.linalg", "cg"),
    ("cupy", "insert"),
    ("cupy", "geomspace"),
    ("cupy", "vecdot"),
    ("cupy", "set_printoptions"),
    ("cupy", "linspace"),
    ("cupy", "alltrue"),
    ("cupy", "NaN"),
    ("cupy", "trapz"),
    ("cupy.linalg", "inv"),
    ("cupy.linalg", "matrix_transpose"),
    ("cupy.random", "Generator"),
    ("cupy.exceptions", "DTypePromotionError"),
    ("cupy.cuda.driver", "driverGetVersion"),
    ("cupy.cuda.runtime", "driverGetVersion"),
]

#: What cunumpy (outside the fake) calls on the device path, with the keywords it passes:
#: ``(callable, keywords, where)``. The keywords must be parameters of the real CuPy
#: callable (as recorded in the JSON) and of the fake one.
DEVICE_PATH_CALLS = [
    ("cupy.ndarray.get", {"order", "stream", "out", "blocking"}, "_backend.device_to_host, memory.py"),
    ("cupy.ndarray.set", {"arr"}, "memory.DeviceMirror._upload (positional)"),
    ("cupy.ndarray.fill", {"value"}, "memory.DeviceMirror.zero (positional)"),
    ("cupy.array", {"obj", "order", "copy"}, "_backend.host_to_device, memory.py"),
    ("cupy.asarray", {"a"}, "_backend.to_cupy"),
    ("cupy.ascontiguousarray", {"a", "dtype"}, "_backend.as_device_array, memory.HostCopy"),
    ("cupy.zeros", {"shape", "dtype"}, "_backend._probe_cupy, memory.DeviceMirror.zero"),
    ("cupy.empty", {"shape", "dtype"}, "cuda._devices.bind_local_device"),
    ("cupy.cuda.Device", {"device"}, "cuda._devices, _staging._OnDevice, profiling (positional)"),
    ("cupy.cuda.Stream", {"non_blocking"}, "cuda._streams.stream/create_stream, memory.py"),
    ("cupy.cuda.Event", {"disable_timing"}, "cuda._streams, memory.py"),
    ("cupy.cuda.Event.record", {"stream"}, "cuda._streams.record_event, memory.py (positional)"),
    ("cupy.cuda.Stream.wait_event", {"event"}, "cuda._streams.wait_event, memory.py (positional)"),
    ("cupy.cuda.get_current_stream", set(), "cuda._streams, memory.py"),
    ("cupy.cuda.alloc_pinned_memory", {"size"}, "cuda._devices.pinned_empty (positional)"),
    ("cupy.cuda.nvtx.RangePush", {"message", "id_color"}, "profiling.nvtx_range (positional)"),
    ("cupy.cuda.nvtx.RangePop", set(), "profiling.nvtx_range"),
    ("cupy.cuda.runtime.getDeviceProperties", {"device"}, "_backend._device_info (positional)"),
    ("cupy.cuda.runtime.getDevice", set(), "_backend, cuda._devices, memory.py"),
    ("cupy.cuda.runtime.getDeviceCount", set(), "_backend, cuda._devices"),
    ("cupy.cuda.runtime.memGetInfo", set(), "cuda._devices.memory_info"),
    ("cupy.cuda.runtime.driverGetVersion", set(), "_backend._device_info"),
    ("cupy.cuda.runtime.runtimeGetVersion", set(), "_backend._device_info"),
    ("cupy.cuda.MemoryPool.free_all_blocks", set(), "cuda._devices.free_memory"),
    ("cupy.cuda.PinnedMemoryPool.free_all_blocks", set(), "cuda._devices.free_memory"),
    ("cupyx.empty_pinned", {"shape", "dtype", "order"}, "(pinned buffers; same signature as the fake)"),
]


@pytest.fixture
def cp():
    if not fake_cupy_active():
        pytest.skip("needs the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    import cupy

    return cupy


def test_names_suite_in_subprocess():
    rerun_under_fake_cupy(__file__, "not in_subprocess")


def _public(obj) -> set:
    return {n for n in dir(obj) if not n.startswith("_")}


def _resolve(path: str):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


def test_data_file_is_cupy_14_2():
    assert DATA["cupy_version"] == "14.2.0"
    assert "cupy" in REAL and "cupyx.scipy.special" in REAL


@pytest.mark.parametrize("module", sorted(REAL))
def test_fake_names_exist_in_real_cupy(cp, module):
    fake = importlib.import_module(module)
    # a nested module another test imported is an attribute of its parent, in CuPy too
    extra = sorted(n for n in _public(fake) - REAL[module] if f"{module}.{n}" not in REAL)
    assert not extra, f"the fake {module} exposes names CuPy {DATA['cupy_version']} lacks: {extra}"


@pytest.mark.parametrize("module", sorted(DATA["missing_modules"]))
def test_modules_missing_from_cupy_are_missing_from_the_fake(cp, module):
    with pytest.raises(ImportError):
        importlib.import_module(module)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_fake_class_attributes_exist_in_real_cupy(cp, name):
    fake = _resolve(name)
    names = _public(fake)
    if name == "cupy.random.Generator":  # methods are bound per instance
        names = _public(cp.random.default_rng(0))
    extra = sorted(names - CLASSES[name] - INSTANCE_ATTRIBUTES.get(name, set()))
    assert not extra, f"the fake {name} has attributes CuPy {DATA['cupy_version']} lacks: {extra}"


@pytest.mark.parametrize(("module", "name"), IMPORTANT, ids=[f"{m}.{n}" for m, n in IMPORTANT])
def test_important_names_present_exactly_when_cupy_has_them(cp, module, name):
    fake = importlib.import_module(module)
    assert hasattr(fake, name) == (name in REAL[module])


def test_generator_methods_are_cupys(cp):
    g = cp.random.default_rng(0)
    for name in ("normal", "choice", "permutation", "shuffle"):
        assert name not in CLASSES["cupy.random.Generator"]
        assert not hasattr(g, name), name
    for name in ("random", "standard_normal", "integers", "uniform"):
        assert hasattr(g, name), name


def test_device_attributes_are_cupys(cp):
    real = DATA["device_attributes"]
    attributes = cp.cuda.Device(0).attributes
    assert not set(attributes) - set(real), sorted(set(attributes) - set(real))
    # cunumpy.cuda.max_shared_memory_per_block reads these two keys.
    assert {"MaxSharedMemoryPerBlock", "MaxSharedMemoryPerBlockOptin"} <= set(real) & set(attributes)
    runtime = cp.cuda.runtime
    constants = {n[len("cudaDevAttr") :]: getattr(runtime, n) for n in dir(runtime) if n.startswith("cudaDevAttr")}
    assert constants == {k: real[k] for k in constants}
    for key, code in constants.items():
        assert runtime.deviceGetAttribute(code, 0) == attributes[key]


def test_device_properties_are_cupys(cp):
    real = DATA["device_properties"]["keys"]
    assert real, "cupy_names.json lacks getDeviceProperties keys"
    props = cp.cuda.runtime.getDeviceProperties(0)
    assert not set(props) - set(real), sorted(set(props) - set(real))
    assert {"name", "major", "minor"} <= set(props)  # what cunumpy.backend_info reads


@pytest.mark.parametrize(("name", "keywords", "where"), DEVICE_PATH_CALLS, ids=[c[0] for c in DEVICE_PATH_CALLS])
def test_device_path_calls_match_real_and_fake(cp, name, keywords, where):
    real = DATA["signatures"][name]["parameters"]
    assert real is not None, f"no signature recorded for {name}"
    assert keywords <= set(real), f"{where}: real {name} takes {real}, not {sorted(keywords - set(real))}"
    fake = inspect.signature(_resolve(name))
    fake_names = [p for p in fake.parameters if p != "self"]
    assert keywords <= set(fake_names), f"fake {name} takes {fake_names}"


@pytest.mark.parametrize("name", [n for n, v in DATA["signatures"].items() if v["parameters"] is not None])
def test_fake_signatures_follow_cupy(cp, name):
    real = DATA["signatures"][name]["parameters"]
    fake = [p for p in inspect.signature(_resolve(name)).parameters if p != "self"]
    assert fake == real, f"{name}: CuPy {DATA['signatures'][name]['text']}, fake {fake}"


def test_numpy_only_keywords_are_refused(cp):
    with pytest.raises(TypeError, match="device"):
        cp.zeros(3, device=None)
    with pytest.raises(TypeError, match="like"):
        cp.ones(3, like=None)
    a = cp.arange(3.0)
    assert cp.asarray(a, copy=False) is not None
    with pytest.raises(ValueError):
        cp.asarray([1.0, 2.0], copy=False)


def test_nvtx_and_streams_follow_cupy(cp):
    nvtx = cp.cuda.nvtx
    assert nvtx.available is True
    nvtx.RangePush("region", 3)
    nvtx.RangePop()
    with pytest.raises(TypeError):
        nvtx.RangePush("region", argb_color=0xFF00FF00)
    nvtx.RangeEnd(nvtx.RangeStart("r", 0))
    s = cp.cuda.Stream(non_blocking=True)
    assert s.is_non_blocking is True and s.priority == 0 and not hasattr(s, "non_blocking")
    external = cp.cuda.ExternalStream(s.ptr)
    assert not isinstance(external, cp.cuda.Stream) and external == s


def test_get_and_set_follow_cupys_contiguity_rules(cp):
    a = cp.arange(12.0).reshape(3, 4)
    with pytest.raises(RuntimeError):
        a.get(out=np.empty((3, 8))[:, ::2])
    out = np.empty((3, 4), order="F")
    assert a.get(out=out) is out and out.tolist() == a.get().tolist()
    with pytest.raises(RuntimeError):
        a[:, ::2].set(np.zeros((3, 2)))
    a[1:].set(np.zeros((2, 4)))
    assert float(a.sum()) == 6.0
