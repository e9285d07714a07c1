"""Devices, memory, streams and events (API.md §4.1, §4.2)."""

import sys

import numpy as np
import pytest

import cunumpy as xp
from cunumpy.cuda import (
    DEFAULT_SHARED_MEMORY_PER_BLOCK,
    HostEvent,
    HostStream,
    bind_local_device,
    create_event,
    create_stream,
    device_count,
    free_memory,
    is_hip,
    max_shared_memory_per_block,
    memory_info,
    pin_memory,
    record_event,
    set_device,
    set_device_for_rank,
    stream as cuda_stream,
    wait_event,
)

LAUNCHER_VARIABLES = (
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK",
    "PALS_LOCAL_RANKID",
    "SLURM_LOCALID",
    "LOCAL_RANK",
)


@pytest.fixture
def numpy_backend():
    with xp.use_backend("numpy"):
        yield


def cupy_functional():
    return xp.cupy_available()


# --------------------------------------------------------------------------- surface


def test_names_live_in_cunumpy_cuda_only():
    for name in (
        "device_count",
        "set_device",
        "memory_info",
        "free_memory",
        "stream",
        "pin_memory",
        "set_device_for_rank",
    ):
        assert name in xp.cuda.__all__
        assert not hasattr(xp, name)
    assert DEFAULT_SHARED_MEMORY_PER_BLOCK == 49152
    for name in (
        "bind_local_device",
        "max_shared_memory_per_block",
        "is_hip",
        "create_stream",
        "create_event",
        "record_event",
        "wait_event",
        "HostStream",
        "HostEvent",
    ):
        assert name in xp.cuda.__all__


def test_importing_cunumpy_cuda_does_not_import_cupy():
    import subprocess

    code = "import cunumpy, cunumpy.cuda, sys; cunumpy.cuda.device_count.__name__; print('cupy' in sys.modules)"
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- devices on NumPy


def test_device_queries_are_neutral_on_numpy(numpy_backend):
    assert memory_info() is None
    assert free_memory() is None
    assert set_device(0) is None
    assert bind_local_device() is None
    count = device_count()
    assert isinstance(count, int) and count >= 0
    if not cupy_functional():
        assert count == 0
        assert max_shared_memory_per_block() == DEFAULT_SHARED_MEMORY_PER_BLOCK
        assert max_shared_memory_per_block(opt_in=True) == DEFAULT_SHARED_MEMORY_PER_BLOCK
        assert is_hip() is False


def test_pin_memory_needs_cupy():
    if cupy_functional():
        pytest.skip("CuPy is functional here")
    with pytest.raises(ImportError, match="CuPy"):
        pin_memory(np.zeros(3))


def test_set_device_for_rank_without_devices(numpy_backend):
    assert set_device_for_rank(5, devices_per_node=4) == 1
    assert set_device_for_rank(3, 2) == 1
    if device_count() == 0:
        assert set_device_for_rank(7) == 0


def test_device_functions_reject_bad_arguments(numpy_backend):
    with pytest.raises(TypeError, match="'i'"):
        set_device("0")
    with pytest.raises(TypeError, match="'i'"):
        set_device(True)
    with pytest.raises(ValueError, match="'i'"):
        set_device(-1)
    with pytest.raises(TypeError, match="host_array"):
        pin_memory([1.0, 2.0])
    with pytest.raises(TypeError, match="rank"):
        set_device_for_rank(1.0)
    with pytest.raises(ValueError, match="rank"):
        set_device_for_rank(-2)
    with pytest.raises(TypeError, match="devices_per_node"):
        set_device_for_rank(0, devices_per_node="2")
    with pytest.raises(ValueError, match="devices_per_node"):
        set_device_for_rank(0, devices_per_node=-1)
    with pytest.raises(TypeError, match="device"):
        max_shared_memory_per_block("0")
    with pytest.raises(ValueError, match="device"):
        max_shared_memory_per_block(-1)
    with pytest.raises(TypeError, match="opt_in"):
        max_shared_memory_per_block(opt_in=1)


# --------------------------------------------------------------------------- devices on CuPy


def test_device_queries_on_the_device_backend(device_only):
    count = device_count()
    assert count >= 1
    free, total = memory_info()
    assert isinstance(free, int) and 0 <= free <= total
    set_device(0)
    assert int(sys.modules["cupy"].cuda.runtime.getDevice()) == 0
    with pytest.raises(ValueError, match="'i'"):
        set_device(count)
    limit = max_shared_memory_per_block()
    assert limit >= DEFAULT_SHARED_MEMORY_PER_BLOCK
    assert max_shared_memory_per_block(0, opt_in=True) >= limit
    with pytest.raises(ValueError, match="device"):
        max_shared_memory_per_block(count)
    assert isinstance(is_hip(), bool)


def test_free_memory_keeps_live_arrays(device_only):
    a = xp.arange(1000.0)
    b = xp.ones(1000)
    del b
    free_memory()
    assert float(xp.to_numpy(a)[999]) == 999.0


def test_pin_memory_makes_an_independent_copy(device_only):
    host = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    pinned = pin_memory(host)
    assert type(pinned) is np.ndarray and pinned is not host
    np.testing.assert_array_equal(pinned, host)
    assert pinned.flags.f_contiguous and pinned.dtype == host.dtype
    pinned[0, 0] = -1.0
    assert host[0, 0] == 0.0


def test_bind_local_device_uses_the_node_local_rank(device_only, monkeypatch):
    for variable in LAUNCHER_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("LOCAL_RANK", "3")
    count = device_count()
    device = bind_local_device()
    assert device == 3 % count
    assert int(sys.modules["cupy"].cuda.runtime.getDevice()) == device


def test_set_device_for_rank_selects_on_the_device_backend(device_only):
    count = device_count()
    assert set_device_for_rank(count + 2) == (count + 2) % count
    assert int(sys.modules["cupy"].cuda.runtime.getDevice()) == (count + 2) % count
    set_device(0)


# --------------------------------------------------------------------------- host streams and events


def test_stream_yields_none_on_numpy(numpy_backend):
    with cuda_stream() as s:
        assert s is None


def test_host_streams_and_events(numpy_backend):
    s = create_stream()
    e = create_event()
    assert isinstance(s, HostStream) and isinstance(e, HostEvent)
    assert s.done is True and e.done is True
    with cuda_stream(s) as current:
        assert current is s
        with s:  # nestable and reusable
            assert record_event() is not None
    with cuda_stream(s):
        pass
    recorded = record_event(e, stream=s)
    assert recorded is e
    assert isinstance(record_event(stream=s), HostEvent)
    assert isinstance(record_event(), HostEvent)
    assert isinstance(s.record(), HostEvent)
    assert s.record(e) is e
    assert wait_event(e) is None
    wait_event(e, stream=s)
    s.wait_event(e)
    s.synchronize()
    e.synchronize()
    e.record(s)
    e.record()
    assert isinstance(create_event(timing=True), HostEvent)
    assert isinstance(create_stream(non_blocking=False), HostStream)


def test_host_and_cuda_objects_do_not_mix():
    s, e = HostStream(), HostEvent()
    with pytest.raises(TypeError, match="event"):
        s.wait_event(object())
    with pytest.raises(TypeError, match="stream"):
        e.record(object())
    with pytest.raises(TypeError, match="event"):
        s.record(object())


def test_stream_functions_reject_bad_arguments(numpy_backend):
    with pytest.raises(TypeError, match="existing"), cuda_stream("default"):
        pass
    with pytest.raises(TypeError, match="non_blocking"):
        create_stream(non_blocking=None)
    with pytest.raises(TypeError, match="timing"):
        create_event(timing="yes")
    with pytest.raises(TypeError, match="event"):
        record_event("e")
    with pytest.raises(TypeError, match="stream"):
        record_event(stream=3)
    with pytest.raises(TypeError, match="event"):
        wait_event(None)
    with pytest.raises(TypeError, match="stream"):
        wait_event(HostEvent(), stream="s")


# --------------------------------------------------------------------------- CUDA streams and events


def test_stream_makes_a_new_cuda_stream_current(device_only):
    cupy = sys.modules["cupy"]
    with cuda_stream() as s:
        assert isinstance(s, cupy.cuda.Stream)
        assert cupy.cuda.get_current_stream() == s
        a = xp.arange(4.0) * 2
    with cuda_stream(s) as again:
        assert again is s
    s.synchronize()
    np.testing.assert_array_equal(xp.to_numpy(a), [0.0, 2.0, 4.0, 6.0])


def test_cuda_events_order_a_producer_and_a_consumer(device_only):
    cupy = sys.modules["cupy"]
    producer, consumer = create_stream(), create_stream()
    assert isinstance(producer, cupy.cuda.Stream)
    event = create_event()
    assert isinstance(event, cupy.cuda.Event)
    with cuda_stream(producer):
        data = xp.full(16, 3.0)
        assert record_event(event, stream=producer) is event
    wait_event(event, stream=consumer)
    with cuda_stream(consumer):
        total = xp.sum(data * 2)
        done = record_event()
    done.synchronize()
    assert float(xp.to_numpy(total)) == 96.0
    assert isinstance(record_event(), cupy.cuda.Event)
    wait_event(record_event())
    assert isinstance(create_event(timing=True), cupy.cuda.Event)


def test_cuda_objects_reject_host_counterparts(device_only):
    with pytest.raises(TypeError):
        wait_event(create_event(), stream=HostStream())
    with pytest.raises(TypeError):
        wait_event(HostEvent(), stream=create_stream())
    with pytest.raises(TypeError):
        record_event(HostEvent(), stream=create_stream())
    with pytest.raises(TypeError):
        record_event(create_event(), stream=HostStream())
    with pytest.raises(TypeError):
        HostStream().wait_event(create_event())
    with pytest.raises(TypeError):
        HostEvent().record(create_stream())
