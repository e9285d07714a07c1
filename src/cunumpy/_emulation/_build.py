"""Building the emulation library of a CudaKernel: compiler lookup, cache, locks.

A library is built once per key (translation unit text, contents of the included headers
and of the prelude, compiler options, compiler identity). It is cached in memory per
process and on disk in ``emulation_cache_dir()``; writes are atomic (temporary file, then
rename) and one build per key happens at a time across threads (a lock per key) and across
processes (``fcntl.flock`` on a lock file beside the library). An entry records the size and
SHA-256 of its library, checked before the library is loaded: a damaged library is rebuilt,
never loaded (loading a truncated one can kill the process with SIGBUS). A complete entry is
used without writing anything, so a read-only cache (a prebuilt one in an image) works.
"""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import functools
import hashlib
import json
import os
import re
import shlex
import stat
import subprocess
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import IO, Any

from ._errors import CudaPortabilityWarning
from ._notice import slow_build_notice
from ._source import STUBS_FILE, RewriteFindings, add_entry_copies, rewrite_preprocessed, user_files

__all__ = [
    "EmulationLibrary",
    "build_count",
    "build_library",
    "emulation_cache_dir",
    "emulation_compiler",
    "prelude_dir",
]

#: Bump when the generated code or the cache layout changes: old entries are then ignored.
_FORMAT = "cunumpy-emulation-8"
# -fno-strict-aliasing: CUDA code reinterprets shared memory and bit patterns through pointer
# casts, which NVRTC compiles as written. -fstack-clash-protection: a frame larger than a page
# touches its pages in order, so a large local array cannot step over a fiber stack's guard
# into the next stack. -g1: line tables, so that reports name the source line.
_BASE_FLAGS = (
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-shared",
    "-fno-strict-aliasing",
    "-pthread",
    "-fstack-clash-protection",
    "-g1",
    # the library's calls to its own functions (the checks' hooks above all) are bound to its own
    # definitions, never to a sanitizer runtime's preloaded into the process
    "-Wl,-Bsymbolic",
)
# GCC gives the static locals of inline functions STB_GNU_UNIQUE binding, which the dynamic
# loader unifies across libraries even under RTLD_LOCAL: two kernel libraries would share one
# `__shared__` variable of a header's template. Every library keeps its own.
_GCC_FLAGS = ("-fno-gnu-unique",)

#: Checks modes of a library (emu_abi.h): none, inline shadow checks (memcheck), a call per
#: access (memcheck where the shadow cannot be mapped), a call per access with atomics told
#: apart (memcheck, racecheck, initcheck).
CHECKS_NONE, CHECKS_SHADOW, CHECKS_CALLS, CHECKS_TRACK = 0, 1, 2, 3


def _link_flags(checks: int, clang: bool, static_ubsan: bool) -> tuple[str, ...]:
    """Linking: only the libraries the kernel uses (a new process then loads less with it).
    GCC links its UBSan runtime whenever a UBSan check is compiled in, though the prelude
    defines the one handler the library calls: with the runtime's static archive, nothing of it
    is linked (no symbol of it is missing) instead of loading libubsan.so with every library."""
    flags: tuple[str, ...] = ("-Wl,--as-needed",)
    if checks in (CHECKS_SHADOW, CHECKS_CALLS) and not clang and static_ubsan:
        flags += ("-static-libubsan",)
    return flags


def _checks_flags(checks: int, clang: bool) -> tuple[str, ...]:
    """The instrumentation flags of a checks mode, for GCC or Clang. The instrumentation's
    runtime functions are defined by the prelude (cunumpy_emu/checks.h), none is linked."""
    if checks == CHECKS_NONE:
        return ("-DCUNUMPY_EMU_CHECKS=0",)
    offset = "0x200000000000"  # CUNUMPY_EMU_SHADOW_OFFSET of emu_abi.h
    if clang:
        kasan: tuple[str, ...] = ("-fsanitize=kernel-address", "-mllvm", "-asan-stack=0", "-mllvm", "-asan-globals=0")
        table = {
            CHECKS_SHADOW: (
                *kasan,
                "-mllvm",
                f"-asan-mapping-offset={offset}",
                "-mllvm",
                "-asan-instrumentation-with-call-threshold=1000000000",
            ),
            CHECKS_CALLS: (*kasan, "-mllvm", "-asan-instrumentation-with-call-threshold=0"),
            CHECKS_TRACK: ("-fsanitize=thread", "-mllvm", "-tsan-instrument-func-entry-exit=0"),
        }
    else:
        kasan = ("-fsanitize=kernel-address", "--param=asan-stack=0", "--param=asan-globals=0")
        table = {
            CHECKS_SHADOW: (
                *kasan,
                f"-fasan-shadow-offset={offset}",
                "--param=asan-instrumentation-with-call-threshold=1000000000",
            ),
            CHECKS_CALLS: (*kasan, "--param=asan-instrumentation-with-call-threshold=0"),
            CHECKS_TRACK: ("-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0"),
        }
    return (*table[checks], "-fsanitize=integer-divide-by-zero", f"-DCUNUMPY_EMU_CHECKS={checks}")


_COMPILE_TIMEOUT = 600

_PRELUDE_DIR = Path(__file__).resolve().parent / "include"


def prelude_dir() -> Path:
    """Directory holding ``cunumpy_emu/prelude.h`` (added with ``-I`` to every build)."""
    return _PRELUDE_DIR


# ------------------------------------------------------------------ compiler and cache


def _which(word: str) -> str | None:
    """shutil.which for a POSIX PATH, without its overhead (a tenth of a new process's first
    launch went to finding the compiler)."""
    if os.sep in word:
        return word if os.access(word, os.X_OK) and not os.path.isdir(word) else None
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder, word)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


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
            found = _which(words[0])
            if found is not None:
                return shlex.join([found, *words[1:]])
    return _which("c++")


_cache_dir_memo: dict = {}


def _cache_dir_path() -> Path:
    """emulation_cache_dir(), without working it out again while the environment is the same."""
    raw = (os.environ.get("CUNUMPY_EMULATION_CACHE", ""), os.environ.get("HOME", ""))
    found = _cache_dir_memo.get(raw)
    if found is None:
        found = _cache_dir_memo[raw] = emulation_cache_dir()
    return found


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


# ------------------------------------------------------------------ files known by their stat
#
# A process that finds its kernel in the disk cache must not read and hash every header nor run
# the compiler to name it: what it learns is kept in small files of the cache directory, and
# trusted while the files it describes have the same device, inode, size, modification time
# and change time (the change time cannot be set back: writing a header in place and restoring
# its modification time still changes it). Timestamps are coarse (a clock tick), so a file
# changed less than _SETTLE_NS before it was read may change again without a new timestamp:
# such a record is not trusted (as git treats "racily clean" files), and the file is read again.

_SETTLE_NS = 2_000_000_000
_HASHED_COMPILER_BYTES = 4 << 20
_DIGESTS_FILE = "file-digests.records"  # not *.json: those are the entries
_COMPILERS_FILE = "compilers.records"
_RECORDS_MAX = 4096


def _stat_of(path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _settled(stat: tuple, read_at_ns: int) -> bool:
    """Whether a file with this stat, read at ``read_at_ns``, had stopped changing by then."""
    return read_at_ns - max(stat[3], stat[4]) > _SETTLE_NS


class _Records:
    """A JSON object in a file of the cache directory, read once per process. What a process
    learns is written back (atomically, merged with what other processes wrote) only by a
    process that builds a library, and so writes into the cache anyway: a process that finds
    its kernels in a cache writes nothing there (a read-only cache in an image works, and is
    never written to). The records are only a shortcut."""

    def __init__(self, name: str):
        self.name = name
        self.lock = threading.Lock()
        self.loaded_from: Path | None = None
        self.records: dict = {}
        self.pending: dict = {}

    def _path(self) -> Path:
        return _cache_dir_path() / self.name

    def _read(self, path: Path) -> dict:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _current(self) -> None:
        path = self._path()
        if self.loaded_from != path:
            self.records = self._read(path)
            self.loaded_from = path
            self.pending = {}

    def get(self, key: str):
        with self.lock:
            self._current()
            return self.records.get(key)

    def put(self, key: str, value) -> None:
        with self.lock:
            self._current()
            self.records[key] = value
            self.pending[key] = value

    def flush(self) -> None:
        """Write what this process learned (called by a build, in a writable cache)."""
        with self.lock:
            self._current()
            if not self.pending:
                return
            path = self._path()
            merged = self._read(path)
            merged.update(self.pending)
            if len(merged) > _RECORDS_MAX:
                merged = dict(list(merged.items())[-_RECORDS_MAX // 2 :])
            try:
                _write_atomic(path, json.dumps(merged).encode("utf-8", "surrogatepass"))
            except OSError:
                return
            self.records = merged
            self.pending = {}


_digest_records = _Records(_DIGESTS_FILE)
_compiler_records = _Records(_COMPILERS_FILE)
_digests_memo: dict = {}


def _digest(path) -> str | None:
    """SHA-256 of a file's contents (None when it cannot be read), read again only when its
    stat changed or was not settled when it was last read."""
    path = os.fspath(path)
    stat = _stat_of(path)
    if stat is None:
        return None
    memo = _digests_memo.get(path)
    if memo is not None and memo[0] == stat:
        return memo[1]
    record = _digest_records.get(path)
    if isinstance(record, list) and len(record) == 2 and tuple(record[0]) == stat:
        _digests_memo[path] = (stat, str(record[1]))
        return str(record[1])
    read_at = time.time_ns()
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None
    if _stat_of(path) == stat and _settled(stat, read_at):
        _digests_memo[path] = (stat, digest)
        _digest_records.put(path, [list(stat), digest])
    return digest


def _remember_digest(path, digest: str) -> None:
    """Record the digest of a file this process has just written whole (its library): it is not
    settled, but nothing else wrote it, and a damaged copy changes its stat."""
    stat = _stat_of(path)
    if stat is not None:
        _digests_memo[os.fspath(path)] = (stat, digest)
        _digest_records.put(os.fspath(path), [list(stat), digest])


_identity_lock = threading.Lock()
_identities: dict = {}


def _compiler_files(command: list[str], compiler_proper: str = "") -> list[str]:
    """The files a compiler command runs: its words found on PATH (a wrapper such as ccache
    and the compiler) and the compiler proper (g++'s cc1plus), resolved."""
    files = []
    for word in command:
        found = _which(word) if not word.startswith("-") else None
        if found is not None:
            files.append(os.path.realpath(found))
    if compiler_proper and os.path.isabs(compiler_proper) and os.path.exists(compiler_proper):
        files.append(os.path.realpath(compiler_proper))
    return files


def _compiler_info(command: list[str]) -> dict:
    """What the emulation needs to know of a compiler: ``identity``, which names it in the cache
    key (its command, its ``--version`` text and the files it runs, with the SHA-256 of their
    contents), and ``static_ubsan`` (GCC's UBSan runtime exists as a static archive, see
    _link_flags). Learned once by running the compiler, then recognised by the stat of those
    files, in this process and in the cache directory's compilers.records."""
    exe = _which(command[0]) or command[0]
    if _stat_of(exe) is None:
        raise RuntimeError(f"CPU emulation: the C++ compiler {command[0]!r} cannot be run (not found)")
    key = json.dumps([_FORMAT, *command])
    record = _compiler_records.get(key)
    if isinstance(record, dict):
        files = record.get("files")
        if (
            isinstance(files, list)
            and files
            and isinstance(record.get("identity"), str)
            and all(isinstance(f, list) and len(f) == 2 and tuple(f[1]) == _stat_of(f[0]) for f in files)
        ):
            return {"identity": record["identity"], "static_ubsan": bool(record.get("static_ubsan"))}
    with _identity_lock:
        found = _identities.get(key)
    if found is not None and all(tuple(stat) == _stat_of(path) for path, stat in found[0]):
        return found[1]
    read_at = time.time_ns()

    def ask(option: str, stderr=subprocess.DEVNULL) -> str:
        return subprocess.run([*command, option], stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=60).stdout

    try:
        version = ask("--version", stderr=subprocess.STDOUT)
        proper = ask("-print-prog-name=cc1plus").strip()
        ubsan = ask("-print-file-name=libubsan.a").strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"CPU emulation: the C++ compiler {shlex.join(command)!r} cannot be run: {exc}") from None
    files = [(path, _stat_of(path)) for path in _compiler_files(command, proper)]
    files = [(path, stat) for path, stat in files if stat is not None]
    # their contents (a wrapper script rewritten in place gives the same --version); a compiler
    # proper of tens of MB by its size and modification time (a process that cannot keep this
    # record, with a read-only cache, would hash it at every start)
    stamps = "\n".join(
        f"{path} {_digest(path) if stat[2] <= _HASHED_COMPILER_BYTES else f'{stat[2]} {stat[3]}'}"
        for path, stat in files
    )
    info = {
        "identity": f"{' '.join(command)}\n{stamps}\n{version}",
        "static_ubsan": os.path.isabs(ubsan) and os.path.isfile(ubsan),
    }
    with _identity_lock:
        _identities[key] = (files, info)
    if files and all(_settled(stat, read_at) for _, stat in files):
        _compiler_records.put(key, {"files": [[path, list(stat)] for path, stat in files], **info})
    return info


def _compiler_identity(command: list[str]) -> str:
    """The compiler's identity in the cache key (see _compiler_info)."""
    return _compiler_info(command)["identity"]


# ------------------------------------------------------------------ libraries


_INT_FUNCTION = ctypes.CFUNCTYPE(ctypes.c_int)


def _symbol(handle: int, name: str) -> int:
    """The address of ``name`` in a loaded library; AttributeError when it has none."""
    try:
        return _ctypes.dlsym(handle, name)
    except OSError:
        raise AttributeError(f"the library has no symbol {name!r}") from None


class EmulationLibrary:
    """A loaded emulation library: the entry addresses of its kernels and its execution mode."""

    __slots__ = (
        "_addresses",
        "_dll",
        "abi_version",
        "bind",
        "checks",
        "depends",
        "entries",
        "extern_shared",
        "fibers",
        "handle",
        "kernel_calls",
        "key",
        "path",
    )

    def __init__(self, path: Path, key: str, fibers: bool, entries, depends=(), extern_shared=(), kernel_calls=()):
        self.path = path
        #: ``(kernel, file, line)`` of each call of a ``__global__`` function from a function
        #: body: the emulation runs it on the calling thread, nvcc rejects it
        self.kernel_calls = tuple((str(k), str(f), int(n)) for k, f, n in kernel_calls)
        self.depends = tuple(depends)  # (path, sha256) of every user header the build read
        self.key = key
        self.fibers = fibers
        self.entries = tuple(entries)
        #: the names of the source's ``extern __shared__`` arrays (for memcheck reports)
        self.extern_shared = tuple(extern_shared)
        # RTLD_LOCAL: every library keeps its own bound-worker pointer and its own symbols.
        self._dll = dll = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self.handle = dll._handle
        symbol = functools.partial(_symbol, dll._handle)  # addresses without ctypes function objects
        self.bind = symbol("cunumpy_emu_bind")
        self.abi_version = int(_INT_FUNCTION(symbol("cunumpy_emu_abi_version"))())
        #: the library's checks mode (0 to 3)
        self.checks = 0
        if self.abi_version >= 2:
            self.checks = int(_INT_FUNCTION(symbol("cunumpy_emu_checks"))())
        self._addresses = {}
        for k, expression in enumerate(self.entries):
            self._addresses[expression] = (symbol(f"cunumpy_emu_thread_{k}"), symbol(f"cunumpy_emu_block_{k}"))

    def symbol_address(self, name: str) -> int:
        """The address of symbol ``name`` (a ``__constant__``/``__device__`` accessor);
        AttributeError when the library has none."""
        return _symbol(self.handle, name)

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
_thread_builds = threading.local()


def build_count() -> int:
    """Libraries compiled by this process (cache hits excluded); for tests."""
    return _builds[0]


def thread_build_count() -> int:
    """Libraries compiled by the calling thread (cache hits excluded): tells a build from a
    cache hit when several threads build at once."""
    return getattr(_thread_builds, "count", 0)


def _key_lock(key: str) -> threading.Lock:
    with _memory_lock:
        lock = _key_locks.get(key)
        if lock is None:
            lock = _key_locks[key] = threading.Lock()
        return lock


_prelude_memo: list = []


def _prelude_digests() -> list:
    """(path, SHA-256) of every file of the prelude directory, sorted. Known by the stat of
    its directories and files (a file added or removed changes its directory's), in this
    process and in the cache directory's file-digests.records."""
    key = f"prelude:{_PRELUDE_DIR}"
    memo = _prelude_memo[0] if _prelude_memo else _digest_records.get(key)
    if isinstance(memo, dict):
        try:
            if all(tuple(stat) == _stat_of(path) for path, stat in memo["dirs"]) and all(
                tuple(stat) == _stat_of(path) for path, stat, _ in memo["files"]
            ):
                if not _prelude_memo:
                    _prelude_memo.append(memo)
                return [(path, digest) for path, _, digest in memo["files"]]
        except (KeyError, TypeError, ValueError):
            pass
    read_at = time.time_ns()
    dirs: list[list[Any]] = []
    files: list[list[Any]] = []
    for root, _, names in os.walk(_PRELUDE_DIR):
        dirs.append([root, _stat_of(root)])
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path):
                files.append([path, _stat_of(path), _digest(path)])
    files.sort()
    record = {"dirs": dirs, "files": files}
    stats = [stat for _, stat in dirs] + [stat for _, stat, _ in files]
    _prelude_memo.clear()
    if all(stat is not None and _settled(stat, read_at) for stat in stats):
        _prelude_memo.append(record)
        _digest_records.put(key, record)
    return [(path, digest) for path, _, digest in files]


def _cache_key(unit: str, flags: tuple, identity: str, headers, checks: int = 0) -> str:
    h = hashlib.sha256()

    def add(data: bytes) -> None:
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)

    add(_FORMAT.encode())
    add(str(checks).encode())
    add(unit.encode("utf-8", "surrogatepass"))
    for flag in flags:
        add(flag.encode("utf-8", "surrogatepass"))
    add(identity.encode("utf-8", "replace"))
    for path, digest in [(path, _digest(path)) for path in headers] + _prelude_digests():
        add(str(path).encode("utf-8", "surrogatepass"))
        add(b"<unreadable>" if digest is None else digest.encode())
    return h.hexdigest()[:32]


def _not_writable(directory: Path, name: str, exc: OSError) -> RuntimeError:
    return RuntimeError(
        f"CPU emulation of kernel '{name}': its library must be built, but the cache directory "
        f"{str(directory)!r} is not writable ({exc.strerror or exc}); set CUNUMPY_EMULATION_CACHE to a "
        "writable directory"
    )


def _cache_dir(name: str) -> Path:
    directory = emulation_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _not_writable(directory, name, exc) from None
    return directory


@contextlib.contextmanager
def _entry_lock(directory: Path, key: str, name: str):
    """Hold the lock file of entry ``key`` (``fcntl.flock``) while it is checked and built."""
    import fcntl  # POSIX only; the emulation needs a POSIX C++ tool chain anyway

    path = directory / f"{key}.lock"
    try:
        lock_file: IO[bytes]
        try:
            lock_file = open(path, "a+b")  # noqa: SIM115  the with below closes it, whichever mode opened it
        except PermissionError:
            # another user's lock file in a shared cache: flock needs no write
            lock_file = open(path, "rb")  # noqa: SIM115  the with below closes it
    except OSError as exc:  # a read-only cache: only a complete entry could have been used
        raise _not_writable(directory, name, exc) from None
    with lock_file:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, racing with threads)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _share(path, mode: int) -> None:
    """Give a cache file the permissions of a file created normally (``mode`` less the umask):
    temporary files are private (0600), and a cache built by one user (an image's) must be
    readable by the others."""
    with contextlib.suppress(OSError):
        os.chmod(path, mode & ~_umask())


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        _share(tmp, 0o666)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


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


def _fingerprint(data: bytes) -> dict:
    """What an entry records of its library: size and SHA-256."""
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _library_intact(path: Path, size: int, sha256: str) -> bool:
    """Whether the library at ``path`` is the one its entry recorded (a regular file of that
    size and checksum). The checksum is read again whenever the file's stat differs from when
    it was last checked (see _digest: any write changes the change time), so a library is
    hashed once, not in every process (0.6 ms per MB)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != size:
        return False
    return _digest(path) == sha256


def _load_cached(directory: Path, key: str, entries) -> EmulationLibrary | None:
    """The library of entry ``key`` if the entry is complete and current, else None (build
    again over it). Writes nothing and takes no lock: entries are written atomically."""
    meta = directory / f"{key}.json"
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
        fibers = bool(info["fibers"])
        depends = [(str(p), str(d)) for p, d in info["depends"]]
        so = directory / str(info["library"])
        extern_shared = [str(n) for n in info.get("extern_shared", [])]
        kernel_calls = [(str(k), str(f), int(n)) for k, f, n in info.get("kernel_calls", [])]
        size, sha256 = int(info["size"]), str(info["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing, unreadable, or written by an older version
    if so.parent != directory or not _depends_current(depends):
        return None  # a header changed since
    if not _library_intact(so, size, sha256):
        return None  # missing, truncated or altered: never handed to the dynamic loader
    try:
        return EmulationLibrary(so, key, fibers, entries, depends, extern_shared, kernel_calls)
    except (OSError, AttributeError):
        return None  # a damaged entry: build again over it


def _load_built(
    so: Path, key: str, fibers: bool, entries, depends, name: str, command, extern_shared=(), kernel_calls=()
) -> EmulationLibrary:
    """Load a library the compiler just wrote; RuntimeError naming the kernel when it cannot
    be loaded (a compiler that wrote an empty file: 'file too short')."""
    try:
        return EmulationLibrary(so, key, fibers, entries, depends, extern_shared, kernel_calls)
    except (OSError, AttributeError) as exc:
        raise RuntimeError(
            f"CPU emulation of kernel '{name}': the library the compiler wrote cannot be loaded ({exc}).\n"
            f"command: {shlex.join(command)}"
        ) from None


def _run(command: list[str], what: str, name: str, *, output_only: bool = False) -> str:
    """Run the compiler; its output (with ``output_only``: stdout alone, the diagnostics
    going into the error message only). RuntimeError with the diagnostics if it fails."""
    try:
        done = subprocess.run(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if output_only else subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=_COMPILE_TIMEOUT,
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


def build_library(
    unit: str, *, name: str, entries, compiler: str, flags: tuple, headers=(), checks: int = CHECKS_NONE
) -> EmulationLibrary:
    """The library of translation unit ``unit``: from memory, from disk, or built now.

    ``entries`` are the kernel expressions whose stubs the unit defines, in order; ``flags``
    the kernel's ``-D``/``-U``/``-I`` and extra options; ``headers`` the files the unit
    includes (their contents are part of the key); ``checks`` the checks mode it is
    instrumented for. RuntimeError with the compiler output when the build fails (nothing is
    cached then).
    """
    command = shlex.split(compiler)
    info = _compiler_info(command)
    identity = info["identity"]
    clang = "clang" in identity.lower()
    flags = (
        tuple(flags)
        + (() if clang else _GCC_FLAGS)
        + _checks_flags(checks, clang)
        + _link_flags(checks, clang, info["static_ubsan"])
    )
    key = _cache_key(unit, flags, identity, headers, checks)
    lib = _memory.get(key)
    if lib is not None and _depends_current(lib.depends):
        return lib
    with _key_lock(key):
        lib = _memory.get(key)
        if lib is not None and _depends_current(lib.depends):
            return lib
        lib = _load_cached(emulation_cache_dir(), key, entries)
        if lib is None:
            directory = _cache_dir(name)
            with _entry_lock(directory, key, name):
                lib = _load_cached(directory, key, entries)
                if lib is None:
                    with slow_build_notice(name, directory):  # a build over ~1 s says so, once
                        lib = _build(directory, key, unit, name, entries, command, flags, checks)
        _memory[key] = lib
    _warn_kernel_calls(lib)
    return lib


_warned_calls: set = set()


def _warn_kernel_calls(lib: EmulationLibrary) -> None:
    """One warning per process for each call of a ``__global__`` function from a function
    body: the emulation runs it on the calling thread, but nvcc does not compile it."""
    for kernel, file, line in lib.kernel_calls:
        with _memory_lock:
            if (kernel, file, line) in _warned_calls:
                continue
            _warned_calls.add((kernel, file, line))
        warnings.warn_explicit(  # located at the call in the kernel's source
            f"the __global__ function '{kernel}' is called like a device function; the CPU emulation runs "
            "it on the calling thread, but nvcc rejects the call (a kernel is launched with <<<...>>>, not "
            "called): move its body into a __device__ function that both kernels call",
            CudaPortabilityWarning,
            file,
            line,
        )


def _clean_dirs() -> tuple:
    """Directories whose headers need no rewrite: the prelude's and cunumpy's shipped ones."""
    from ..cuda._source import cuda_include_dir

    shipped = Path(cuda_include_dir()) / "cunumpy"
    return (_PRELUDE_DIR, shipped, shipped.resolve())  # markers spell the path as -I gave it


def _unit_path(directory: Path, key: str, unit: str) -> Path:
    """Where the translation unit is written for the preprocessor. A quoted ``#include`` is
    searched first in the directory of the file holding it, and the unit holds the kernel's
    source: its directory must let nothing be found before the kernel's own (``-iquote``) and
    include directories, as on a GPU. So it is a private one, nested deeper than any line of
    the unit climbs with ``..`` (``#include "../x.cuh"`` would otherwise find a file beside the
    cache directory)."""
    ups = max((line.count("..") for line in unit.splitlines()), default=0)
    folder = directory / f"{key}.unit"
    for _ in range(ups):
        folder = folder / "_"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{key}.cpp"


def _build(directory, key, unit, name, entries, command, flags, checks=CHECKS_NONE) -> EmulationLibrary:
    # Preprocess first, then rewrite the preprocessed text (so headers and macro expansions
    # are covered) and compile that: its line markers keep diagnostics on the user's files.
    source = _unit_path(directory, key, unit)
    _write_atomic(source, unit.encode("utf-8", "surrogatepass"))
    includes = [f"-I{_PRELUDE_DIR}"]
    preprocessed = _run(
        command + list(_BASE_FLAGS) + includes + list(flags) + ["-E", str(source)],
        "preprocessing",
        name,
        output_only=True,
    )
    clean_dirs, clean_files = _clean_dirs(), (str(source), STUBS_FILE)
    found = RewriteFindings()
    rewritten = rewrite_preprocessed(preprocessed, clean_dirs, clean_files, found, shared_dirs=clean_dirs[1:])
    rewritten = add_entry_copies(rewritten, clean_dirs, clean_files, found)
    depends = [(os.path.abspath(path), _digest(path)) for path in user_files(preprocessed, clean_dirs, clean_files)]
    depends = [(path, digest) for path, digest in depends if digest is not None]
    fibers = uses_collectives(rewritten, _PRELUDE_DIR)
    expanded = directory / f"{key}.ii"
    _write_atomic(expanded, rewritten.encode("utf-8", "surrogatepass"))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{key}.", suffix=".so.tmp")
    os.close(fd)
    try:
        if checks == CHECKS_TRACK:
            # -fsanitize=thread would also link the sanitizer's runtime, which cannot be
            # loaded into Python: compile with it, link without.
            obj = tmp[: -len(".so.tmp")] + ".o"
            try:
                _run([*command, *_BASE_FLAGS, *flags, "-c", str(expanded), "-o", obj], "compilation", name)
                _run(
                    [*command, "-shared", "-pthread", "-Wl,-Bsymbolic", "-Wl,--as-needed", obj, "-o", tmp],
                    "linking",
                    name,
                )
            finally:
                _unlink(obj)
        else:
            _run([*command, *_BASE_FLAGS, *flags, str(expanded), "-o", tmp], "compilation", name)
        with _memory_lock:
            _builds[0] += 1
        _thread_builds.count = thread_build_count() + 1
        fingerprint = _fingerprint(Path(tmp).read_bytes())
        _share(tmp, 0o777)
        so = directory / _library_name(key, depends)
        os.replace(tmp, so)
        tmp = so  # from here on, a failure removes the library
        lib = _load_built(so, key, fibers, entries, depends, name, command, found.extern_shared, found.kernel_calls)
        meta = directory / f"{key}.json"
        try:  # the build this one replaces (its headers changed): its library goes
            stale = str(json.loads(meta.read_text())["library"])
        except (OSError, ValueError, KeyError, TypeError):
            stale = None
        _write_atomic(
            meta,
            json.dumps(
                {
                    "fibers": fibers,
                    "kernel": name,
                    "depends": depends,
                    "library": so.name,
                    "extern_shared": found.extern_shared,
                    "kernel_calls": found.kernel_calls,
                    **fingerprint,
                }
            ).encode(),
        )
        if stale and stale != so.name and "/" not in stale:
            _unlink(directory / stale)  # a process that loaded it keeps its mapping
        _remember_digest(so, fingerprint["sha256"])
        _digest_records.flush()
        _compiler_records.flush()
        _unlink(expanded)  # about 1 MB each; kept only when the build fails (the error names it)
    except BaseException:
        _unlink(tmp)
        raise
    return lib
