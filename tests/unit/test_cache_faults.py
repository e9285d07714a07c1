"""The emulation cache under faults: damaged entries, read-only cache directories, a compiler
that writes an empty library, quoted includes climbing out of the kernel's folder. A damaged library once killed the next process (SIGBUS while
it was loaded), so those cases run in child processes."""

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _emulation_support import requires_compiler

from cunumpy import kernel_testing as kt
from cunumpy._emulation import _build
from cunumpy.kernels import CudaKernel

# The cache logic is Python; under the preloaded sanitizers every compiler run is slow, and the
# child processes cannot load the sanitized extension without them.
pytestmark = [requires_compiler, pytest.mark.nosan]

FILL = 'extern "C" __global__ void fill_{tag}(double* x, long long n) {{ long long i = threadIdx.x; if (i < n) x[i] = {tag} + i; }}'

# One launch in a fresh process: how many libraries it built and whether the result is right.
CHILD = textwrap.dedent(
    """
    import numpy as np
    from cunumpy import kernel_testing as kt
    from cunumpy._emulation import _build
    from cunumpy.kernels import CudaKernel
    k = CudaKernel({src!r}, "fill_{tag}")
    x = np.zeros(8)
    kt.emulate_cuda_kernel(k, x, 8, grid=(1,), block=(8,))
    assert (x == {tag} + np.arange(8)).all(), x
    print("builds", _build.build_count(), flush=True)
    """
)


def child(tag, cache, **kwargs):
    code = CHILD.format(src=FILL.format(tag=tag), tag=tag)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["CUNUMPY_EMULATION_CACHE"] = str(cache)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, **kwargs)


def builds(result) -> int:
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stdout}\n{result.stderr}"
    return int(result.stdout.split("builds")[1])


def entry(cache: Path):
    (meta,) = cache.glob("*.json")
    info = json.loads(meta.read_text())
    return meta, info, cache / info["library"]


def truncate(size):
    def damage(meta, info, library):
        with open(library, "r+b") as f:
            f.truncate(size)

    return damage


def flip_a_byte(meta, info, library):
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    library.write_bytes(bytes(data))


def forget_the_checksum(meta, info, library):
    # an entry of an earlier version, which recorded no checksum, is not trusted
    meta.write_text(json.dumps({k: v for k, v in info.items() if k not in ("size", "sha256")}))


@pytest.mark.parametrize(
    "damage",
    [truncate(1024), truncate(4096), truncate(12288), truncate(0), flip_a_byte, forget_the_checksum],
    ids=["1KB", "4KB", "12KB", "empty", "flipped-byte", "no-checksum"],
)
def test_a_damaged_library_is_rebuilt_by_the_next_process_not_loaded(tmp_path, damage):
    assert builds(child(1, tmp_path)) == 1
    damage(*entry(tmp_path))
    # was: killed by SIGBUS while loading the truncated library, or the altered one was used
    assert builds(child(1, tmp_path)) == 1
    assert builds(child(1, tmp_path)) == 0  # the rebuilt entry is sound again
    assert len(list(tmp_path.glob("*.so"))) == 1


def test_an_entry_records_the_size_and_checksum_of_its_library_and_follows_the_umask(tmp_path, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path))
    kt.compile_for_emulation(CudaKernel(FILL.format(tag=2), "fill_2"))
    meta, info, library = entry(tmp_path)
    import hashlib

    assert info["size"] == library.stat().st_size
    assert info["sha256"] == hashlib.sha256(library.read_bytes()).hexdigest()
    # temporary files are created private (0600); a cache is shared like files made normally
    umask = _build._umask()
    assert stat.S_IMODE(meta.stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(library.stat().st_mode) == 0o777 & ~umask


# ------------------------------------------------------------------ read-only caches

# Makes the cache directory read-only for the child, as a read-only file system (a prebuilt
# cache in an image) does: every Python-level write under it fails with EROFS. (Permissions
# would not do: root writes anywhere, and another user cannot run this interpreter.)
READ_ONLY = textwrap.dedent(
    """
    import os, sys
    _root = os.path.realpath({cache!r})
    _WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    _CHANGES = {{"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.chmod", "os.truncate", "os.symlink",
                 "os.link", "os.utime", "os.chown"}}

    def _inside(path):
        try:
            p = os.path.realpath(os.fsdecode(path))
        except Exception:
            return False
        return (p == _root or p.startswith(_root + os.sep)) and p.endswith({suffix!r})

    def _read_only(event, args):
        if event == "open":
            paths = [args[0]] if (args[2] or 0) & _WRITES or any(c in (args[1] or "") for c in "wax+") else []
        elif event in _CHANGES:
            paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
        else:
            return
        for path in paths:
            if isinstance(path, (str, bytes, os.PathLike)) and _inside(path):
                print("write refused:", event, os.fsdecode(path), file=sys.stderr)
                raise OSError({errno}, os.strerror({errno}), os.fsdecode(path))

    sys.addaudithook(_read_only)
    """
)


def read_only_child(tag, cache, suffix="", errno=30):
    """``child`` with the writes under ``cache`` to paths ending in ``suffix`` refused with
    ``errno`` (EROFS: a read-only file system)."""
    code = READ_ONLY.format(cache=str(cache), suffix=suffix, errno=errno) + CHILD.format(
        src=FILL.format(tag=tag), tag=tag
    )
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["CUNUMPY_EMULATION_CACHE"] = str(cache)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_a_read_only_cache_holding_the_library_is_used_without_writing(tmp_path):
    assert builds(child(3, tmp_path)) == 1
    for lock in tmp_path.glob("*.lock"):
        lock.unlink()  # a complete entry needs no lock file
    # was: OSError: [Errno 30] Read-only file system: '<key>.lock'
    result = read_only_child(3, tmp_path)
    assert builds(result) == 0
    assert "write refused" not in result.stderr  # nothing was even tried


def test_a_build_in_a_read_only_cache_says_to_set_the_variable(tmp_path):
    result = read_only_child(4, tmp_path)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError") and "CUNUMPY_EMULATION_CACHE" in last, result.stderr
    assert "'fill_4'" in last and "not writable" in last and str(tmp_path) in last
    # a damaged entry there is not loaded either: it needs a build, with the same message
    assert builds(child(4, tmp_path)) == 1
    truncate(4096)(*entry(tmp_path))
    result = read_only_child(4, tmp_path)
    assert result.returncode != 0 and "CUNUMPY_EMULATION_CACHE" in result.stderr.strip().splitlines()[-1]


def test_another_users_lock_file_in_a_shared_cache_still_locks(tmp_path):
    assert builds(child(6, tmp_path)) == 1
    meta, _info, _library = entry(tmp_path)
    meta.unlink()  # the entry must be built again, under its lock
    # its lock file belongs to another user: opening it for writing is refused (EACCES)
    result = read_only_child(6, tmp_path, suffix=".lock", errno=13)
    assert builds(result) == 1, result.stderr
    assert "write refused" in result.stderr  # the refusal happened, and the lock was taken read-only
    assert len(list(tmp_path.glob("*.json"))) == 1


# ------------------------------------------------------------------ compiler and includes


def test_a_compiler_that_writes_an_empty_library_names_the_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    real = kt.emulation_compiler()
    empty = tmp_path / "empty-c++"
    # preprocesses (and answers --version) with the real compiler; "compiles" to an empty file
    empty.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        for a in "$@"; do case "$a" in -E|--version) exec {real} "$@";; esac; done
        out=""; prev=""
        for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
        : > "$out"
        """)
    )
    empty.chmod(0o755)
    k = CudaKernel(FILL.format(tag=5), "fill_5")
    # was: OSError: .../<key>.<hash>.so: file too short
    with pytest.raises(RuntimeError, match=r"kernel 'fill_5'.*cannot be loaded.*file too short"):
        kt.emulate_cuda_kernel(k, np.zeros(8), 8, grid=(1,), block=(8,), compiler=str(empty))
    cache = tmp_path / "cache"
    assert not list(cache.glob("*.json")) and not list(cache.glob("*.so"))  # nothing cached
    x = np.zeros(8)
    kt.emulate_cuda_kernel(k, x, 8, grid=(1,), block=(8,))  # the real compiler then works
    assert (x == 5 + np.arange(8)).all()


def test_quoted_includes_climbing_out_of_the_kernel_folder_start_from_it_not_from_the_cache(tmp_path, monkeypatch):
    # tmp/a/cache is the cache, tmp/a/x.cuh sits beside it; tmp/b/k holds the kernel, tmp/b/x.cuh
    # is the header it means
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "a" / "cache"))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.cuh").write_text("#define VALUE 2.0\n")
    (tmp_path / "b" / "k").mkdir(parents=True)
    (tmp_path / "b" / "x.cuh").write_text("#define VALUE 1.0\n")
    (tmp_path / "b" / "k" / "k_cuda.cu").write_text(
        '#include "../x.cuh"\nextern "C" __global__ void k(double* x) { x[0] = VALUE; }\n'
    )
    x = np.zeros(1)
    kt.emulate_cuda_kernel(CudaKernel.from_file(tmp_path / "b" / "k" / "k_cuda.cu"), x, grid=(1,), block=(1,))
    assert x[0] == 1.0  # was 2.0: the header beside the cache directory
    # a kernel without a directory finds nothing there either (as NVRTC would not)
    src = '#include "../x.cuh"\n#include "../../x.cuh"\nextern "C" __global__ void k2(double* x) { x[0] = VALUE; }\n'
    (tmp_path / "x.cuh").write_text("#define VALUE 3.0\n")
    with pytest.raises(RuntimeError, match="x.cuh"):
        kt.emulate_cuda_kernel(CudaKernel(src, "k2"), x, grid=(1,), block=(1,))
