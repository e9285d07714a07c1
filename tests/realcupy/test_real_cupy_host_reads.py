"""Host reads of real CuPy arrays are recorded as copies to the host (issue 33 item 9).

CuPy implements ``float(a)``, ``int(a)``, ``bool(a)``, ``a.item()``, ``a.tolist()`` and the
text conversions as ``get()`` and a host operation; once a transfer counter is active,
cunumpy records each as an implicit ``to_host`` event and a ``sync``, so
``assert_no_transfers()`` catches them on a GPU as on the fake CuPy. Without a driver the
copy itself then fails (``cudaErrorInsufficientDriver``), after the event is recorded: the
arrays here wrap host memory (``UnownedMemory``), which needs no driver to construct.
"""

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from cunumpy.profiling import assert_no_transfers, count_transfers  # noqa: E402


def _device_array(host):
    memory = cupy.cuda.memory.UnownedMemory(host.ctypes.data, host.nbytes, host, 0)
    return cupy.ndarray(host.shape, host.dtype, cupy.cuda.MemoryPointer(memory, 0))


READS = [
    (float, "float()"),
    (int, "int()"),
    (bool, "bool()"),
    (complex, "complex()"),
    (lambda a: a.item(), "item()"),
    (lambda a: a.tolist(), "tolist()"),
    (repr, "repr()"),
    (str, "str()"),
]


@pytest.mark.parametrize("read, what", READS, ids=[w for _, w in READS])
def test_host_reads_are_to_host_copies_and_syncs(read, what):
    host = np.arange(4.0)
    a = _device_array(host)
    x = a[1]  # a 0-d view: no device work
    with count_transfers() as counter:
        try:
            read(x)
        except Exception as exc:  # the copy fails without a driver, the read is recorded first
            if "cudaErrorInsufficientDriver" not in str(exc):
                raise
    assert [(e.kind, e.nbytes, e.implicit) for e in counter.events] == [("to_host", 8, True), ("sync", None, True)]
    assert all(what in e.description and "float64" in e.description for e in counter.events)
    assert counter.events[0].where.startswith(__file__)


def test_assert_no_transfers_catches_a_scalar_read_by_default():
    x = _device_array(np.arange(3.0))[0]
    with pytest.raises(AssertionError, match=r"to_host"), assert_no_transfers():
        try:
            float(x)
        except Exception as exc:  # no driver: the copy fails after being recorded
            if "cudaErrorInsufficientDriver" not in str(exc):
                raise


def test_without_a_counter_nothing_is_recorded_and_the_class_keeps_working():
    import cunumpy._transfers as transfers

    assert transfers.instrument_cupy_reads() is True
    assert cupy.ndarray.__dict__["__cunumpy_reads_recorded__"] is True
    assert transfers.instrument_cupy_reads() is True  # idempotent: wrapped once
    assert cupy.ndarray.item.__wrapped__ is cupy._core.core._ndarray_base.item
    assert not transfers.sinks
    a = _device_array(np.arange(2.0))
    assert a.shape == (2,) and a.nbytes == 16
