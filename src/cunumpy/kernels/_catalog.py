"""Kernel folders and KernelCatalog (API.md sections 2.6 and 2.7).

A kernel folder ``<name>/`` is an importable package holding ``<name><host_suffix>.py``
(function ``<name>``), optionally ``<name>_numba.py``, ``<name>_numpy.py``,
``<name><cuda_suffix>`` and ``<name><test_args_suffix>.py``. Building a kernel imports the
host module, syntax-checks the other host modules (they are imported when first selected) and
parses the CUDA source; nothing is compiled. Any failure names the file and leaves nothing
half-built.
"""

from __future__ import annotations

import errno
import importlib
import os
import stat
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from . import _cuda_kernel, _cuda_variants
from ._cuda_kernel import CudaKernel
from ._host_impl import CompiledHostKernel, HostImplementations
from ._kernel import Kernel
from ._pyccel_kernel import outputs_from_annotations

__all__ = ["KernelCatalog"]

_FORTRAN_NAME_LIMIT = 63
_PYCCEL_OPTIONS = frozenset({"use_cupy", "object_modules", "is_array", "outputs", "parameters"})


def _import_package(package: str, what: str):
    if not isinstance(package, str) or not package:
        raise TypeError(f"{what}: 'package' must be a dotted package name, not {package!r}")
    try:
        module = importlib.import_module(package)
    except ModuleNotFoundError:
        raise
    if getattr(module, "__path__", None) is None:
        raise ModuleNotFoundError(f"{what}: {package!r} is a module, not a package (a folder with __init__.py)")
    if getattr(module, "__file__", None) is None:
        folder = next(iter(module.__path__)) if list(module.__path__) else package
        raise ModuleNotFoundError(f"{what}: {folder} has no __init__.py (kernel folders must be regular packages)")
    return module


def _syntax_check(path: Path) -> None:
    """Compile the file's source without running it: a SyntaxError names the file."""
    try:
        source = path.read_text(encoding="utf-8")
        compile(source, str(path), "exec")
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
        raise ImportError(f"kernel host module {path} cannot be compiled: {exc}") from exc


def _import_host_module(dotted: str, path: Path):
    try:
        return importlib.import_module(dotted)
    except Exception as exc:
        raise ImportError(f"importing kernel host module {path} failed: {type(exc).__name__}: {exc}") from exc


def _module_loader(dotted: str, name: str, path: Path):
    def load():
        module = _import_host_module(dotted, path)
        try:
            return getattr(module, name)
        except AttributeError:
            raise AttributeError(f"{path} defines no function {name!r}") from None

    return load


def _has_cuda_source(path: Path, where: str) -> bool:
    """Whether the folder has its CUDA source: False when there is nothing at ``path``; an
    OSError naming the path when what is there cannot be read as a source (a directory, a
    FIFO, a dangling link), which would otherwise pass for a kernel without CUDA. The file
    is not opened here: opening a FIFO blocks."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if not path.is_symlink():
            return False
        raise FileNotFoundError(
            errno.ENOENT, f"{where}: the CUDA source is a dangling symbolic link (to {os.readlink(path)!r})", str(path)
        ) from None
    if stat.S_ISREG(mode):
        return True
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, f"{where}: the CUDA source is a directory, not a file", str(path))
    raise OSError(errno.EINVAL, f"{where}: the CUDA source is not a regular file (a FIFO, socket or device)", str(path))


def _naming_file(exc: Exception, path: Path) -> Exception:
    """``exc`` with ``path`` in its message, of the same type and with the same details.
    (``type(exc)(message)`` fails for exceptions whose constructor takes more than a message:
    UnicodeDecodeError takes five arguments.)"""
    if isinstance(exc, UnicodeDecodeError):
        data = exc.object
        line = bytes(data[: exc.start]).count(b"\n") + 1
        return UnicodeDecodeError(
            exc.encoding,
            data,
            exc.start,
            exc.end,
            f"{exc.reason}: {path} is not valid {exc.encoding.upper()} at byte offset {exc.start} (line {line}); "
            "CUDA sources are read as UTF-8",
        )
    if isinstance(exc, OSError) and exc.filename is not None:
        return exc  # its message names the file already
    if isinstance(exc, OSError) and exc.errno is not None:
        return type(exc)(exc.errno, exc.strerror, str(path))
    try:
        renamed = type(exc)(f"{path}: {exc}")
    except Exception:  # noqa: BLE001 - a constructor that wants more than a message
        return exc
    return renamed if str(renamed) == f"{path}: {exc}" else exc


def _constant(value):
    return lambda: value


def _source_root(package: str) -> Path | None:
    top = sys.modules.get(package.split(".")[0])
    paths = list(getattr(top, "__path__", None) or ())
    return Path(paths[0]).resolve().parent if paths else None


def _resolve_outputs(outputs, function, where):
    if outputs is None:
        return None
    if isinstance(outputs, str):
        if outputs != "annotations":
            raise ValueError(f"{where}: 'outputs' must be names/indices or the string 'annotations', not {outputs!r}")
        return outputs_from_annotations(function)
    return outputs


def kernel_from_folder(
    cls: type[Kernel],
    package: str,
    *,
    host_suffix: str = "_kernels",
    cuda_suffix: str = "_cuda.cu",
    test_args_suffix: str = "_test_args",
    check_name_length: bool = True,
    missing_cuda: str = "raise",
    host_options: Any = None,
    include_dirs: Any = None,
    dispatch: str = "backend",
    compile_host: Any = None,
    extra_implementations: Mapping[str, Any] | None = None,
    outputs: Any = None,
    host_fallback: Callable[..., Any] | None = None,
    **cuda_options: Any,
) -> Kernel:
    """The kernel of the kernel folder ``package`` (a dotted package name, usually
    ``__name__`` in its ``__init__.py``): ``<name><host_suffix>.py`` gives the "pyccel"
    (compiled by ``compile_host(module)`` on first use) and "python" implementations,
    ``<name>_numba.py`` / ``<name>_numpy.py`` further ones, ``<name><cuda_suffix>`` the
    CUDA kernel, ``<name><test_args_suffix>.py`` the test arguments; ``host_fallback``
    (callable) replaces the "numpy" implementation. Compiles nothing."""
    where = f"Kernel.from_folder({package!r})"
    module = _import_package(package, where)
    folder = Path(module.__file__).resolve().parent
    name = package.rpartition(".")[2]
    for suffix, label in (
        (host_suffix, "host_suffix"),
        (cuda_suffix, "cuda_suffix"),
        (test_args_suffix, "test_args_suffix"),
    ):
        if not isinstance(suffix, str):
            raise TypeError(f"{where}: {label!r} must be a str, not {type(suffix).__name__}")
    if compile_host is not None and not callable(compile_host):
        raise TypeError(f"{where}: 'compile_host' must be callable or None")
    if host_fallback is not None and not callable(host_fallback):
        raise TypeError(f"{where}: 'host_fallback' must be callable or None")
    if extra_implementations is not None and not isinstance(extra_implementations, Mapping):
        raise TypeError(f"{where}: 'extra_implementations' must be a mapping of names to loaders")
    if not isinstance(host_options, (Mapping, type(None))):
        raise TypeError(f"{where}: 'host_options' must be a mapping, not {type(host_options).__name__}")
    host_file = folder / f"{name}{host_suffix}.py"
    if not host_file.is_file():
        raise FileNotFoundError(f"{where}: no host module {host_file} (function {name!r})")
    if check_name_length and len(f"bind_c_{name}{host_suffix}") > _FORTRAN_NAME_LIMIT:
        warnings.warn(
            f"kernel folder {folder}: 'bind_c_{name}{host_suffix}' exceeds the {_FORTRAN_NAME_LIMIT}-character "
            "Fortran identifier limit; Pyccel's Fortran output will fail (shorten the kernel name)",
            UserWarning,
            stacklevel=3,
        )
    host_module = _import_host_module(f"{package}.{name}{host_suffix}", host_file)
    python = getattr(host_module, name, None)
    if not callable(python):
        raise AttributeError(f"{where}: {host_file} defines no function {name!r}")

    loaders = {}
    if compile_host is not None:
        loaders["pyccel"] = _constant(CompiledHostKernel(host_module, name, compile_host, fallback=host_fallback))
    else:
        loaders["pyccel"] = _constant(python)
    numba_file = folder / f"{name}_numba.py"
    if numba_file.is_file():
        _syntax_check(numba_file)
        loaders["numba"] = _module_loader(f"{package}.{name}_numba", name, numba_file)
    numpy_file = folder / f"{name}_numpy.py"
    if host_fallback is not None:
        loaders["numpy"] = _constant(host_fallback)
    elif numpy_file.is_file():
        _syntax_check(numpy_file)
        loaders["numpy"] = _module_loader(f"{package}.{name}_numpy", name, numpy_file)
    loaders["python"] = _constant(python)
    for key, loader in dict(extra_implementations or {}).items():
        loaders[key] = loader
    implementations = HostImplementations(name, loaders)

    options = dict(host_options) if host_options is not None else {}
    resolved = _resolve_outputs(outputs, python, where)
    if "outputs" not in options and resolved is not None:
        options["outputs"] = resolved

    cuda_file = folder / f"{name}{cuda_suffix}"
    cuda = None
    if _has_cuda_source(cuda_file, where):
        if include_dirs is None:
            root = _source_root(package)
            dirs = (str(folder),) + ((str(root),) if root is not None else ())
        else:
            if isinstance(include_dirs, (str, os.PathLike)):
                include_dirs = (include_dirs,)
            dirs = tuple(str(d) for d in include_dirs)
        try:
            cuda = CudaKernel.from_file(cuda_file, name, suffix=cuda_suffix, include_dirs=dirs, **cuda_options)
        except (ValueError, OSError) as exc:  # UnicodeDecodeError is a ValueError
            renamed = _naming_file(exc, cuda_file)
            if renamed is exc:
                raise
            raise renamed from exc
    test_file = folder / f"{name}{test_args_suffix}.py"
    test_args = f"{package}.{name}{test_args_suffix}" if test_file.is_file() else None
    return cls(
        implementations,
        cuda,
        name=name,
        missing_cuda=missing_cuda,
        cuda_path=cuda_file,
        host_options=options,
        dispatch=dispatch,
        test_args=test_args,
    )


# It is Kernel.from_folder (a classmethod there): calls with bad arguments name that.
kernel_from_folder.__name__ = "from_folder"
kernel_from_folder.__qualname__ = "Kernel.from_folder"


# Kernel.from_folder(): attached here, so that the kernel classes need not import the catalog.
Kernel.from_folder = classmethod(kernel_from_folder)  # type: ignore[attr-defined]


def _per_kernel(value, name, what, *, options=False):
    """A setting of ``from_package`` for one kernel: a function of the name, a mapping by
    name, or (``options``) one mapping of PyccelKernel options shared by every kernel."""
    if value is None:
        return None
    if callable(value) and not isinstance(value, Mapping):
        return value(name)
    if isinstance(value, Mapping):
        if options and value and set(value) <= _PYCCEL_OPTIONS:
            return dict(value)
        return value.get(name)
    raise TypeError(f"KernelCatalog.from_package(): {what!r} must be a mapping or a function of the kernel name")


class KernelCatalog(Mapping):
    """A read-only mapping of kernel names to :class:`Kernel` objects.

    Usually built by :meth:`from_package` from a package with one folder per kernel;
    ``catalog["push"](markers, dt)`` calls one.

    Parameters
    ----------
    kernels : mapping or iterable of Kernel, optional
        Kernels to register, under their mapping keys or their own names.
    """

    def __init__(self, kernels: Mapping[str, Kernel] | Iterable[Kernel] | None = None) -> None:
        self._kernels: dict = {}
        if kernels is not None:
            items = kernels.items() if isinstance(kernels, Mapping) else ((None, k) for k in kernels)
            for key, kernel in items:
                self.register(kernel, key)

    def register(self, kernel: Kernel, name: str | None = None) -> Kernel:
        """Add ``kernel`` under ``name`` (default: its name) and return it; KeyError for a
        name already present."""
        if not isinstance(kernel, Kernel):
            raise TypeError(f"KernelCatalog.register(): expected a Kernel, not {type(kernel).__name__}")
        key = kernel.name if name is None else name
        if not isinstance(key, str):
            raise TypeError(f"KernelCatalog.register(): 'name' must be a str, not {type(key).__name__}")
        if key in self._kernels:
            raise KeyError(f"KernelCatalog.register(): a kernel named {key!r} is already registered")
        self._kernels[key] = kernel
        return kernel

    @classmethod
    def from_package(
        cls,
        package: str,
        *,
        host_suffix: str = "_kernels",
        cuda_suffix: str = "_cuda.cu",
        test_args_suffix: str = "_test_args",
        check_name_length: bool = True,
        missing_cuda: str = "raise",
        host_options: Any = None,
        include_dirs: Any = None,
        dispatch: str = "backend",
        compile_host: Any = None,
        host_fallback: Any = None,
        outputs: Any = None,
        **cuda_options: Any,
    ) -> KernelCatalog:
        """One ``Kernel.from_folder`` per subfolder (sorted by name) holding
        ``<name><host_suffix>.py``; ``host_options``/``host_fallback`` may be mappings or
        functions of the kernel name."""
        module = _import_package(package, f"KernelCatalog.from_package({package!r})")
        root = Path(module.__file__).resolve().parent
        kernels = {}
        for sub in sorted(p for p in root.iterdir() if p.is_dir()):
            name = sub.name
            if not (sub / f"{name}{host_suffix}.py").is_file():
                continue
            if not (sub / "__init__.py").is_file():
                raise ModuleNotFoundError(
                    f"KernelCatalog.from_package({package!r}): kernel folder {sub} has no __init__.py"
                )
            kernels[name] = kernel_from_folder(
                Kernel,
                f"{package}.{name}",
                host_suffix=host_suffix,
                cuda_suffix=cuda_suffix,
                test_args_suffix=test_args_suffix,
                check_name_length=check_name_length,
                missing_cuda=missing_cuda,
                host_options=_per_kernel(host_options, name, "host_options", options=True),
                include_dirs=include_dirs,
                dispatch=dispatch,
                compile_host=compile_host,
                host_fallback=_per_kernel(host_fallback, name, "host_fallback"),
                outputs=outputs,
                **cuda_options,
            )
        return cls(kernels)

    # ------------------------------------------------------------------ mapping

    def __getitem__(self, name):
        return self._kernels[name]

    def __iter__(self):
        return iter(self._kernels)

    def __len__(self):
        return len(self._kernels)

    # ------------------------------------------------------------------ reports

    @property
    def with_cuda(self) -> list:
        """The names of the kernels that have a CUDA port."""
        return [n for n, k in self._kernels.items() if k.has_cuda]

    @property
    def without_cuda(self) -> list:
        """The names of the kernels without a CUDA port yet."""
        return [n for n, k in self._kernels.items() if not k.has_cuda]

    def summary(self, max_missing: int = 10) -> str:
        """``"3/5 kernels have CUDA (missing: a, b)"``."""
        if isinstance(max_missing, bool) or not isinstance(max_missing, int) or max_missing < 0:
            raise ValueError(f"summary(): 'max_missing' must be an int >= 0, not {max_missing!r}")
        missing = self.without_cuda
        text = f"{len(self._kernels) - len(missing)}/{len(self._kernels)} kernels have CUDA"
        if missing:
            shown = missing[:max_missing]
            more = ", ..." if len(missing) > max_missing else ""
            text += f" (missing: {', '.join(shown)}{more})"
        return text

    __str__ = summary

    def __repr__(self):
        return f"<KernelCatalog: {self.summary()}>"

    def parity_cases(self) -> list:
        """``[(name, kernel)]`` for the kernels with CUDA."""
        return [(n, k) for n, k in self._kernels.items() if k.has_cuda]

    def check_signatures(self) -> None:
        """One ValueError listing every kernel whose host and CUDA/host signatures differ."""
        problems = []
        for kernel in self._kernels.values():
            problems.extend(kernel._signature_problems())
        if problems:
            raise ValueError(f"{len(problems)} kernel signature mismatch(es):\n  " + "\n  ".join(problems))

    def compile_all(self, jobs: int | None = 1) -> list:
        """Compile every CUDA kernel (``jobs`` threads; None: CPU count); the names compiled.
        RuntimeError without a functional CuPy when there are CUDA kernels."""
        jobs = _cuda_variants._compile_jobs(jobs)
        names = self.with_cuda
        if not names:
            return []
        if _cuda_kernel._emulation_hook() is None:
            from .._backend import cupy_available, cupy_unavailable_reason

            if not cupy_available():
                raise RuntimeError(
                    f"KernelCatalog.compile_all(): compiling {len(names)} CUDA kernel(s) needs a "
                    f"functional CuPy: {cupy_unavailable_reason()}"
                )
        errors = _cuda_variants._compile_each([(n, self._kernels[n]) for n in names], jobs)
        for n in names:
            if n in errors:
                raise errors[n]
        return names

    def build_emulation(self, jobs: int | None = None, sanitize: str | Iterable[str] = ()) -> list:
        """Build the CPU-emulation library of every CUDA kernel, in parallel, before a launch needs it.

        The libraries go to the emulation cache (``CUNUMPY_EMULATION_CACHE``) under the keys a
        launch with the same settings looks up, so the first launch of each kernel, in this
        process or a later one, loads its library instead of compiling it. The C++ compiler
        runs as a subprocess per kernel: ``jobs`` threads keep that many compilers busy.
        ``python -m cunumpy emulation build PATH`` does the same from the command line.

        Parameters
        ----------
        jobs : int, optional
            Parallel builds (default: the CPU count).
        sanitize : str or sequence of str, optional
            Build for launches with these checks (``"racecheck"``, ``"initcheck"``): their
            instrumented library differs from the default one. ``CUNUMPY_EMULATION_SANITIZE``
            and ``CUNUMPY_EMULATION_MEMCHECK`` apply as they do to a launch.

        Returns
        -------
        list
            One record per kernel with CUDA, in catalog order, with the fields ``name``,
            ``source``, ``status`` (``"built"``, ``"cached"`` or ``"skipped"`` for a template
            kernel without ``template_args``), ``seconds``, ``error`` and ``library`` (the
            path of the shared library).

        Raises
        ------
        RuntimeError
            When a kernel failed to build (no C++ compiler, a compiler error): the message
            names every kernel that failed, with its compiler output. The others are built.
        """
        where = "KernelCatalog.build_emulation()"
        items = []
        for name, kernel in self._kernels.items():
            cuda = kernel.cuda_kernel
            if cuda is not None:
                path = kernel.cuda_path
                items.append((name, str(path) if path is not None else name, cuda))
        # The emulation sits above the kernels, which never import it: this call asks for it,
        # so it is loaded by name here (as the fake CuPy's launch hook loads it).
        prebuild = importlib.import_module("cunumpy._emulation._prebuild")
        return prebuild.build_or_raise(items, jobs=jobs, sanitize=sanitize, what=where)
