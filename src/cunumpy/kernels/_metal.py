"""MetalKernel: a Metal Shading Language kernel body run through MLX (API.md section 2.13).

NumPy arrays in and out; nothing stays on the GPU; not part of ``Kernel`` dispatch. Every
argument is validated before MLX is imported, so the rules hold (and are tested) on machines
without MLX.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .. import _transfers

__all__ = ["MetalKernel", "metal_available"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FLOAT64_MODES = ("error", "cast")


def metal_available() -> bool:
    """Tell whether MLX imports and reports a Metal GPU; never raises.

    Returns
    -------
    bool
        True on Apple silicon with MLX installed (``pip install 'cunumpy[metal]'``).
    """
    try:
        import mlx.core as mx

        return bool(mx.metal.is_available())
    except Exception:  # noqa: BLE001 - any MLX failure means Metal is not available
        return False


def _mlx():
    try:
        import mlx.core as mx
    except ImportError as exc:
        raise ImportError("MetalKernel needs MLX on an Apple-silicon Mac: pip install 'cunumpy[metal]'") from exc
    try:
        ok = bool(mx.metal.is_available())
    except Exception:  # noqa: BLE001 - any MLX failure means Metal is not available
        ok = False
    if not ok:
        raise RuntimeError("MetalKernel: MLX is installed but reports no Metal GPU")
    return mx


def _names(value, what):
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        raise TypeError(f"MetalKernel: {what!r} must be a sequence of names, not {type(value).__name__}")
    names = tuple(value)
    for n in names:
        if not isinstance(n, str) or not _IDENTIFIER.match(n):
            raise ValueError(f"MetalKernel: {what!r} entry {n!r} is not a valid identifier")
    return names


def _dims(value, what, *, allow_zero=False):
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"MetalKernel: {what} must be an int or a tuple of 1 to 3 ints, not {value!r}")
    if isinstance(value, (int, np.integer)):
        dims: tuple[int, ...] = (int(value),)
    elif isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            raise ValueError(f"MetalKernel: {what} must have 1 to 3 dimensions, got {len(value)}")
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value):
            raise TypeError(f"MetalKernel: {what} entries must be ints, got {value!r}")
        dims = tuple(int(v) for v in value)
    else:
        raise TypeError(f"MetalKernel: {what} must be an int or a tuple of 1 to 3 ints, not {type(value).__name__}")
    low = 0 if allow_zero else 1
    if any(v < low for v in dims):
        raise ValueError(
            f"MetalKernel: {what} entries must be {'non-negative' if allow_zero else 'positive'}, got {dims}"
        )
    return dims


class MetalKernel:
    """A Metal kernel body over flat row-major NumPy inputs and outputs, run through MLX.

    Runs on Apple silicon only and is not part of :class:`Kernel` dispatch. A call is
    ``kernel(*inputs, out=..., n_threads=None, template=None)`` with NumPy float32 data.

    Parameters
    ----------
    source : str
        The Metal body.
    inputs : sequence of str
        The names of the input parameters.
    outputs : sequence of str
        The names of the output parameters (at least one, no repeats).
    name : str, optional
        The kernel's name.
    header : str, optional
        Metal code placed before the function.
    threadgroup : int or tuple of int, optional
        1 to 3 positive ints (default 256).
    float64 : {"error", "cast"}, optional
        ``"error"`` (default): float64 data is a :class:`TypeError`; ``"cast"``: computed in
        float32.
    atomic_outputs : bool, optional
        Declare the outputs atomic.
    init_value : float, optional
        A value the outputs are filled with before the launch.

    Raises
    ------
    TypeError
        An argument has the wrong type.
    ValueError
        ``float64`` is not one of its values, or ``outputs`` is empty or repeats a name.
    """

    def __init__(
        self,
        source: str,
        inputs: Iterable[str],
        outputs: Iterable[str],
        *,
        name: str = "cunumpy_kernel",
        header: str = "",
        threadgroup: int | tuple[int, ...] = 256,
        float64: str = "error",
        atomic_outputs: bool = False,
        init_value: float | None = None,
    ) -> None:
        if not isinstance(source, str):
            raise TypeError(f"MetalKernel: 'source' must be a str, not {type(source).__name__}")
        if not isinstance(header, str):
            raise TypeError(f"MetalKernel: 'header' must be a str, not {type(header).__name__}")
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise ValueError(f"MetalKernel: 'name' must be an identifier, not {name!r}")
        self._inputs = _names(inputs, "inputs")
        self._outputs = _names(outputs, "outputs")
        if not self._outputs:
            raise ValueError("MetalKernel: at least one output name is required")
        every = self._inputs + self._outputs
        repeated = sorted({n for n in every if every.count(n) > 1})
        if repeated:
            raise ValueError(f"MetalKernel: repeated input/output names: {', '.join(repeated)}")
        if float64 not in _FLOAT64_MODES:
            raise ValueError(f"MetalKernel: 'float64' must be 'error' or 'cast', not {float64!r}")
        if init_value is not None and (isinstance(init_value, bool) or not isinstance(init_value, (int, float))):
            raise TypeError(f"MetalKernel: 'init_value' must be a number or None, not {init_value!r}")
        self._threadgroup = _dims(threadgroup, "threadgroup")
        if math.prod(self._threadgroup) > 1024:
            raise ValueError(f"MetalKernel: threadgroup {self._threadgroup} has more than 1024 threads")
        self._source = source
        self._header = header
        self._name = name
        self._float64 = float64
        self._atomic = bool(atomic_outputs)
        self._init_value = init_value
        self._compiled: Any = None

    @property
    def name(self) -> str:
        """The kernel's name."""
        return self._name

    @property
    def source(self) -> str:
        """The Metal body."""
        return self._source

    @property
    def header(self) -> str:
        """The header code."""
        return self._header

    @property
    def inputs(self) -> tuple[str, ...]:
        """The input parameter names."""
        return self._inputs

    @property
    def outputs(self) -> tuple[str, ...]:
        """The output parameter names."""
        return self._outputs

    @property
    def threadgroup(self) -> tuple[int, ...]:
        """The threadgroup size."""
        return self._threadgroup

    @property
    def float64(self) -> str:
        """``"error"`` or ``"cast"``."""
        return self._float64

    @property
    def atomic_outputs(self) -> bool:
        """Whether the outputs are atomic."""
        return self._atomic

    @property
    def init_value(self) -> float | None:
        """The fill value of the outputs, or None."""
        return self._init_value

    def __repr__(self):
        return f"<MetalKernel {self._name!r} inputs={list(self._inputs)} outputs={list(self._outputs)}>"

    # ------------------------------------------------------------------ validation

    def _check_dtype(self, dtype, label):
        if dtype.kind == "c":
            raise TypeError(
                f"MetalKernel {self._name!r}: {label} has complex dtype {dtype}; Metal kernels take real data"
            )
        if dtype == np.float64 and self._float64 == "error":
            raise TypeError(
                f"MetalKernel {self._name!r}: {label} is float64; Metal computes in float32 "
                "(pass float32 data or float64='cast')"
            )
        if dtype.kind not in "biuf":
            raise TypeError(f"MetalKernel {self._name!r}: {label} has unsupported dtype {dtype}")

    def _prepare_input(self, value, label):
        if isinstance(value, np.generic):  # NumPy scalars (np.float64 too) are typed data
            value = np.asarray(value)
        elif isinstance(value, (bool, int)):
            return np.array([int(value)], dtype=np.int32)
        elif isinstance(value, float):
            return np.array([value], dtype=np.float32)
        if not isinstance(value, np.ndarray):
            raise TypeError(
                f"MetalKernel {self._name!r}: {label} must be a NumPy array or a Python scalar, "
                f"not {type(value).__name__}"
            )
        self._check_dtype(value.dtype, label)
        array = value.reshape(1) if value.ndim == 0 else value
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        return np.ascontiguousarray(array)

    def _prepare(self, inputs, out, n_threads, template):
        if len(inputs) != len(self._inputs):
            raise TypeError(
                f"MetalKernel {self._name!r}: expected {len(self._inputs)} input(s) "
                f"({', '.join(self._inputs) or 'none'}), got {len(inputs)}"
            )
        outs = (out,) if isinstance(out, np.ndarray) else out
        if outs is None or isinstance(outs, (str, bytes)) or not hasattr(outs, "__iter__"):
            raise TypeError(f"MetalKernel {self._name!r}: 'out' must be a NumPy array or a sequence of them")
        outs = tuple(outs)
        if len(outs) != len(self._outputs):
            raise TypeError(
                f"MetalKernel {self._name!r}: expected {len(self._outputs)} output(s) "
                f"({', '.join(self._outputs)}), got {len(outs)}"
            )
        for label, o in zip(self._outputs, outs):
            if not isinstance(o, np.ndarray):
                raise TypeError(
                    f"MetalKernel {self._name!r}: output {label!r} must be a NumPy array, not {type(o).__name__}"
                )
            if not o.flags.writeable:
                raise ValueError(f"MetalKernel {self._name!r}: output {label!r} is read-only")
            self._check_dtype(o.dtype, f"output {label!r}")
        prepared = tuple(self._prepare_input(v, f"input {n!r}") for n, v in zip(self._inputs, inputs))
        if n_threads is None:
            first = outs[0]
            n_threads = (first.shape[0] if first.ndim else 1,)
        else:
            n_threads = _dims(n_threads, "n_threads", allow_zero=True)
        if template is not None:
            if isinstance(template, Mapping):
                template = tuple(template.items())
            try:
                template = tuple((str(k), v) for k, v in template)
            except (TypeError, ValueError):
                raise TypeError(
                    f"MetalKernel {self._name!r}: 'template' must be a mapping or a sequence of (name, value) pairs"
                ) from None
            for k, v in template:
                if not _IDENTIFIER.match(k):
                    raise ValueError(f"MetalKernel {self._name!r}: template name {k!r} is not an identifier")
                if not isinstance(v, (bool, int, np.dtype, type)):
                    raise TypeError(
                        f"MetalKernel {self._name!r}: template value of {k!r} must be an int, bool or dtype, not {v!r}"
                    )
        return prepared, outs, n_threads, template

    # ------------------------------------------------------------------ call

    def __call__(self, *inputs, out, n_threads=None, template=None):
        prepared, outs, n_threads, template = self._prepare(inputs, out, n_threads, template)
        mx = _mlx()
        if 0 in n_threads:
            return outs[0] if len(outs) == 1 else outs
        if self._compiled is None:
            self._compiled = mx.fast.metal_kernel(
                name=self._name,
                input_names=list(self._inputs),
                output_names=list(self._outputs),
                source=self._source,
                header=self._header,
                atomic_outputs=self._atomic,
            )
        arrays = []
        for a in prepared:
            arrays.append(mx.array(a))
            _transfers.record("to_device", f"MetalKernel {self._name} input {_transfers.describe(a)}", int(a.nbytes))
        out_dtypes = [mx.float32 if o.dtype == np.float64 else getattr(mx, o.dtype.name) for o in outs]
        grid = tuple(n_threads) + (1,) * (3 - len(n_threads))
        group = self._threadgroup + (1,) * (3 - len(self._threadgroup))
        options = dict(
            inputs=arrays,
            grid=grid,
            threadgroup=group,
            output_shapes=[o.shape for o in outs],
            output_dtypes=out_dtypes,
        )
        if template:
            options["template"] = list(template)
        if self._init_value is not None:
            options["init_value"] = self._init_value
        results = self._compiled(**options)
        for o, r in zip(outs, results):
            host = np.asarray(r)
            _transfers.record(
                "to_host", f"MetalKernel {self._name} output {_transfers.describe(host)}", int(host.nbytes)
            )
            np.copyto(o, host.reshape(o.shape), casting="same_kind")
        return outs[0] if len(outs) == 1 else outs
