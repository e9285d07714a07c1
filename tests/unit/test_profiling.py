"""Timing, NVTX ranges, transfer counters and budgets (API.md §7)."""

import dataclasses
import sys

import numpy as np
import pytest

import cunumpy as xp
from cunumpy import _transfers
from cunumpy._transfers import record
from cunumpy.profiling import (
    Timing,
    TransferBudget,
    TransferCounter,
    TransferEvent,
    assert_no_transfers,
    count_transfers,
    nvtx_range,
    timed_region,
)

HERE = __file__


def line_of(marker):
    """Line number of the line in this file containing ``marker`` (for call sites)."""
    with open(HERE) as f:
        for number, line in enumerate(f, 1):
            if marker in line and "line_of(" not in line:
                return number
    raise AssertionError(marker)


def emit(kind, description="op (3,) float64", nbytes=None, **flags):
    """Report an event the way cunumpy's helpers do (call site: this helper; lines whose
    call site matters call ``record`` directly)."""
    _transfers.record(kind, description, nbytes, **flags)


@pytest.fixture(autouse=True)
def no_leftover_sinks():
    yield
    assert _transfers.sinks == [], "a counter or budget stayed active after its block"


# --------------------------------------------------------------------------- public surface


def test_module_exports_exactly_the_documented_names():
    import cunumpy.profiling as profiling

    assert sorted(profiling.__all__) == sorted(
        [
            "timed_region",
            "Timing",
            "nvtx_range",
            "count_transfers",
            "assert_no_transfers",
            "TransferCounter",
            "TransferEvent",
            "TransferBudget",
        ]
    )
    assert profiling.TransferEvent is _transfers.TransferEvent
    assert xp.profiling is profiling


# --------------------------------------------------------------------------- timed_region


def test_timed_region_on_numpy_is_a_plain_timer():
    with xp.use_backend("numpy"), timed_region("setup") as t:
        assert isinstance(t, Timing) and t.elapsed is None
        sum(range(1000))
    assert t.name == "setup"
    assert isinstance(t.elapsed, float) and t.elapsed >= 0.0
    assert t.synced is False


def test_timed_region_sets_elapsed_when_the_block_raises():
    with pytest.raises(KeyError), timed_region("fails") as t:
        raise KeyError("x")
    assert t.elapsed is not None and t.elapsed >= 0.0


def test_timed_region_synchronises_on_the_device_backend(device_only):
    a = xp.arange(10.0)
    with timed_region("step") as t:
        b = a * 2
    assert t.synced is True and t.elapsed >= 0.0
    with timed_region("launch only", sync=False) as t2:
        b = b + 1
    assert t2.synced is False and t2.elapsed >= 0.0
    assert xp.to_numpy(b)[3] == 7.0


def test_timed_region_syncs_are_not_reported_as_transfers(on_backend):
    with assert_no_transfers(syncs=True), timed_region("quiet"):
        pass


def test_timed_region_rejects_bad_arguments():
    with pytest.raises(TypeError, match="name"):
        timed_region(3)
    with pytest.raises(TypeError, match="sync"):
        timed_region("x", sync="yes")


# --------------------------------------------------------------------------- nvtx_range


def test_nvtx_range_is_a_context_manager_and_a_decorator(on_backend):
    with nvtx_range("block") as r:
        assert isinstance(r, nvtx_range)

    @nvtx_range("fib", color=2)
    def fib(n):
        """Fibonacci."""
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    assert fib(10) == 55  # re-entrant: every recursion level opens the range again
    assert fib.__name__ == "fib" and fib.__doc__ == "Fibonacci."


class NvtxRecorder:
    """Stands in for cupy.cuda.nvtx and records what is pushed and popped."""

    available = True

    def __init__(self):
        self.calls = []

    def RangePush(self, message, id_color=-1):
        self.calls.append(("push", message, id_color))

    def RangePushC(self, message, argb_color=0):
        self.calls.append(("pushC", message, argb_color))

    def RangePop(self):
        self.calls.append(("pop",))


def test_nvtx_range_pushes_and_pops_on_the_device_backend(device_only, monkeypatch):
    recorder = NvtxRecorder()
    monkeypatch.setattr(sys.modules["cupy"].cuda, "nvtx", recorder, raising=False)
    with nvtx_range("outer"), pytest.raises(ValueError), nvtx_range("inner", color=3):
        raise ValueError
    assert recorder.calls == [("push", "outer", -1), ("push", "inner", 3), ("pop",), ("pop",)]
    recorder.calls.clear()
    with timed_region("timed"):
        pass
    assert recorder.calls == [("push", "timed", -1), ("pop",)]


def test_nvtx_range_does_nothing_on_numpy(monkeypatch):
    cupy = sys.modules.get("cupy")
    recorder = NvtxRecorder()
    if cupy is not None:
        monkeypatch.setattr(cupy.cuda, "nvtx", recorder, raising=False)
    with xp.use_backend("numpy"), nvtx_range("host"):
        pass
    assert recorder.calls == []


def test_nvtx_range_rejects_bad_arguments():
    with pytest.raises(TypeError, match="name"):
        nvtx_range(None)
    with pytest.raises(TypeError, match="color"):
        nvtx_range("x", color="red")
    with pytest.raises(ValueError, match="color"):
        nvtx_range("x", color=-1)
    with pytest.raises(TypeError, match="callable"):
        nvtx_range("x")(42)


# --------------------------------------------------------------------------- count_transfers


def test_counter_counts_kinds_bytes_and_total():
    with count_transfers() as c:
        emit("to_host", nbytes=24)
        emit("to_host", nbytes=8)
        emit("to_device", nbytes=100)
        emit("kernel_conversion", "push: 3 array(s)")
        emit("fallback", "kernel push")
        emit("device_copy", nbytes=16)
        emit("sync", "synchronize()")
    assert isinstance(c, TransferCounter)
    assert (c.to_host, c.to_device, c.kernel_conversions, c.fallbacks, c.device_copies, c.syncs) == (2, 1, 1, 1, 1, 1)
    assert c.total == 6  # markers count, syncs do not
    assert (c.bytes_to_host, c.bytes_to_device, c.bytes("device_copy"), c.bytes("sync")) == (32, 100, 16, 0)
    assert c.count("to_host") == 2
    assert [e.description for e in c.kernel_conversion_calls] == ["push: 3 array(s)"]
    assert len(c.events) == 7 and all(isinstance(e, TransferEvent) for e in c.events)


def test_nothing_is_recorded_outside_a_counter():
    emit("to_host", nbytes=8)
    with count_transfers() as c:
        pass
    emit("to_host", nbytes=8)
    assert c.events == []


def test_event_fields_and_str():
    with count_transfers() as c:
        record("to_host", "to_host_async (1,) float64", 8, blocking=False)  # MARK-event
        emit("sync", "float()", implicit=True)
    first, second = c.events
    where = f"{HERE}:{line_of('MARK-event')}"
    assert first.where == where
    assert (first.kind, first.nbytes, first.blocking, first.implicit) == ("to_host", 8, False, False)
    assert second.implicit is True and second.blocking is True and second.nbytes is None
    assert str(first) == f"{where}: to_host: to_host_async (1,) float64"
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.kind = "to_device"  # frozen


def test_nested_counters_each_see_every_event_and_a_counter_twice_counts_once():
    with count_transfers() as outer:
        emit("to_host", nbytes=8)
        with count_transfers() as inner:
            emit("to_device", nbytes=8)
        with count_transfers(outer) as same:
            assert same is outer
            emit("to_device", nbytes=4)
        with count_transfers(into=outer), count_transfers(into=outer):
            emit("to_host", nbytes=2)
    assert (outer.to_host, outer.to_device) == (2, 2)
    assert (inner.to_host, inner.to_device) == (0, 1)


def test_count_transfers_accumulates_into_an_existing_counter():
    total = TransferCounter()
    for _ in range(3):
        with count_transfers(total):
            emit("to_device", nbytes=10)
    assert total.to_device == 3 and total.bytes_to_device == 30


def test_count_transfers_as_a_decorator():
    counter = TransferCounter()

    @count_transfers(counter)
    def step(n):
        for _ in range(n):
            emit("to_host", nbytes=1)
        return n

    @count_transfers
    def bare():
        emit("to_device", nbytes=1)

    @count_transfers()
    def called():
        emit("fallback", "kernel k")

    assert step(2) == 2 and step(3) == 3
    bare()
    called()
    called()
    assert counter.to_host == 5
    assert bare.transfers.to_device == 1
    assert called.transfers.fallbacks == 2
    emit("to_host")  # outside any call: not counted
    assert counter.to_host == 5


def test_counter_is_removed_when_the_block_raises():
    with pytest.raises(RuntimeError), count_transfers() as c:
        emit("to_host")
        raise RuntimeError("boom")
    emit("to_host")
    assert c.to_host == 1


def test_report_format():
    with count_transfers() as c:
        for _ in range(2):
            record("to_host", "to_numpy (3,) float64", 24)  # MARK-repeat
        record("to_device", "to_cupy (2, 2) int32", 16)  # MARK-once
        record("kernel_conversion", "push: 2 array(s)")  # MARK-marker
        record("sync", "synchronize()")  # MARK-sync
    lines = c.report().splitlines()
    first = lines[0]
    assert "4" in first
    positions = [
        first.index(f"{kind}=") for kind in ("to_host", "to_device", "kernel_conversion", "fallback", "device_copy")
    ]
    assert positions == sorted(positions)
    assert "to_host=2" in first and "to_device=1" in first and "fallback=0" in first
    assert lines[1:] == [
        "  to_host (2):",
        f"    {HERE}:{line_of('MARK-repeat')}: to_numpy (3,) float64 (x2)",
        "  to_device (1):",
        f"    {HERE}:{line_of('MARK-once')}: to_cupy (2, 2) int32",
        "  kernel_conversion (1):",
        f"    {HERE}:{line_of('MARK-marker')}: push: 2 array(s)",
        "  sync (1):",
        f"    {HERE}:{line_of('MARK-sync')}: synchronize()",
    ]


def test_counter_rejects_bad_arguments():
    with pytest.raises(TypeError, match="into"):
        count_transfers(into=[])
    with pytest.raises(ValueError, match="to_gpu"):
        TransferCounter().count("to_gpu")
    with pytest.raises(ValueError, match="nope"):
        TransferCounter().bytes("nope")


def test_counters_see_real_device_copies_with_byte_sizes(on_backend):
    host = np.arange(12.0).reshape(3, 4)
    with count_transfers() as c:
        a = xp.to_cunumpy(host)
        back = xp.to_numpy(a)
    np.testing.assert_array_equal(back, host)
    if on_backend == "numpy":
        assert c.events == []  # nothing was copied
    else:
        assert (c.to_device, c.to_host) == (1, 1)
        assert c.bytes_to_device == c.bytes_to_host == host.nbytes
        assert all(e.where.startswith(HERE + ":") for e in c.events)


# --------------------------------------------------------------------------- assert_no_transfers


def test_assert_no_transfers_fails_with_the_report():
    with pytest.raises(AssertionError) as info, assert_no_transfers():
        record("to_host", "to_numpy (3,) float64", 24)  # MARK-forbidden
    message = str(info.value)
    assert "to_host" in message
    assert f"{HERE}:{line_of('MARK-forbidden')}: to_numpy (3,) float64" in message


@pytest.mark.parametrize("kind", ["to_host", "to_device", "kernel_conversion", "fallback"])
def test_assert_no_transfers_rejects_each_forbidden_kind(kind):
    with pytest.raises(AssertionError, match=kind), assert_no_transfers():
        emit(kind)


def test_assert_no_transfers_allows_device_copies_and_syncs_unless_asked():
    with assert_no_transfers() as c:
        emit("device_copy", nbytes=8)
        emit("sync", "synchronize()")
    assert c.device_copies == 1 and c.syncs == 1
    with pytest.raises(AssertionError, match="sync"), assert_no_transfers(syncs=True):
        emit("sync", "synchronize()")


def test_assert_no_transfers_lets_exceptions_through_unchanged():
    with pytest.raises(ZeroDivisionError), assert_no_transfers():
        emit("to_host")
        1 / 0  # noqa: B018 - raises inside the block on purpose


def test_assert_no_transfers_as_a_decorator():
    @assert_no_transfers()
    def clean():
        emit("device_copy")
        return "ok"

    @assert_no_transfers()
    def dirty():
        emit("to_device")

    assert clean() == "ok"
    with pytest.raises(AssertionError):
        dirty()


def test_assert_no_transfers_rejects_bad_arguments():
    with pytest.raises(TypeError, match="syncs"):
        assert_no_transfers(syncs=1)
    with pytest.raises(TypeError):
        assert_no_transfers(True)


def test_assert_no_transfers_on_a_device_loop(on_backend):
    a = xp.zeros(8)
    with assert_no_transfers():
        for _ in range(3):
            a = a + 1
    with pytest.raises(AssertionError) if on_backend == "cupy" else _nothing(), assert_no_transfers():
        xp.to_numpy(a)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# --------------------------------------------------------------------------- TransferBudget


def test_budget_attributes_each_event_to_the_innermost_phase():
    budget = TransferBudget()
    with budget.phase("step") as step:
        emit("to_device", nbytes=8)
        with budget.phase("output") as output:
            emit("to_host", nbytes=80)
        emit("to_device", nbytes=8)
    emit("to_host")  # outside every phase
    assert step is budget["step"] and output is budget["output"]
    assert (budget["step"].to_device, budget["step"].to_host) == (2, 0)
    assert (budget["output"].to_device, budget["output"].to_host) == (0, 1)
    assert budget.calls == {"step": 1, "output": 1}


def test_budget_counts_calls_and_recursion_is_one_call():
    budget = TransferBudget()

    @budget.count("solve")
    def solve(depth):
        emit("sync", "synchronize()")
        return depth if depth == 0 else solve(depth - 1)

    for _ in range(3):
        solve(4)
    assert budget.calls == {"solve": 3}
    assert budget["solve"].syncs == 15


def test_budget_start_and_stop():
    budget = TransferBudget(started=False)
    with budget.phase("a"):
        emit("to_host")
    budget.start()
    with budget.phase("a"):
        emit("to_host")
    budget.stop()
    with budget.phase("a"):
        emit("to_host")
    assert budget.calls == {"a": 1} and budget["a"].to_host == 1


def test_budget_require_allows_limits_and_forbids_the_rest():
    budget = TransferBudget()
    budget.require("step", allow={"to_host": {"max_nbytes": 8, "max_count": 3}, "sync": None}, calls=2)
    for _ in range(2):
        with budget.phase("step"):
            emit("to_host", "residual (1,) float64", 8)
            emit("sync", "synchronize()")
    assert budget.violations() == []
    budget.check()


def test_budget_violations_name_phase_rule_and_call_site():
    budget = TransferBudget()
    budget.require(
        "step",
        allow={
            "to_host": {"max_nbytes": 8, "max_count": 1, "max_total_bytes": 10, "blocking": False},
            "sync": {"implicit": False},
        },
        calls=1,
    )
    budget.require("never", calls=0)
    budget.require("missing", calls=1)
    for _ in range(2):
        with budget.phase("step"):  # MARK-phase
            record("to_host", "big (100,) float64", 800)  # MARK-big
            record("to_device", "upload (1,) float64", 8)  # MARK-forbidden-kind
            record("sync", "float()", implicit=True)  # MARK-implicit
    found = budget.violations()
    text = "\n".join(found)
    big = f"{HERE}:{line_of('MARK-big')}"
    assert all("'step'" in line or "'missing'" in line for line in found)
    assert "expected 1 call(s), got 2" in text and f"{HERE}:{line_of('MARK-phase')}" in text
    assert "forbidden kind to_device" in text and f"{HERE}:{line_of('MARK-forbidden-kind')}" in text
    assert "max_nbytes=8" in text and big in text
    assert "max_count=1" in text
    assert "max_total_bytes=10" in text
    assert "blocking" in text
    assert "implicit" in text and f"{HERE}:{line_of('MARK-implicit')}" in text
    assert "'missing': expected 1 call(s), got 0" in text
    assert not any("'never'" in line for line in found)
    with pytest.raises(AssertionError, match="violation"):
        budget.check()


def test_budget_non_blocking_copies_pass_a_blocking_false_rule():
    budget = TransferBudget().require("io", allow={"to_host": {"blocking": False}})
    with budget.phase("io"):
        emit("to_host", "HostStaging.copy (4,) float64", 32, blocking=False)
    assert budget.violations() == []


def test_budget_report_has_a_line_per_phase():
    budget = TransferBudget()
    with budget.phase("init"):
        emit("to_device", nbytes=8)
    for _ in range(2):
        with budget.phase("step"):
            pass
    lines = budget.report().splitlines()
    assert "init (1 call(s))" in lines and "step (2 call(s))" in lines


def test_budget_rejects_bad_arguments():
    budget = TransferBudget()
    with pytest.raises(ValueError, match="to_gpu"):
        budget.require("a", allow={"to_gpu": None})
    with pytest.raises(ValueError, match="max_bytes"):
        budget.require("a", allow={"to_host": {"max_bytes": 1}})
    with pytest.raises(TypeError, match="allow"):
        budget.require("a", allow=["to_host"])
    with pytest.raises(TypeError, match="calls"):
        budget.require("a", calls="2")
    with pytest.raises(ValueError, match="calls"):
        budget.require("a", calls=-1)
    with pytest.raises(TypeError, match="max_count"):
        budget.require("a", allow={"to_host": {"max_count": 1.5}})
    with pytest.raises(TypeError, match="blocking"):
        budget.require("a", allow={"to_host": {"blocking": "no"}})
    with pytest.raises(TypeError, match="name"):
        budget.phase(1)
    with pytest.raises(TypeError, match="started"):
        TransferBudget(started=None)
    with pytest.raises(KeyError, match="unknown"):
        budget["unknown"]
    with pytest.raises(TypeError, match="callable"):
        budget.count("a")(3)


def test_budget_and_counter_both_see_events():
    budget = TransferBudget()
    with count_transfers() as c, budget.phase("p"):
        emit("to_host")
    assert c.to_host == 1 and budget["p"].to_host == 1


def test_a_phase_counter_also_active_directly_counts_each_event_once():
    budget = TransferBudget()
    with budget.phase("p") as phase_counter, count_transfers(phase_counter):
        emit("to_host")
    assert budget["p"].to_host == 1
