"""xp.scipy (API.md section 10): forwarding per access, available/resolve/dir, errors,
the solve_circulant fill-in and the device splines, on NumPy and the fake CuPy.

In a plain run the fake-CuPy cases skip and ``test_scipy_suite_in_fake_cupy_subprocess``
runs this file once in a fake-CuPy child instead.
"""

import importlib
import sys

import numpy as np
import pytest
from _fake_support import rerun_under_fake_cupy

import cunumpy as xp
import cunumpy.scipy as xscipy
from cunumpy.kernel_testing import run_in_fake_cupy_subprocess

pytest.importorskip("scipy")
import scipy.interpolate
import scipy.linalg

SUBPACKAGES = [
    "fft",
    "fftpack",
    "interpolate",
    "linalg",
    "ndimage",
    "signal",
    "sparse",
    "sparse.csgraph",
    "sparse.linalg",
    "spatial",
    "special",
    "stats",
]


def test_scipy_suite_in_fake_cupy_subprocess():
    rerun_under_fake_cupy(__file__, "not in_fake_cupy_subprocess")


def _subpackage(path):
    obj = xp.scipy
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _real_prefix(backend):
    return "scipy" if backend == "numpy" else "cupyx.scipy"


# --------------------------------------------------------------------------- forwarding


@pytest.mark.parametrize("path", SUBPACKAGES)
def test_subpackages_resolve_to_the_backend_module(on_backend, path):
    real = importlib.import_module(f"{_real_prefix(on_backend)}.{path}")
    assert _subpackage(path).resolve() is real
    assert xp.scipy.available(path.split(".")[0])


def test_top_level_resolve(on_backend):
    assert xp.scipy.resolve() is importlib.import_module(_real_prefix(on_backend))


def test_names_are_the_backend_functions(on_backend):
    special = importlib.import_module(f"{_real_prefix(on_backend)}.special")
    assert xp.scipy.special.erf is special.erf
    cg = importlib.import_module(f"{_real_prefix(on_backend)}.sparse.linalg").cg
    assert xp.scipy.sparse.linalg.cg is cg


def test_a_backend_switch_takes_effect_at_once(device_only):
    special = xp.scipy.special  # held across the switches
    import cupyx.scipy.special

    assert special.erf is cupyx.scipy.special.erf
    with xp.use_backend("numpy"):
        assert special.erf is scipy.special.erf
        assert type(special.erf(np.zeros(2))) is np.ndarray
    assert special.erf is cupyx.scipy.special.erf
    assert xp.is_gpu(special.erf(xp.zeros(2)))


def test_forwarded_calls_follow_the_array_backend(on_backend):
    x = xp.linspace(0.0, 1.0, 5)
    result = xp.scipy.special.erf(x)
    assert xp.get_array_backend(result) == on_backend
    np.testing.assert_allclose(xp.to_numpy(result), scipy.special.erf(np.linspace(0.0, 1.0, 5)))


def test_nested_modules_are_forwarded_too(on_backend):
    distance = xp.scipy.spatial.distance
    assert distance.resolve() is importlib.import_module(f"{_real_prefix(on_backend)}.spatial.distance")
    a = xp.asarray([[0.0, 0.0], [3.0, 4.0]])
    assert float(distance.cdist(a, a)[0, 1]) == 5.0


def test_subpackage_proxies_are_shared_and_pickle():
    import pickle

    assert xp.scipy.special is xp.scipy.special
    assert xp.scipy.sparse.linalg is xp.scipy.sparse.linalg
    assert pickle.loads(pickle.dumps(xp.scipy.sparse.linalg)) is xp.scipy.sparse.linalg


def test_sparse_matrix_built_on_the_host_moves_once(on_backend):
    import scipy.sparse
    import scipy.sparse.linalg

    host = scipy.sparse.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(5, 5), format="csr")
    A = xp.scipy.sparse.csr_matrix(host)
    b = xp.arange(1.0, 6.0)
    x, info = xp.scipy.sparse.linalg.cg(A, b)
    assert info == 0 and xp.get_array_backend(x) == on_backend
    np.testing.assert_allclose(xp.to_numpy(A @ x), xp.to_numpy(b), rtol=1e-5)


def test_optimize_and_integrate_are_not_forwarded(on_backend):
    for name in ("optimize", "integrate"):
        with pytest.raises(AttributeError, match=rf"xp\.{name}"):
            getattr(xp.scipy, name)
        assert not xp.scipy.available(name)
        assert name not in dir(xp.scipy)


def test_missing_name_names_the_backend(on_backend):
    with pytest.raises(AttributeError) as info:
        xp.scipy.special.no_such_function  # noqa: B018 - the attribute read must raise
    message = str(info.value)
    assert "no_such_function" in message
    assert ("NumPy" if on_backend == "numpy" else "CuPy") in message


def test_names_absent_on_cupy_hint_at_scipy(device_only):
    for path, name in [
        ("special", "jv"),
        ("special", "erfi"),
        ("linalg", "solve"),
        ("linalg", "inv"),
        ("linalg", "eigh"),
        ("sparse.linalg", "inv"),
        ("interpolate", "RectBivariateSpline"),
        ("interpolate", "splrep"),
        ("interpolate", "splev"),
    ]:
        module = _subpackage(path)
        assert not module.available(name), (path, name)
        with pytest.raises(AttributeError, match=rf"CuPy backend.*exists in scipy\.{path}"):
            getattr(module, name)


def test_names_present_on_numpy_that_cupy_lacks():
    with xp.use_backend("numpy"):
        assert xp.scipy.special.available("jv")
        assert xp.scipy.interpolate.available("RectBivariateSpline")
        assert xp.scipy.interpolate.splev is scipy.interpolate.splev


def test_available_never_raises(on_backend):
    for level in (xp.scipy, xp.scipy.special, xp.scipy.sparse, xp.scipy.sparse.linalg):
        for bad in (None, 3, "", "__class__", "__dict__", b"erf", "no such name"):
            assert level.available(bad) is False
    assert xp.scipy.special.available("erf") is True
    assert xp.scipy.available("special") is True
    assert xp.scipy.sparse.available("linalg") is True
    assert xp.scipy.sparse.available("csgraph") is True
    assert xp.scipy.available("sparse.linalg") is True
    assert xp.scipy.available("special.erf") is False  # names, not attribute paths


def test_dir_lists_module_names_and_helpers(on_backend):
    names = dir(xp.scipy.special)
    assert {"available", "resolve", "erf"} <= set(names)
    assert names == sorted(names)
    top = dir(xp.scipy)
    assert {"available", "resolve", "special", "sparse", "interpolate"} <= set(top)
    assert {"linalg", "csgraph", "available"} <= set(dir(xp.scipy.sparse))
    assert "solve_circulant" in dir(xp.scipy.linalg)


def test_all_is_explicit():
    assert xscipy.__all__ == ["available", "resolve"]


# --------------------------------------------------------------------------- missing SciPy


@pytest.fixture
def without_scipy(monkeypatch):
    """SciPy (and the fake cupyx.scipy built on it) cannot be imported."""
    monkeypatch.setattr(xscipy, "_modules", {})
    for name in list(sys.modules):
        if name == "scipy" or name.startswith(("scipy.", "cupyx.scipy.")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "scipy", None)
    if "cupyx.scipy" in sys.modules and getattr(sys.modules["cupyx.scipy"], "__cunumpy_fake__", False):
        for sub in SUBPACKAGES:
            monkeypatch.setitem(sys.modules, f"cupyx.scipy.{sub}", None)
    yield


def test_without_scipy_names_raise_import_error(on_backend, without_scipy):
    backend = "NumPy" if on_backend == "numpy" else "CuPy"
    with pytest.raises(ImportError, match=rf"special.*{backend} backend"):
        xp.scipy.special.resolve()
    with pytest.raises(ImportError, match=rf"{backend} backend"):
        xp.scipy.special.erf  # noqa: B018 - the attribute read must raise
    assert xp.scipy.special.available("erf") is False
    assert xp.scipy.sparse.linalg.available("cg") is False
    assert {"available", "resolve"} <= set(dir(xp.scipy.special))


def test_scipy_made_unimportable_after_use_is_not_served_from_the_cache(on_backend, monkeypatch):
    """``sys.modules["scipy"] = None`` alone, after xp.scipy resolved names: the cached
    module and the still-imported ``scipy.special`` must not be handed out (issue 27 item 8).
    On CuPy the backend's root is ``cupyx`` (the real cupyx.scipy does not need SciPy)."""
    backend = "NumPy" if on_backend == "numpy" else "CuPy"
    root = "scipy" if on_backend == "numpy" else "cupyx"
    assert callable(xp.scipy.special.erf) and xp.scipy.sparse.linalg.available("cg")
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, root, None)
        with pytest.raises(
            ImportError,
            match=rf"xp.scipy.special needs .* on the {backend} backend.*"
            rf"import of {root} halted",
        ):
            xp.scipy.special.erf  # noqa: B018 - the attribute read must raise
        with pytest.raises(ImportError, match=rf"{backend} backend"):
            xp.scipy.sparse.linalg.resolve()
        with pytest.raises(ImportError):
            xp.scipy.resolve()
        assert xp.scipy.special.available("erf") is False
        assert xp.scipy.available("special") is False
        assert {"available", "resolve"} <= set(dir(xp.scipy.special))
    # importable again: the same modules come back
    assert xp.scipy.special.resolve() is importlib.import_module(f"{_real_prefix(on_backend)}.special")
    assert xp.scipy.special.available("erf") is True


def test_without_scipy_solve_circulant_still_works(on_backend, without_scipy):
    x = xp.scipy.linalg.solve_circulant(xp.asarray([2.0, 1.0, 0.0]), xp.asarray([3.0, 3.0, 3.0]))
    np.testing.assert_allclose(xp.to_numpy(x), [1.0, 1.0, 1.0])


@pytest.mark.nosan  # a child Python running pure-Python code: nothing for the sanitizers
def test_nothing_is_imported_until_used():
    code = (
        "import sys\n"
        "import cunumpy as xp\n"
        "special = xp.scipy.special\n"
        "sparse_linalg = xp.scipy.sparse.linalg\n"
        "assert 'scipy' not in sys.modules, 'scipy imported by attribute access to a subpackage'\n"
        "xp.scipy.linalg.solve_circulant\n"
        "assert 'scipy' not in sys.modules, 'scipy imported by the fill-in'\n"
        "special.erf\n"
        "assert 'scipy.special' in sys.modules\n"
        "assert 'scipy.sparse' not in sys.modules\n"
    )
    run_in_fake_cupy_subprocess(code, env={"CUNUMPY_BACKEND": "numpy"})
    run_in_fake_cupy_subprocess(
        code.replace("'scipy.special' in", "'cupyx.scipy.special' in"), env={"CUNUMPY_BACKEND": "cupy"}
    )


# --------------------------------------------------------------------------- solve_circulant

CIRCULANT_CASES = [
    # (c, b, keywords)
    (np.array([2.0, -1.0, 0.0, 0.5]), np.array([1.0, 2.0, 3.0, 4.0]), {}),
    (np.array([4, 1, 0, 1]), np.array([1, 2, 3, 4]), {}),
    (np.array([2.0, -1.0, 0.0, 0.5], np.float32), np.array([1.0, 2.0, 3.0, 4.0], np.float32), {}),
    (np.array([2.0, -1.0, 0.0, 0.5], np.float32), np.array([1.0, 2.0, 3.0, 4.0]), {}),
    (np.array([2.0 + 1j, -1.0, 0.5j]), np.array([1.0, 2.0, 3.0]), {}),
    (np.array([2.0, -1.0, 0.5]), np.array([1.0 - 1j, 2.0, 3.0j], np.complex64), {}),
    (np.array([2.0, -1.0, 0.5]), np.arange(6.0).reshape(3, 2), {}),  # several right-hand sides
    (np.arange(1.0, 13.0).reshape(3, 4) ** 1.5, np.arange(12.0).reshape(4, 3), {"caxis": -1, "baxis": 0}),
    (np.arange(1.0, 13.0).reshape(4, 3) ** 1.5, np.arange(12.0).reshape(3, 4), {"caxis": 0, "baxis": 1, "outaxis": 1}),
    (np.array([1.0, 1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0, 4.0]), {"singular": "lstsq"}),
    (np.array([1.0, -1.0, 0.0]), np.array([1.0, 0.0, -1.0]), {"singular": "lstsq"}),
    (np.array([3.0, 1.0, 1.0]), np.array([1.0, 0.0, -1.0]), {"singular": "lstsq", "tol": 2.5}),
    (np.array([3.0, 1.0, 1.0]), np.zeros((3, 0)), {}),
    (np.array([3.0, 1.0, 1.0], np.float32), np.zeros((3, 0), np.float32), {}),
]


@pytest.mark.parametrize("case", range(len(CIRCULANT_CASES)))
def test_solve_circulant_agrees_with_scipy(on_backend, case):
    c, b, keywords = CIRCULANT_CASES[case]
    expected = scipy.linalg.solve_circulant(c, b, **keywords)
    result = xp.scipy.linalg.solve_circulant(xp.asarray(c), xp.asarray(b), **keywords)
    assert xp.get_array_backend(result) == on_backend
    assert result.dtype == expected.dtype
    assert result.shape == expected.shape
    rtol = 1e-5 if expected.dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(xp.to_numpy(result), expected, rtol=rtol, atol=rtol)


def test_solve_circulant_takes_lists_on_the_active_backend(on_backend):
    result = xp.scipy.linalg.solve_circulant([2.0, 1.0, 0.0], [3.0, 3.0, 3.0])
    assert xp.get_array_backend(result) == on_backend
    np.testing.assert_allclose(xp.to_numpy(result), [1.0, 1.0, 1.0])


def test_solve_circulant_is_cunumpys_fill_in_on_both_backends(on_backend):
    from cunumpy.scipy._circulant import solve_circulant

    assert xp.scipy.linalg.solve_circulant is solve_circulant
    assert xp.scipy.linalg.available("solve_circulant")


def test_solve_circulant_singular_raises(on_backend):
    c = xp.asarray([1.0, 1.0, 1.0, 1.0])
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        xp.scipy.linalg.solve_circulant(c, xp.asarray([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(np.linalg.LinAlgError):
        scipy.linalg.solve_circulant([1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0])
    # A large tol makes a regular matrix near-singular, as in SciPy.
    with pytest.raises(np.linalg.LinAlgError):
        xp.scipy.linalg.solve_circulant(xp.asarray([3.0, 1.0, 1.0]), xp.asarray([1.0, 0.0, 0.0]), tol=2.5)


def test_solve_circulant_bad_input(on_backend):
    solve = xp.scipy.linalg.solve_circulant
    c, b = xp.asarray([2.0, 1.0, 0.0]), xp.asarray([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="incompatible lengths"):
        solve(c, xp.asarray([1.0, 2.0]))
    with pytest.raises(ValueError, match="caxis"):
        solve(c, b, caxis=3)
    with pytest.raises(ValueError, match="baxis"):
        solve(c, b, baxis=-2)
    with pytest.raises(TypeError, match="outaxis"):
        solve(c, b, outaxis=0.5)
    with pytest.raises(ValueError, match="singular"):
        solve(c, b, singular="ignore")
    with pytest.raises(TypeError, match="'c'"):
        solve(np.array(["a", "b", "c"]), np.ones(3))
    with pytest.raises(TypeError, match="'b'"):
        solve(xp.asarray([2.0, 1.0, 0.0]), "abc")
    with pytest.raises(TypeError, match="'tol'"):
        solve(c, b, tol="small")


def test_solve_circulant_and_forwarding_from_many_threads(on_backend):
    from concurrent.futures import ThreadPoolExecutor

    c = xp.asarray([4.0, 1.0, 0.0, 1.0])
    rhs = [xp.asarray(np.arange(4.0) + i) for i in range(16)]
    expected = [scipy.linalg.solve_circulant([4.0, 1.0, 0.0, 1.0], np.arange(4.0) + i) for i in range(16)]

    def work(i):
        erf = xp.scipy.special.erf(xp.zeros(2))
        return xp.scipy.linalg.solve_circulant(c, rhs[i]), erf

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(16)))
    for (x, erf), want in zip(results, expected):
        np.testing.assert_allclose(xp.to_numpy(x), want, rtol=1e-12)
        assert xp.get_array_backend(erf) == on_backend


def test_solve_circulant_mixed_backends(device_only):
    solve = xp.scipy.linalg.solve_circulant
    with pytest.raises(TypeError, match="'c' is a host"):
        solve(np.array([2.0, 1.0, 0.0]), xp.asarray([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="'b' is a host"):
        solve(xp.asarray([2.0, 1.0, 0.0]), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="tol"):
        solve(xp.asarray([2.0, 1.0, 0.0]), xp.asarray([1.0, 2.0, 3.0]), tol=np.ones(1))
    # a list joins the device side
    assert xp.is_gpu(solve(xp.asarray([2.0, 1.0, 0.0]), [3.0, 3.0, 3.0]))
    # host arrays on the CuPy backend stay on the host
    assert xp.is_cpu(solve(np.array([2.0, 1.0, 0.0]), np.array([3.0, 3.0, 3.0])))


def test_solve_circulant_synchronises_once_on_the_device(device_only):
    c, b = xp.asarray([2.0, -1.0, 0.0, 0.5]), xp.asarray([1.0, 2.0, 3.0, 4.0])
    with xp.profiling.count_transfers() as counter:
        xp.scipy.linalg.solve_circulant(c, b)
    assert counter.syncs == 1 and counter.total == counter.to_host == 1  # the flag read to the host
    with xp.profiling.count_transfers() as counter:
        xp.scipy.linalg.solve_circulant(c, b, singular="lstsq")
    assert counter.syncs == 0 and counter.total == 0


def test_solve_circulant_does_not_modify_inputs(on_backend):
    c, b = xp.asarray([2.0, -1.0, 0.0, 0.5]), xp.asarray([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    c_before, b_before = xp.to_numpy(c).copy(), xp.to_numpy(b).copy()
    xp.scipy.linalg.solve_circulant(c, b, singular="lstsq")
    np.testing.assert_array_equal(xp.to_numpy(c), c_before)
    np.testing.assert_array_equal(xp.to_numpy(b), b_before)


# --------------------------------------------------------------------------- device splines


def _grid():
    x = np.linspace(0.0, 2.0, 12)
    return x, np.sin(3.0 * x) + x**2, np.linspace(0.05, 1.95, 17)


def test_spline_classes_exist_on_both_backends(on_backend):
    for name in (
        "UnivariateSpline",
        "make_interp_spline",
        "NdBSpline",
        "BSpline",
        "make_lsq_spline",
        "CubicSpline",
        "PchipInterpolator",
        "RegularGridInterpolator",
    ):
        assert xp.scipy.interpolate.available(name), name
    host_only = ("RectBivariateSpline", "splrep", "splev")
    for name in host_only:
        assert xp.scipy.interpolate.available(name) is (on_backend == "numpy"), name


SPLINE_CLASSES = (
    "UnivariateSpline",
    "InterpolatedUnivariateSpline",
    "LSQUnivariateSpline",
    "BSpline",
    "NdBSpline",
    "CubicSpline",
    "PchipInterpolator",
    "PPoly",
    "RegularGridInterpolator",
)


def test_spline_names_stay_classes(on_backend):
    """Classes on the backend stay classes through xp.scipy, so isinstance works (issue 27
    item 4); results of factory functions are instances of the backend's classes, subclasses
    stay subclasses, and class-level constructors and signatures are SciPy's."""
    import copy
    import inspect
    import pickle

    x, y, at = _grid()
    interpolate = xp.scipy.interpolate
    for name in SPLINE_CLASSES:
        assert isinstance(getattr(interpolate, name), type), name
    smooth = interpolate.UnivariateSpline(xp.asarray(x), xp.asarray(y), s=0.1)
    assert isinstance(smooth, interpolate.UnivariateSpline)
    assert not isinstance(smooth, interpolate.BSpline)
    exact = interpolate.InterpolatedUnivariateSpline(xp.asarray(x), xp.asarray(y))
    assert isinstance(exact, interpolate.InterpolatedUnivariateSpline)
    assert isinstance(exact, interpolate.UnivariateSpline)  # a subclass in SciPy and CuPy
    assert issubclass(interpolate.LSQUnivariateSpline, interpolate.UnivariateSpline)
    made = interpolate.make_interp_spline(xp.asarray(x), xp.asarray(y))
    assert isinstance(made, interpolate.BSpline)
    assert isinstance(interpolate.CubicSpline(xp.asarray(x), xp.asarray(y)), interpolate.PPoly)
    for spline in (copy.copy(made), copy.deepcopy(made), pickle.loads(pickle.dumps(made))):
        assert type(spline) is type(made)
        _agree(spline(xp.asarray(at)), scipy.interpolate.make_interp_spline(x, y)(at), on_backend)
    element = interpolate.BSpline.basis_element(xp.asarray([0.0, 1.0, 2.0]))
    assert isinstance(element, interpolate.BSpline)
    _agree(element(xp.asarray([0.5, 1.5])), [0.5, 0.5], on_backend)  # the linear hat
    assert "s" in inspect.signature(interpolate.UnivariateSpline).parameters
    if on_backend == "cupy":
        assert not isinstance(smooth, scipy.interpolate.UnivariateSpline)  # a device object
        assert type(smooth).__module__ == "cupyx.scipy.interpolate"


def _agree(result, expected, on_backend, rtol=1e-10):
    assert xp.get_array_backend(result) == on_backend
    np.testing.assert_allclose(xp.to_numpy(result), expected, rtol=rtol, atol=1e-12)


def test_interp_and_lsq_splines_agree_with_scipy(on_backend):
    x, y, at = _grid()
    interpolate = xp.scipy.interpolate
    spline = interpolate.make_interp_spline(xp.asarray(x), xp.asarray(y), k=3)
    _agree(spline(xp.asarray(at)), scipy.interpolate.make_interp_spline(x, y, k=3)(at), on_backend)
    knots = np.r_[[0.0] * 4, [0.5, 1.0, 1.5], [2.0] * 4]
    lsq = interpolate.make_lsq_spline(xp.asarray(x), xp.asarray(y), xp.asarray(knots), k=3)
    _agree(lsq(xp.asarray(at)), scipy.interpolate.make_lsq_spline(x, y, knots, k=3)(at), on_backend)
    bspline = interpolate.BSpline(xp.asarray(knots), lsq.c, 3)
    _agree(bspline(xp.asarray(at)), scipy.interpolate.make_lsq_spline(x, y, knots, k=3)(at), on_backend)


def test_cubic_pchip_and_univariate_splines_agree_with_scipy(on_backend):
    x, y, at = _grid()
    interpolate = xp.scipy.interpolate
    for name in ("CubicSpline", "PchipInterpolator"):
        ours = getattr(interpolate, name)(xp.asarray(x), xp.asarray(y))
        _agree(ours(xp.asarray(at)), getattr(scipy.interpolate, name)(x, y)(at), on_backend)
    smooth = interpolate.UnivariateSpline(xp.asarray(x), xp.asarray(y), s=0.1)
    _agree(smooth(xp.asarray(at)), scipy.interpolate.UnivariateSpline(x, y, s=0.1)(at), on_backend, rtol=1e-8)


def test_ndbspline_and_grid_interpolation_agree_with_scipy(on_backend):
    """The §10 recipe for RectBivariateSpline on the device: make_interp_spline per axis + NdBSpline."""
    x = np.linspace(0.0, 1.0, 8)
    y = np.linspace(0.0, 2.0, 9)
    values = np.sin(x)[:, None] * np.cos(y)[None, :]
    points = np.stack([np.linspace(0.05, 0.95, 6), np.linspace(0.1, 1.9, 6)], axis=1)
    interpolate = xp.scipy.interpolate
    tx = interpolate.make_interp_spline(xp.asarray(x), xp.asarray(values), k=3, axis=0).t
    ty = interpolate.make_interp_spline(xp.asarray(y), xp.asarray(values), k=3, axis=1).t
    host_tx = scipy.interpolate.make_interp_spline(x, values, k=3, axis=0).t
    host_ty = scipy.interpolate.make_interp_spline(y, values, k=3, axis=1).t
    coefficients = np.asarray(scipy.interpolate.RectBivariateSpline(x, y, values).get_coeffs()).reshape(8, 9)
    ours = interpolate.NdBSpline((tx, ty), xp.asarray(coefficients), 3)
    theirs = scipy.interpolate.NdBSpline((host_tx, host_ty), coefficients, 3)
    _agree(ours(xp.asarray(points)), theirs(points), on_backend)
    np.testing.assert_allclose(
        theirs(points), scipy.interpolate.RectBivariateSpline(x, y, values).ev(*points.T), rtol=1e-10
    )
    grid = interpolate.RegularGridInterpolator((xp.asarray(x), xp.asarray(y)), xp.asarray(values))
    _agree(grid(xp.asarray(points)), scipy.interpolate.RegularGridInterpolator((x, y), values)(points), on_backend)


def test_device_splines_refuse_host_arrays(device_only):
    x, y, at = _grid()
    spline = xp.scipy.interpolate.make_interp_spline(xp.asarray(x), xp.asarray(y))
    with pytest.raises(TypeError):
        spline(at)
    with pytest.raises(TypeError):
        xp.scipy.interpolate.CubicSpline(x, xp.asarray(y))
