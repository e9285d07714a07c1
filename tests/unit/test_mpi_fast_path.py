"""The common case of ``cunumpy.mpi.exchange``: checked in C (``_core.exchange_plain``) and
posted in C (``_core.exchange_post``), with the pure-Python twins as oracles."""

import numpy as np
import pytest

import cunumpy as xp
from cunumpy import _reference, mpi
from cunumpy._native import HAVE_C_CORE, core


@pytest.fixture(autouse=True)
def forget_cuda_awareness():
    saved = mpi.get_mpi_cuda_aware()
    mpi.set_mpi_cuda_aware(None)
    yield
    mpi.set_mpi_cuda_aware(saved)


def _read_only():
    a = np.zeros(4)
    a.flags.writeable = False
    return a


def _cases():
    a, b = np.zeros(4), np.ones(3, np.int32)
    plain = [([(a, 0, 1)], [(b, 0, 2)]), ((), ()), ([], [(a, -1, 0)]), ([(a, 0, 0), (b, 0, 7)], [])]
    not_plain = [
        ([(a, 0)], []),  # a 2-tuple
        ([[a, 0, 1]], []),  # a list, not a tuple
        ([(a, 1, 0)], []),  # rank outside a one-rank communicator
        ([(a, -2, 0)], []),  # negative rank that is not PROC_NULL
        ([(a, 0, -1)], []),  # negative tag
        ([(a, 0, True)], []),  # bool tag
        ([(a, np.int64(0), 0)], []),  # NumPy integer rank
        ([(a[::2], 0, 0)], []),  # non-contiguous
        ([(_read_only(), 0, 0)], []),  # read-only receive
        ([], [(np.zeros(2, object), 0, 0)]),  # Python objects
        ([], [(np.zeros(2, [("x", "O"), ("y", "f8")]), 0, 0)]),  # objects inside a struct
        ([], [(b"abc", 0, 0)]),  # not an ndarray
        ([(a, 2**70, 0)], []),  # a rank that overflows a C long
        (iter([(a, 0, 0)]), []),  # not a list or tuple
    ]
    return plain, not_plain


@pytest.mark.parametrize("impl", ["c", "twin"])
def test_exchange_plain_accepts_only_the_common_form(impl):
    if impl == "c" and not HAVE_C_CORE:
        pytest.skip("no C core")
    fn = core.exchange_plain if impl == "c" else _reference.exchange_plain
    plain, not_plain = _cases()
    for receives, sends in plain:
        out = fn(receives, sends, np.ndarray, True, lambda: 1, -1)
        assert out == (tuple(receives), tuple(sends), True)
    for receives, sends in not_plain:
        assert fn(receives, sends, np.ndarray, True, lambda: 1, -1) is None, (receives, sends)
    # a read-only array may be sent
    assert fn([], [(_read_only(), 0, 0)], np.ndarray, True, lambda: 1, -1) is not None


@pytest.mark.parametrize("impl", ["c", "twin"])
def test_exchange_plain_asks_the_size_only_after_the_structure_passed(impl):
    if impl == "c" and not HAVE_C_CORE:
        pytest.skip("no C core")
    fn = core.exchange_plain if impl == "c" else _reference.exchange_plain
    calls = []

    def get_size():
        calls.append(1)
        return 2

    assert fn([(np.zeros(2), 0)], [], np.ndarray, True, get_size, -1) is None
    assert fn([], (), np.ndarray, True, get_size, -1) == ((), (), True)  # nothing to ask
    assert calls == []
    assert fn([(np.zeros(2), 1, 0)], [], np.ndarray, True, get_size, -1) is not None
    assert calls == [1]

    def broken():
        raise RuntimeError("size")

    with pytest.raises(RuntimeError, match="size"):
        fn([(np.zeros(2), 0, 0)], [], np.ndarray, True, broken, -1)


@pytest.mark.parametrize("impl", ["c", "twin"])
def test_exchange_post_posts_receives_then_sends(impl):
    if impl == "c" and not HAVE_C_CORE:
        pytest.skip("no C core")
    fn = core.exchange_post if impl == "c" else _reference.exchange_post
    order = []
    a, b = np.zeros(2), np.ones(2)
    out = fn(
        lambda *args: order.append(("recv", *args)) or "r",
        lambda *args: order.append(("send", *args)) or "s",
        ((a, 0, 1),),
        ((b, 0, 2),),
    )
    assert out == ["r", "s"]
    assert order == [("recv", a, 0, 1), ("send", b, 0, 2)]

    def failing(*args):
        raise OSError("post")

    with pytest.raises(OSError, match="post"):
        fn(failing, failing, ((a, 0, 1),), ())


@pytest.mark.skipif(not HAVE_C_CORE, reason="no C core")
def test_exchange_post_refuses_malformed_arguments():
    with pytest.raises(TypeError):
        core.exchange_post(print, print, [(np.zeros(1), 0, 0)], ())
    with pytest.raises(TypeError):
        core.exchange_post(print, print, ((np.zeros(1), 0),), ())
    with pytest.raises(TypeError):
        core.exchange_plain((), (), "not a type", True, lambda: 1, -1)


def test_exchange_fast_path_delivers_on_the_serial_stand_in():
    comm = mpi.SerialMPI.COMM_WORLD.Dup()
    send, recv = np.arange(5.0), np.zeros(5)
    mpi.exchange(comm, [(send, 0, 3)], [(recv, 0, 3)])
    np.testing.assert_array_equal(recv, send)
    # PROC_NULL takes part in the fast path too and leaves the buffer alone
    recv2 = np.full(3, 7.0)
    null = mpi.SerialMPI.PROC_NULL
    mpi.exchange(comm, [(np.ones(3), null, 0)], [(recv2, null, 0)])
    np.testing.assert_array_equal(recv2, 7.0)


def test_exchange_device_fast_path_counts_its_synchronisation(device_only):
    comm = mpi.SerialMPI.COMM_WORLD.Dup()
    send, recv = xp.arange(6.0), xp.zeros(6)
    with xp.profiling.count_transfers() as counter:
        mpi.exchange(comm, [(send, 0, 1)], [(recv, 0, 1)], cuda_aware=True)
    np.testing.assert_array_equal(xp.to_numpy(recv), np.arange(6.0))
    assert counter.syncs == 1 and counter.to_host == 0 and counter.to_device == 0
    # a strided device view leaves the fast path: packed, then scattered back
    target = xp.zeros(12)
    with xp.profiling.count_transfers() as counter:
        mpi.exchange(comm, [(send, 0, 2)], [(target[::2], 0, 2)], cuda_aware=True)
    np.testing.assert_array_equal(xp.to_numpy(target)[::2], np.arange(6.0))
    assert counter.device_copies >= 1


@pytest.mark.parametrize("impl", ["c", "twin"])
def test_exchange_host_posts_and_waits_only_in_the_common_form(impl):
    if impl == "c" and not HAVE_C_CORE:
        pytest.skip("no C core")
    fn = core.exchange_host if impl == "c" else _reference.exchange_host
    events = []
    recv = lambda *args: events.append("recv") or "r"  # noqa: E731
    send = lambda *args: events.append("send") or "s"  # noqa: E731
    wait = lambda requests: events.append(("wait", tuple(requests)))  # noqa: E731
    a = np.zeros(2)
    assert fn([(a, 0, 1)], [(a, 0, 2)], lambda: 1, -1, recv, send, wait) is True
    assert events == ["recv", "send", ("wait", ("r", "s"))]
    events.clear()
    assert fn((), [], lambda: 1, -1, recv, send, wait) is False
    assert fn([(np.zeros(4)[::2], 0, 1)], [], lambda: 1, -1, recv, send, wait) is None
    assert fn([(a, 0, 1)], [], lambda: 1 / 0, -1, recv, send, wait) is None  # the slow path reports it
    assert events == []

    def failing_wait(requests):
        raise OSError("wait")

    with pytest.raises(OSError, match="wait"):
        fn([(a, 0, 1)], [], lambda: 1, -1, recv, send, failing_wait)
