"""Timing, NVTX ranges and transfer accounting (API.md section 7).

Counters and budgets are sinks of :mod:`cunumpy._transfers`: while one is active every
copy made by cunumpy is reported to it as a :class:`TransferEvent`. Outside an active
counter the instrumentation costs one truth test per call.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import _backend, _transfers
from ._transfers import KINDS, TransferEvent

__all__ = [
    "Timing",
    "TransferBudget",
    "TransferCounter",
    "TransferEvent",
    "assert_no_transfers",
    "count_transfers",
    "nvtx_range",
    "timed_region",
]

# Kinds that move data or mark a host round trip; ``sync`` is reported separately.
_TRANSFER_KINDS = KINDS[:-1]
_FORBIDDEN_BY_DEFAULT = ("to_host", "to_device", "kernel_conversion", "fallback")


def _check_name(function: str, name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{function}: 'name' must be a str, not {type(name).__name__}")
    return name


def _check_bool(function: str, argument: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{function}: {argument!r} must be a bool, not {type(value).__name__}")
    return value


def _check_kind(function: str, kind) -> str:
    if kind not in KINDS:
        raise ValueError(f"{function}: unknown event kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kind


def _add_sink(sink) -> None:
    if not _transfers.sinks:
        _transfers.instrument_cupy_reads()  # the real CuPy's float(a), a.item(), print(a) ...
    _transfers.sinks.append(sink)


def _remove_sink(sink) -> None:
    # Remove the innermost entry of exactly this object; exits need not be strictly nested.
    sinks = _transfers.sinks
    for i in range(len(sinks) - 1, -1, -1):
        if sinks[i] is sink:
            del sinks[i]
            return


# --------------------------------------------------------------------------- NVTX


def _nvtx_module():
    """CuPy's NVTX module on the CuPy backend when NVTX is usable, else None."""
    if _backend.get_backend() != "cupy":
        return None
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    nvtx = getattr(getattr(cupy, "cuda", None), "nvtx", None)
    if nvtx is None:
        try:
            import importlib

            nvtx = importlib.import_module("cupy.cuda.nvtx")
        except Exception:  # noqa: BLE001 - any failure to load NVTX means no ranges
            return None
    if not getattr(nvtx, "available", True) or not hasattr(nvtx, "RangePop"):
        return None
    return nvtx


class nvtx_range:
    """Mark a block (or every call of a function) as a named NVTX range.

    On the CuPy backend the range is pushed on entry and popped on exit, also when the block
    raises. A no-op on NumPy or without NVTX. Reusable and re-entrant; never synchronises.

    Parameters
    ----------
    name : str
        The range's name, as profilers (Nsight Systems) show it.
    color : int, optional
        An index into the NVTX colour table.

    Raises
    ------
    TypeError
        ``name`` is not a str or ``color`` is not an int.
    ValueError
        ``color`` is negative.
    """

    def __init__(self, name: str, color: int | None = None):
        self.name = _check_name("nvtx_range()", name)
        if color is not None:
            if isinstance(color, bool) or not isinstance(color, int):
                raise TypeError(f"nvtx_range(): 'color' must be an int or None, not {type(color).__name__}")
            if color < 0:
                raise ValueError(f"nvtx_range(): 'color' must be a non-negative index, got {color}")
        self.color = color
        self._pushed: list = []  # one entry per active level: the NVTX module popped on exit

    def __enter__(self):
        nvtx = _nvtx_module()
        if nvtx is not None:
            if self.color is None:
                nvtx.RangePush(self.name)
            else:
                nvtx.RangePush(self.name, self.color)
        self._pushed.append(nvtx)
        return self

    def __exit__(self, *exc) -> None:
        nvtx = self._pushed.pop()
        if nvtx is not None:
            nvtx.RangePop()

    def __call__(self, function):
        if not callable(function):
            raise TypeError(f"nvtx_range(): can only decorate a callable, not {type(function).__name__}")

        @functools.wraps(function)
        def ranged(*args, **kwargs):
            with self:
                return function(*args, **kwargs)

        return ranged

    def __repr__(self) -> str:
        return f"nvtx_range({self.name!r}, color={self.color!r})"


# --------------------------------------------------------------------------- timing


@dataclass
class Timing:
    """Result of :func:`timed_region`.

    Parameters
    ----------
    name : str
        The region's name.
    elapsed : float or None
        Wall time in seconds (None while the block runs).
    synced : bool
        Whether the device was synchronised at the end, so ``elapsed`` includes the GPU work.
    """

    name: str
    elapsed: float | None = None
    synced: bool = False


def _device_synchronize() -> None:
    # Deliberately not xp.synchronize(): the region's own waits are not reported as sync events.
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.cuda.Device().synchronize()


class timed_region:
    """Time a block: ``with timed_region("step") as t: ...`` then ``t.elapsed`` (seconds).

    On the CuPy backend the device is synchronised on entry, so earlier work is not charged,
    and with ``sync=True`` on exit too (``t.synced`` is then True); the block is also an NVTX
    range. On NumPy it is a plain ``time.perf_counter`` timer. ``elapsed`` is set also when
    the block raises. These waits are not reported as ``sync`` events.

    Parameters
    ----------
    name : str
        The region's name.
    sync : bool, optional
        Synchronise at the end (default True); False measures host and launch time only.
    """

    def __init__(self, name: str, *, sync: bool = True):
        self._name = _check_name("timed_region()", name)
        self._sync = _check_bool("timed_region()", "sync", sync)
        self._active: list = []

    def __enter__(self) -> Timing:
        timing = Timing(self._name)
        on_device = _backend.get_backend() == "cupy"
        nvtx: Any = nvtx_range(self._name) if on_device else None
        if on_device:
            _device_synchronize()
            nvtx.__enter__()
        self._active.append((timing, on_device, nvtx, time.perf_counter()))
        return timing

    def __exit__(self, *exc) -> None:
        timing, on_device, nvtx, start = self._active.pop()
        try:
            if on_device and self._sync:
                _device_synchronize()
                timing.synced = True
        finally:
            timing.elapsed = time.perf_counter() - start
            if nvtx is not None:
                nvtx.__exit__(*exc)


# --------------------------------------------------------------------------- counters


class TransferCounter:
    """Events seen while a counter was active, with per-kind counts, byte sums and a report."""

    def __init__(self):
        self.events: list[TransferEvent] = []

    def _receive(self, event: TransferEvent) -> None:
        self.events.append(event)

    def count(self, kind: str) -> int:
        """Number of events of ``kind`` (one of ``to_host``, ..., ``sync``)."""
        _check_kind("TransferCounter.count()", kind)
        return sum(1 for e in self.events if e.kind == kind)

    def bytes(self, kind: str) -> int:
        """Bytes moved by events of ``kind``; markers and syncs carry no bytes."""
        _check_kind("TransferCounter.bytes()", kind)
        return sum(e.nbytes or 0 for e in self.events if e.kind == kind)

    @property
    def to_host(self) -> int:
        """The number of device-to-host copies."""
        return self.count("to_host")

    @property
    def to_device(self) -> int:
        """The number of host-to-device copies."""
        return self.count("to_device")

    @property
    def kernel_conversions(self) -> int:
        """The number of kernel calls that converted device arguments (PyccelKernel)."""
        return self.count("kernel_conversion")

    @property
    def fallbacks(self) -> int:
        """The number of host fallbacks of kernels without a CUDA port."""
        return self.count("fallback")

    @property
    def device_copies(self) -> int:
        """The number of copies on the device (dtype or layout changes)."""
        return self.count("device_copy")

    @property
    def syncs(self) -> int:
        """The number of host waits (each host read of a device array is one, with its ``to_host`` copy)."""
        return self.count("sync")

    @property
    def total(self) -> int:
        """Events of every kind except ``sync`` (conversion and fallback markers included)."""
        return sum(1 for e in self.events if e.kind != "sync")

    @property
    def bytes_to_host(self) -> int:
        """Bytes copied from the device to the host."""
        return self.bytes("to_host")

    @property
    def bytes_to_device(self) -> int:
        """Bytes copied from the host to the device."""
        return self.bytes("to_device")

    @property
    def kernel_conversion_calls(self) -> list[TransferEvent]:
        """The ``kernel_conversion`` marker events, one per converting PyccelKernel call."""
        return [e for e in self.events if e.kind == "kernel_conversion"]

    def clear(self) -> None:
        """Forget every event seen so far."""
        self.events.clear()

    def report(self) -> str:
        """Counts per kind, then each call site with its description and repeat count."""
        counts = dict.fromkeys(KINDS, 0)
        for event in self.events:
            counts[event.kind] = counts.get(event.kind, 0) + 1
        per_kind = ", ".join(f"{kind}={counts[kind]}" for kind in _TRANSFER_KINDS)
        lines = [f"{self.total} transfer(s): {per_kind}; {counts['sync']} sync(s)"]
        for kind in KINDS:
            if not counts[kind]:
                continue
            lines.append(f"  {kind} ({counts[kind]}):")
            sites: dict[tuple[str, str], int] = {}
            for event in self.events:
                if event.kind == kind:
                    key = (event.where, event.description)
                    sites[key] = sites.get(key, 0) + 1
            for (where, description), n in sites.items():
                lines.append(f"    {where}: {description}" + (f" (x{n})" if n > 1 else ""))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<TransferCounter total={self.total} to_host={self.to_host} to_device={self.to_device} syncs={self.syncs}>"
        )


class count_transfers:
    """Count the transfers of a block: ``with count_transfers() as c: ...; c.report()``.

    Also a decorator: every call of the decorated function counts into the same counter,
    available as ``function.transfers``; ``@count_transfers`` without parentheses works too.
    Counters nest: each active counter sees every event, and a counter active twice counts it
    once. It sees what cunumpy's helpers do (conversions, kernels, staging, MPI buffers);
    forwarded calls such as ``xp.asarray(host)`` and raw CuPy copies are not seen.

    Parameters
    ----------
    into : TransferCounter, optional
        Accumulate into this counter instead of a new one.

    Raises
    ------
    TypeError
        ``into`` is not a TransferCounter, or the decorated object is not callable.
    """

    def __new__(cls, into=None):
        if callable(into) and not isinstance(into, TransferCounter):
            return cls()(into)  # bare @count_transfers
        return super().__new__(cls)

    def __init__(self, into: TransferCounter | None = None):
        if into is not None and not isinstance(into, TransferCounter):
            raise TypeError(
                f"{type(self).__name__}(): 'into' must be a TransferCounter or None, not {type(into).__name__}"
            )
        self.counter = TransferCounter() if into is None else into

    def __enter__(self) -> TransferCounter:
        _add_sink(self.counter)
        return self.counter

    def __exit__(self, *exc) -> None:
        _remove_sink(self.counter)

    def __call__(self, function):
        if not callable(function):
            raise TypeError(f"{type(self).__name__}(): can only decorate a callable, not {type(function).__name__}")

        @functools.wraps(function)
        def counted(*args, **kwargs):
            with self:
                return function(*args, **kwargs)

        counted.transfers = self.counter  # type: ignore[attr-defined]  # the documented attribute of a counted function
        return counted


class assert_no_transfers(count_transfers):
    """Fail if the block copied data between host and device.

    Forbidden: ``to_host``, ``to_device``, ``kernel_conversion`` and ``fallback`` events
    (a host read such as ``float(x[0])``, ``x.item()``, ``bool(x > 1)`` or ``print(x)`` of a
    device array is a ``to_host`` copy); ``device_copy`` is allowed, and ``sync`` unless
    ``syncs=True``. The ``with`` statement
    binds the counter; an exception raised inside the block propagates unchanged. Also a
    decorator. An :class:`AssertionError` with the report is raised at the end of the block.

    Parameters
    ----------
    syncs : bool, optional
        Also forbid host waits (``sync`` events).

    Raises
    ------
    TypeError
        A positional argument is given (``syncs`` is keyword-only).
    """

    def __new__(cls, *args, **kwargs):
        if args:
            raise TypeError("assert_no_transfers() takes keyword arguments only (syncs=...)")
        return object.__new__(cls)

    def __init__(self, *, syncs: bool = False):
        super().__init__()
        self.syncs = _check_bool("assert_no_transfers()", "syncs", syncs)
        self._starts: list[int] = []

    def __enter__(self) -> TransferCounter:
        self._starts.append(len(self.counter.events))
        return super().__enter__()

    def __exit__(self, exc_type, exc, tb) -> None:
        super().__exit__(exc_type, exc, tb)
        start = self._starts.pop()
        if exc_type is not None:
            return
        forbidden = _FORBIDDEN_BY_DEFAULT + (("sync",) if self.syncs else ())
        block = TransferCounter()
        block.events = self.counter.events[start:]
        bad = [e for e in block.events if e.kind in forbidden]
        if bad:
            kinds = ", ".join(sorted({e.kind for e in bad}, key=KINDS.index))
            raise AssertionError(
                f"assert_no_transfers: {len(bad)} forbidden event(s) ({kinds}) in the block\n{block.report()}"
            )


# --------------------------------------------------------------------------- budgets

_LIMIT_KEYS = ("max_nbytes", "max_count", "max_total_bytes", "blocking", "implicit")


def _check_limits(phase: str, kind, limits) -> dict | None:
    _check_kind(f"TransferBudget.require({phase!r})", kind)
    if limits is None:
        return None
    if not isinstance(limits, Mapping):
        raise TypeError(
            f"TransferBudget.require({phase!r}): limits of {kind!r} must be a dict or None, not {type(limits).__name__}"
        )
    checked = {}
    for key, value in limits.items():
        if key not in _LIMIT_KEYS:
            raise ValueError(
                f"TransferBudget.require({phase!r}): unknown limit {key!r} for {kind!r}; "
                f"expected one of {', '.join(_LIMIT_KEYS)}"
            )
        if key in ("blocking", "implicit"):
            if not isinstance(value, bool):
                raise TypeError(
                    f"TransferBudget.require({phase!r}): {kind}.{key} must be a bool, not {type(value).__name__}"
                )
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"TransferBudget.require({phase!r}): {kind}.{key} must be an int, not {type(value).__name__}"
                )
            if value < 0:
                raise ValueError(f"TransferBudget.require({phase!r}): {kind}.{key} must be >= 0, got {value}")
        checked[key] = value
    return checked


class _Phase:
    """Accounting of one named phase: its counter, number of entries and entry sites."""

    def __init__(self):
        self.counter = TransferCounter()
        self.calls = 0
        self.sites: dict[str, int] = {}


class _PhaseContext:
    def __init__(self, budget: TransferBudget, name: str):
        self._budget = budget
        self._name = name

    def __enter__(self) -> TransferCounter:
        return self._budget._enter(self._name)

    def __exit__(self, *exc) -> None:
        self._budget._exit(self._name)


class TransferBudget:
    """Per-phase transfer accounting for a program, with declared limits.

    ``with budget.phase("output") as c: ...`` or ``@budget.count("step")`` attributes every
    event to the innermost active phase. :meth:`require` declares what a phase may do;
    :meth:`check` raises :class:`AssertionError` naming the phase, the rule and the call
    site of every violation.

    Parameters
    ----------
    started : bool, optional
        With False nothing is counted until :meth:`start`.
    """

    def __init__(self, started: bool = True):
        self._running = _check_bool("TransferBudget()", "started", started)
        self._phases: dict[str, _Phase] = {}
        self._rules: dict[str, tuple[dict, int | None]] = {}
        self._stack: list[str] = []

    # -- phases
    def _phase(self, name: str) -> _Phase:
        phase = self._phases.get(name)
        if phase is None:
            phase = self._phases[name] = _Phase()
        return phase

    def phase(self, name: str) -> _PhaseContext:
        """Context manager counting the block into phase ``name``; yields its counter."""
        _check_name("TransferBudget.phase()", name)
        self._phase(name)
        return _PhaseContext(self, name)

    def count(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: every call of the function is one entry of phase ``name``."""
        context = self.phase(name)

        def decorate(function):
            if not callable(function):
                raise TypeError(f"TransferBudget.count(): can only decorate a callable, not {type(function).__name__}")

            @functools.wraps(function)
            def counted(*args, **kwargs):
                with context:
                    return function(*args, **kwargs)

            return counted

        return decorate

    def _enter(self, name: str) -> TransferCounter:
        phase = self._phase(name)
        if self._running and name not in self._stack:  # recursion is not another call
            phase.calls += 1
            site = _transfers.caller_location()
            phase.sites[site] = phase.sites.get(site, 0) + 1
        self._stack.append(name)
        _add_sink(self)
        return phase.counter

    def _exit(self, name: str) -> None:
        _remove_sink(self)
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i] == name:
                del self._stack[i]
                break

    def _receive(self, event: TransferEvent) -> None:
        if self._running and self._stack:
            counter = self._phases[self._stack[-1]].counter
            if not any(sink is counter for sink in _transfers.sinks):  # else it receives the event itself
                counter._receive(event)

    def start(self) -> None:
        """Count events and phase entries from now on."""
        self._running = True

    def stop(self) -> None:
        """Count nothing from now on (until :meth:`start`)."""
        self._running = False

    @property
    def running(self) -> bool:
        """Whether the budget is counting (after :meth:`start`, before :meth:`stop`)."""
        return self._running

    def __getitem__(self, name: str) -> TransferCounter:
        _check_name("TransferBudget[]", name)
        try:
            return self._phases[name].counter
        except KeyError:
            known = ", ".join(map(repr, self._phases)) or "none"
            raise KeyError(f"TransferBudget has no phase {name!r} (known: {known})") from None

    def __contains__(self, name) -> bool:
        return name in self._phases

    @property
    def phases(self) -> list[str]:
        """Names of the phases declared so far, in order of declaration."""
        return list(self._phases)

    @property
    def calls(self) -> dict[str, int]:
        """Number of (non-recursive) entries per phase."""
        return {name: phase.calls for name, phase in self._phases.items()}

    # -- rules
    def require(self, phase: str, allow: Mapping | None = None, calls: int | None = None) -> TransferBudget:
        """Declare the rules of ``phase``: kinds outside ``allow`` are forbidden.

        ``allow`` maps a kind to ``None`` (allowed without limits) or a dict of limits among
        ``max_nbytes`` (per event), ``max_count``, ``max_total_bytes`` (over the phase),
        ``blocking`` and ``implicit`` (``False`` forbids blocking resp. implicit events).
        ``calls=n`` requires exactly ``n`` entries. Replaces earlier rules of the phase.
        """
        _check_name("TransferBudget.require()", phase)
        if allow is None:
            allow = {}
        if not isinstance(allow, Mapping):
            raise TypeError(
                f"TransferBudget.require({phase!r}): 'allow' must be a dict or None, not {type(allow).__name__}"
            )
        rules = {kind: _check_limits(phase, kind, limits) for kind, limits in allow.items()}
        if calls is not None:
            if isinstance(calls, bool) or not isinstance(calls, int):
                raise TypeError(
                    f"TransferBudget.require({phase!r}): 'calls' must be an int or None, not {type(calls).__name__}"
                )
            if calls < 0:
                raise ValueError(f"TransferBudget.require({phase!r}): 'calls' must be >= 0, got {calls}")
        self._phase(phase)
        self._rules[phase] = (rules, calls)
        return self

    def violations(self) -> list[str]:
        """One line per broken rule, naming the phase, the rule and the call site(s)."""
        found: list[str] = []
        for name, (rules, calls) in self._rules.items():
            phase = self._phases[name]
            if calls is not None and phase.calls != calls:
                sites = ", ".join(phase.sites) or "never entered"
                found.append(f"phase {name!r}: expected {calls} call(s), got {phase.calls} (entered at: {sites})")
            events = phase.counter.events
            for kind in KINDS:
                of_kind = [e for e in events if e.kind == kind]
                if not of_kind:
                    continue
                if kind not in rules:
                    found += _per_site(name, f"forbidden kind {kind}", of_kind)
                    continue
                limits = rules[kind]
                if not limits:
                    continue
                if "max_nbytes" in limits:
                    big = [e for e in of_kind if e.nbytes is not None and e.nbytes > limits["max_nbytes"]]
                    found += _per_site(name, f"{kind} event larger than max_nbytes={limits['max_nbytes']}", big)
                if "max_count" in limits and len(of_kind) > limits["max_count"]:
                    found.append(
                        f"phase {name!r}: {len(of_kind)} {kind} event(s) exceed max_count={limits['max_count']} "
                        f"(at: {_sites(of_kind)})"
                    )
                total = sum(e.nbytes or 0 for e in of_kind)
                if "max_total_bytes" in limits and total > limits["max_total_bytes"]:
                    found.append(
                        f"phase {name!r}: {total} bytes of {kind} exceed max_total_bytes={limits['max_total_bytes']} "
                        f"(at: {_sites(of_kind)})"
                    )
                if limits.get("blocking") is False:
                    found += _per_site(
                        name, f"blocking {kind} not allowed (blocking=False)", [e for e in of_kind if e.blocking]
                    )
                if limits.get("implicit") is False:
                    found += _per_site(
                        name, f"implicit {kind} not allowed (implicit=False)", [e for e in of_kind if e.implicit]
                    )
        return found

    def check(self) -> None:
        """AssertionError listing every violation of the declared rules (nothing if none)."""
        found = self.violations()
        if found:
            lines = "\n".join(f"  {line}" for line in found)
            raise AssertionError(f"TransferBudget: {len(found)} violation(s)\n{lines}")

    def report(self) -> str:
        """Per phase a ``<phase> (<k> call(s))`` line followed by its counter's report."""
        state = "running" if self._running else "stopped"
        lines = [f"TransferBudget ({state}): {len(self._phases)} phase(s)"]
        for name, phase in self._phases.items():
            lines.append(f"{name} ({phase.calls} call(s))")
            lines.extend("  " + line for line in phase.counter.report().splitlines())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<TransferBudget phases={self.calls!r} running={self._running}>"


def _sites(events) -> str:
    return ", ".join(dict.fromkeys(e.where for e in events))


def _per_site(phase: str, rule: str, events) -> list[str]:
    grouped: dict[tuple[str, str], int] = {}
    for e in events:
        grouped[(e.where, e.description)] = grouped.get((e.where, e.description), 0) + 1
    return [
        f"phase {phase!r}: {rule}: {where}: {description}" + (f" (x{n})" if n > 1 else "")
        for (where, description), n in grouped.items()
    ]
