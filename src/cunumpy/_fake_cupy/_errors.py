"""The fake CuPy's refusals of host data where CuPy takes device arrays (shared by the
ndarray's operators and the functions' argument conversion)."""

from __future__ import annotations


def _host_array_error(where: str, value) -> TypeError:
    return TypeError(
        f"{where} got a host numpy.ndarray (shape {value.shape}, {value.dtype}); CuPy functions "
        "take device arrays: copy it explicitly with cupy.asarray() or xp.to_cupy()"
    )


def _list_error(where: str, value) -> TypeError:
    kind = type(value).__name__
    return TypeError(
        f"{where} got a Python {kind}; CuPy does not accept {kind}s here: make a device array first with cupy.asarray()"
    )


class ListArgumentError(TypeError, AttributeError):
    """A list where a CuPy function calls a method of its argument: CuPy raises
    AttributeError (``'list' object has no attribute ...``), the fake's usual refusal is
    TypeError; this is both, so either ``except`` clause matches."""
