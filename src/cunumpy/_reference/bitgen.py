"""Twin of _core/bitgen.c: uniform draws from a tuple of NumPy bit generators, chunk by chunk."""

import numpy as np

__all__ = ["bitgen_fill"]


def bitgen_fill(bit_generators, chunk, out, low, range_, plain):
    if not isinstance(bit_generators, tuple):
        raise TypeError("'bit_generators' must be a tuple")
    k, chunk = len(bit_generators), int(chunk)
    if k < 1 or chunk < 1:
        raise ValueError("need at least one bit generator and a positive 'chunk'")
    for i, bg in enumerate(bit_generators):
        if not isinstance(bg, np.random.BitGenerator):
            raise TypeError(f"bit generator {i} has no NumPy 'BitGenerator' capsule")
        for j in range(i):
            if bit_generators[j] is bg:
                raise ValueError(f"bit generators {j} and {i} share one state")
    if out.dtype != np.float64:
        raise TypeError(f"'out' has the wrong element type (format '{out.dtype.char}')")
    if not out.flags.writeable:
        raise ValueError("'out' must be a writable buffer")
    if not out.flags.c_contiguous:
        raise ValueError("'out' must be C-contiguous")
    flat = out.reshape(-1)
    n = flat.size
    if n < 1 or (n - 1) // chunk + 1 != k:
        raise ValueError(f"{k} bit generators of {chunk} draws do not cover 'out' ({n} values) exactly")
    for i, bg in enumerate(bit_generators):
        part = flat[i * chunk : (i + 1) * chunk]
        draws = np.random.Generator(bg).random(part.size)
        # Two roundings, like NumPy's uniform: low + range * draw.
        part[...] = draws if plain else float(low) + float(range_) * draws
    return None
