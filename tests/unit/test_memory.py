"""Host staging, asynchronous host copies and device mirrors (API.md §5, §1.4)."""

import sys

import numpy as np
import pytest

import cunumpy as xp
from cunumpy.memory import DeviceMirror, HostCopy, HostStaging, StagedCopy
from cunumpy.profiling import count_transfers


def test_module_exports_exactly_the_documented_names():
    assert sorted(xp.memory.__all__) == ["DeviceMirror", "HostCopy", "HostStaging", "StagedCopy"]
    assert not hasattr(xp, "DeviceMirror")


# --------------------------------------------------------------------------- HostStaging


def test_staging_properties_and_repr():
    staging = HostStaging(3, np.float64)
    assert staging.shape == (3,) and staging.dtype == np.float64 and staging.buffers == 2
    assert repr(staging) == "HostStaging(shape=(3,), dtype=float64, buffers=2)"
    assert HostStaging((2, 4), "int32", buffers=5).shape == (2, 4)
    with pytest.raises(AttributeError):
        staging.shape = (4,)
    with pytest.raises(AttributeError):
        staging.buffers = 3


def test_staging_rejects_bad_arguments():
    with pytest.raises(ValueError, match="buffers"):
        HostStaging(3, float, buffers=0)
    with pytest.raises(TypeError, match="buffers"):
        HostStaging(3, float, buffers=1.5)
    with pytest.raises(TypeError, match="shape"):
        HostStaging("3", float)
    with pytest.raises(ValueError, match="shape"):
        HostStaging((2, -1), float)
    with pytest.raises(TypeError, match="dtype"):
        HostStaging(3, object)
    staging = HostStaging((2, 3), np.float64)
    with pytest.raises(ValueError, match=r"\(3, 2\)"):
        staging.copy(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="float32"):
        staging.copy(np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="array"):
        staging.copy([[0.0] * 3] * 2)
    with pytest.raises(ValueError, match="stream"):
        staging.copy(np.zeros((2, 3)), stream=xp.cuda.HostStream(), event=xp.cuda.HostEvent())
    with pytest.raises(TypeError, match="stream"):
        staging.copy(np.zeros((2, 3)), stream="s")


def test_staging_of_host_arrays_copies_at_once():
    staging = HostStaging(4, np.float64)
    source = np.arange(4.0)
    handle = staging.copy(source)
    assert isinstance(handle, StagedCopy)
    source[:] = -1.0  # the copy already happened
    assert handle.ready() is True
    np.testing.assert_array_equal(handle.result(), [0.0, 1.0, 2.0, 3.0])


def test_staged_copies_go_stale_when_their_slot_is_reused():
    staging = HostStaging(2, np.int64, buffers=2)
    first = staging.copy(np.array([1, 1]))
    second = staging.copy(np.array([2, 2]))
    np.testing.assert_array_equal(first.result(), [1, 1])  # still valid: two buffers
    third = staging.copy(np.array([3, 3]))
    with pytest.raises(RuntimeError, match="reused"):
        first.result()
    with pytest.raises(RuntimeError, match="reused"):
        first.ready()
    np.testing.assert_array_equal(second.result(), [2, 2])
    np.testing.assert_array_equal(third.result(), [3, 3])
    assert third.result() is not second.result()
    staging.synchronize()


def test_staging_of_device_arrays(on_backend):
    staging = HostStaging((3, 2), np.float64, buffers=2)
    source = xp.asarray(np.arange(6.0).reshape(3, 2))
    with count_transfers() as c:
        handle = staging.copy(source)
        source[...] = -5.0  # allowed at once: the copy works on a snapshot
    result = handle.result()
    assert type(result) is np.ndarray
    np.testing.assert_array_equal(result, np.arange(6.0).reshape(3, 2))
    assert handle.ready() is True
    if on_backend == "cupy":
        (event,) = c.events
        assert (event.kind, event.blocking, event.nbytes) == ("to_host", False, 48)
        assert "HostStaging.copy" in event.description
    else:
        assert c.events == []


def test_staging_stays_on_the_device_of_its_first_array(device_only):
    staging = HostStaging((2,), np.float64)
    staging.copy(xp.zeros(2)).result()
    staging.copy(xp.ones(2)).result()  # the same device again
    staging._device_id = 1  # as if bound on device 1 (the fake CuPy has one device)
    with pytest.raises(
        ValueError,
        match=r"HostStaging.copy\(\): 'array' lives on device 0, but this "
        r"staging is bound to device 1; use one staging per device",
    ):
        staging.copy(xp.zeros(2))


def test_staging_keeps_at_most_buffers_copies_in_flight(device_only):
    staging = HostStaging(5, np.float32, buffers=3)
    handles = [staging.copy(xp.full(5, float(i), dtype=xp.float32)) for i in range(7)]
    staging.synchronize()
    for i, handle in enumerate(handles[-3:], start=4):
        assert handle.ready() is True
        np.testing.assert_array_equal(handle.result(), np.full(5, i, np.float32))
    for handle in handles[:4]:
        with pytest.raises(RuntimeError):
            handle.result()


def test_staging_waits_for_an_explicit_producer(device_only):
    producer = xp.cuda.create_stream()
    with xp.cuda.stream(producer):
        data = xp.arange(8.0) + 1
    handle = HostStaging(8, np.float64).copy(data, stream=producer)
    np.testing.assert_array_equal(handle.result(), np.arange(8.0) + 1)
    with xp.cuda.stream(producer):
        data2 = data * 2
        event = xp.cuda.record_event(stream=producer)
    handle = HostStaging(8, np.float64).copy(data2, event=event)
    np.testing.assert_array_equal(handle.result(), (np.arange(8.0) + 1) * 2)


def test_staging_device_copies_reject_host_dependencies(device_only):
    staging = HostStaging(2, np.float64)
    with pytest.raises(TypeError, match="CUDA producer"):
        staging.copy(xp.zeros(2), stream=xp.cuda.HostStream())
    with pytest.raises(TypeError, match="CUDA producer"):
        staging.copy(xp.zeros(2), event=xp.cuda.HostEvent())
    with pytest.raises(ValueError, match="at most one"):
        staging.copy(xp.zeros(2), stream=xp.cuda.create_stream(), event=xp.cuda.create_event())


def test_host_slots_are_replaced_on_first_device_use(device_only):
    staging = HostStaging(3, np.float64, buffers=2)
    old = staging.copy(np.array([1.0, 2.0, 3.0]))
    new = staging.copy(xp.asarray(np.array([4.0, 5.0, 6.0])))
    np.testing.assert_array_equal(old.result(), [1.0, 2.0, 3.0])  # older handle keeps its snapshot
    np.testing.assert_array_equal(new.result(), [4.0, 5.0, 6.0])


# --------------------------------------------------------------------------- to_host_async / HostCopy


def test_to_host_async_of_host_data(on_backend):
    with xp.use_backend("numpy"):
        h = xp.to_host_async(np.float64(2.5))
    assert isinstance(h, HostCopy)
    assert h.ready() is True and h.result() == 2.5
    values = np.arange(3)
    h = HostCopy.start(values)
    values[0] = 99
    np.testing.assert_array_equal(h.result(), [0, 1, 2])


def test_to_host_async_of_a_device_scalar(device_only):
    x = xp.sum(xp.arange(10.0))
    with count_transfers() as c:
        h = xp.to_host_async(x)
    value = h.result()
    assert isinstance(value, np.floating) and value == 45.0
    assert h.ready() is True
    (event,) = c.events
    assert (event.kind, event.blocking, event.nbytes) == ("to_host", False, 8)
    assert "to_host_async" in event.description


def test_to_host_async_of_a_small_device_array(device_only):
    a = xp.asarray(np.arange(12.0).reshape(3, 4))[:, 1]  # strided view
    h = xp.to_host_async(a)
    result = h.result()
    assert type(result) is np.ndarray
    np.testing.assert_array_equal(result, [1.0, 5.0, 9.0])


def test_to_host_async_rejects_foreign_device_objects():
    class Foreign:
        __cuda_array_interface__ = {"shape": (1,), "typestr": "<f8", "data": (0, False), "version": 3}  # noqa: RUF012 - read only

    with pytest.raises(TypeError, match="'a'"):
        xp.to_host_async(Foreign())


# --------------------------------------------------------------------------- DeviceMirror


def test_mirror_rejects_non_arrays():
    with pytest.raises(TypeError, match="host_array"):
        DeviceMirror([1.0, 2.0])
    with pytest.raises(TypeError, match="host_array"):
        DeviceMirror(np.zeros(2)).rebind((1, 2))


def test_mirror_on_numpy_is_the_host_array():
    host = np.arange(4.0)
    with xp.use_backend("numpy"):
        mirror = DeviceMirror(host)
        assert mirror.device is host
        with count_transfers() as c:
            assert mirror.to_device() is mirror
            assert mirror.to_host() is mirror
        assert c.events == []
        assert mirror.zero() is mirror
        np.testing.assert_array_equal(host, 0.0)
        assert (mirror.host is host, mirror.shape, mirror.dtype) == (True, (4,), np.float64)
        assert "(4,)" in repr(mirror) and "float64" in repr(mirror)
        with pytest.raises(ValueError, match="at most one"):
            mirror.to_host(stream=xp.cuda.HostStream(), event=xp.cuda.HostEvent())


def test_mirror_detects_host_reallocation_without_rebind(on_backend):
    host = np.zeros(6)
    mirror = DeviceMirror(host)
    host.shape = (2, 3)  # the owner reshaped its array in place
    for action in (lambda: mirror.device, mirror.to_device, mirror.to_host):
        with pytest.raises(ValueError, match="rebind"):
            action()
    mirror.rebind(host)
    assert mirror.shape == (2, 3)
    assert mirror.device.shape == (2, 3)


def test_mirror_round_trip_on_the_device(device_only):
    host = np.arange(6.0).reshape(2, 3)
    mirror = DeviceMirror(host)
    with count_transfers() as c:
        device = mirror.device
    assert xp.is_gpu(device) and device.shape == (2, 3)
    assert (c.to_device, c.bytes_to_device) == (1, 48)
    assert c.events[0].where.startswith(__file__ + ":")  # the user's line, not cunumpy's
    assert mirror.device is device  # allocated once
    device *= 10
    with count_transfers() as c:
        assert mirror.to_host() is mirror
    assert (c.to_host, c.bytes_to_host) == (1, 48)
    assert mirror.host is host
    np.testing.assert_array_equal(host, np.arange(6.0).reshape(2, 3) * 10)
    host[0, 0] = -1.0
    mirror.to_device()
    assert float(xp.to_numpy(mirror.device)[0, 0]) == -1.0
    assert "device" in repr(mirror)


def test_mirror_to_host_before_allocation_does_nothing(device_only):
    host = np.ones(3)
    mirror = DeviceMirror(host)
    with count_transfers() as c:
        mirror.to_host()
    assert c.events == []
    np.testing.assert_array_equal(host, 1.0)


def test_mirror_zero_allocates_without_upload(device_only):
    host = np.ones(4)
    mirror = DeviceMirror(host)
    with count_transfers() as c:
        mirror.zero()
    assert c.events == []
    np.testing.assert_array_equal(xp.to_numpy(mirror.device), 0.0)
    np.testing.assert_array_equal(host, 1.0)
    mirror.device[...] = 2.0
    mirror.zero().to_host()
    np.testing.assert_array_equal(host, 0.0)


def test_mirror_rebind_keeps_or_drops_the_device_buffer(device_only):
    mirror = DeviceMirror(np.zeros(3))
    buffer = mirror.device
    replacement = np.full(3, 7.0)
    assert mirror.rebind(replacement) is mirror
    assert mirror.device is buffer  # kept, not refreshed
    np.testing.assert_array_equal(xp.to_numpy(mirror.device), 0.0)
    mirror.to_host()
    np.testing.assert_array_equal(replacement, 0.0)
    mirror.rebind(np.ones(5))
    assert mirror.device is not buffer and mirror.device.shape == (5,)


def test_mirror_to_host_keeps_the_layout_of_the_host(device_only):
    host = np.asfortranarray(np.zeros((2, 3)))
    mirror = DeviceMirror(host)
    mirror.device[...] = xp.asarray(np.arange(6.0).reshape(2, 3))
    mirror.to_host()
    assert host.flags.f_contiguous
    np.testing.assert_array_equal(host, np.arange(6.0).reshape(2, 3))


def test_mirror_to_host_after_a_producer(device_only):
    host = np.zeros(4)
    mirror = DeviceMirror(host)
    producer = xp.cuda.create_stream()
    with xp.cuda.stream(producer):
        mirror.device[...] = 3.0
    mirror.to_host(stream=producer)
    np.testing.assert_array_equal(host, 3.0)
    with xp.cuda.stream(producer):
        mirror.device[...] = 4.0
        event = xp.cuda.record_event(stream=producer)
    mirror.to_host(event=event)
    np.testing.assert_array_equal(host, 4.0)
    with pytest.raises(ValueError, match="at most one"):
        mirror.to_host(stream=producer, event=event)
    with pytest.raises(TypeError):
        mirror.to_host(stream=xp.cuda.HostStream())


def test_mirror_requires_its_device_to_be_current(device_only, monkeypatch):
    cupy = sys.modules["cupy"]
    mirror = DeviceMirror(np.zeros(2))
    mirror.device  # noqa: B018 - the property read is what is tested
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 1)
    with pytest.raises(ValueError, match="current"):
        mirror.to_host()
