"""Concurrent writers: every C entry point that reads a user buffer with the GIL released,
called while another Python thread rewrites that buffer in a loop.

Rule (issue 9): a racing caller may get a wrong result (as with NumPy), or a ValueError, but
the call must never write outside its outputs or crash. Each case runs in a subprocess, so a
crash is a failed test; under `make check-c` the subprocess inherits the sanitizer build.
Inputs are large enough for the paths that release the GIL (and for the sort's hybrid path).
"""

from __future__ import annotations

import pytest
from test_c_robustness import run_isolated

from cunumpy._native import HAVE_C_CORE

pytestmark = pytest.mark.skipif(not HAVE_C_CORE, reason="needs the C core")

# Seconds of calls per case: the unfixed sort and run counting crashed well within this.
SECONDS = 1.5

_HARNESS = """
import sys, threading, time
import numpy as np
import cunumpy._core as core

sys.setswitchinterval(1e-5)
rs = np.random.default_rng(1)
stop = threading.Event()

def writer(buf, *states):
    # Alternate whole-buffer states (NumPy copies release the GIL) and single elements.
    i = 0
    flat = buf.reshape(-1) if buf.flags.c_contiguous else None
    while not stop.is_set():
        np.copyto(buf, states[i % len(states)])
        if flat is not None and flat.size:
            flat[(i * 7919) % flat.size] = flat[-1]
        i += 1

def race(call, buf, *states, seconds={seconds}):
    t = threading.Thread(target=writer, args=(buf, *states), daemon=True)
    t.start()
    calls = errors = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            try:
                call()
            except ValueError:
                errors += 1  # a detected inconsistency is an allowed outcome
            calls += 1
    finally:
        stop.set()
        t.join()
    print("survived", calls, errors)
"""


def _race(body: str) -> None:
    code = _HARNESS.format(seconds=SECONDS) + body
    out = run_isolated(code, timeout=300)
    assert "survived" in out


# --------------------------------------------------------------------------- sort.c


@pytest.mark.parametrize(
    "dtype, low, high",
    [
        ("int64", -(2**62), 2**62),  # wide keys: the 128-bit record path
        ("int64", 0, 2**20),  # keys within 32 bits: the packed 64-bit record path
        ("uint32", 0, 2**32),
        ("int32", -(2**31), 2**31),
        ("uint8", 0, 256),
        ("int16", -(2**15), 2**15),
    ],
)
def test_radix_argsort_with_keys_written_concurrently(dtype, low, high):
    """Regression (issue 9, item 2): the hybrid path counted buckets in one read of the keys
    and scattered in a second; a change in between wrote past the output (heap overflow)."""
    _race(
        f"""
n = 200_000
a = rs.integers({low}, {high}, n).astype("{dtype}")
b = np.sort(a)[::-1].copy()  # a very different bucket distribution
c = np.full(n, a[0], dtype="{dtype}")
keys = a.copy()
order = np.empty(n, np.int64)
sk = np.empty(n, keys.dtype)
def call():
    core.radix_argsort(keys, order, sk)
    # whatever the order, it must be a set of valid indices
    assert order.min() >= 0 and order.max() < n
race(call, keys, a, b, c)
"""
    )


def test_radix_argsort_small_path_with_keys_written_concurrently():
    """Below the hybrid threshold: keys are converted once into a private buffer."""
    _race(
        """
n = 30_000
a = rs.integers(-(2**40), 2**40, n)
b = rs.integers(0, 7, n)
keys = a.copy()
order = np.empty(n, np.int64); sk = np.empty(n, np.int64)
def call():
    core.radix_argsort(keys[::1], order, sk)
    core.radix_argsort(keys[::2], order[: n // 2], sk[: n // 2])
race(call, keys, a, b)
"""
    )


def test_take_rows_with_order_and_rows_written_concurrently():
    """The payload gather of sort_by_key: each index is read once and checked before use."""
    _race(
        """
n = 300_000
good = rs.permutation(n).astype(np.int64)
bad = good.copy(); bad[::1000] = n + 5
order = good.copy()
src = rs.random((n, 3)); dst = np.empty_like(src)
def call():
    core.take_rows(src, order, dst)
race(call, order, good, bad)
race_src = rs.random((n, 3))
stop.clear()
race(lambda: core.take_rows(src, good, dst), src, race_src, race_src[::-1].copy())
"""
    )


# --------------------------------------------------------------------------- segment.c


def test_segment_runs_with_keys_written_concurrently():
    """Regression (issue 9, item 3): runs were counted in one pass and written in a second
    without a bound; more runs in the second read wrote past unique/starts/stops."""
    _race(
        """
n = 300_000
few = np.repeat(np.arange(10, dtype=np.int64), n // 10)
many = np.arange(n, dtype=np.int64)
keys = few.copy()
def call():
    runs = core.segment_runs(keys)
    u = np.empty(runs, np.int64); s = np.empty(runs, np.int64); e = np.empty(runs, np.int64)
    core.segment_runs(keys, u, s, e)
race(call, keys, few, many)
"""
    )


def test_segment_boundaries_with_keys_written_concurrently():
    """The same through the public API (32-bit keys, read in place)."""
    _race(
        """
import cunumpy.algorithms as al
n = 300_000
few = np.repeat(np.arange(10, dtype=np.int32), n // 10)
many = np.arange(n, dtype=np.int32)
keys = few.copy()
race(lambda: al.segment_boundaries(keys), keys, few, many)
"""
    )


def test_segment_sum_and_check_with_inputs_written_concurrently():
    _race(
        """
n = 1 << 19  # past the two-thread split
nseg = 64
good = rs.integers(-1, nseg, n)
bad = rs.integers(-10**12, 10**12, n)
keys = good.copy()
vals = rs.standard_normal((n, 2))
out = np.empty((nseg, 2))
def call():
    core.segment_check_keys(keys, nseg)
    core.segment_sum_into(vals, keys, out, True)
    core.segment_sum_into(vals, keys, out, False)
    core.segment_sum_into(vals[:, :1], keys, out[:, :1].copy(), False)
race(call, keys, good, bad)
"""
    )


def test_segment_sum_with_values_written_concurrently():
    _race(
        """
n = 1 << 19
nseg = 7
keys = rs.integers(0, nseg, n).astype(np.int32)
a = rs.standard_normal((n, 3)); b = -a
vals = a.copy()
out = np.empty((nseg, 3))
race(lambda: core.segment_sum_into(vals, keys, out, False), vals, a, b)
"""
    )


def test_cell_offsets_with_keys_written_concurrently():
    _race(
        """
n = 400_000
ncells = 1000
a = np.sort(rs.integers(0, ncells, n))
b = rs.integers(-5, 2 * ncells, n)
keys = a.copy()
out = np.empty(ncells + 1, np.int64)
race(lambda: core.cell_offsets_into(keys, ncells, out), keys, a, b)
"""
    )


# --------------------------------------------------------------------------- compact.c


def test_compact_with_mask_and_arrays_written_concurrently():
    _race(
        """
n = 300_000
m_all = np.ones(n, bool); m_none = np.zeros(n, bool); m_half = rs.random(n) < 0.5
mask = m_half.copy()
x = rs.standard_normal((n, 3)); y = np.arange(n)
def call():
    core.compact_in_place(mask, (x, y))
race(call, mask, m_all, m_none, m_half)
"""
    )
    _race(
        """
n = 300_000
mask = rs.random(n) < 0.5
x = rs.standard_normal((n, 3)); a = x.copy(); b = -x
def call():
    core.compact_in_place(mask, (x,))
race(call, x, a, b)
"""
    )


# --------------------------------------------------------------------------- morton.c


def test_morton_keys_with_positions_written_concurrently():
    _race(
        """
n = 300_000
a = rs.random((n, 3)); b = np.full((n, 3), np.nan); c = np.full((n, 3), 1e300)
pos = a.copy()
out = np.empty(n, np.uint64)
race(lambda: core.morton_keys_into(pos, (0.0, 0.0, 0.0), (1024.0,) * 3, 10, out), pos, a, b, c)
"""
    )


def test_morton_encode_and_decode_with_inputs_written_concurrently():
    _race(
        """
n = 300_000
a = rs.integers(0, 2**21, n).astype(np.uint64); b = np.full(n, 2**64 - 1, np.uint64)
cx = a.copy()
cy = a.copy()
out = np.empty(n, np.uint64)
race(lambda: core.morton_encode_into((cx, cy, cy), out), cx, a, b)
"""
    )
    _race(
        """
n = 300_000
a = rs.integers(0, 2**63, n).astype(np.uint64); b = np.full(n, 2**64 - 1, np.uint64)
keys = a.copy()
outs = tuple(np.empty(n, np.uint64) for _ in range(3))
race(lambda: core.morton_decode_into(keys, outs), keys, a, b)
"""
    )


# --------------------------------------------------------------------------- philox.c


def test_philox_with_inputs_written_concurrently():
    _race(
        """
n = 200_000
a = rs.integers(0, 2**32, 4 * n).astype(np.uint32); b = ~a
counters = a.copy()
k0 = rs.integers(0, 2**32, n).astype(np.uint32); k1 = k0.copy()
out = np.empty(4 * n, np.uint32)
race(lambda: core.philox4x32_10_into(counters, k0, k1, out), counters, a, b)
"""
    )
    _race(
        """
n = 200_000
a = rs.integers(0, 2**63, n).astype(np.uint64); b = ~a
seed = a.copy()
stream = np.zeros(1, np.uint64); counter = np.arange(n, dtype=np.uint64)
o0 = np.empty(n); o1 = np.empty(n)
def call():
    core.philox_fill(0, seed, stream, counter, o0)
    core.philox_fill(3, seed, stream, counter, o0, o1)
race(call, seed, a, b)
"""
    )
