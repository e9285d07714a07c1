"""Host/CUDA parity checks and generated device-function kernels for ``cunumpy.kernel_testing``
(API.md sections 13.2 to 13.4).

Without a GPU the CUDA side runs on the fake CuPy through the CPU emulation
(``cunumpy.kernel_testing.emulated_launches``, read here as ``emulated_launches``); when that cannot run, the check skips with
the reason (or fails under ``CUNUMPY_REQUIRE_CUDA``).

A mismatch is one ``AssertionError`` listing every array that differs, by parameter name
(``out``, ``args.rho``, ``x[2]``, ``return``), with its count of differing elements and the
first indices. This module's frames, and those of the library below a kernel call, are
hidden from pytest's tracebacks: a failure shows the test and the message.
"""

from __future__ import annotations

import contextlib
import os
import re
import types
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ._emulation import emulated_launches as _emulated_launches
from ._test_requirements import _REQUIRE_VARIABLE, _kernel_launch_missing_reason, _pytest, cuda_required
from .kernels._cuda_launch import _device_type, _struct_fields

if TYPE_CHECKING:
    from .arguments import CudaStruct
    from .kernels import CudaKernel, Kernel, KernelCatalog

# pytest leaves out the frames of a module with this global: a parity failure shows the
# user's test and the message, not this module's code.
__tracebackhide__ = True

__all__ = [
    "TEST_ARGS_SETTINGS",
    "ParityResults",
    "assert_kernels_agree",
    "check_parity",
    "device_function_kernel",
    "parity_cases",
]

#: Settings a test-argument module may define, and the assert_kernels_agree keyword each sets.
TEST_ARGS_SETTINGS = {
    "N_THREADS": "n_threads",
    "GRID": "grid",
    "BLOCK": "block",
    "RTOL": "rtol",
    "ATOL": "atol",
    "N_CALLS": "n_calls",
    "OUTPUTS": "outputs",
    "SEED": "seed",
}

#: The CPU emulation's launches, through which the CUDA side runs on the fake CuPy (None: not
#: available, the check then skips).
emulated_launches: Any = _emulated_launches

#: Indices listed per differing array in a parity failure.
_FIRST_INDICES = 3


def _skip_or_fail(reason: str) -> NoReturn:  # type: ignore[misc]  # pytest.skip and pytest.fail raise
    pytest = _pytest()
    if cuda_required():
        pytest.fail(f"{_REQUIRE_VARIABLE} is set, but {reason}", pytrace=False)
    pytest.skip(reason)


def _device_context(sanitize=None):
    """A context manager under which CUDA launches run: the real GPU, or the fake CuPy with
    the CPU emulation (``sanitize`` forwarded to it). Skips (or fails) when neither is possible."""
    from ._backend import cupy_available
    from ._fake_cupy import fake_cupy_active

    if fake_cupy_active():
        emulated = emulated_launches
        if emulated is None:
            _skip_or_fail("the fake CuPy is active and the CPU emulation is not available: CUDA kernels cannot launch")
        reason = _kernel_launch_missing_reason()
        if reason is not None:
            _skip_or_fail(reason)
        # Explicitly, so that the check emulates also under CUNUMPY_EMULATION=0.
        return emulated() if sanitize is None else emulated(sanitize=sanitize)
    if not cupy_available():
        from ._backend import cupy_unavailable_reason

        _skip_or_fail(f"needs CuPy with a GPU (or the fake CuPy with the CPU emulation): {cupy_unavailable_reason()}")
    return contextlib.nullcontext()


# --------------------------------------------------------------------------- collecting arrays


def _is_array(value) -> bool:
    if isinstance(value, np.ndarray):
        return True
    device_type = _device_type()
    return device_type is not None and isinstance(value, device_type)


def _fields(obj):
    """(label, value) of the members of a container or argument object, one level deep."""
    if isinstance(obj, (tuple, list)):
        return [(f"[{i}]", v) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        return [(f"[{k!r}]", v) for k, v in obj.items()]
    names = _struct_fields(getattr(obj, "struct", None))
    if names:
        by_item = hasattr(type(obj), "__getitem__") and not hasattr(type(obj), "pack")
        found = []
        for name in names:
            try:
                value = obj[name] if by_item else getattr(obj, name)
            except (AttributeError, KeyError, TypeError):
                continue
            found.append((f".{name}", value))
        return found
    attributes = getattr(obj, "__dict__", None)
    if isinstance(attributes, dict) and attributes:
        return [(f".{k}", v) for k, v in attributes.items() if not k.startswith("_")]
    if hasattr(type(obj), "__cuda_args__"):
        try:
            values = obj.__cuda_args__()
        except Exception:  # noqa: BLE001 - a user's __cuda_args__ that raises has no fields to compare
            return []
        if isinstance(values, tuple):
            return [(f".{i}", v) for i, v in enumerate(values)]
    return []


def _arrays_of(value, path):
    if _is_array(value):
        return [(path, value)]
    if isinstance(value, (str, bytes, int, float, complex, np.generic)) or value is None:
        return []
    return [(path + label, v) for label, v in _fields(value) if _is_array(v)]


def _parameter_names(kernel, n_args) -> list:
    """The name of each argument position: the host's parameter names, else the CUDA
    kernel's, else ``"argument N"``."""
    names = kernel.host_parameters()
    if names is None or len(names) < n_args:
        signature = getattr(kernel.cuda_kernel, "signature", None)
        names = [p.name for p in signature] if signature else None
    if names is None or len(names) < n_args:
        return [f"argument {i}" for i in range(n_args)]
    return list(names[:n_args])


def _selection(kernel, outputs, n_args):
    """[(index, field or None)] from ``outputs`` (None: the host's declared outputs, else all)."""
    names = kernel.host_parameters()
    if outputs is None:
        outputs = kernel.host_kernel.outputs
        if outputs is None:
            return [(i, None) for i in range(n_args)]
    if isinstance(outputs, (str, int)):
        outputs = (outputs,)
    chosen = []
    for entry in outputs:
        if isinstance(entry, bool) or not isinstance(entry, (int, np.integer, str)):
            raise TypeError(f"assert_kernels_agree(): 'outputs' entries must be int or str, not {entry!r}")
        field = None
        if isinstance(entry, str):
            head, _, field = entry.partition(".")
            field = field or None
            if head.lstrip("-").isdigit():
                entry = int(head)
            else:
                if names is None or head not in names:
                    raise KeyError(
                        f"assert_kernels_agree(): output {head!r} matches no parameter of kernel "
                        f"{kernel.name!r} (parameters: {', '.join(names) if names else 'unknown'})"
                    )
                entry = names.index(head)
        index = int(entry)
        position = index + n_args if index < 0 else index
        if not 0 <= position < n_args:
            raise IndexError(f"assert_kernels_agree(): output index {index} is out of range for {n_args} arguments")
        chosen.append((position, field))
    return chosen


def _collect(args, chosen, names=None):
    """{path: array} of the chosen arguments; a path starts with the parameter's name (from
    ``names``) or, without names, with ``"argument N"``."""
    arrays = {}
    for index, field in chosen:
        value = args[index]
        path = names[index] if names is not None else f"argument {index}"
        if field is None:
            found = _arrays_of(value, path)
        else:
            members = dict(_fields(value))
            key = f".{field}"
            if key not in members:
                raise KeyError(f"assert_kernels_agree(): argument {index} ({path}) has no field {field!r}")
            found = _arrays_of(members[key], f"{path}.{field}")
        for p, a in found:
            arrays[p] = a
    return arrays


def _host_copy(a):
    if isinstance(a, np.ndarray):
        return a.copy()
    return a.get()


class ParityResults(dict):
    """What ``assert_kernels_agree`` returns: the host kernel's arrays keyed by parameter
    path (``"out"``, ``"args.rho"``, ``"x[2]"``, ``"return"``). The keys of earlier releases
    (``"argument 2"``, ``"argument 0.rho"``) still find the same arrays, without being listed."""

    def __init__(self, arrays, aliases):
        super().__init__(arrays)
        self.aliases = dict(aliases)

    def __missing__(self, key):
        name = self.aliases.get(key)
        if name is None:
            raise KeyError(key)
        return dict.__getitem__(self, name)

    def __contains__(self, key):
        return dict.__contains__(self, key) or self.aliases.get(key) in self.keys()

    def get(self, key, default=None):
        return self[key] if key in self else default  # noqa: SIM401 - dict.get would skip the aliases

    def __reduce__(self):
        return (type(self), (dict(self), self.aliases))


# --------------------------------------------------------------------------- comparing


def _format_index(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _format_value(value) -> str:
    value = value.item() if hasattr(value, "item") else value
    return repr(value) if isinstance(value, (float, complex)) else str(value)


def _comparable(a):
    a = np.asarray(a)
    return a.astype(np.int8) if a.dtype.kind == "b" else a


def _mismatch(path, actual, expected, rtol, atol) -> str | None:
    """One line describing how ``actual`` (CUDA) differs from ``expected`` (host), or None."""
    actual, expected = _comparable(actual), _comparable(expected)
    if actual.shape != expected.shape:
        return f"{path}: shape {actual.shape} on CUDA, {expected.shape} on the host"
    if actual.dtype.kind in "iufc" and expected.dtype.kind in "iufc":
        with np.errstate(all="ignore"):
            close = np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = np.asarray(actual == expected, dtype=bool)
        if close.shape != actual.shape:
            close = np.broadcast_to(close, actual.shape)
    if close.all():
        return None
    bad = np.argwhere(~close)
    shown = ", ".join(
        f"{_format_index(i)} {_format_value(actual[tuple(i)])} vs {_format_value(expected[tuple(i)])}"
        for i in bad[:_FIRST_INDICES]
    )
    more = ", ..." if len(bad) > _FIRST_INDICES else ""
    return f"{path}: {len(bad)} of {actual.size} differ (CUDA vs host): {shown}{more}"


def _compare(kernel, host, device, rtol, atol):
    problems = [
        line
        for line in (_mismatch(path, device[path], expected, rtol, atol) for path, expected in host.items())
        if line is not None
    ]
    if problems:
        raise AssertionError(
            f"kernel {kernel.name!r}: CUDA and host results differ in {len(problems)} of {len(host)} "
            f"array(s) (rtol={rtol:g}, atol={atol:g}):\n  " + "\n  ".join(problems)
        )


# --------------------------------------------------------------------------- hiding library frames

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _without_library_frames(exc: BaseException) -> BaseException:
    """``exc`` with the frames of cunumpy's own code (below a kernel call) left out of its
    traceback, so that pytest shows the user's code and the message."""
    kept = []
    tb = exc.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return exc.with_traceback(rebuilt)


def _call(kernel, args, n_threads, grid, block):
    try:
        return kernel(*args, n_threads=n_threads, grid=grid, block=block)
    except Exception as exc:  # noqa: BLE001 - re-raised: only the traceback is shortened
        raise _without_library_frames(exc)  # noqa: B904 - the same exception, fewer frames


def _returned_arrays(value) -> dict:
    if value is None:
        return {}
    return {path: _host_copy(a) for path, a in _arrays_of(value, "return")}


# --------------------------------------------------------------------------- assert_kernels_agree


def assert_kernels_agree(
    kernel: Kernel,
    make_args: Callable[[str, int], Iterable[Any]],
    *,
    n_threads: int | tuple[int, ...] | Callable[[tuple], int | tuple[int, ...]] | None = None,
    grid: int | tuple[int, ...] | None = None,
    block: int | tuple[int, ...] | None = None,
    rtol: float = 1e-12,
    atol: float = 0.0,
    n_calls: int = 1,
    outputs: Iterable[int | str] | None = None,
    seed: int = 0,
    sanitize: str | Iterable[str] | None = None,
) -> dict[str, np.ndarray]:
    """Check that a kernel's CUDA port computes what its host kernel computes.

    For each backend (``"numpy"``, then ``"cupy"``): activate it, build
    ``args = make_args(backend, seed)`` with it active, call ``kernel(*args, n_threads=...,
    grid=..., block=...)`` ``n_calls`` times and collect the arrays; the CUDA results are
    copied to the host and compared with ``numpy.testing.assert_allclose``. The CUDA side
    runs on a GPU, or on the fake CuPy through the CPU emulation; where neither can run it
    the check skips with the reason (and fails under ``CUNUMPY_REQUIRE_CUDA=1``).

    Parameters
    ----------
    kernel : cunumpy.kernels.Kernel
        A kernel with a CUDA port.
    make_args : callable
        ``make_args(backend, seed)`` returns the argument tuple, built with ``backend``
        active (seeded host data converted with ``xp.to_cunumpy``).
    n_threads : int, tuple or callable, optional
        The launch size, or a callable of the argument tuple; omit it when the CUDA kernel
        infers it.
    grid, block : int or tuple of int, optional
        An explicit launch shape.
    rtol, atol : float, optional
        The tolerances (loosen them for atomics: the order of additions differs).
    n_calls : int, optional
        Calls per backend; 2 or more finds state that is not reset between calls.
    outputs : sequence of int or str, optional
        The arrays to compare: indices, parameter names, or ``"name.field"`` /
        ``"0.field"`` for one field of a struct or argument object. Default: the host
        kernel's declared ``outputs``, else every argument.
    seed : int, optional
        Passed to ``make_args``.
    sanitize : sequence of str, optional
        Checks of the CPU emulation when the CUDA side is emulated (see
        :func:`emulate_cuda_kernel`).

    Returns
    -------
    dict of str to numpy.ndarray
        The host kernel's arrays, keyed by parameter path (``"out"``, ``"args.x"``,
        ``"x[2]"``; the older keys ``"argument N..."`` still work).

    Raises
    ------
    TypeError
        ``kernel`` is not a Kernel, ``make_args`` is not callable, ``n_calls`` is not an
        int, or an ``outputs`` entry has the wrong type.
    ValueError
        The kernel has no CUDA port, or ``n_calls`` is below 1.
    KeyError
        An unknown output name or field.
    IndexError
        An output index out of range.
    AssertionError
        The results differ, or the two sides have different arrays; the message lists every
        differing array by parameter name, with the count and the first indices.
    """
    from ._backend import use_backend
    from .kernels import Kernel

    if not isinstance(kernel, Kernel):
        raise TypeError(f"assert_kernels_agree(): expected a Kernel, not {type(kernel).__name__}")
    cuda = kernel.cuda_kernel
    if cuda is None:
        raise ValueError(f"assert_kernels_agree(): kernel {kernel.name!r} has no CUDA version to compare")
    if isinstance(n_calls, bool) or not isinstance(n_calls, (int, np.integer)):
        raise TypeError(f"assert_kernels_agree(): 'n_calls' must be an int, not {n_calls!r}")
    if n_calls < 1:
        raise ValueError(f"assert_kernels_agree(): 'n_calls' must be >= 1, got {n_calls}")
    if not callable(make_args):
        raise TypeError("assert_kernels_agree(): 'make_args' must be callable as make_args(backend, seed)")
    if outputs is not None and not isinstance(outputs, (str, int)):
        for entry in outputs:
            if isinstance(entry, bool) or not isinstance(entry, (int, np.integer, str)):
                raise TypeError(f"assert_kernels_agree(): 'outputs' entries must be int or str, not {entry!r}")
    if n_threads is None and grid is None and cuda.n_threads_from is None:
        raise TypeError(
            f"assert_kernels_agree(): kernel {kernel.name!r} cannot infer its launch size "
            "(n_threads_from=None); pass n_threads= or grid="
        )
    device = _device_context(sanitize)
    results, returned, aliases = {}, {}, {}
    for backend in ("numpy", "cupy"):
        context = device if backend == "cupy" else contextlib.nullcontext()
        with use_backend(backend, strict=True), context:
            args = tuple(make_args(backend, seed))
            size = n_threads(args) if callable(n_threads) else n_threads
            for _ in range(n_calls):
                value = _call(kernel, args, size, grid, block)
            chosen = _selection(kernel, outputs, len(args))
            names = _parameter_names(kernel, len(args))
            arrays = _collect(args, chosen, names)
            if backend == "numpy":
                old = _collect(args, chosen)
                aliases = {o: n for o, n in zip(old, arrays) if o != n}
            results[backend] = {path: _host_copy(a) for path, a in arrays.items()}
            returned[backend] = _returned_arrays(value)
    host, device_results = results["numpy"], results["cupy"]
    if returned["numpy"] and returned["cupy"]:  # compared when both sides return arrays
        host.update(returned["numpy"])
        device_results.update(returned["cupy"])
    if set(host) != set(device_results):
        raise AssertionError(
            f"kernel {kernel.name!r}: the host and CUDA sides have different arrays: host "
            f"{sorted(host)}, CUDA {sorted(device_results)}"
        )
    _compare(kernel, host, device_results, rtol, atol)
    return ParityResults(host, aliases)


# --------------------------------------------------------------------------- test-argument modules


def parity_cases(catalog: KernelCatalog) -> list:
    """List the kernels of a catalog that have a CUDA port, as pytest parameters.

    Use it as ``@pytest.mark.parametrize("kernel", parity_cases(catalog))`` with
    :func:`check_parity` in the test.

    Parameters
    ----------
    catalog : cunumpy.kernels.KernelCatalog
        The catalog.

    Returns
    -------
    list
        One ``pytest.param(kernel, id=name)`` per kernel with CUDA; kernels without a
        ``<name>_test_args.py`` module are marked skip with a reason naming the missing file.
    """
    pytest = _pytest()
    cases = []
    for name, kernel in catalog.parity_cases():
        marks = ()
        if kernel.test_args_module is None:
            missing = f"{name}/{name}_test_args.py"
            if kernel.cuda_path is not None:
                missing = str(kernel.cuda_path.parent / f"{name}_test_args.py")
            marks = pytest.mark.skip(reason=f"kernel {name!r} has no test-argument module ({missing})")
        cases.append(pytest.param(kernel, id=name, marks=marks))
    return cases


def check_parity(kernel: Kernel, **overrides: Any) -> dict[str, np.ndarray]:
    """Run :func:`assert_kernels_agree` with the settings of the kernel's test-arguments module.

    The module is ``<name>/<name>_test_args.py`` of the kernel's folder. It defines
    ``make_args(backend, seed)`` and may set, as module constants, every keyword of
    :func:`assert_kernels_agree` that ``TEST_ARGS_SETTINGS`` lists: ``N_THREADS`` (an int, a
    tuple or a callable of the arguments), ``GRID``, ``BLOCK``, ``RTOL``, ``ATOL``,
    ``N_CALLS``, ``OUTPUTS`` and ``SEED``.

    Parameters
    ----------
    kernel : cunumpy.kernels.Kernel
        A kernel of a kernel folder, with a CUDA port.
    **overrides
        Keywords of :func:`assert_kernels_agree` that win over the module's settings
        (``sanitize=`` too, for the emulated CUDA side).

    Returns
    -------
    dict of str to numpy.ndarray
        What :func:`assert_kernels_agree` returns.

    Raises
    ------
    ValueError
        The kernel has no test-arguments module.
    TypeError
        The module defines no callable ``make_args``.
    """
    if getattr(kernel, "test_args_module", None) is None:
        raise ValueError(
            f"check_parity(): kernel {getattr(kernel, 'name', kernel)!r} has no test-argument module "
            "(<name>/<name>_test_args.py defining make_args(backend, seed))"
        )
    module = kernel.test_args
    make_args = getattr(module, "make_args", None)
    if not callable(make_args):
        raise TypeError(f"check_parity(): {kernel.test_args_module} defines no callable make_args(backend, seed)")
    settings = {}
    for constant, keyword in TEST_ARGS_SETTINGS.items():
        if hasattr(module, constant):
            settings[keyword] = getattr(module, constant)
    settings.update(overrides)
    return assert_kernels_agree(kernel, make_args, **settings)


# --------------------------------------------------------------------------- device_function_kernel

_PROTOTYPE = re.compile(r"^\s*(?P<ret>[^()]*?)\s*\b(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^()]*)\)\s*;?\s*$", re.S)
_PARAMETER = re.compile(r"^(?P<type>.*?)(?P<name>[A-Za-z_]\w*)\s*$", re.S)
_QUALIFIERS = re.compile(
    r"\b(?:const|volatile|__restrict__|restrict|__device__|__host__|inline|static|__forceinline__)\b"
)


def _plain(ctype: str) -> str:
    return " ".join(_QUALIFIERS.sub(" ", ctype).split())


def _scalar_type_ok(ctype: str) -> bool:
    from .cuda import parse_cuda_signature

    try:
        (param,) = parse_cuda_signature(f'extern "C" __global__ void probe({ctype} v) {{}}', "probe")
    except ValueError:
        return False
    return not param.pointer and param.struct is None and not param.view_ndim and param.dtype is not None


def device_function_kernel(
    header_source: str,
    signature: str,
    *,
    name: str | None = None,
    includes: Iterable[str] = (),
    n_threads_param: str = "n",
    out_param: str = "out",
    structs: Iterable[CudaStruct] = (),
    **cuda_kernel_options: Any,
) -> CudaKernel:
    """Wrap a ``__device__`` function in a kernel that calls it once per thread, for testing it.

    The generated ``extern "C" __global__ void <fn>_kernel(...)`` passes pointer and struct
    parameters unchanged (shared by all threads), turns each scalar parameter into a
    per-thread ``const T*`` array (thread ``i`` uses ``x[i]``), writes the return value to
    ``R* out`` and takes the element count ``int n`` (threads ``i >= n`` return); a ``void``
    function has no ``out``.

    Parameters
    ----------
    header_source : str
        The source that defines the function.
    signature : str
        The function's prototype, such as ``"double f(const double* t, int p, double x)"``.
    name : str, optional
        The kernel's name (default ``<fn>_kernel``).
    includes : sequence of str, optional
        Headers placed before ``header_source`` (quoted unless written as ``<...>``).
    n_threads_param : str, optional
        The name of the count parameter (default ``"n"``).
    out_param : str, optional
        The name of the output parameter (default ``"out"``).
    structs : sequence of cunumpy.arguments.CudaStruct, optional
        Struct types of struct parameters (by value or ``const S&``).
    **cuda_kernel_options
        Further keywords of :class:`~cunumpy.kernels.CudaKernel`.

    Returns
    -------
    cunumpy.kernels.CudaKernel
        The wrapping kernel: ``k(t, p_values, x_values, out, n)``.

    Raises
    ------
    TypeError
        ``header_source`` or ``signature`` is not a str.
    ValueError
        The prototype cannot be parsed, returns a pointer, reference or struct, has a
        parameter of an unsupported type or a non-struct parameter by reference, or a
        parameter named like ``out_param`` or ``n_threads_param``.
    """
    from .kernels import CudaKernel

    if not isinstance(header_source, str):
        raise TypeError(f"device_function_kernel(): 'header_source' must be a str, not {type(header_source).__name__}")
    if not isinstance(signature, str):
        raise TypeError(f"device_function_kernel(): 'signature' must be a str, not {type(signature).__name__}")
    if isinstance(includes, str):
        includes = (includes,)
    match = _PROTOTYPE.match(signature)
    if match is None:
        raise ValueError(f"device_function_kernel(): cannot parse the prototype {signature!r}")
    function = match["name"]
    returns = _plain(match["ret"])
    struct_names = {getattr(s, "name", None) for s in structs}
    if not returns:
        raise ValueError(f"device_function_kernel(): the prototype {signature!r} has no return type")
    if "*" in returns or "&" in returns:
        raise ValueError(
            f"device_function_kernel(): {function} returns a pointer or reference ({returns}); return a value"
        )
    if returns in struct_names:
        raise ValueError(f"device_function_kernel(): {function} returns the struct {returns}; return a scalar")
    if returns != "void" and not _scalar_type_ok(returns):
        raise ValueError(f"device_function_kernel(): unsupported return type {returns!r} of {function}")
    kernel_params, call_args = [], []
    text = match["params"].strip()
    pieces = [] if text in ("", "void") else [p.strip() for p in text.split(",")]
    for piece in pieces:
        m = _PARAMETER.match(piece)
        if m is None or not m["type"].strip():
            raise ValueError(f"device_function_kernel(): cannot parse the parameter {piece!r} of {signature!r}")
        pname, ptype = m["name"], m["type"].strip()
        if pname in (out_param, n_threads_param):
            raise ValueError(
                f"device_function_kernel(): parameter {pname!r} of {function} clashes with the generated "
                f"'{out_param}'/'{n_threads_param}' parameters; pass out_param=/n_threads_param="
            )
        base = _plain(ptype.replace("&", " ").replace("*", " "))
        if "*" in ptype:
            kernel_params.append(f"{ptype} {pname}")
            call_args.append(pname)
        elif base in struct_names:
            kernel_params.append(f"{base} {pname}")
            call_args.append(pname)
        elif "&" in ptype:
            raise ValueError(
                f"device_function_kernel(): parameter {pname!r} ({ptype}) is a reference to a non-struct "
                "type; only structs listed in structs= may be passed by reference"
            )
        elif _scalar_type_ok(base):
            kernel_params.append(f"const {base}* {pname}")
            call_args.append(f"{pname}[i]")
        else:
            raise ValueError(f"device_function_kernel(): unsupported type {ptype!r} of parameter {pname!r}")
    if returns != "void":
        kernel_params.append(f"{returns}* {out_param}")
    kernel_params.append(f"int {n_threads_param}")
    lines = []
    for inc in includes:
        inc = str(inc).strip()
        lines.append(f"#include {inc}" if inc.startswith("<") else f'#include "{inc}"')
    call = f"{function}({', '.join(call_args)})"
    body = f"{out_param}[i] = {call};" if returns != "void" else f"{call};"
    kernel_name = name or f"{function}_kernel"
    source = "\n".join(
        [
            *lines,
            header_source,
            "",
            f'extern "C" __global__ void {kernel_name}({", ".join(kernel_params)})',
            "{",
            "    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;",
            f"    if (i >= {n_threads_param}) return;",
            f"    {body}",
            "}",
            "",
        ]
    )
    return CudaKernel(source, kernel_name, structs=structs, **cuda_kernel_options)
