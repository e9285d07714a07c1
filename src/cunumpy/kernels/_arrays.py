"""Arguments of ``dispatch="arrays"`` kernels brought to the side of a reference array, and
``fuse`` (API.md sections 2.11 and 2.12)."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _transfers
from .._backend import device_to_host, host_to_device, is_cupy_array

__all__ = ["as_kernel_array", "fuse", "kernel_output", "kernel_outputs"]


def _padded_rows(a: np.ndarray) -> bool:
    """Row-major with gaps between rows only: the last axis contiguous, every other stride
    positive and at least the extent of the next axis (e.g. ``storage[:, :n]``)."""
    if a.ndim == 0:
        return True
    strides, shape, item = a.strides, a.shape, a.itemsize
    if shape[-1] > 1 and strides[-1] != item:
        return False
    for axis in range(a.ndim - 1):
        if shape[axis] > 1 and (strides[axis] <= 0 or strides[axis] < shape[axis + 1] * abs(strides[axis + 1] or item)):
            return False
    return True


def _target_dtype(value, dtype, where):
    if dtype is not None:
        try:
            return np.dtype(dtype)
        except TypeError as exc:
            raise TypeError(f"{where}: 'dtype' {dtype!r} is not a NumPy dtype") from exc
    found = getattr(value, "dtype", None)
    if found is not None:
        return np.dtype(found)
    return np.asarray(value).dtype


def _convert(value, like, dtype, strided, where):
    """(array on like's side, whether it is ``value`` itself)."""
    wanted = _target_dtype(value, dtype, where)
    if wanted.hasobject:
        raise TypeError(f"{where}: object arrays cannot be kernel arguments")
    if is_cupy_array(like):
        cupy = sys.modules["cupy"]
        if is_cupy_array(value):
            if value.dtype == wanted and value.flags.c_contiguous:
                return value, True
            converted = cupy.ascontiguousarray(value, dtype=wanted)
            if _transfers.sinks:
                _transfers.record(
                    "device_copy", f"{where} {_transfers.describe(value)} -> {wanted}", int(converted.nbytes)
                )
            return converted, False
        host = np.ascontiguousarray(np.asarray(value), dtype=wanted)
        return host_to_device(host, where), False
    if is_cupy_array(value):
        host = device_to_host(value, where)
        return np.ascontiguousarray(host, dtype=wanted), False
    if type(value) is np.ndarray and value.dtype == wanted:
        if value.flags.c_contiguous or (strided and _padded_rows(value)):
            return value, True
    return np.ascontiguousarray(np.asarray(value), dtype=wanted), False


def _check_like(like, where):
    if not (isinstance(like, np.ndarray) or is_cupy_array(like)):
        raise TypeError(f"{where}: 'like' must be a NumPy or CuPy array, not {type(like).__name__}")


def as_kernel_array(value: Any, like: Any, dtype: npt.DTypeLike | None = None, *, strided: bool = False) -> Any:
    """Bring an argument of a ``dispatch="arrays"`` kernel to the side of the main array.

    Parameters
    ----------
    value : array_like
        The argument.
    like : numpy.ndarray or cupy.ndarray
        The array whose side (host or device) the result must be on.
    dtype : dtype, optional
        The wanted dtype (default: the one of ``value``).
    strided : bool, optional
        On the host side, pass row-padded NumPy views (``storage[:, :n]``, C order with
        gaps) through unchanged, as Pyccel accepts them.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        ``value`` itself when it fits, else one conversion (counted as a transfer event);
        always C order.

    Raises
    ------
    TypeError
        ``like`` is not a NumPy or CuPy array.
    """
    _check_like(like, "as_kernel_array()")
    return _convert(value, like, dtype, strided, "as_kernel_array()")[0]


def _write_back(out, buffer, where):
    """Copy the kernel's results in ``buffer`` into ``out`` on ``out``'s side (counted)."""
    if is_cupy_array(out):
        if not is_cupy_array(buffer):
            buffer = host_to_device(np.ascontiguousarray(buffer), where)
        elif _transfers.sinks:
            _transfers.record("device_copy", f"{where} write-back {_transfers.describe(out)}", int(out.nbytes))
        out[...] = buffer
        return
    if is_cupy_array(buffer):
        buffer = device_to_host(buffer, where)
    np.copyto(out, buffer, casting="unsafe")


@contextlib.contextmanager
def kernel_output(out: Any, like: Any, dtype: npt.DTypeLike | None = None, *, strided: bool = False) -> Iterator[Any]:
    """Give a kernel an output buffer that fits it, written back into ``out`` after the block.

    Parameters
    ----------
    out : numpy.ndarray or cupy.ndarray
        The caller's output array.
    like : numpy.ndarray or cupy.ndarray
        The array whose side the kernel runs on.
    dtype : dtype, optional
        The dtype the kernel needs.
    strided : bool, optional
        As for :func:`as_kernel_array`.

    Yields
    ------
    numpy.ndarray or cupy.ndarray
        ``out`` itself when it fits (side of ``like``, ``dtype``, C order), else a converted
        buffer that is copied into ``out`` when the block exits without an exception.

    Raises
    ------
    TypeError
        ``out`` or ``like`` is not a NumPy or CuPy array.
    """
    where = "kernel_output()"
    _check_like(like, where)
    if not (isinstance(out, np.ndarray) or is_cupy_array(out)):
        raise TypeError(f"{where}: 'out' must be a NumPy or CuPy array, not {type(out).__name__}")
    buffer, same = _convert(out, like, dtype, strided, where)
    yield buffer
    if not same:
        _write_back(out, buffer, where)


@contextlib.contextmanager
def kernel_outputs(
    *outputs: Any, like: Any, dtype: npt.DTypeLike | None = None, strided: bool = False
) -> Iterator[tuple]:
    """Give a kernel several output buffers, as :func:`kernel_output` does for one.

    Parameters
    ----------
    *outputs : numpy.ndarray or cupy.ndarray
        The caller's output arrays.
    like : numpy.ndarray or cupy.ndarray
        The array whose side the kernel runs on.
    dtype : dtype, optional
        The dtype the kernel needs.
    strided : bool, optional
        As for :func:`as_kernel_array`.

    Yields
    ------
    tuple
        One buffer per output, written back after the block when it is not the output itself.
    """
    with contextlib.ExitStack() as stack:
        buffers = tuple(stack.enter_context(kernel_output(out, like, dtype, strided=strided)) for out in outputs)
        yield buffers


# --------------------------------------------------------------------------- fuse


def _promote_scalars(args, kwargs):
    """Python scalars cast to the dtype NumPy 2 would give them next to the array arguments."""
    dtypes = [a.dtype for a in (*args, *kwargs.values()) if hasattr(a, "dtype") and hasattr(a, "shape")]
    if not dtypes:
        return args, kwargs

    def cast(value):
        if type(value) in (int, float, complex):
            return np.dtype(np.result_type(*dtypes, value)).type(value)
        return value

    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def fuse(function: Callable[..., Any] | None = None, *, kernel_name: str | None = None) -> Callable[..., Any]:
    """Fuse a chain of elementwise operations into one GPU kernel where the arguments allow it.

    Calls with a CuPy array argument go through ``cupy.fuse`` (created on first use, traced
    with the CuPy backend active; Python scalars are promoted as NumPy 2 would); other calls
    are plain calls. Use as ``@fuse`` or ``@fuse(kernel_name="k")``.

    Parameters
    ----------
    function : callable, optional
        The function to fuse (absent when used as ``@fuse(kernel_name=...)``).
    kernel_name : str, optional
        The name of the fused CUDA kernel.

    Returns
    -------
    callable
        The decorated function (or a decorator, without ``function``).

    Raises
    ------
    TypeError
        ``function`` is not callable or ``kernel_name`` is not a str.
    """
    if function is None:
        return functools.partial(fuse, kernel_name=kernel_name)
    if not callable(function):
        raise TypeError(f"fuse(): expected a function, not {type(function).__name__}")
    if kernel_name is not None and not isinstance(kernel_name, str):
        raise TypeError(f"fuse(): 'kernel_name' must be a str, not {type(kernel_name).__name__}")
    name = kernel_name or getattr(function, "__name__", "fused_kernel")
    fused: list = []

    @functools.wraps(function)
    def call(*args, **kwargs):
        cupy: Any = sys.modules.get("cupy")
        device_type = getattr(cupy, "ndarray", None) if cupy is not None else None
        if device_type is None or not (
            any(isinstance(a, device_type) for a in args) or any(isinstance(v, device_type) for v in kwargs.values())
        ):
            return function(*args, **kwargs)
        from .._backend import use_backend

        if not fused:
            fused.append(cupy.fuse(kernel_name=name)(function))
        args, kwargs = _promote_scalars(args, kwargs)
        with use_backend("cupy"):
            return fused[0](*args, **kwargs)

    return call
