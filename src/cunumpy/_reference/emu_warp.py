"""Twin of the warp collectives in _core/emu/emu_runtime.c: what each lane of one warp gets
from a shuffle, a ballot or a block barrier count, given what every lane passed. The C
runtime computes the same from the values its fibers bring to the meeting point."""

__all__ = ["SHFL_DOWN", "SHFL_IDX", "SHFL_UP", "SHFL_XOR", "ballot", "shfl", "syncthreads_count"]

SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR = 0, 1, 2, 3


def _check_mask(mask, present):
    if not 0 <= mask <= 0xFFFFFFFF:
        raise ValueError(f"'mask' must be a 32-bit lane mask, got {mask!r}")
    if mask & ~present:
        raise RuntimeError(f"mask 0x{mask:08x} names lanes that do not exist (0x{present:08x} do)")


def shfl(kind, mask, values, args, width=32):
    """Results of one shuffle for every lane of a warp, as a dict lane -> value.

    ``values[lane]`` and ``args[lane]`` are what lane passed (source lane, delta or lane
    mask); lanes outside ``mask`` do not take part. A source outside the lane's segment of
    ``width`` lanes gives the lane its own value; a source inside it that ``mask`` does not name
    is undefined on a GPU and a ``RuntimeError`` (the first such lane).
    """
    if kind not in (SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR):
        raise ValueError(f"'kind' must be 0..3, got {kind!r}")
    if width < 1 or width > 32 or width & (width - 1):
        raise ValueError(f"'width' must be a power of two from 1 to 32, got {width!r}")
    present = (1 << len(values)) - 1 if len(values) < 32 else 0xFFFFFFFF
    _check_mask(mask, present)
    out = {}
    for lane in range(len(values)):
        if not mask >> lane & 1:
            continue
        start = lane & ~(width - 1)
        end = start + width - 1
        arg = args[lane]
        if kind == SHFL_IDX:
            src, valid = start | (arg & (width - 1)), True
        elif kind == SHFL_UP:
            src = lane - (arg & 0xFFFFFFFF)
            valid = src >= start
        elif kind == SHFL_DOWN:
            src = lane + (arg & 0xFFFFFFFF)
            valid = src <= end
        else:
            src = lane ^ (arg & 31)
            valid = src <= end
        if valid and not mask >> src & 1:
            raise RuntimeError(f"lane {lane} reads lane {src}, which the mask does not name")
        out[lane] = values[src] if valid else values[lane]
    return out


def ballot(mask, predicates):
    """The ballot every lane in ``mask`` receives: bit l set when lane l's predicate is true."""
    present = (1 << len(predicates)) - 1 if len(predicates) < 32 else 0xFFFFFFFF
    _check_mask(mask, present)
    return sum(1 << lane for lane, p in enumerate(predicates) if mask >> lane & 1 and p)


def syncthreads_count(predicates):
    """What __syncthreads_count returns to every thread of the block."""
    return sum(1 for p in predicates if p)
