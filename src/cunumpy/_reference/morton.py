"""Twin of _core/morton.c: Morton keys with vectorised uint64 magic-bit spreading.

``keys_from_positions`` works with any NumPy-like namespace (``xp=cupy`` on a GPU); it is
also the vectorised baseline of the benchmark.
"""

import numpy as np

__all__ = [
    "compact",
    "keys_from_positions",
    "morton_decode_into",
    "morton_encode_into",
    "morton_keys_into",
    "morton_method",
    "spread",
]

_SPREAD = {
    2: (
        0xFFFFFFFF,
        [
            (16, 0x0000FFFF0000FFFF),
            (8, 0x00FF00FF00FF00FF),
            (4, 0x0F0F0F0F0F0F0F0F),
            (2, 0x3333333333333333),
            (1, 0x5555555555555555),
        ],
    ),
    3: (
        0x1FFFFF,
        [
            (32, 0x001F00000000FFFF),
            (16, 0x001F0000FF0000FF),
            (8, 0x100F00F00F00F00F),
            (4, 0x10C30C30C30C30C3),
            (2, 0x1249249249249249),
        ],
    ),
}


def spread(v, ndim, xp=np):
    u64 = xp.uint64
    first, steps = _SPREAD[ndim]
    x = xp.asarray(v, dtype=u64) & u64(first)
    for shift, mask in steps:
        x = (x | (x << u64(shift))) & u64(mask)
    return x


def compact(k, ndim, xp=np):
    u64 = xp.uint64
    first, steps = _SPREAD[ndim]
    x = xp.asarray(k, dtype=u64) & u64(steps[-1][1])
    for (shift, _), (_, mask) in zip(reversed(steps), [*list(reversed(steps))[1:], (0, first)]):
        x = (x | (x >> u64(shift))) & u64(mask)
    return x


def cells_from_positions(positions, lower, scale, levels, xp=np):
    top = float(2**levels - 1)
    t = (positions - xp.asarray(lower, dtype=xp.float64)) * xp.asarray(scale, dtype=xp.float64)
    return xp.clip(xp.floor(t), 0.0, top).astype(xp.uint64)


def keys_from_positions(positions, lower, scale, levels, xp=np):
    ndim = positions.shape[1]
    cells = cells_from_positions(positions, lower, scale, levels, xp)
    key = xp.zeros(positions.shape[0], dtype=xp.uint64)
    for a in range(ndim):
        key |= spread(cells[:, a], ndim, xp) << xp.uint64(a)
    return key


_method = ["python"]


def morton_method(name=None):
    if name is not None and name not in ("pdep", "magic", "auto"):
        raise ValueError(f"morton_method(): 'name' must be 'pdep', 'magic' or 'auto', got {name!r}")
    return "magic"


def morton_keys_into(positions, lower, scale, levels, out):
    if positions.ndim != 2 or positions.shape[1] not in (2, 3):
        raise ValueError(f"'positions' must have shape (n, 2) or (n, 3), got {positions.shape}")
    ndim = positions.shape[1]
    if not 1 <= levels <= {2: 32, 3: 21}[ndim]:
        raise ValueError(f"'levels' out of range for {ndim}-D, got {levels}")
    finite = np.isfinite(positions).all(axis=1)
    if not finite.all():
        raise ValueError(f"'positions' must be finite; row {int(np.argmin(finite))} is not")
    out[...] = keys_from_positions(positions, lower, scale, levels)
    return None


def morton_encode_into(cells, out):
    if len(cells) not in (2, 3):
        raise ValueError("morton_encode_into(): 2 or 3 cell arrays are needed")
    ndim = len(cells)
    key = np.zeros(out.shape, dtype=np.uint64)
    for a, c in enumerate(cells):
        key |= spread(np.broadcast_to(c, out.shape), ndim) << np.uint64(a)
    out[...] = key
    return None


def morton_decode_into(keys, outs):
    if len(outs) not in (2, 3):
        raise ValueError("morton_decode_into(): 2 or 3 output arrays are needed")
    ndim = len(outs)
    for a, o in enumerate(outs):
        o[...] = compact(keys >> np.uint64(a), ndim)
    return None
