"""as_kernel_array, kernel_output, kernel_outputs (API.md 2.11) and fuse (2.12)."""

import sys

import numpy as np
import pytest
from _events import Events

import cunumpy as xp

kernels = xp.kernels


def cupy():
    return sys.modules["cupy"]


# --------------------------------------------------------------------------- host side


def test_fitting_host_arrays_are_returned_as_is():
    like = np.zeros(3)
    a = np.arange(4.0)
    assert kernels.as_kernel_array(a, like) is a
    assert kernels.as_kernel_array(a, like, dtype=np.float64) is a
    converted = kernels.as_kernel_array(a, like, dtype=np.float32)
    assert converted.dtype == np.float32 and converted.flags.c_contiguous
    f = np.asfortranarray(np.ones((3, 4)))
    c = kernels.as_kernel_array(f, like)
    assert c is not f and c.flags.c_contiguous
    lst = kernels.as_kernel_array([1, 2, 3], like, dtype=float)
    assert isinstance(lst, np.ndarray) and lst.dtype == np.float64


def test_strided_host_views_pass_through():
    storage = np.zeros((4, 10))
    view = storage[:, :6]
    like = np.zeros(1)
    assert kernels.as_kernel_array(view, like, strided=True) is view
    copied = kernels.as_kernel_array(view, like)
    assert copied is not view and copied.flags.c_contiguous
    for not_row_major in (storage[:, ::2], storage.T, storage[::-1]):
        assert kernels.as_kernel_array(not_row_major, like, strided=True) is not not_row_major


def test_bad_arguments():
    with pytest.raises(TypeError, match="like"):
        kernels.as_kernel_array(np.zeros(2), [1.0])
    with pytest.raises(TypeError, match="dtype"):
        kernels.as_kernel_array(np.zeros(2), np.zeros(2), dtype="no such dtype")
    with pytest.raises(TypeError, match="object"):
        kernels.as_kernel_array(np.array([None]), np.zeros(2))
    with pytest.raises(TypeError, match="out"), kernels.kernel_output([1.0], np.zeros(2)):
        pass


def test_kernel_output_host_write_back_only_on_normal_exit():
    out = np.zeros(4, dtype=np.float32)
    like = np.zeros(1)
    with kernels.kernel_output(out, like, dtype=np.float64) as buf:
        assert buf is not out and buf.dtype == np.float64
        buf[:] = 1.5
    np.testing.assert_array_equal(out, 1.5)
    with pytest.raises(RuntimeError), kernels.kernel_output(out, like, dtype=np.float64) as buf:
        buf[:] = 9.0
        raise RuntimeError("kernel failed")
    np.testing.assert_array_equal(out, 1.5)
    same = np.zeros(3)
    with kernels.kernel_output(same, like) as buf:
        assert buf is same


def test_kernel_outputs_several():
    a, b = np.zeros(3, dtype=np.float32), np.zeros(3)
    with kernels.kernel_outputs(a, b, like=np.zeros(1), dtype=np.float64) as (ba, bb):
        assert bb is b and ba is not a
        ba[:] = 2.0
        bb[:] = 3.0
    np.testing.assert_array_equal(a, 2.0)
    np.testing.assert_array_equal(b, 3.0)


# --------------------------------------------------------------------------- device side


def test_device_side_conversions_are_counted(device_only):
    like = cupy().zeros(2)
    d = cupy().arange(4.0)
    assert kernels.as_kernel_array(d, like) is d
    with Events() as events:
        moved = kernels.as_kernel_array(np.arange(4.0), like)
    assert xp.is_gpu(moved) and len(events.kinds("to_device")) == 1
    with Events() as events:
        cast = kernels.as_kernel_array(d, like, dtype=np.float32)
    assert xp.is_gpu(cast) and cast.dtype == np.float32 and len(events.kinds("device_copy")) == 1
    with Events() as events:
        back = kernels.as_kernel_array(d, np.zeros(1))
    assert isinstance(back, np.ndarray) and len(events.kinds("to_host")) == 1


def test_kernel_output_across_sides(device_only):
    host_out = np.zeros(3)
    with Events() as events, kernels.kernel_output(host_out, cupy().zeros(1)) as buf:
        assert xp.is_gpu(buf)
        buf[...] = 4.0
    np.testing.assert_array_equal(host_out, 4.0)
    assert len(events.kinds("to_device")) == 1 and len(events.kinds("to_host")) == 1
    dev_out = cupy().zeros(3)
    with kernels.kernel_output(dev_out, np.zeros(1)) as buf:
        assert isinstance(buf, np.ndarray)
        buf[:] = 5.0
    np.testing.assert_array_equal(dev_out.get(), 5.0)
    dev_f32 = cupy().zeros(3, dtype=np.float32)
    with kernels.kernel_output(dev_f32, cupy().zeros(1), dtype=np.float64) as buf:
        buf[...] = 6.0
    np.testing.assert_array_equal(dev_f32.get(), 6.0)


# --------------------------------------------------------------------------- fuse


def test_fuse_plain_call_on_host():
    calls = []

    @kernels.fuse
    def axpy(a, x, y):
        calls.append(1)
        return a * x + y

    x = np.arange(3.0)
    np.testing.assert_array_equal(axpy(2.0, x, x), 3 * x)
    assert axpy.__wrapped__(2.0, x, x) is not None and axpy.__name__ == "axpy"

    @kernels.fuse(kernel_name="named")
    def double(x):
        return 2 * x

    np.testing.assert_array_equal(double(x), 2 * x)
    with pytest.raises(TypeError):
        kernels.fuse(3)
    with pytest.raises(TypeError, match="kernel_name"):
        kernels.fuse(kernel_name=3)(lambda x: x)


def test_fuse_on_device_keeps_the_unfused_dtype(device_only):
    @kernels.fuse
    def scale(x, a):
        return x * a

    x32 = cupy().ones(3, dtype=np.float32)
    out = scale(x32, 2.0)
    assert xp.is_gpu(out) and out.dtype == np.float32 == (np.ones(3, np.float32) * 2.0).dtype
    out = scale(x=cupy().ones(2, dtype=np.int32), a=2.5)
    assert out.dtype == np.float64


def test_fuse_promotes_python_scalars():
    from cunumpy.kernels._arrays import _promote_scalars

    args, kwargs = _promote_scalars((np.ones(2, np.float32), 2.0, 3), {"b": 1.5})
    assert args[1].dtype == np.float32 and args[2].dtype == np.float32 and kwargs["b"].dtype == np.float32
    args, _ = _promote_scalars((np.ones(2, np.int32), 2.5), {})
    assert args[1].dtype == np.float64
    assert _promote_scalars((1.0,), {}) == ((1.0,), {})
