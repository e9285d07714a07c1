"""Building the emulation library of a CudaKernel: compiler lookup, cache, locks.

A library is built once per key (translation unit text, contents of the included headers
and of the prelude, compiler options, compiler identity). It is cached in memory per
process and on disk in ``emulation_cache_dir()``; writes are atomic (temporary file, then
rename) and one build per key happens at a time across threads (a lock per key) and across
processes (``fcntl.flock`` on a lock file beside the library).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from ._source import STUBS_FILE, rewrite_preprocessed, user_files

__all__ = [
    "EmulationLibrary",
    "build_count",
    "build_library",
    "emulation_cache_dir",
    "emulation_compiler",
    "prelude_dir",
]

#: Bump when the generated code or the cache layout changes: old entries are then ignored.
_FORMAT = "cunumpy-emulation-5"
# -fno-strict-aliasing: CUDA code reinterprets shared memory and bit patterns through pointer
# casts, which NVRTC compiles as written.
_BASE_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fno-strict-aliasing", "-pthread")
_COMPILE_TIMEOUT = 600

_PRELUDE_DIR = Path(__file__).resolve().parent / "include"


def prelude_dir() -> Path:
    """Directory holding ``cunumpy_emu/prelude.h`` (added with ``-I`` to every build)."""
    return _PRELUDE_DIR


# ------------------------------------------------------------------ compiler and cache


def emulation_compiler() -> str | None:
    """Return the C++ compiler the emulation uses.

    ``$CXX`` may carry arguments (``"ccache g++"``); its first word is resolved on ``PATH``.

    Returns
    -------
    str or None
        ``$CXX`` if it resolves, else ``c++`` if it exists, else None (emulation tests skip).
    """
    cxx = os.environ.get("CXX", "").strip()
    if cxx:
        try:
            words = shlex.split(cxx)
        except ValueError:
            words = []
        if words:
            found = shutil.which(words[0])
            if found is not None:
                return shlex.join([found] + words[1:])
    return shutil.which("c++")


def emulation_cache_dir() -> Path:
    """Return the folder of the on-disk cache of emulation builds.

    Returns
    -------
    pathlib.Path
        ``$CUNUMPY_EMULATION_CACHE``, else ``~/.cache/cunumpy/emulation`` (not created here).
    """
    env = os.environ.get("CUNUMPY_EMULATION_CACHE", "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "cunumpy" / "emulation"


_identity_lock = threading.Lock()
_identities: dict = {}


def _compiler_identity(command: list[str]) -> str:
    """The resolved compiler path, its modification time and its ``--version`` text."""
    exe = shutil.which(command[0]) or command[0]
    try:
        st = os.stat(exe)
        stamp = (os.path.realpath(exe), st.st_mtime_ns, st.st_size)
    except OSError:
        raise RuntimeError(f"CPU emulation: the C++ compiler {command[0]!r} cannot be run (not found)") from None
    key = (tuple(command), stamp)
    with _identity_lock:
        found = _identities.get(key)
    if found is not None:
        return found
    try:
        out = subprocess.run(
            command + ["--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"CPU emulation: the C++ compiler {shlex.join(command)!r} cannot be run: {exc}") from None
    identity = f"{stamp}\n{' '.join(command)}\n{out.stdout}"
    with _identity_lock:
        _identities[key] = identity
    return identity


# ------------------------------------------------------------------ libraries


class EmulationLibrary:
    """A loaded emulation library: the entry addresses of its kernels and its execution mode."""

    __slots__ = ("path", "key", "fibers", "entries", "depends", "bind", "abi_version", "_dll", "_addresses")

    def __init__(self, path: Path, key: str, fibers: bool, entries, depends=()):
        self.path = path
        self.depends = tuple(depends)  # (path, sha256) of every user header the build read
        self.key = key
        self.fibers = fibers
        self.entries = tuple(entries)
        # RTLD_LOCAL: every library keeps its own bound-worker pointer and its own symbols.
        self._dll = dll = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self.bind = ctypes.cast(dll.cunumpy_emu_bind, ctypes.c_void_p).value
        version = dll.cunumpy_emu_abi_version
        version.restype = ctypes.c_int
        version.argtypes = ()
        self.abi_version = int(version())
        self._addresses = {}
        for k, expression in enumerate(self.entries):
            thread_fn = ctypes.cast(getattr(dll, f"cunumpy_emu_thread_{k}"), ctypes.c_void_p).value
            block_fn = ctypes.cast(getattr(dll, f"cunumpy_emu_block_{k}"), ctypes.c_void_p).value
            self._addresses[expression] = (thread_fn, block_fn)

    def entry(self, expression: str) -> tuple[int, int]:
        """(thread function, block function) addresses of kernel ``expression``."""
        return self._addresses[expression]

    def __repr__(self):
        return f"<EmulationLibrary {self.path.name} ({'fibers' if self.fibers else 'loops'})>"


# ------------------------------------------------------------------ mode choice

# Operations that need every thread of a block (or warp) alive at once: fiber mode. The text is
# preprocessed, so __activemask() appears as the prelude's activemask_at<site>().
_COLLECTIVES = re.compile(
    r"\b(?:__syncthreads(?:_count|_and|_or)?|__syncwarp|__shfl(?:_up|_down|_xor)?(?:_sync)?"
    r"|__ballot(?:_sync)?|__any(?:_sync)?|__all(?:_sync)?|__activemask|activemask_at|__match_(?:any|all)_sync"
    r"|__reduce_\w+_sync|this_thread_block|tiled_partition|coalesced_threads|this_grid)\b"
)
_LINE_MARKER = re.compile(r'^#\s*\d+\s+"((?:[^"\\]|\\.)*)"', re.M)


def uses_collectives(preprocessed: str, exclude_dir: Path) -> bool:
    """Whether the preprocessed text, outside the files under ``exclude_dir`` (the prelude),
    mentions a barrier or a warp operation."""
    excluded = str(exclude_dir)
    pos = 0
    current_excluded = False
    for m in _LINE_MARKER.finditer(preprocessed):
        if not current_excluded and _COLLECTIVES.search(preprocessed, pos, m.start()):
            return True
        name = m.group(1).replace("\\\\", "\\")
        current_excluded = name.startswith(excluded)
        pos = m.end()
    return not current_excluded and _COLLECTIVES.search(preprocessed, pos) is not None


# ------------------------------------------------------------------ cache

_memory: dict[str, EmulationLibrary] = {}
_memory_lock = threading.Lock()
_key_locks: dict[str, threading.Lock] = {}
_builds = [0]


def build_count() -> int:
    """Libraries compiled by this process (cache hits excluded); for tests."""
    return _builds[0]


def _key_lock(key: str) -> threading.Lock:
    with _memory_lock:
        lock = _key_locks.get(key)
        if lock is None:
            lock = _key_locks[key] = threading.Lock()
        return lock


def _prelude_files() -> list[Path]:
    return sorted(p for p in _PRELUDE_DIR.rglob("*") if p.is_file())


def _cache_key(unit: str, flags: tuple, identity: str, headers) -> str:
    h = hashlib.sha256()

    def add(data: bytes) -> None:
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)

    add(_FORMAT.encode())
    add(unit.encode("utf-8", "surrogatepass"))
    for flag in flags:
        add(flag.encode("utf-8", "surrogatepass"))
    add(identity.encode("utf-8", "replace"))
    for path in list(headers) + _prelude_files():
        add(str(path).encode("utf-8", "surrogatepass"))
        try:
            add(Path(path).read_bytes())
        except OSError:
            add(b"<unreadable>")
    return h.hexdigest()[:32]


def _cache_dir() -> Path:
    directory = emulation_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeError(
            f"CPU emulation: cannot create the cache directory {str(directory)!r} ({exc}); "
            "set CUNUMPY_EMULATION_CACHE to a writable directory"
        ) from None
    return directory


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _digest(path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _depends_current(depends) -> bool:
    """Whether every header a build read still has the contents it had. The key covers the
    headers found by name before the build; this covers the rest (``#include MACRO``,
    headers included from headers in other directories)."""
    return all(_digest(path) == digest for path, digest in depends)


def _library_name(key: str, depends) -> str:
    """The file of a build: a rebuild after a header changed gets a name of its own, because
    the dynamic loader hands out the library already loaded under a name again."""
    h = hashlib.sha256(json.dumps(depends).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{key}.{h}.so"


def _load_cached(directory: Path, key: str, entries) -> EmulationLibrary | None:
    meta = directory / f"{key}.json"
    try:
        info = json.loads(meta.read_text())
        fibers = bool(info["fibers"])
        depends = [(str(p), str(d)) for p, d in info["depends"]]
        so = directory / str(info["library"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if so.parent != directory or not so.is_file() or not _depends_current(depends):
        return None  # missing, or a header changed since: build again over it
    try:
        return EmulationLibrary(so, key, fibers, entries, depends)
    except (OSError, AttributeError):
        return None  # a damaged entry: build again over it


def _run(command: list[str], what: str, name: str, *, output_only: bool = False) -> str:
    """Run the compiler; its output (with ``output_only``: stdout alone, the diagnostics
    going into the error message only). RuntimeError with the diagnostics if it fails."""
    try:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE if output_only else subprocess.STDOUT,
            text=True, errors="replace", timeout=_COMPILE_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"CPU emulation of kernel '{name}': {what} took longer than {_COMPILE_TIMEOUT} s: {shlex.join(command)}"
        ) from None
    except OSError as exc:
        raise RuntimeError(f"CPU emulation of kernel '{name}': cannot run the C++ compiler: {exc}") from None
    if done.returncode != 0:
        diagnostics = done.stderr if output_only else done.stdout
        raise RuntimeError(
            f"CPU emulation of kernel '{name}': {what} failed (exit code {done.returncode}).\n"
            f"command: {shlex.join(command)}\ncompiler output:\n{diagnostics}"
        )
    return done.stdout


def build_library(unit: str, *, name: str, entries, compiler: str, flags: tuple, headers=()) -> EmulationLibrary:
    """The library of translation unit ``unit``: from memory, from disk, or built now.

    ``entries`` are the kernel expressions whose stubs the unit defines, in order; ``flags`` the kernel's ``-D``/``-U``/``-I`` and extra options; ``headers`` the files
    the unit includes (their contents are part of the key). RuntimeError with the compiler
    output when the build fails (nothing is cached then).
    """
    command = shlex.split(compiler)
    identity = _compiler_identity(command)
    key = _cache_key(unit, flags, identity, headers)
    lib = _memory.get(key)
    if lib is not None and _depends_current(lib.depends):
        return lib
    with _key_lock(key):
        lib = _memory.get(key)
        if lib is not None and _depends_current(lib.depends):
            return lib
        directory = _cache_dir()
        lock_path = directory / f"{key}.lock"
        import fcntl  # POSIX only; the emulation needs a POSIX C++ tool chain anyway

        with open(lock_path, "a+b") as lock_file:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
            try:
                lib = _load_cached(directory, key, entries)
                if lib is None:
                    lib = _build(directory, key, unit, name, entries, command, flags)
            finally:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)
        _memory[key] = lib
        return lib


def _clean_dirs() -> tuple:
    """Directories whose headers need no rewrite: the prelude's and cunumpy's shipped ones."""
    from ..cuda._source import cuda_include_dir

    shipped = Path(cuda_include_dir()) / "cunumpy"
    return (_PRELUDE_DIR, shipped, shipped.resolve())  # markers spell the path as -I gave it


def _build(directory, key, unit, name, entries, command, flags) -> EmulationLibrary:
    # Preprocess first, then rewrite the preprocessed text (so headers and macro expansions
    # are covered) and compile that: its line markers keep diagnostics on the user's files.
    source = directory / f"{key}.cpp"
    _write_atomic(source, unit.encode("utf-8", "surrogatepass"))
    includes = [f"-I{_PRELUDE_DIR}"]
    preprocessed = _run(
        command + list(_BASE_FLAGS) + includes + list(flags) + ["-E", str(source)], "preprocessing", name,
        output_only=True,
    )
    clean_dirs, clean_files = _clean_dirs(), (str(source), STUBS_FILE)
    rewritten = rewrite_preprocessed(preprocessed, clean_dirs, clean_files)
    depends = [(os.path.abspath(path), _digest(path)) for path in user_files(preprocessed, clean_dirs, clean_files)]
    depends = [(path, digest) for path, digest in depends if digest is not None]
    fibers = uses_collectives(rewritten, _PRELUDE_DIR)
    expanded = directory / f"{key}.ii"
    _write_atomic(expanded, rewritten.encode("utf-8", "surrogatepass"))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{key}.", suffix=".so.tmp")
    os.close(fd)
    try:
        _run(command + list(_BASE_FLAGS) + list(flags) + [str(expanded), "-o", tmp], "compilation", name)
        with _memory_lock:
            _builds[0] += 1
        so = directory / _library_name(key, depends)
        os.replace(tmp, so)
        meta = directory / f"{key}.json"
        try:  # the build this one replaces (its headers changed): its library goes
            stale = str(json.loads(meta.read_text())["library"])
        except (OSError, ValueError, KeyError, TypeError):
            stale = None
        _write_atomic(meta, json.dumps(
            {"fibers": fibers, "kernel": name, "depends": depends, "library": so.name}).encode())
        if stale and stale != so.name and "/" not in stale:
            _unlink(directory / stale)  # a process that loaded it keeps its mapping
        _unlink(expanded)  # about 1 MB each; kept only when the build fails (the error names it)
    except BaseException:
        _unlink(tmp)
        raise
    return EmulationLibrary(so, key, fibers, entries, depends)
