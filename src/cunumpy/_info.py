"""What ``python -m cunumpy info`` reports: versions, the C core, CUDA, the active backend,
and whether CUDA kernels can run in the CPU emulation (compiler, cache, workers).

Everything here is read without importing the optional packages: their versions come from
the installed distributions' metadata, CuPy is asked only through ``backend_info()`` (the
same probe ``set_backend("cupy")`` uses), and the CUDA toolkit is found on disk. Each
inspection that fails is reported as a value, never raised: the output is meant to be
pasted into a bug report from a machine where something is already wrong.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from typing import Any

__all__ = ["OPTIONAL_PACKAGES", "collect", "format_text"]

#: Distributions reported besides cunumpy, as (label, distribution names tried in order).
OPTIONAL_PACKAGES = (
    ("numpy", ("numpy",)),
    ("array-api-compat", ("array-api-compat", "array_api_compat")),
    ("maybempi", ("maybempi",)),
    ("cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy")),
    ("mpi4py", ("mpi4py",)),
    ("scipy", ("scipy",)),
    ("pyccel", ("pyccel",)),
    ("numba", ("numba",)),
    ("petsc4py", ("petsc4py",)),
)

_NVCC_RELEASE = re.compile(r"release\s+([0-9][0-9.]*)")


def _distribution_version(names) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - broken metadata must not hide the rest of the report
            return None
    return None


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _c_core() -> dict:
    try:
        from . import _native

        path = getattr(_native.core, "__file__", None)
        return {"in_use": bool(_native.HAVE_C_CORE), "module": _native.core.__name__, "path": path}
    except Exception as exc:  # noqa: BLE001 - the report records why the C core is not in use
        return {"in_use": False, "module": None, "path": None, "error": _error(exc)}


def _find_nvcc() -> tuple[str | None, str | None]:
    """(path of nvcc, the CUDA root it was found from) via PATH, then CUDA_HOME/CUDA_PATH."""
    found = shutil.which("nvcc")
    if found:
        return found, "PATH"
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(variable)
        if root:
            candidate = os.path.join(root, "bin", "nvcc")
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate, variable
    return None, None


def _cuda_toolkit() -> dict:
    nvcc, found_via = _find_nvcc()
    toolkit = {
        "nvcc": nvcc,
        "nvcc_found_via": found_via,
        "nvcc_version": None,
        "cuda_home": os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or None,
    }
    if nvcc is not None:
        try:
            completed = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=20, check=False)
            match = _NVCC_RELEASE.search(completed.stdout)
            toolkit["nvcc_version"] = match.group(1).rstrip(".") if match else None
            if match is None:
                toolkit["nvcc_error"] = f"unrecognised `nvcc --version` output (exit code {completed.returncode})"
        except Exception as exc:  # noqa: BLE001 - a hung or broken nvcc is something to report
            toolkit["nvcc_error"] = _error(exc)
    return toolkit


def _compiler_version(compiler: str) -> tuple[str | None, str | None]:
    """(first line of ``compiler --version``, error)."""
    try:
        completed = subprocess.run(
            [*shlex.split(compiler), "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except Exception as exc:  # noqa: BLE001 - a hung or broken compiler is something to report
        return None, _error(exc)
    lines = (completed.stdout or completed.stderr).strip().splitlines()
    if completed.returncode != 0 or not lines:
        return None, f"`{compiler} --version` exited with code {completed.returncode}"
    return lines[0].strip(), None


def _directory_size(path) -> tuple[int, int]:
    """(bytes, libraries) under ``path``: every file counts, ``*.so`` files are the libraries."""
    size = libraries = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                size += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
            libraries += name.endswith(".so")
    return size, libraries


def _emulation() -> dict:
    """The CPU emulation of CUDA kernels: compiler, automatic use on the fake CuPy, cache, workers."""
    try:
        from ._emulation import _launch
        from ._emulation._build import emulation_cache_dir, emulation_compiler
    except Exception as exc:  # noqa: BLE001 - the report records why the emulation cannot be inspected
        return {"error": _error(exc)}
    report: dict = {"compiler": None, "compiler_version": None}
    try:
        compiler = emulation_compiler()
    except Exception as exc:  # noqa: BLE001 - the report records the failure and goes on
        compiler = None
        report["compiler_error"] = _error(exc)
    if compiler is not None:
        report["compiler"] = compiler
        report["compiler_version"], error = _compiler_version(compiler)
        if error:
            report["compiler_error"] = error
    elif "compiler_error" not in report:
        report["compiler_error"] = f"no C++ compiler: {_launch.compiler_looked_for()}"
    try:
        usable, detail = _launch.automatic_emulation_status()
        report["automatic"] = usable
        report["automatic_off_reason"] = None if usable else detail
    except Exception as exc:  # noqa: BLE001 - the report records the failure and goes on
        report["automatic"] = False
        report["automatic_off_reason"] = _error(exc)
    cache: dict[str, Any] = {"path": None, "exists": False, "size_bytes": 0, "libraries": 0}
    try:
        directory = emulation_cache_dir()
        cache["path"] = str(directory)
        cache["exists"] = directory.is_dir()
        if cache["exists"]:
            cache["size_bytes"], cache["libraries"] = _directory_size(directory)
    except Exception as exc:  # noqa: BLE001 - the report records the failure and goes on
        cache["error"] = _error(exc)
    report["cache"] = cache
    try:
        report["workers"] = _launch.emulation_workers()
        report["workers_from"] = (
            "CUNUMPY_EMULATION_THREADS" if os.environ.get("CUNUMPY_EMULATION_THREADS", "").strip() else "xp.threads"
        )
    except Exception as exc:  # noqa: BLE001 - the report records the failure and goes on
        report["workers"] = None
        report["workers_error"] = _error(exc)
    return report


def collect() -> dict:
    """The report as a JSON-serialisable dict (see ``python -m cunumpy info --json``)."""
    from . import _backend

    info: dict = {
        "cunumpy": _backend.installed_version(),
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "platform": {
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "description": platform.platform(),
        },
        "packages": {label: _distribution_version(names) for label, names in OPTIONAL_PACKAGES},
        "c_core": _c_core(),
    }
    backend = _backend.backend_info()  # never raises, never imports MPI
    info["backend"] = {
        "active": backend.get("backend"),
        "cupy_available": backend.get("cupy_available"),
        "cupy_unavailable_reason": backend.get("cuda_unavailable_reason"),
        "fake_cupy": backend.get("fake_cupy"),
        "min_cupy_version": backend.get("min_cupy_version"),
        "imported_cupy_version": (backend.get("versions") or {}).get("cupy"),
    }
    cuda = {"toolkit": _cuda_toolkit(), "cuda_visible_devices": backend.get("cuda_visible_devices")}
    cuda["device"] = backend.get("device")
    if "cuda_inspection_error" in backend:
        cuda["inspection_error"] = backend["cuda_inspection_error"]
    try:
        from .cuda import device_count

        cuda["device_count"] = int(device_count())
    except Exception as exc:  # noqa: BLE001 - the report records the driver's failure and goes on
        cuda["device_count"] = 0
        cuda["device_count_error"] = _error(exc)
    info["cuda"] = cuda
    info["emulation"] = _emulation()
    info["environment"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("CUNUMPY_")}
    return info


def _size_text(size: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)  # pragma: no cover


def _value(value) -> str:
    return "not installed" if value is None else str(value)


def format_text(info: dict) -> str:
    """The report as aligned ``name: value`` lines in sections."""
    lines = [f"cunumpy {info['cunumpy']}"]

    def section(title: str, rows) -> None:
        lines.append("")
        lines.append(title)
        rows = list(rows)
        width = max((len(name) for name, _ in rows), default=0)
        lines.extend(f"  {name + ':':<{width + 1}} {value}" for name, value in rows)

    python, system = info["python"], info["platform"]
    section(
        "system",
        [
            ("python", f"{python['version']} ({python['implementation']}) {python['executable']}"),
            ("platform", system["description"]),
        ],
    )
    section("packages", [(name, _value(version)) for name, version in info["packages"].items()])

    core = info["c_core"]
    if core["in_use"]:
        core_text = f"C extension ({core['path']})"
    else:
        core_text = "pure-Python fallback (cunumpy._reference): the C extension did not import"
        if core.get("error"):
            core_text += f" ({core['error']})"
    section("C core", [("in use", core_text)])

    backend = info["backend"]
    if backend["cupy_available"]:
        cupy_text = "available" + (" (the fake CuPy: CUNUMPY_FAKE_CUPY)" if backend["fake_cupy"] else "")
    else:
        cupy_text = f"unavailable: {backend['cupy_unavailable_reason']}"
    section(
        "backend",
        [
            ("active", backend["active"]),
            ("CuPy", cupy_text),
            ("minimum CuPy", backend["min_cupy_version"]),
        ],
    )

    cuda, toolkit = info["cuda"], info["cuda"]["toolkit"]
    if toolkit["nvcc"]:
        nvcc_text = f"{toolkit['nvcc']} (release {toolkit['nvcc_version'] or 'unknown'})"
        if toolkit.get("nvcc_error"):
            nvcc_text += f" [{toolkit['nvcc_error']}]"
    else:
        nvcc_text = "not found (neither on PATH nor under CUDA_HOME/CUDA_PATH)"
    rows = [
        ("nvcc", nvcc_text),
        ("CUDA_HOME", _value(toolkit["cuda_home"]).replace("not installed", "not set")),
        ("CUDA_VISIBLE_DEVICES", "not set" if cuda["cuda_visible_devices"] is None else cuda["cuda_visible_devices"]),
        ("devices", str(cuda["device_count"])),
    ]
    device = cuda.get("device")
    if device:
        rows.append(
            (
                "current device",
                f"{device['id']}: {device['name']} (compute capability {device['compute_capability']}, "
                f"driver {device['driver_version']}, runtime {device['runtime_version']})",
            )
        )
    for key in ("inspection_error", "device_count_error"):
        if cuda.get(key):
            rows.append((key.replace("_", " "), cuda[key]))
    section("CUDA", rows)

    emulation = info["emulation"]
    if "error" in emulation:
        section("CUDA emulation", [("unavailable", emulation["error"])])
    else:
        if emulation["compiler"]:
            compiler_text = f"{emulation['compiler']} ({emulation['compiler_version'] or 'version unknown'})"
            if emulation.get("compiler_error"):
                compiler_text += f" [{emulation['compiler_error']}]"
        else:
            compiler_text = f"not found: {emulation['compiler_error']}"
        automatic = "on" if emulation["automatic"] else f"off: {emulation['automatic_off_reason']}"
        cache = emulation["cache"]
        if cache.get("error"):
            cache_text = f"{cache['path']} [{cache['error']}]"
        elif cache["exists"]:
            cache_text = f"{cache['path']} ({cache['libraries']} libraries, {_size_text(cache['size_bytes'])})"
        else:
            cache_text = f"{cache['path']} (not created yet)"
        if emulation["workers"] is None:
            workers_text = emulation["workers_error"]
        else:
            workers_text = f"{emulation['workers']} (from {emulation['workers_from']})"
        section(
            "CUDA emulation",
            [
                ("C++ compiler", compiler_text),
                ("on the fake CuPy", f"launches emulate by themselves: {automatic}"),
                ("cache", cache_text),
                ("workers", workers_text),
            ],
        )

    environment = info["environment"]
    section("environment", list(environment.items()) or [("CUNUMPY_*", "none set")])
    return "\n".join(lines)
