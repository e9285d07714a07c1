"""CPU emulation: compiler lookup, cache directory, source rewrites, mode choice and the
build cache (one build per key across threads and processes)."""

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from _emulation_support import requires_compiler

from cunumpy import kernel_testing as kt
from cunumpy._emulation import _build, _launch
from cunumpy._emulation._source import PTX_MESSAGE, entry_points, rewrite_source
from cunumpy.kernels import CudaKernel

# ------------------------------------------------------------------ compiler and cache dir


def test_public_names_are_exported():
    for name in (
        "emulate_cuda_kernel",
        "emulated_launches",
        "emulation_compiler",
        "compile_for_emulation",
        "emulation_cache_dir",
    ):
        assert name in kt.__all__ and callable(getattr(kt, name))


def _fake_tool(directory: Path, name: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_compiler_prefers_cxx_then_cplusplus_then_none(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CXX", raising=False)
    assert kt.emulation_compiler() is None
    cplusplus = _fake_tool(bin_dir, "c++")
    assert kt.emulation_compiler() == str(cplusplus)
    mine = _fake_tool(bin_dir, "my-g++")
    monkeypatch.setenv("CXX", "my-g++")
    assert kt.emulation_compiler() == str(mine)
    monkeypatch.setenv("CXX", "my-g++ -fno-lto")
    assert kt.emulation_compiler() == f"{mine} -fno-lto"
    monkeypatch.setenv("CXX", "not-installed-g++")
    assert kt.emulation_compiler() == str(cplusplus)  # $CXX must resolve on PATH


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "here"))
    assert kt.emulation_cache_dir() == tmp_path / "here"
    monkeypatch.delenv("CUNUMPY_EMULATION_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kt.emulation_cache_dir() == tmp_path / ".cache" / "cunumpy" / "emulation"


def test_missing_compiler_is_a_runtime_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    k = CudaKernel('extern "C" __global__ void k(double* x) {}', "k")
    with pytest.raises(RuntimeError, match="C\\+\\+ compiler"):
        kt.emulate_cuda_kernel(k, np.zeros(3))
    with pytest.raises(RuntimeError, match="C\\+\\+ compiler"):
        kt.compile_for_emulation(k)


# ------------------------------------------------------------------ rewrites


def test_extern_shared_becomes_the_dynamic_shared_pointer():
    src = textwrap.dedent("""
        extern __shared__ float file_scope[];
        __global__ void k() {
            extern __shared__ __align__(16) unsigned char smem[];
        }
        // extern __shared__ int in_a_comment[];
        const char *s = "extern __shared__ int in_a_string[];";
    """)
    out = rewrite_source(src)
    assert "static const cunumpy_emu_extern_shared<float> file_scope;" in out
    assert "unsigned char* const smem = static_cast<unsigned char*>(cunumpy_emu_dynamic_shared());" in out
    assert "// extern __shared__ int in_a_comment[];" in out
    assert '"extern __shared__ int in_a_string[];"' in out


def test_inline_ptx_becomes_a_trap():
    src = 'void f(unsigned &l) { asm volatile("mov.u32 %0, %%laneid;" : "=r"(l)); __asm__("x" ::); }\n// asm("y")\n'
    out = rewrite_source(src)
    assert "mov.u32" not in out and out.count(f'cunumpy_emu_inline_ptx("{PTX_MESSAGE}")') == 2
    assert '// asm("y")' in out


def test_inline_ptx_with_brackets_in_its_strings_is_replaced_whole():
    # The closing parenthesis is found outside string literals only.
    src = 'void f() { asm volatile("{ ) (" ::); int after = 1; }\n'
    out = rewrite_source(src)
    assert out.count(f'cunumpy_emu_inline_ptx("{PTX_MESSAGE}")') == 1
    assert "{ ) (" not in out and "::" not in out and "int after = 1; }" in out


def test_source_without_rewrites_is_returned_unchanged():
    src = 'extern "C" __global__ void k(double* x) { x[0] = 1; }'
    assert rewrite_source(src) is src


def test_entry_points_cover_every_kernel_of_the_source():
    src = textwrap.dedent("""
        extern "C" __global__ void a(double* x) {}
        template <typename T> __global__ void t(T* x) {}
        extern "C" __global__ void b(int* x) {}
    """)
    assert entry_points(src, "b") == ["a", "b"]
    assert entry_points(src, "t<double>") == ["a", "b", "t<double>"]


def test_nvrtc_options_translate_to_host_compiler_options():
    flags = _launch.host_compiler_flags(
        [
            "-DA=1",
            "-D",
            "B",
            "--define-macro=C",
            "-I/x",
            "--include-path",
            "/y",
            "-lineinfo",
            "--use_fast_math",
            "--fmad=false",
            "-std=c++17",
            "-UZ",
            "-ffp-contract=off",
            "-arch=sm_90",
        ]
    )
    assert flags == ["-DA=1", "-DB", "-DC", "-I/x", "-I/y", "-ffp-contract=off", "-UZ", "-ffp-contract=off"]


def test_mode_choice_ignores_the_prelude_and_sees_headers(tmp_path):
    prelude = tmp_path / "inc"
    text = f'# 1 "{prelude}/cunumpy_emu/prelude.h"\nvoid __syncthreads();\n# 1 "kernel.cu"\nvoid k() {{ int x = 1; }}\n'
    assert not _build.uses_collectives(text, prelude)
    assert _build.uses_collectives(text + '# 1 "/usr/x/reduce.cuh"\nv = __shfl_xor_sync(m, v, 1);\n', prelude)
    assert _build.uses_collectives('# 1 "k.cu"\n__syncwarp();\n', prelude)


# ------------------------------------------------------------------ argument errors (no compiler needed)


def test_unchecked_kernels_and_wrong_arguments_are_type_errors():
    unchecked = CudaKernel('extern "C" __global__ void k(double* x) {}', "k", check_signature=False)
    with pytest.raises(TypeError, match="check_signature=False"):
        kt.emulate_cuda_kernel(unchecked, np.zeros(3))
    with pytest.raises(TypeError, match="expected a CudaKernel"):
        kt.emulate_cuda_kernel("k", np.zeros(3))
    k = CudaKernel('extern "C" __global__ void k(double* x, int n) {}', "k")
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        kt.emulate_cuda_kernel(k, np.zeros(3))
    with pytest.raises(TypeError, match=r"argument 0 \(double\* x\): expected dtype float64, got float32"):
        kt.emulate_cuda_kernel(k, np.zeros(3, np.float32), 3)
    with pytest.raises(TypeError, match="expected a NumPy array"):
        kt.emulate_cuda_kernel(k, [0.0, 1.0], 2)
    with pytest.raises(TypeError, match="argument 0"):
        kt.emulate_cuda_kernel(k, np.zeros(3, object), 2)
    with pytest.raises(OverflowError, match="argument 1"):
        kt.emulate_cuda_kernel(k, np.zeros(3), 2**40)
    with pytest.raises(TypeError, match="argument 1"):
        kt.emulate_cuda_kernel(k, np.zeros(3), 2.5)
    with pytest.raises(TypeError, match="exactly one"):
        kt.emulate_cuda_kernel(k, np.zeros(3), 3, n_threads=3, grid=1)
    with pytest.raises(ValueError, match="shared_mem"):
        kt.emulate_cuda_kernel(k, np.zeros(3), 3, shared_mem=-1)
    with pytest.raises(TypeError, match="options"):
        kt.emulate_cuda_kernel(k, np.zeros(3), 3, options="-O3")


def test_hostile_index_is_checked_before_anything_runs():
    class Hostile:
        def __index__(self):
            raise ZeroDivisionError("no index")

    k = CudaKernel('extern "C" __global__ void k(double* x, int n) {}', "k")
    with pytest.raises((ZeroDivisionError, TypeError)):
        kt.emulate_cuda_kernel(k, np.zeros(3), Hostile())


def test_views_check_dimensions():
    k = CudaKernel('extern "C" __global__ void k(Array2D<double> a) {}', "k")
    with pytest.raises(TypeError, match="2-dimensional"):
        kt.emulate_cuda_kernel(k, np.zeros(3))


@requires_compiler
def test_complex_without_its_header_names_the_missing_include():
    c = CudaKernel('extern "C" __global__ void k(complex<double>* a) {}', "k")
    with pytest.raises(RuntimeError, match="cupy/complex.cuh") as info:
        kt.emulate_cuda_kernel(c, np.zeros(3, complex))
    assert "kernel 'k'" in str(info.value)


def test_zero_size_launch_checks_but_does_not_compile(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler: compiling would raise
    monkeypatch.delenv("CXX", raising=False)
    k = CudaKernel('extern "C" __global__ void k(double* x, int n) {}', "k")
    assert kt.emulate_cuda_kernel(k, np.zeros(0), 0) is None
    with pytest.raises(OverflowError):
        kt.emulate_cuda_kernel(k, np.zeros(0), 2**40)


# ------------------------------------------------------------------ building


BAD = 'extern "C" __global__ void bad(double* x) { x[0] = undeclared_name; }'


@requires_compiler
def test_compile_error_carries_the_compiler_output():
    k = CudaKernel(BAD, "bad")
    with pytest.raises(RuntimeError, match="undeclared_name") as info:
        kt.compile_for_emulation(k)
    assert "kernel 'bad'" in str(info.value)
    # A failed build is not cached: the next call compiles (and fails) again.
    with pytest.raises(RuntimeError, match="undeclared_name"):
        kt.compile_for_emulation(k)


COUNTED = 'extern "C" __global__ void counted_{tag}(double* x) {{ x[0] = {tag}; }}'


@requires_compiler
def test_one_build_per_key_across_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path))
    src = COUNTED.format(tag=11)
    kernels = [CudaKernel(src, "counted_11") for _ in range(4)]
    before = _build.build_count()
    barrier = threading.Barrier(len(kernels))
    errors = []

    def work(k):
        try:
            barrier.wait()
            kt.compile_for_emulation(k)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in kernels]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _build.build_count() - before == 1
    paths = {kt.compile_for_emulation(k) for k in kernels}
    assert len(paths) == 1 and next(iter(paths)).parent == tmp_path
    assert not list(tmp_path.glob("*.tmp"))  # atomic writes leave no temporaries


_CHILD = """
import sys
from cunumpy import kernel_testing as kt
from cunumpy._emulation import _build
from cunumpy.kernels import CudaKernel
k = CudaKernel({src!r}, "counted_{tag}")
sys.stdin.readline()  # start together
kt.compile_for_emulation(k)
print("builds", _build.build_count())
"""


@requires_compiler
@pytest.mark.nosan
def test_one_build_per_key_across_processes(tmp_path):
    tag = 12
    code = _CHILD.format(src=COUNTED.format(tag=tag), tag=tag)
    env = dict(os.environ, CUNUMPY_EMULATION_CACHE=str(tmp_path))
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = [c.communicate("go\n", timeout=300)[0] for c in children]
    for c, out in zip(children, outputs):
        assert c.returncode == 0, out
    counts = [int(out.split("builds")[1]) for out in outputs]
    assert sorted(counts) == [0, 1], outputs
    assert len(list(tmp_path.glob("*.so"))) == 1


@requires_compiler
def test_disk_cache_is_reused_and_header_edits_rebuild(tmp_path, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    header = tmp_path / "value.cuh"
    header.write_text("#define VALUE 1\n")
    src = '#include "value.cuh"\nextern "C" __global__ void h(double* x) { x[0] = VALUE; }'
    k = CudaKernel(src, "h", include_dirs=[tmp_path])
    first = kt.compile_for_emulation(k)
    _build._memory.clear()  # as in a new process: found on disk, not rebuilt
    before = _build.build_count()
    assert CudaKernel(src, "h", include_dirs=[tmp_path]) is not k
    assert kt.compile_for_emulation(CudaKernel(src, "h", include_dirs=[tmp_path])) == first
    assert _build.build_count() == before
    header.write_text("#define VALUE 2\n")
    second = kt.compile_for_emulation(CudaKernel(src, "h", include_dirs=[tmp_path]))
    assert second != first and _build.build_count() == before + 1
    # A kernel object keeps its build (as on a GPU) until recompile() under emulated_launches.
    assert kt.compile_for_emulation(k) == first
    with kt.emulated_launches():
        assert k.recompile() is None
    assert kt.compile_for_emulation(k) == second


@pytest.mark.nosan  # the cache logic is Python; four g++ runs under the preloaded sanitizers take 30 s
@requires_compiler
def test_headers_named_by_a_macro_rebuild_when_they_change(tmp_path, monkeypatch):
    """The key holds the headers found by name before the build; a header the preprocessor
    reached otherwise (``#include MACRO``, or from a header in another directory) is recorded
    with its contents after the build and checked on every later use, in memory and on disk."""
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "value.cuh"
    header.write_text("#define VALUE 1\n")
    src = (
        '#define VALUE_HEADER "value.cuh"\n#include VALUE_HEADER\n'
        'extern "C" __global__ void macro_h(double* x) { x[0] = VALUE; }'
    )

    def run():
        out = np.zeros(1)
        kt.emulate_cuda_kernel(CudaKernel(src, "macro_h", include_dirs=[tmp_path / "inc"]), out, grid=(1,), block=(1,))
        return out[0]

    assert run() == 1.0
    before = _build.build_count()
    assert run() == 1.0 and _build.build_count() == before  # unchanged: the same build
    header.write_text("#define VALUE 2\n")
    assert run() == 2.0 and _build.build_count() == before + 1  # memory entry was stale
    _build._memory.clear()  # as in a new process
    assert run() == 2.0 and _build.build_count() == before + 1  # the disk entry is current
    header.write_text("#define VALUE 3\n")
    _build._memory.clear()
    assert run() == 3.0 and _build.build_count() == before + 2  # the disk entry was stale
    assert len(list((tmp_path / "cache").glob("*.so"))) == 1  # replaced builds are removed


# ------------------------------------------------------------------ files known by their stat


def _forget_records():
    """What a new process knows of the cache's files: nothing in memory."""
    _build._memory.clear()
    _build._digests_memo.clear()
    _build._prelude_memo.clear()
    _build._identities.clear()
    for records in (_build._digest_records, _build._compiler_records):
        records.loaded_from = None
        records.records = {}


def test_files_changed_just_before_they_are_read_are_read_again(tmp_path, monkeypatch):
    """Timestamps are coarse: a file read less than _SETTLE_NS after it changed could change
    again with the same stat, so its digest is not recorded."""
    import hashlib
    import json

    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path))
    _forget_records()
    header = tmp_path / "fresh.cuh"
    header.write_text("#define VALUE 1\n")
    want = hashlib.sha256(b"#define VALUE 1\n").hexdigest()
    assert _build._digest(header) == want
    records = tmp_path / _build._DIGESTS_FILE
    assert not records.exists() or str(header) not in json.loads(records.read_text())
    monkeypatch.setattr(_build, "_SETTLE_NS", 0)  # settled at once
    assert _build._digest(header) == want
    _build._digest_records.flush()  # as a build does
    stat, digest = json.loads(records.read_text())[str(header)]
    assert digest == want and stat[2] == header.stat().st_size
    _forget_records()
    assert _build._digest(tmp_path / "missing.cuh") is None


@pytest.mark.nosan  # two g++ runs; the cache logic is Python
@requires_compiler
def test_a_header_rewritten_in_place_with_its_size_and_time_still_rebuilds(tmp_path, monkeypatch):
    """A process finding its kernel on disk knows the headers by their stat (read from the
    cache's file-digests.records), not by reading them: the stat holds the change time, which
    a program cannot set back, so writing a header in place and restoring its size and
    modification time still rebuilds."""
    import json
    import time

    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_build, "_SETTLE_NS", 20_000_000)  # records trusted after 20 ms instead of 2 s
    _forget_records()
    header = tmp_path / "value.cuh"
    header.write_text("#define VALUE 1\n")
    before = header.stat()
    time.sleep(0.1)
    src = '#include "value.cuh"\nextern "C" __global__ void inplace(double* x) { x[0] = VALUE; }'

    def run():
        out = np.zeros(1)
        kt.emulate_cuda_kernel(CudaKernel(src, "inplace", include_dirs=[tmp_path]), out, grid=(1,), block=(1,))
        return out[0]

    assert run() == 1.0
    records = json.loads((tmp_path / "cache" / _build._DIGESTS_FILE).read_text())
    assert str(header) in records  # known by its stat from now on
    _forget_records()
    built = _build.build_count()
    assert run() == 1.0 and _build.build_count() == built  # found on disk
    time.sleep(0.1)
    header.write_text("#define VALUE 2\n")
    os.utime(header, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = header.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    _forget_records()
    assert run() == 2.0 and _build.build_count() == built + 1


@pytest.mark.nosan  # three g++ runs; the cache logic is Python
@requires_compiler
def test_a_changed_compiler_rebuilds(tmp_path, monkeypatch):
    """The compiler is named once by running it, then known by the stat of the files it runs
    (compilers.records): a compiler replaced in place, even with the same size and modification
    time, is run again and the kernel rebuilt."""
    import json
    import time

    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_build, "_SETTLE_NS", 20_000_000)
    monkeypatch.delenv("CXX", raising=False)
    real = kt.emulation_compiler()
    _forget_records()
    wrapper = tmp_path / "cxx"
    wrapper.write_text(f'#!/bin/sh\nexec {real} -DSCALE=2 "$@"\n')
    wrapper.chmod(0o755)
    before = wrapper.stat()
    time.sleep(0.1)
    monkeypatch.setenv("CXX", str(wrapper))
    src = 'extern "C" __global__ void scaled(double* x) { x[0] = SCALE; }'

    def run():
        out = np.zeros(1)
        kt.emulate_cuda_kernel(CudaKernel(src, "scaled"), out, grid=(1,), block=(1,))
        return out[0]

    assert run() == 2.0
    compilers = json.loads((tmp_path / "cache" / _build._COMPILERS_FILE).read_text())
    assert any(str(wrapper) in json.loads(key) for key in compilers)
    _forget_records()
    built = _build.build_count()
    assert run() == 2.0 and _build.build_count() == built  # the same compiler: found on disk
    time.sleep(0.1)
    wrapper.write_text(f'#!/bin/sh\nexec {real} -DSCALE=3 "$@"\n')
    os.utime(wrapper, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert wrapper.stat().st_size == before.st_size and wrapper.stat().st_mtime_ns == before.st_mtime_ns
    _forget_records()
    assert run() == 3.0 and _build.build_count() == built + 1


# ------------------------------------------------------------------ the notice of a slow build


def _unique_kernel(tmp_path, name="noticed"):
    value = abs(hash(str(tmp_path))) % 1_000_000  # a new cache key in every test
    return CudaKernel(f'extern "C" __global__ void {name}(double* x) {{ x[0] = {value}; }}', name)


@requires_compiler
def test_a_build_over_the_threshold_says_which_kernel_and_where_once(tmp_path, monkeypatch, caplog):
    import logging

    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CUNUMPY_EMULATION_NOTICE_AFTER", "0")  # every build is "slow"
    k = _unique_kernel(tmp_path)
    with caplog.at_level(logging.WARNING, logger="cunumpy.emulation"):
        kt.emulate_cuda_kernel(k, np.zeros(1), grid=(1,), block=(1,))
        kt.emulate_cuda_kernel(k, np.zeros(1), grid=(1,), block=(1,))  # built: nothing more
    lines = [r.getMessage() for r in caplog.records if r.name == "cunumpy.emulation"]
    assert len(lines) == 1, lines
    assert "compiling the CPU emulation of CUDA kernel 'noticed'" in lines[0]
    assert f"cached in {tmp_path / 'cache'}" in lines[0]


@requires_compiler
def test_a_build_under_the_threshold_or_with_the_notice_off_says_nothing(tmp_path, monkeypatch, caplog):
    import logging

    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING, logger="cunumpy.emulation"):
        monkeypatch.setenv("CUNUMPY_EMULATION_NOTICE_AFTER", "off")
        kt.emulate_cuda_kernel(_unique_kernel(tmp_path, "quiet_a"), np.zeros(1), grid=(1,), block=(1,))
        monkeypatch.setenv("CUNUMPY_EMULATION_NOTICE_AFTER", "600")  # far above any build
        kt.emulate_cuda_kernel(_unique_kernel(tmp_path, "quiet_b"), np.zeros(1), grid=(1,), block=(1,))
    assert not [r for r in caplog.records if r.name == "cunumpy.emulation"]
    monkeypatch.setenv("CUNUMPY_EMULATION_NOTICE_AFTER", "soon")
    with pytest.raises(
        ValueError, match="CUNUMPY_EMULATION_NOTICE_AFTER must be a number of seconds or 'off', got 'soon'"
    ):
        kt.emulate_cuda_kernel(_unique_kernel(tmp_path, "quiet_c"), np.zeros(1), grid=(1,), block=(1,))


@pytest.mark.nosan  # a child process with a slow compiler; the logic is Python
@requires_compiler
def test_a_slow_first_build_prints_one_line_on_stderr_unless_silenced(tmp_path):
    # The default threshold (1 s) against a compiler that takes 1.5 s a run: a program that
    # configured no logging gets the line on stderr; setLevel(ERROR) silences it.
    real = kt.emulation_compiler()
    slow = tmp_path / "slow-cxx"
    slow.write_text(f'#!/bin/sh\nsleep 1.5\nexec {real} "$@"\n')
    slow.chmod(0o755)
    code = textwrap.dedent("""
        import logging, sys
        import numpy as np
        import cunumpy.kernel_testing as kt
        from cunumpy.kernels import CudaKernel
        if sys.argv[1] == "quiet":
            logging.getLogger("cunumpy.emulation").setLevel(logging.ERROR)
        k = CudaKernel('extern "C" __global__ void slowly(double* x) { x[0] = 2; }', "slowly")
        out = np.zeros(1)
        kt.emulate_cuda_kernel(k, out, grid=(1,), block=(1,))
        print("RESULT", out[0])
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_EMULATION_")}
    for mode in ("loud", "quiet"):
        env.update(CXX=str(slow), CUNUMPY_EMULATION_CACHE=str(tmp_path / f"cache-{mode}"))
        done = subprocess.run([sys.executable, "-c", code, mode], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and "RESULT 2.0" in done.stdout, done.stderr
        lines = [line for line in done.stderr.splitlines() if "compiling the CPU emulation" in line]
        if mode == "loud":
            assert len(lines) == 1, done.stderr
            assert "'slowly'" in lines[0] and str(tmp_path / "cache-loud") in lines[0]
        else:
            assert lines == [], done.stderr
