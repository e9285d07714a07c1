"""Build the emulation libraries of many kernels ahead of their first launch, in parallel.

Used by ``python -m cunumpy emulation build PATH...`` and ``KernelCatalog.build_emulation``.
Each kernel is built by :func:`._launch.library_for`, the function a launch uses, with the
settings a launch uses (the default compiler and options, the checks mode of the
environment or of ``sanitize``): the libraries land in the emulation cache under the keys the
launches look up. The compiler runs as a subprocess, so a pool of threads builds on every core.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import dataclasses
import os
import time
import typing
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..kernels._cuda_kernel import CudaKernel
from . import _build
from ._launch import _environment_memcheck, _environment_sanitize, check_sanitize, checks_mode, library_for

__all__ = ["EmulationBuild", "build_kernels", "build_or_raise", "find_kernels"]

_FOLDER_SUFFIX = "_cuda.cu"


@dataclasses.dataclass(frozen=True)
class EmulationBuild:
    """The outcome of building one kernel's emulation library.

    Attributes
    ----------
    name : str
        The kernel's name.
    source : str
        The file holding its CUDA source (or another label of where it came from).
    status : str
        ``"built"`` (compiled now), ``"cached"`` (found in the emulation cache),
        ``"failed"`` (``error`` says why) or ``"skipped"`` (a template kernel: it needs
        ``template_args`` to be built).
    seconds : float
        The wall time spent on it.
    error : str or None
        The error (with the compiler's output) when it failed, the reason when skipped.
    library : str or None
        The path of the shared library when built or cached.
    """

    name: str
    source: str
    status: str
    seconds: float
    error: str | None = None
    library: str | None = None

    def as_dict(self) -> dict:
        """The fields as a dict (for JSON)."""
        return dataclasses.asdict(self)


def _package_root(folder: Path) -> Path:
    """The directory above the top package holding ``folder`` (kernel_from_folder adds it to
    the include directories of a kernel folder, as ``_source_root`` does)."""
    top = folder
    while (top.parent / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    return top.parent


def _folder_kernel(folder: Path) -> CudaKernel:
    """The CUDA kernel of kernel folder ``folder``, read as ``Kernel.from_folder`` reads it
    (same include directories, hence the same cache key), without importing its host modules."""
    name = folder.name
    return CudaKernel.from_file(
        folder / f"{name}{_FOLDER_SUFFIX}",
        name,
        suffix=_FOLDER_SUFFIX,
        include_dirs=(str(folder), str(_package_root(folder))),
    )


def _is_kernel_folder(folder: Path) -> bool:
    return (folder / f"{folder.name}{_FOLDER_SUFFIX}").is_file()


Found = tuple[str, str, Callable[[], object]]  # (name, source label, loader of a CudaKernel or a list)


def _file_loader(path: Path) -> Callable[[], list]:
    return lambda: list(CudaKernel.all_from_file(path).values())


def _folder_loader(folder: Path) -> Callable[[], CudaKernel]:
    return lambda: _folder_kernel(folder)


def find_kernels(paths: Sequence[str | os.PathLike[str]]) -> list[Found]:
    """What to build for ``paths``: ``(label, source, loader)`` per kernel folder and per
    ``.cu``/``.cuh`` file. A directory is searched recursively: a folder ``<name>/`` holding
    ``<name>_cuda.cu`` is a kernel folder (its one kernel), any other ``.cu`` file gives every
    ``__global__`` function it defines; ``.cuh`` files count only when named. FileNotFoundError
    naming a path that does not exist; ValueError naming a file that is not CUDA source."""
    found: list[Found] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
                here = Path(root).resolve()
                folder_source = f"{here.name}{_FOLDER_SUFFIX}"
                if folder_source in files:
                    found.append((here.name, str(here / folder_source), _folder_loader(here)))
                for name in sorted(files):
                    if name.endswith(".cu") and name != folder_source:
                        file = here / name
                        found.append((name, str(file), _file_loader(file)))
        elif path.is_file():
            file = path.resolve()
            if file.suffix not in (".cu", ".cuh"):
                raise ValueError(f"{raw}: not CUDA source (a .cu or .cuh file, or a directory)")
            if file.name.endswith(_FOLDER_SUFFIX) and _is_kernel_folder(file.parent):
                found.append((file.parent.name, str(file), _folder_loader(file.parent)))
            else:
                found.append((file.name, str(file), _file_loader(file)))
        else:
            raise FileNotFoundError(f"{raw}: no such file or directory")
    return found


def _check_jobs(jobs, what: str) -> int:
    if jobs is None:
        return os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int):
        raise TypeError(f"{what}: 'jobs' must be an int >= 1 or None, not {jobs!r}")
    if jobs < 1:
        raise ValueError(f"{what}: 'jobs' must be >= 1, got {jobs}")
    return jobs


def _build_one(kernel: CudaKernel, source: str, checks: int) -> EmulationBuild:
    start = time.perf_counter()
    if kernel.signature is None:
        return EmulationBuild(
            kernel.name, source, "skipped", 0.0, "a template kernel: build it with template_args (an instantiation)"
        )
    before = _build.thread_build_count()
    try:
        lib = library_for(kernel, None, (), checks=checks)
    except Exception as exc:  # noqa: BLE001 - each kernel's error is reported with its name
        return EmulationBuild(kernel.name, source, "failed", time.perf_counter() - start, str(exc))
    status = "built" if _build.thread_build_count() > before else "cached"
    return EmulationBuild(kernel.name, source, status, time.perf_counter() - start, None, str(lib.path))


def build_kernels(
    items: Iterable[tuple[str, str, object]],
    *,
    jobs: int | None = None,
    sanitize: str | Iterable[str] = (),
    on_result: Callable[[EmulationBuild], None] | None = None,
    what: str = "build_emulation()",
) -> list[EmulationBuild]:
    """Build every kernel of ``items`` (``(name, source, kernel_or_loader)``; a loader returns
    a CudaKernel or a list of them) on ``jobs`` threads (None: the CPU count), in the checks
    mode of a launch with ``sanitize`` (plus CUNUMPY_EMULATION_SANITIZE and
    CUNUMPY_EMULATION_MEMCHECK); ``on_result`` is called with each outcome as it comes
    (in the calling thread). Returns the outcomes in the order of ``items``."""
    jobs = _check_jobs(jobs, what)
    names = check_sanitize(sanitize, what)
    checks = checks_mode(names | _environment_sanitize(), _environment_memcheck())
    # One group per item: the kernels of one .cu file share one library (every __global__
    # function of a source is an entry of it), so they are built one after the other in one
    # task (the first builds, the others find it) instead of holding threads waiting for it.
    groups: list[tuple[str, list[tuple[int, CudaKernel]]]] = []
    results: list[EmulationBuild | None] = []
    failed_early: list[tuple[int, EmulationBuild]] = []
    for name, source, thing in items:
        try:
            loaded = thing() if callable(thing) and not isinstance(thing, CudaKernel) else thing
        except Exception as exc:  # noqa: BLE001 - a source that cannot be read is that kernel's failure
            results.append(None)
            error = f"{type(exc).__name__}: {exc}"
            failed_early.append((len(results) - 1, EmulationBuild(name, source, "failed", 0.0, error)))
            continue
        group: list[tuple[int, CudaKernel]] = []
        for kernel in loaded if isinstance(loaded, list) else [loaded]:
            results.append(None)
            group.append((len(results) - 1, typing.cast(CudaKernel, kernel)))
        if group:
            groups.append((source, group))

    def report(index: int, result: EmulationBuild) -> None:
        results[index] = result
        if on_result is not None:
            on_result(result)

    for index, result in failed_early:
        report(index, result)

    def run_group(source: str, group: list[tuple[int, CudaKernel]]) -> list[tuple[int, EmulationBuild]]:
        return [(index, _build_one(kernel, source, checks)) for index, kernel in group]

    if groups:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(jobs, len(groups))) as pool:
            futures = [
                pool.submit(contextvars.copy_context().run, run_group, source, group) for source, group in groups
            ]
            for future in concurrent.futures.as_completed(futures):
                for index, result in future.result():
                    report(index, result)
    return [r for r in results if r is not None]


def build_or_raise(
    items: Sequence[tuple[str, str, object]], *, jobs: int | None, sanitize: str | Iterable[str], what: str
) -> list[EmulationBuild]:
    """:func:`build_kernels`, raising a RuntimeError (after building the others) that names
    every kernel that failed, with its error; RuntimeError without a C++ compiler."""
    if items and _build.emulation_compiler() is None:
        raise RuntimeError(f"{what}: the CPU emulation needs a C++ compiler: none found (set CXX or install c++)")
    results = build_kernels(items, jobs=jobs, sanitize=sanitize, what=what)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        details = "\n".join(f"kernel {r.name!r} ({r.source}): {r.error}" for r in failed)
        raise RuntimeError(f"{what}: {len(failed)} of {len(results)} kernel(s) failed to build:\n{details}")
    return results
