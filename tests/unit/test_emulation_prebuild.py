"""Building emulation libraries ahead of the first launch: ``python -m cunumpy emulation
build PATH...`` and ``KernelCatalog.build_emulation()``.

Each test uses its own emulation cache directory, so "built" and "cached" are this test's.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from _emulation_support import requires_compiler

from cunumpy.kernels import KernelCatalog

pytestmark = pytest.mark.nosan  # child processes compiling C++: nothing for the sanitizers here

SCALE = """\
extern "C" __global__ void scale(double a, double* y, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
"""

SHIFT = """\
extern "C" __global__ void shift(double b, double* y, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] += b;
}
"""

BROKEN = """\
extern "C" __global__ void broken(double* y)
{
    y[threadIdx.x] = no_such_function_here(1.0);
}
"""


def _cli(*args, cache, env=None):
    environment = dict(os.environ, CUNUMPY_EMULATION_CACHE=str(cache), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "cunumpy", "emulation", "build", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )


def _kernels(tmp_path, package="pkg"):
    """A package with one kernel folder (``pkg/scale``) and a plain ``.cu`` file (``pkg/more/shift.cu``)."""
    pkg = tmp_path / package
    (pkg / "scale").mkdir(parents=True)
    (pkg / "more").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "scale" / "__init__.py").write_text("")
    (pkg / "scale" / "scale_kernels.py").write_text("def scale(a, y, n):\n    y[:n] *= a\n")
    (pkg / "scale" / "scale_cuda.cu").write_text(SCALE)
    (pkg / "more" / "shift.cu").write_text(SHIFT)
    return pkg


@requires_compiler
def test_cli_builds_every_kernel_then_finds_them_cached(tmp_path):
    pkg = _kernels(tmp_path)
    cache = tmp_path / "cache"
    first = _cli(pkg, "--jobs", "2", cache=cache)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert any(line.startswith("built") and " scale " in line for line in lines), first.stdout
    assert any(line.startswith("built") and " shift " in line for line in lines), first.stdout
    assert "2 kernel(s): 2 built" in lines[-1]

    again = _cli(pkg, "--json", cache=cache)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert {(k["name"], k["status"]) for k in report["kernels"]} == {("scale", "cached"), ("shift", "cached")}
    assert report["cached"] == 2 and report["failed"] == 0
    assert all(os.path.isfile(k["library"]) for k in report["kernels"])

    # The key is the one a launch looks up: the kernel folder's kernel, read by
    # Kernel.from_folder in a new process, finds its library without compiling.
    probe = textwrap.dedent(
        """
        from cunumpy.kernels import Kernel
        from cunumpy.kernel_testing import compile_for_emulation
        from cunumpy._emulation import build_count
        compile_for_emulation(Kernel.from_folder("pkg.scale").cuda_kernel)
        print(build_count())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=dict(os.environ, CUNUMPY_EMULATION_CACHE=str(cache), PYTHONPATH=str(tmp_path)),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


@requires_compiler
def test_cli_failure_names_the_kernel_and_the_compiler_error(tmp_path):
    pkg = _kernels(tmp_path)
    (pkg / "more" / "broken.cu").write_text(BROKEN)
    done = _cli(pkg / "more", cache=tmp_path / "cache")
    assert done.returncode == 1
    assert any(line.startswith("built") and " shift " in line for line in done.stdout.splitlines()), done.stdout
    assert any(line.startswith("failed") and " broken " in line for line in done.stdout.splitlines()), done.stdout
    assert "kernel 'broken'" in done.stderr
    assert "no_such_function_here" in done.stderr  # the compiler's diagnostic


def test_cli_bad_arguments(tmp_path):
    missing = _cli(tmp_path / "nowhere", cache=tmp_path / "cache")
    assert missing.returncode == 2
    assert "nowhere" in missing.stderr
    text = tmp_path / "notes.txt"
    text.write_text("x")
    assert _cli(text, cache=tmp_path / "cache").returncode == 2
    assert _cli(tmp_path, "--jobs", "0", cache=tmp_path / "cache").returncode == 2
    bad = _cli(tmp_path, "--sanitize", "nonsense", cache=tmp_path / "cache")
    assert bad.returncode == 2 and "nonsense" in bad.stderr
    empty = _cli(tmp_path, cache=tmp_path / "cache")  # nothing to build there
    assert empty.returncode == 1 and "no CUDA kernel found" in empty.stderr


def test_cli_without_a_compiler(tmp_path):
    pkg = _kernels(tmp_path)
    (tmp_path / "bin").mkdir()  # a PATH without c++, and no CXX
    done = _cli(pkg, cache=tmp_path / "cache", env={"CXX": "", "PATH": str(tmp_path / "bin")})
    assert done.returncode == 1
    assert "compiler" in done.stderr


def test_cli_info_still_the_default():
    done = subprocess.run([sys.executable, "-m", "cunumpy", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "emulation build" in done.stdout


@requires_compiler
def test_catalog_build_emulation(tmp_path, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = _kernels(tmp_path, "prebuild_catalog_ok")
    (pkg / "plain").mkdir()  # a kernel folder without a CUDA port
    (pkg / "plain" / "__init__.py").write_text("")
    (pkg / "plain" / "plain_kernels.py").write_text("def plain(y):\n    y += 1\n")
    catalog = KernelCatalog.from_package("prebuild_catalog_ok")
    results = catalog.build_emulation(jobs=2)
    assert [(r.name, r.status) for r in results] == [("scale", "built")]
    assert results[0].source.endswith("scale_cuda.cu") and os.path.isfile(results[0].library)
    assert [r.status for r in catalog.build_emulation()] == ["cached"]
    assert [r.status for r in catalog["scale"].build_emulation()] == ["cached"]
    assert catalog["plain"].build_emulation() == []
    assert catalog["scale"].build_emulation(sanitize="racecheck")[0].status == "built"  # another library
    with pytest.raises(ValueError, match="jobs"):
        catalog.build_emulation(jobs=0)
    with pytest.raises(TypeError, match="jobs"):
        catalog.build_emulation(jobs=1.5)
    with pytest.raises(ValueError, match="nonsense"):
        catalog.build_emulation(sanitize="nonsense")


@requires_compiler
def test_catalog_build_emulation_names_a_failed_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("CUNUMPY_EMULATION_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = _kernels(tmp_path, "prebuild_catalog_broken")
    (pkg / "scale" / "scale_cuda.cu").write_text(SCALE.replace("y[i] *= a;", "y[i] *= a + no_such_name;"))
    catalog = KernelCatalog.from_package("prebuild_catalog_broken")
    with pytest.raises(RuntimeError, match=r"kernel 'scale'.*\n(.|\n)*no_such_name"):
        catalog.build_emulation(jobs=1)
    with pytest.raises(RuntimeError, match=r"Kernel.build_emulation\(\)(.|\n)*no_such_name"):
        catalog["scale"].build_emulation()


@requires_compiler
def test_cli_kernels_of_one_file_share_its_library_and_templates_are_skipped(tmp_path):
    source = tmp_path / "two.cu"
    template = "template <typename T>\n__global__ void fill(T* y, T v) { y[threadIdx.x] = v; }\n"
    source.write_text(SCALE + SHIFT + template)
    done = _cli(source, "--json", "--jobs", "2", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    statuses = [(k["name"], k["status"]) for k in report["kernels"]]
    assert statuses == [("scale", "built"), ("shift", "cached"), ("fill", "skipped")]
    assert report["kernels"][0]["library"] == report["kernels"][1]["library"]
    assert "template_args" in report["kernels"][2]["error"]
