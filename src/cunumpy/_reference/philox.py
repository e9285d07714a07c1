"""Twin of _core/philox.c: Philox4x32-10 with vectorised uint64 arithmetic.

``philox_blocks`` works with any NumPy-like namespace (``xp=cupy`` on a GPU); it is also
the vectorised baseline of the benchmark.
"""

import numpy as np

__all__ = ["philox4x32_10_into", "philox_blocks", "philox_fill"]

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
_LOW32 = 0xFFFFFFFF


def philox_blocks(c0, c1, c2, c3, k0, k1, xp=np):
    """Ten Philox rounds on uint64 arrays holding 32-bit words; returns four such arrays."""
    u64 = xp.uint64
    mask = u64(_LOW32)
    m0, m1 = u64(M0), u64(M1)
    c0, c1, c2, c3 = (xp.asarray(c, dtype=u64) for c in (c0, c1, c2, c3))
    k0, k1 = xp.asarray(k0, dtype=u64), xp.asarray(k1, dtype=u64)
    for _ in range(10):
        p0 = c0 * m0
        p1 = c2 * m1
        c0, c1, c2, c3 = (p1 >> u64(32)) ^ c1 ^ k0, p1 & mask, (p0 >> u64(32)) ^ c3 ^ k1, p0 & mask
        k0 = (k0 + u64(W0)) & mask
        k1 = (k1 + u64(W1)) & mask
    return c0, c1, c2, c3


def _words(seed, stream, counter, xp=np):
    u64 = xp.uint64
    mask = u64(_LOW32)
    seed, stream, counter = (xp.asarray(v, dtype=u64) for v in (seed, stream, counter))
    return philox_blocks(
        counter & mask, counter >> u64(32), stream & mask, stream >> u64(32), seed & mask, seed >> u64(32), xp=xp
    )


def _u53(lo, hi, xp=np):
    u64 = xp.uint64
    return ((lo | (hi << u64(32))) >> u64(11)).astype(xp.float64) * (2.0**-53)


def philox_fill(kind, seed, stream, counter, out0, out1=None):
    if kind not in (0, 1, 2, 3):
        raise ValueError(f"philox_fill(): 'kind' must be 0..3, got {kind}")
    if (kind in (1, 3)) != (out1 is not None):
        raise TypeError("philox_fill(): 'out1' is needed exactly for kinds 1 and 3")
    n = out0.size
    if n == 0:
        return None
    x0, x1, x2, x3 = _words(seed, stream, counter)
    u0, u1 = _u53(x0, x1), _u53(x2, x3)
    if kind == 0:
        out0[...] = np.broadcast_to(u0, (n,))
    elif kind == 1:
        out0[...] = np.broadcast_to(u0, (n,))
        out1[...] = np.broadcast_to(u1, (n,))
    else:
        r = np.sqrt(-2.0 * np.log(1.0 - u0))
        a = 6.283185307179586476925286766559 * u1
        out0[...] = np.broadcast_to(r * np.cos(a), (n,))
        if kind == 3:
            out1[...] = np.broadcast_to(r * np.sin(a), (n,))
    return None


def philox4x32_10_into(counters, key0, key1, out):
    if counters.size % 4:
        raise ValueError("'counters' must hold a multiple of 4 words")
    c = counters.reshape(-1, 4)
    ys = philox_blocks(c[:, 0], c[:, 1], c[:, 2], c[:, 3], key0, key1)
    o = out.reshape(-1, 4)
    for j in range(4):
        o[:, j] = ys[j].astype(np.uint32)
    return None
