"""Test helpers: fake-CuPy control (API.md section 13.5) and pytest markers (section 13.1).

Not imported by ``import cunumpy``. Importing this module imports neither pytest nor
CuPy and leaves ``xp.testing`` alone; the pytest objects (``BACKENDS``, ``backend``,
``requires_cupy``, ``requires_device_backend`` and the HIP-gap markers) are created on first
access. Their rules (the table in LLM_GUIDE.md): the ``cupy`` case of ``backend`` and
``requires_device_backend`` run on a GPU or on the fake CuPy (whose launches emulate by
themselves), ``requires_cupy`` only on a real GPU, the HIP-gap markers where CUDA kernels can
launch and not on HIP; ``CUNUMPY_REQUIRE_CUDA`` turns the skips into errors. While
cunumpy's pytest plugin is active, ``requires_device_backend`` is the plugin's marker, which
also activates the CuPy backend for the test.

Host/CUDA parity checks (``assert_kernels_agree``, ``parity_cases``, ``check_parity``) and
``device_function_kernel`` (sections 13.2 to 13.4) live in ``cunumpy._parity``; without a GPU
they launch through the CPU emulation (``emulated_launches``) when it is available.

The CPU emulation of CUDA kernels (API.md section 15: ``emulate_cuda_kernel``,
``emulated_launches``, ``compile_for_emulation``, ``emulation_compiler``,
``emulation_cache_dir``) is implemented in ``cunumpy._emulation`` and re-exported here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping

# --- CPU emulation (API.md section 15) --------------------------------------------------
from ._emulation import (
    CudaPortabilityWarning as CudaPortabilityWarning,
    EmulationError as EmulationError,
    EmulationTimeoutError as EmulationTimeoutError,
    EmulationUnavailable as EmulationUnavailable,
    InitcheckError as InitcheckError,
    KernelAnalysis as KernelAnalysis,
    KernelFaultError as KernelFaultError,
    MemcheckError as MemcheckError,
    RacecheckError as RacecheckError,
    analyze_kernel as analyze_kernel,
    analyzed_launches as analyzed_launches,
    compile_for_emulation as compile_for_emulation,
    emulate_cuda_kernel as emulate_cuda_kernel,
    emulated_launches as emulated_launches,
    emulation_cache_dir as emulation_cache_dir,
    emulation_compiler as emulation_compiler,
)
from ._fake_cupy import fake_cupy_active, host_buffer, install_fake_cupy
from ._parity import (
    TEST_ARGS_SETTINGS,
    assert_kernels_agree,
    check_parity,
    device_function_kernel,
    parity_cases,
)
from ._test_requirements import (
    _REQUIRE_VARIABLE,
    _device_backend_missing_reason,
    _kernel_launch_missing_reason,
    _pytest as _pytest,
    _real_cupy_missing_reason,
    cuda_required,
    device_backend_available,
)

_EMULATION_NAMES = [
    "CudaPortabilityWarning",
    "EmulationError",
    "EmulationTimeoutError",
    "EmulationUnavailable",
    "InitcheckError",
    "KernelAnalysis",
    "KernelFaultError",
    "MemcheckError",
    "RacecheckError",
    "analyze_kernel",
    "analyzed_launches",
    "compile_for_emulation",
    "emulate_cuda_kernel",
    "emulated_launches",
    "emulation_cache_dir",
    "emulation_compiler",
]
# --- end of CPU emulation ----------------------------------------------------------------

__all__ = [
    "BACKENDS",  # noqa: F822 - created on first access by the module __getattr__
    "MPI_LAUNCHER_PREFIXES",
    "backend",  # noqa: F822 - created on first access by the module __getattr__
    "cuda_required",
    "device_backend_available",
    "fake_cupy_active",
    "fake_cupy_session",
    "host_buffer",
    "install_fake_cupy",
    "requires_cupy",  # noqa: F822 - created on first access by the module __getattr__
    "requires_device_backend",  # noqa: F822 - created on first access by the module __getattr__
    "run_in_fake_cupy_subprocess",
    *_EMULATION_NAMES,
]
# Parity checks, device-function kernels and the HIP-gap markers (API.md 13.1 to 13.4).
__all__ += [
    "TEST_ARGS_SETTINGS",
    "assert_kernels_agree",
    "bounds_check_views_available",
    "check_parity",
    "device_function_kernel",
    "high_dim_cuda_views_available",
    "parity_cases",
    "requires_bounds_check_views",  # noqa: F822 - created on first access by the module __getattr__
    "requires_high_dim_cuda_views",  # noqa: F822 - created on first access by the module __getattr__
    "requires_warp_shuffle",  # noqa: F822 - created on first access by the module __getattr__
    "warp_shuffle_available",
]

#: Environment-variable prefixes (and names) set by MPI launchers; removed from the
#: environment of :func:`run_in_fake_cupy_subprocess` children so they run serially.
MPI_LAUNCHER_PREFIXES = (
    "OMPI_",
    "PMIX_",
    "PMI_",
    "HYDRA_",
    "MPIR_",
    "I_MPI_",
    "SLURM_",
    "MV2_",
    "MPI_LOCALRANKID",
    "ALPS_APP_PE",
    "PALS_",
)

# World-rank variables of common launchers (read without importing mpi4py).
_WORLD_RANK_VARIABLES = (
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "MV2_COMM_WORLD_RANK",
    "SLURM_PROCID",
    "PALS_RANKID",
    "ALPS_APP_PE",
)


# --------------------------------------------------------------------------- availability


def _missing(marker: str) -> tuple[str, str | None, bool]:
    """(what ``marker`` needs, why it is missing or None, whether CUNUMPY_REQUIRE_CUDA turns
    the skip into an error): the rules of the markers, shared with the pytest plugin."""
    if marker == "requires_cupy":
        return "a functional CuPy", _real_cupy_missing_reason(), True
    if marker == "requires_device_backend":
        return "a device backend", _device_backend_missing_reason(), True
    available, what = _HIP_GAPS[marker]
    reason = _kernel_launch_missing_reason()
    if reason is not None:
        return "a device backend", reason, True
    if not available():
        return what, f"{what} is not supported on HIP/ROCm", False
    return what, None, False


def _requirement_failed(what: str, reason: str) -> bool:
    """Raised from a skip condition at test setup when CUNUMPY_REQUIRE_CUDA is set."""
    raise RuntimeError(f"{_REQUIRE_VARIABLE} is set, but {what} is unavailable: {reason}")


def _requirement_mark(what: str, reason: str | None, required: bool = True):
    pytest = _pytest()
    if reason is None:
        return pytest.mark.skipif(False, reason=f"{what} is available")
    if required and cuda_required():
        # A string condition is evaluated at test setup; raising there makes the test error.
        condition = f"__import__('cunumpy.kernel_testing', fromlist=['_'])._requirement_failed({what!r}, {reason!r})"
        return pytest.mark.skipif(condition, reason=reason)
    return pytest.mark.skipif(True, reason=reason)


def _marker_mark(marker: str):
    return _requirement_mark(*_missing(marker))


def _plugin_active() -> bool:
    """True while cunumpy's pytest plugin is configured in a pytest run of this process."""
    plugin = sys.modules.get("cunumpy_pytest_plugin")
    return getattr(plugin, "_configured", 0) > 0


def _numpy_active() -> bool:
    from . import _backend

    return _backend.get_backend() != "cupy"


def _make_requires_cupy():
    return _marker_mark("requires_cupy")


def _make_requires_device_backend():
    # The condition is a bool, as in earlier releases (code reads ``mark.args[0]``; a string
    # condition is true to anything but pytest's own evaluation). Only the error of
    # CUNUMPY_REQUIRE_CUDA stays a string: it must be raised when the test is set up.
    pytest = _pytest()
    reason = _device_backend_missing_reason()
    if _plugin_active():
        # The plugin skips (or errors) by the same rule and activates the CuPy backend; the
        # condition says whether it will skip.
        return pytest.mark.requires_device_backend(
            reason is not None, reason=reason or "requires_device_backend: a device backend is available"
        )
    if reason is not None:
        return _marker_mark("requires_device_backend")
    # Without the plugin nothing activates the device backend: the test must find it active
    # (checked when the marker is made, at collection).
    return pytest.mark.skipif(
        _numpy_active(),
        reason="requires_device_backend: the NumPy backend is active (set CUNUMPY_BACKEND=cupy, or enable "
        "cunumpy's pytest plugin, which activates the CuPy backend for such tests)",
    )


def _device_case_mark():
    """The mark of the ``cupy`` case of ``BACKENDS``: it runs on a GPU or on the fake CuPy."""
    pytest = _pytest()
    if _plugin_active():
        return pytest.mark.requires_device_backend
    return _marker_mark("requires_device_backend")


def _make_backends():
    pytest = _pytest()
    return ["numpy", pytest.param("cupy", marks=_device_case_mark())]


def _make_backend_fixture():
    pytest = _pytest()

    @pytest.fixture(name="backend", params=_lazy("BACKENDS"))
    def backend(request):
        """Run the test once per backend of ``BACKENDS`` and yield the backend's name.

        ``numpy`` runs on NumPy; ``cupy`` on a GPU or on the fake CuPy (kernels emulated).
        The backend is active for the test (strictly when ``CUNUMPY_REQUIRE_CUDA`` is set).

        Parameters
        ----------
        request : pytest.FixtureRequest
            pytest's request; its ``param`` is the backend.

        Yields
        ------
        str
            ``"numpy"`` or ``"cupy"``.
        """
        from ._backend import use_backend

        with use_backend(request.param, strict=cuda_required()):
            yield request.param

    return backend


def _on_hip() -> bool:
    from . import cuda

    try:
        return bool(cuda.is_hip())
    except Exception:  # noqa: BLE001 - any driver failure means not HIP
        return False


def warp_shuffle_available() -> bool:
    """Tell whether warp shuffles compile: False on a HIP/ROCm CuPy (``reduce.cuh``, ``scan.cuh``).

    Returns
    -------
    bool
        True except on HIP.
    """
    return not _on_hip()


def high_dim_cuda_views_available() -> bool:
    """Tell whether array views of 5 or more dimensions compile: False on a HIP/ROCm CuPy.

    Returns
    -------
    bool
        True except on HIP.
    """
    return not _on_hip()


def bounds_check_views_available() -> bool:
    """Tell whether ``array_view.cuh`` compiles with ``CUNUMPY_BOUNDS_CHECK``: False on a HIP/ROCm CuPy.

    Returns
    -------
    bool
        True except on HIP.
    """
    return not _on_hip()


_HIP_GAPS = {
    "requires_warp_shuffle": (warp_shuffle_available, "warp shuffles (reduce.cuh, scan.cuh)"),
    "requires_high_dim_cuda_views": (high_dim_cuda_views_available, "array views of 5 or more dimensions"),
    "requires_bounds_check_views": (bounds_check_views_available, "array_view.cuh with CUNUMPY_BOUNDS_CHECK"),
}

_LAZY_FACTORIES = {
    "requires_warp_shuffle": lambda: _marker_mark("requires_warp_shuffle"),
    "requires_high_dim_cuda_views": lambda: _marker_mark("requires_high_dim_cuda_views"),
    "requires_bounds_check_views": lambda: _marker_mark("requires_bounds_check_views"),
    "requires_cupy": _make_requires_cupy,
    "requires_device_backend": _make_requires_device_backend,
    "BACKENDS": _make_backends,
    "backend": _make_backend_fixture,
}


def _lazy(name):
    value = globals().get(name)
    if value is None:
        value = _LAZY_FACTORIES[name]()
        globals()[name] = value
    return value


def __getattr__(name):
    if name in _LAZY_FACTORIES:
        return _lazy(name)
    raise AttributeError(f"module 'cunumpy.kernel_testing' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


# --------------------------------------------------------------------------- fake CuPy control


@contextlib.contextmanager
def fake_cupy_session(*, compiler: str | None = None, options: Iterable[str] = ()) -> Iterator[None]:
    """Run a block on the fake CuPy with every CUDA launch emulated on the CPU.

    Activates the CuPy backend strictly and enters :func:`emulated_launches` for the block;
    restores both after.

    Parameters
    ----------
    compiler : str, optional
        The C++ compiler of the emulation.
    options : sequence of str, optional
        Extra compiler options of the emulation.

    Yields
    ------
    None

    Raises
    ------
    RuntimeError
        The fake CuPy is not installed (set ``CUNUMPY_FAKE_CUPY=1`` before importing cunumpy).
    """
    if not fake_cupy_active():
        raise RuntimeError(
            "fake_cupy_session() needs the fake CuPy: set CUNUMPY_FAKE_CUPY=1 before importing "
            "cunumpy (or call install_fake_cupy() before any backend use)"
        )
    from ._backend import use_backend

    with use_backend("cupy", strict=True), emulated_launches(compiler=compiler, options=options):
        yield


def _world_rank() -> int:
    for variable in _WORLD_RANK_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def _child_environment(env) -> dict:
    child = {k: v for k, v in os.environ.items() if not any(k.startswith(prefix) for prefix in MPI_LAUNCHER_PREFIXES)}
    child.update(CUNUMPY_FAKE_CUPY="1", OMP_NUM_THREADS="1", MAYBEMPI="0")
    if env:
        child.update({str(k): str(v) for k, v in env.items()})
    return child


def _exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def run_in_fake_cupy_subprocess(
    code: str, *, env: Mapping[str, str] | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """Run Python code in a fresh serial interpreter on the fake CuPy, for a test.

    The child runs ``python -X faulthandler -c code`` with ``CUNUMPY_FAKE_CUPY=1``,
    ``OMP_NUM_THREADS=1``, ``MAYBEMPI=0``, without MPI launcher variables
    (``MPI_LAUNCHER_PREFIXES``), then ``env``. Under MPI only rank 0 runs it (the other ranks
    skip the test).

    Parameters
    ----------
    code : str
        The program.
    env : mapping, optional
        Extra environment variables.
    timeout : float, optional
        Seconds before the child is stopped.

    Returns
    -------
    subprocess.CompletedProcess
        The finished child (its output captured as text).

    Notes
    -----
    A non-zero exit or a timeout fails the test (``pytest.fail``) with the exit code or
    signal and the last 50 lines of output.
    """
    pytest = _pytest()
    if _world_rank() != 0:
        pytest.skip("run_in_fake_cupy_subprocess() runs on MPI rank 0 only")
    command = [sys.executable, "-X", "faulthandler", "-c", code]
    try:
        result = subprocess.run(
            command,
            env=_child_environment(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.output.decode(errors="replace") if isinstance(exc.output, bytes) else (exc.output or "")
        tail = "\n".join(output.splitlines()[-50:])
        pytest.fail(f"fake-CuPy subprocess timed out after {timeout} s; last output:\n{tail}", pytrace=False)
    if result.returncode != 0:
        tail = "\n".join(result.stdout.splitlines()[-50:])
        pytest.fail(
            f"fake-CuPy subprocess {_exit_description(result.returncode)}; last 50 lines of output:\n{tail}",
            pytrace=False,
        )
    return result
