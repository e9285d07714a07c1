"""The fake CuPy is as strict as CuPy and no stricter (API.md section 14, issue 16).

One test per rule of the audit in ``src/cunumpy/_fake_cupy/FIDELITY.md`` (the rule's row
is named in each test's docstring). In a plain run these tests skip and
``test_fidelity_suite_in_subprocess`` runs the file once in a fake-CuPy child.
"""

import numpy as np
import pytest
from _fake_support import rerun_under_fake_cupy

import cunumpy as xp
from cunumpy.kernel_testing import fake_cupy_active


@pytest.fixture
def cp(device_only):
    if not fake_cupy_active():
        pytest.skip("needs the fake CuPy (CUNUMPY_FAKE_CUPY=1)")
    import cupy

    return cupy


def test_fidelity_suite_in_subprocess():
    rerun_under_fake_cupy(__file__, "not in_subprocess")


def _host(a):
    return a.get()


# --------------------------------------------------------------------------- array type


def test_type_module_is_cupy(cp):
    """Row "ndarray type"."""
    a = cp.zeros(2)
    assert type(a).__module__ == "cupy" and type(a).__name__ == "ndarray"
    assert cp.ndarray.__module__ == "cupy"


# --------------------------------------------------------------------------- NumPy ufuncs


def test_numpy_ufunc_call_returns_device_array(cp):
    """Row "NumPy ufunc call"."""
    a = cp.linspace(0.0, 1.0, 5)
    result = np.sin(a)
    assert type(result) is cp.ndarray
    np.testing.assert_allclose(_host(result), np.sin(np.linspace(0.0, 1.0, 5)))
    assert type(np.add(a, 1.0)) is cp.ndarray and type(np.float64(2.0) * a) is cp.ndarray
    assert type(np.add(a, np.array(1.0))) is cp.ndarray  # 0-d host arrays act as scalars


def test_numpy_ufunc_with_out(cp):
    """Row "NumPy ufunc out=": the result is the given device array."""
    a, b, c = cp.arange(4.0), cp.full(4, 2.0), cp.empty(4)
    assert np.maximum(a, b, out=c) is c
    assert _host(c).tolist() == [2.0, 2.0, 2.0, 3.0]
    assert np.add(a, b, out=(c,)) is c


def test_numpy_ufunc_methods(cp):
    """Row "NumPy ufunc methods"."""
    a = cp.arange(1.0, 5.0)
    total = np.add.reduce(a)
    assert type(total) is cp.ndarray and total.ndim == 0 and float(total) == 10.0
    assert _host(np.multiply.accumulate(a)).tolist() == [1.0, 2.0, 6.0, 24.0]
    assert np.add.outer(a, a).shape == (4, 4) and type(np.add.outer(a, a)) is cp.ndarray
    assert _host(np.add.reduceat(a, cp.array([0, 2]))).tolist() == [3.0, 7.0]
    b = cp.zeros(3)
    np.add.at(b, [0, 0, 2], 1.0)  # indices as a list, as CuPy's indexing converts them
    assert _host(b).tolist() == [2.0, 0.0, 1.0]


def test_numpy_ufunc_mixing_host_arrays_raises(cp):
    """Row "NumPy ufunc with host arrays": TypeError, as CuPy's ufuncs."""
    a = cp.arange(3.0)
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        np.add(a, np.ones(3))
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        np.ones(3) + a
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        np.add(a, a, out=np.empty(3))
    with pytest.raises(TypeError):
        np.add(np.ones(3), np.ones(3), out=a)


def test_numpy_ufunc_out_with_two_arrays_raises_value_error(cp):
    """Row "NumPy ufunc out=": CuPy takes exactly one output array."""
    a = cp.arange(3.0)
    with pytest.raises(ValueError, match="exactly one"):
        np.divmod(a, 2.0, out=(cp.empty(3), cp.empty(3)))


def test_numpy_ufunc_cupy_lacks_is_declined(cp):
    """Row "NumPy ufunc CuPy lacks": NumPy raises TypeError (nothing runs on the host)."""
    with pytest.raises(TypeError):
        np.isnat(cp.zeros(2))


# --------------------------------------------------------------------------- indexing


def test_take_module_function_and_method_agree(cp):
    """Row "take": lists and host index arrays are copied, as CuPy's take does."""
    a = cp.arange(10.0, 15.0)
    for indices in ([1, 2], np.array([1, 2]), cp.array([1, 2]), (1, 2)):
        assert _host(cp.take(a, indices)).tolist() == [11.0, 12.0]
        assert _host(a.take(indices)).tolist() == [11.0, 12.0]
    assert float(cp.take(a, 3)) == 13.0
    m = cp.arange(6).reshape(2, 3)
    assert _host(cp.take(m, [2, 0], axis=1)).tolist() == [[2, 0], [5, 3]]
    out = cp.empty(2)
    assert cp.take(a, [0, 4], out=out) is out and _host(out).tolist() == [10.0, 14.0]


def test_take_of_a_list_fails_as_in_cupy(cp):
    """Row "take": CuPy calls ``a.take``; a list has none (AttributeError)."""
    with pytest.raises(AttributeError):
        cp.take([1, 2, 3], [0])
    with pytest.raises(TypeError, match=r"cupy.take\(\).*host numpy.ndarray"):  # see the delegating row
        cp.take(np.arange(3), [0])
    with pytest.raises(TypeError, match=r"cupy.put\(\).*host numpy.ndarray"):
        cp.put(np.zeros(3), [0], 1.0)


def test_put_takes_lists_and_host_arrays_and_wraps_by_default(cp):
    """Row "put": indices and values copied; CuPy's default mode is "wrap"."""
    a = cp.zeros(4)
    cp.put(a, [0, 1], [5.0, 6.0])
    a.put(np.array([2]), np.array([7.0]))
    cp.put(a, [5], 9.0)  # wraps to index 1
    assert _host(a).tolist() == [5.0, 9.0, 7.0, 0.0]
    with pytest.raises(IndexError):
        cp.put(a, [5], 1.0, mode="raise")
    with pytest.raises(TypeError, match="mode"):
        a.put([0], 1.0, mode="nearest")


def test_place_copies_mask_and_values(cp):
    """Row "place": CuPy converts mask and vals with cupy.asarray; arr must be a device array."""
    a = cp.zeros(4)
    cp.place(a, [True, False, True, False], [1.0, 2.0])
    assert _host(a).tolist() == [1.0, 0.0, 2.0, 0.0]
    with pytest.raises(TypeError):
        cp.place(np.zeros(4), [True] * 4, [1.0])


def test_getitem_with_lists_and_host_index_arrays(cp):
    """Row "a[index] read"."""
    a = cp.arange(5.0)
    assert _host(a[[0, 3]]).tolist() == [0.0, 3.0]
    assert _host(a[np.array([4, 1])]).tolist() == [4.0, 1.0]
    assert _host(a[np.array([True, False, True, False, False])]).tolist() == [0.0, 2.0]


def test_advanced_index_assignment_takes_host_values(cp):
    """Row "a[advanced] = value": indices and values are copied to the device."""
    a = cp.zeros(5)
    a[[0, 1]] = np.array([1.0, 2.0])
    a[np.array([2, 3])] = [3.0, 4.0]
    a[np.array([False, False, False, False, True])] = np.array([5.0])
    assert _host(a).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    m = cp.zeros((2, 2))
    m[[0, 1], 0] = np.array([7.0, 8.0])
    assert _host(m).tolist() == [[7.0, 0.0], [8.0, 0.0]]


def test_basic_slice_assignment_of_host_array_raises_value_error(cp):
    """Row "a[basic] = host array": ValueError (CuPy's fill refuses non-scalar NumPy arrays)."""
    a = cp.zeros(4)
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):
        a[...] = np.ones(4)
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):
        a[1:3] = np.ones(2)
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):
        a.fill(np.ones(4))
    with pytest.raises(TypeError, match="list"):
        a[1:3] = [1.0, 2.0]
    a[...] = np.array(3.0)
    assert _host(a).tolist() == [3.0] * 4
    assert _host(a).tolist() == [3.0] * 4  # nothing was written by the refused assignments


def test_putmask_refuses_host_arrays_as_cupy(cp):
    """Row "putmask": a and mask must be device arrays, values a device array or scalar (TypeError)."""
    a = cp.zeros(3)
    with pytest.raises(TypeError):
        cp.putmask(a, np.array([True, False, True]), 1.0)
    cp.putmask(a, a == 0, 2.0)
    assert _host(a).tolist() == [2.0, 2.0, 2.0]


def test_extract_copies_condition_only(cp):
    """Row "extract": condition converted; arr must be a device array."""
    a = cp.arange(4.0)
    assert _host(cp.extract([True, False, True, False], a)).tolist() == [0.0, 2.0]
    with pytest.raises(TypeError):
        cp.extract(cp.ones(4, dtype=bool), np.arange(4.0))


# --------------------------------------------------------------------------- creation and manipulation


def test_asarray_parameters_take_host_data(cp):
    """Row "array-like parameters" (functions CuPy runs cupy.asarray on)."""
    host = np.arange(9.0).reshape(3, 3)
    for result, expected in (
        (cp.tril(host), np.tril(host)),
        (cp.triu(host.tolist()), np.triu(host)),
        (cp.tile(np.ones(2), 2), np.ones(4)),
        (cp.append([1.0], np.array([2.0])), np.array([1.0, 2.0])),
        (cp.resize(np.arange(3), 5), np.resize(np.arange(3), 5)),
        (cp.diag(np.array([1.0, 2.0])), np.diag([1.0, 2.0])),
        (cp.cov(host), np.cov(host)),
        (cp.average(host, weights=np.ones(3), axis=0), np.average(host, weights=np.ones(3), axis=0)),
        (cp.isclose(cp.ones(2), np.ones(2)), np.array([True, True])),
        (cp.real(np.array([1 + 2j])), np.array([1.0])),
        (cp.round(np.array([1.26]), 1), np.array([1.3])),
        (cp.fft.fftshift(np.arange(4.0)), np.fft.fftshift(np.arange(4.0))),
        (cp.cross([1.0, 0.0, 0.0], np.array([0.0, 1.0, 0.0])), np.array([0.0, 0.0, 1.0])),
    ):
        assert type(result) is cp.ndarray
        np.testing.assert_allclose(_host(result), expected)


def test_creation_functions_take_host_data(cp):
    """Row "creation"."""
    assert type(cp.asarray(np.ones(2))) is cp.ndarray and type(cp.array([1, 2])) is cp.ndarray
    assert cp.zeros_like(np.ones((2, 3))).shape == (2, 3)


def test_other_array_parameters_refuse_host_arrays(cp):
    """Row "device-only parameters": TypeError naming the function and the argument."""
    with pytest.raises(TypeError, match=r"cupy.concatenate\(\)"):
        cp.concatenate([cp.ones(2), np.ones(2)])
    with pytest.raises(TypeError, match=r"cupy.sum\(\).*'a'"):
        cp.sum(np.ones(2))
    with pytest.raises(TypeError, match="cupy.ndarray \\+"):
        cp.ones(2) + np.ones(2)


def test_delete_and_histogram_refuse_with_value_error(cp):
    """Row "explicit ValueError checks": delete(arr) and histogram(x) check with ValueError."""
    with pytest.raises(ValueError, match="host numpy.ndarray"):
        cp.delete(np.ones(3), 0)
    with pytest.raises(ValueError, match="host numpy.ndarray"):
        cp.histogram(np.ones(3))
    assert _host(cp.delete(cp.arange(3), [0])).tolist() == [1, 2]  # indices may be a list


def test_list_to_method_delegating_function(cp):
    """Row "lists where CuPy calls a method": both TypeError and AttributeError."""
    for function in (cp.sum, cp.mean, cp.reshape, cp.transpose, cp.argmax):
        args = ([1.0, 2.0],) if function is not cp.reshape else ([1.0, 2.0], (2, 1))
        with pytest.raises(AttributeError):
            function(*args)
        with pytest.raises(TypeError):
            function(*args)


# --------------------------------------------------------------------------- linalg, fft, random, cupyx.scipy


def test_linalg_refuses_host_arrays_with_lin_alg_error(cp):
    """Row "linalg": CuPy's _assert_cupy_array raises LinAlgError (a ValueError)."""
    for name in ("solve", "inv", "cholesky", "qr", "svd"):
        args = (np.eye(2), cp.ones(2)) if name == "solve" else (np.eye(2),)
        with pytest.raises(cp.linalg.LinAlgError, match="host numpy.ndarray"):
            getattr(cp.linalg, name)(*args)
    assert issubclass(cp.linalg.LinAlgError, ValueError)
    with pytest.raises(TypeError):  # the others: no explicit check, TypeError
        cp.linalg.norm(np.ones(2))


def test_fft_refuses_host_arrays(cp):
    """Row "fft": TypeError ('The input array a must be a cupy.ndarray' in CuPy)."""
    with pytest.raises(TypeError):
        cp.fft.fft(np.ones(4))
    assert type(cp.fft.fft(cp.ones(4))) is cp.ndarray


def test_random_results_are_device_arrays(cp):
    """Row "random"."""
    rng = cp.random.default_rng(0)
    assert type(rng.standard_normal(3)) is cp.ndarray
    assert type(cp.random.rand(2)) is cp.ndarray


def test_cupyx_scipy_host_first_argument(cp):
    """Row "cupyx.scipy": asarray-converting functions take host data, the others refuse it."""
    pytest.importorskip("scipy")
    import cupyx.scipy.ndimage as ndimage
    import cupyx.scipy.signal as signal

    assert type(signal.detrend(np.arange(5.0))) is cp.ndarray
    assert type(signal.detrend([1.0, 2.0, 4.0])) is cp.ndarray
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        ndimage.gaussian_filter(np.ones(4), 1.0)
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        signal.convolve(np.ones(3), cp.ones(2))


# --------------------------------------------------------------------------- a program


def test_program_runs_unchanged(cp):
    """The issue's program: NumPy ufuncs, take/put and fancy indexing on device arrays."""
    with xp.use_backend("cupy"):
        x = xp.linspace(0.0, np.pi, 8)
        y = np.sin(x) + np.cos(x) ** 2
        picked = xp.take(y, [0, 7])
        xp.put(y, [1, 2], [0.0, 0.0])
        y[[3, 4]] = np.array([1.0, 1.0])
        y[np.array([5])] = 2.0
        total = np.add.reduce(y)
        expected = np.sin(np.linspace(0.0, np.pi, 8)) + np.cos(np.linspace(0.0, np.pi, 8)) ** 2
        np.testing.assert_allclose(xp.to_numpy(picked), expected[[0, 7]])
        expected[[1, 2]] = 0.0
        expected[[3, 4]] = 1.0
        expected[5] = 2.0
        np.testing.assert_allclose(float(total), expected.sum())
