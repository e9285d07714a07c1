"""Kernel.from_folder (API.md 2.6) and KernelCatalog (2.7) on the example package
tests/unit/kernel_pkg (several kernels; CUDA ports for some; Pyccel-, Numba- and NumPy host
implementations) and on broken folders built in tmp_path."""

import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import cunumpy as xp
from cunumpy.kernels import _cuda_kernel

Kernel = xp.kernels.Kernel
KernelCatalog = xp.kernels.KernelCatalog
PACKAGE_DIR = Path(__file__).parent / "kernel_pkg"
_counter = itertools.count()


@pytest.fixture(autouse=True)
def automatic_selection():
    host = xp.kernels.get_host_kernel_implementation()
    xp.kernels.set_host_kernel_implementation(None)
    yield
    xp.kernels.set_host_kernel_implementation(host)


@pytest.fixture
def catalog():
    return KernelCatalog.from_package("kernel_pkg")


def make_package(root: Path, files: dict) -> str:
    """A fresh importable package under root (unique name) with the given files."""
    name = f"cn_tmp_kernels_{next(_counter)}"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return name


HOST = "def {name}(x, n):\n    x[:n] += 1.0\n"
CUDA = 'extern "C" __global__ void {name}(double* x, long long n) {{ }}\n'


# --------------------------------------------------------------------------- the example package


def test_catalog_of_the_example_package(catalog):
    assert list(catalog) == ["axpy", "norm2", "scale_rows", "smooth"]
    assert len(catalog) == 4 and "axpy" in catalog and "nope" not in catalog
    assert catalog.with_cuda == ["axpy", "norm2", "scale_rows"]
    assert catalog.without_cuda == ["smooth"]
    assert catalog.summary() == "3/4 kernels have CUDA (missing: smooth)"
    assert str(catalog) == catalog.summary()
    assert [n for n, _ in catalog.parity_cases()] == ["axpy", "norm2", "scale_rows"]
    catalog.check_signatures()
    with pytest.raises(TypeError):
        catalog["axpy"] = None


def test_implementations_and_files(catalog):
    assert catalog["axpy"].implementations == ("pyccel", "numpy", "python", "cuda")
    assert catalog["scale_rows"].implementations == ("pyccel", "numba", "python", "cuda")
    assert catalog["smooth"].implementations == ("pyccel", "numpy", "python")
    assert catalog["axpy"].test_args_module == "kernel_pkg.axpy.axpy_test_args"
    assert catalog["axpy"].test_args.N_THREADS == 1000
    assert catalog["norm2"].test_args_module is None
    assert catalog["smooth"].cuda_path == PACKAGE_DIR / "smooth" / "smooth_cuda.cu"
    # Default include dirs: the folder itself and the source root of the top-level package.
    cuda = catalog["axpy"].cuda_kernel
    assert cuda.include_dirs[0] == PACKAGE_DIR / "axpy"
    assert PACKAGE_DIR.parent in cuda.include_dirs
    assert Path(cuda.source_dir) == PACKAGE_DIR / "axpy"
    assert not cuda.is_compiled


def test_host_calls_through_each_implementation(catalog):
    with xp.use_backend("numpy"):
        x, y = np.arange(6.0), np.ones(6)
        for implementation in ("pyccel", "numpy", "python", None):
            with xp.kernels.use_host_kernel_implementation(implementation):
                catalog["axpy"](2.0, x, y, 6)
        np.testing.assert_allclose(y, 1.0 + 8.0 * x)
        field, out = np.arange(5.0) ** 2, np.zeros(5)
        catalog["smooth"](field, out)
        assert catalog["smooth"].selected() == "pyccel"
        with xp.kernels.use_host_kernel_implementation("numpy"):
            out2 = np.zeros(5)
            catalog["smooth"](field, out2)
        np.testing.assert_allclose(out, out2)


def test_numba_implementation(catalog):
    pytest.importorskip("numba")
    with xp.use_backend("numpy"), xp.kernels.use_host_kernel_implementation("numba"):
        a = np.ones((3, 4))
        catalog["scale_rows"](a, np.array([1.0, 2.0, 3.0]))
        assert catalog["scale_rows"].selected() == "numba"
        np.testing.assert_allclose(a[:, 0], [1.0, 2.0, 3.0])
        with pytest.raises(LookupError, match="numba"):
            catalog["axpy"](1.0, np.ones(2), np.ones(2), 2)


def test_outputs_from_annotations_and_host_options(catalog):
    by_annotations = KernelCatalog.from_package("kernel_pkg", outputs="annotations")
    assert by_annotations["norm2"].host_kernel.outputs == ("out",)
    assert by_annotations["axpy"].host_kernel.outputs == ("y",)
    per_name = KernelCatalog.from_package(
        "kernel_pkg", host_options=lambda name: {"outputs": (0,)} if name == "smooth" else None
    )
    assert per_name["smooth"].host_kernel.outputs == (0,)
    assert per_name["axpy"].host_kernel.outputs is None
    shared = KernelCatalog.from_package("kernel_pkg", host_options={"outputs": ()}, outputs="annotations")
    assert shared["norm2"].host_kernel.outputs == ()  # host_options win
    with pytest.raises(ValueError, match="annotations"):
        KernelCatalog.from_package("kernel_pkg", outputs="all")


def test_from_folder_of_one_kernel():
    k = Kernel.from_folder("kernel_pkg.axpy", dispatch="arrays", missing_cuda="fallback", block_size=64)
    assert k.name == "axpy" and k.dispatch == "arrays" and k.missing_cuda == "fallback"
    assert k.cuda_kernel.block_size == 64
    extra = Kernel.from_folder("kernel_pkg.smooth", extra_implementations={"numba": lambda: lambda f, o: None})
    assert extra.implementations == ("pyccel", "numba", "numpy", "python")


def test_host_fallback_becomes_numpy_and_compile_host_fallback():
    def never(module):
        raise RuntimeError("no pyccel in this test")

    calls = []

    def numpy_axpy(alpha, x, y, n):
        calls.append("numpy")
        y[:n] += alpha * x[:n]

    cat = KernelCatalog.from_package("kernel_pkg", compile_host=never, host_fallback={"axpy": numpy_axpy})
    assert cat["axpy"].implementations[:2] == ("pyccel", "numpy")
    with xp.use_backend("numpy"):
        y = np.zeros(3)
        with pytest.warns(RuntimeWarning, match="no pyccel in this test"):
            cat["axpy"](1.0, np.ones(3), y, 3)
        assert cat["axpy"].selected() == "pyccel" and calls == ["numpy"]
        with pytest.warns(RuntimeWarning, match="uncompiled Python"):
            cat["smooth"](np.ones(3), np.zeros(3))


def test_register_and_constructor():
    cat = KernelCatalog()
    k = Kernel(lambda x: None, name="mine")
    assert cat.register(k) is k and cat["mine"] is k
    cat.register(k, "alias")
    with pytest.raises(KeyError, match="mine"):
        cat.register(k)
    with pytest.raises(TypeError, match="Kernel"):
        cat.register(lambda x: None)
    assert list(KernelCatalog({"a": k})) == ["a"]
    assert list(KernelCatalog([k])) == ["mine"]


def test_summary_truncates():
    cat = KernelCatalog({f"k{i}": Kernel(lambda x: None, name=f"k{i}") for i in range(5)})
    assert cat.summary(max_missing=2) == "0/5 kernels have CUDA (missing: k0, k1, ...)"
    with pytest.raises(ValueError, match="max_missing"):
        cat.summary(max_missing=-1)


def test_compile_all(catalog, monkeypatch):
    assert KernelCatalog({"k": Kernel(lambda x: None, name="k")}).compile_all() == []
    with pytest.raises(ValueError, match="'jobs' must be >= 1, got 0"):
        catalog.compile_all(jobs=0)
    for bad in (True, 1.5, "2"):
        with pytest.raises(TypeError, match="'jobs' must be an int or None"):
            catalog.compile_all(jobs=bad)

    class Hook:
        compiled = []  # noqa: RUF012 - shared on purpose: the test reads it from the class

        def compile(self, kernel):
            self.compiled.append(kernel.name)

    monkeypatch.setattr(_cuda_kernel, "emulation_hook", Hook())
    assert catalog.compile_all(jobs=2) == ["axpy", "norm2", "scale_rows"]
    assert sorted(Hook.compiled) == ["axpy", "norm2", "scale_rows"]


def test_compile_all_without_cupy_is_a_runtime_error(catalog):
    if xp.cupy_available():
        pytest.skip("a CuPy (real or fake) is available")
    with pytest.raises(RuntimeError, match="CuPy"):
        catalog.compile_all()


def test_check_signatures_lists_every_mismatch(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(
        tmp_path,
        {
            "one/__init__.py": "",
            "one/one_kernels.py": "def one(x, n):\n    pass\n",
            "one/one_cuda.cu": 'extern "C" __global__ void one(double* y, long long n) { }\n',
            "two/__init__.py": "",
            "two/two_kernels.py": "def two(x, n):\n    pass\n",
            "two/two_numpy.py": "def two(n, x):\n    pass\n",
        },
    )
    cat = KernelCatalog.from_package(package)
    with pytest.raises(ValueError, match=r"(?s)2 kernel signature.*'one'.*\(y, n\).*'two'.*numpy"):
        cat.check_signatures()


# --------------------------------------------------------------------------- broken folders


def test_folder_not_a_package(tmp_path, monkeypatch):
    with pytest.raises(ModuleNotFoundError):
        Kernel.from_folder("cn_no_such_kernel_package")
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(tmp_path, {"mod.py": ""})
    with pytest.raises(ModuleNotFoundError, match="not a package"):
        Kernel.from_folder(f"{package}.mod")


def test_missing_host_module(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(tmp_path, {"k/__init__.py": "", "k/k_cuda.cu": CUDA.format(name="k")})
    with pytest.raises(FileNotFoundError, match="k_kernels.py"):
        Kernel.from_folder(f"{package}.k")


def test_kernel_folder_without_init_names_the_folder(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(tmp_path, {"k/k_kernels.py": HOST.format(name="k")})
    with pytest.raises(ModuleNotFoundError, match=r"k.*__init__"):
        KernelCatalog.from_package(package)


def test_syntax_error_in_a_host_module_names_the_file(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(tmp_path, {"k/__init__.py": "", "k/k_kernels.py": "def k(x, n:\n"})
    with pytest.raises(ImportError, match=r"k_kernels\.py"):
        KernelCatalog.from_package(package)
    package = make_package(
        tmp_path, {"k/__init__.py": "", "k/k_kernels.py": HOST.format(name="k"), "k/k_numba.py": "def k(:\n"}
    )
    with pytest.raises(ImportError, match=r"k_numba\.py"):
        KernelCatalog.from_package(package)


def test_host_module_without_the_function(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(tmp_path, {"k/__init__.py": "", "k/k_kernels.py": HOST.format(name="other")})
    with pytest.raises(AttributeError, match=r"k_kernels\.py.*'k'"):
        Kernel.from_folder(f"{package}.k")


def test_cuda_file_without_the_kernel_names_the_file(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(
        tmp_path,
        {"k/__init__.py": "", "k/k_kernels.py": HOST.format(name="k"), "k/k_cuda.cu": CUDA.format(name="other")},
    )
    with pytest.raises(ValueError, match=r"k_cuda\.cu"):
        KernelCatalog.from_package(package)


def test_cuda_source_that_is_not_utf8_names_the_file_and_the_byte_offset(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(tmp_path, {"k/__init__.py": "", "k/k_kernels.py": HOST.format(name="k")})
    source = tmp_path / package / "k" / "k_cuda.cu"
    text = "// one Latin-1 letter: caf\xe9\n" + CUDA.format(name="k")
    source.write_bytes(text.encode("latin-1"))
    offset = text.index("\xe9")
    # was: TypeError: function takes exactly 5 arguments (1 given)
    with pytest.raises(UnicodeDecodeError) as info:
        KernelCatalog.from_package(package)
    message = str(info.value)
    assert str(source) in message and f"byte offset {offset} (line 1)" in message, message
    assert "UTF-8" in message and "0xe9" in message
    assert (info.value.start, info.value.end) == (offset, offset + 1)
    assert isinstance(info.value.__cause__, UnicodeDecodeError)  # the decode error itself is kept


def _fifo(path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(path)


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda path: path.mkdir(), IsADirectoryError, "is a directory"),
        (_fifo, OSError, "not a regular file"),  # opening it would block
        (lambda path: path.symlink_to(path.parent / "gone.cu"), FileNotFoundError, "dangling symbolic link"),
    ],
    ids=["directory", "fifo", "dangling-link"],
)
def test_cuda_source_that_is_not_a_file_is_an_error_not_a_kernel_without_cuda(
    tmp_path, monkeypatch, make, error, words
):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(tmp_path, {"k/__init__.py": "", "k/k_kernels.py": HOST.format(name="k")})
    source = tmp_path / package / "k" / "k_cuda.cu"
    make(source)
    with pytest.raises(error, match=words) as info:
        Kernel.from_folder(f"{package}.k")
    assert info.value.filename == str(source)
    # without anything there the kernel simply has no CUDA
    if source.is_dir():
        source.rmdir()
    else:
        source.unlink()
    assert not Kernel.from_folder(f"{package}.k").has_cuda


def test_long_names_warn(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    name = "k" * 49
    package = make_package(tmp_path, {f"{name}/__init__.py": "", f"{name}/{name}_kernels.py": HOST.format(name=name)})
    with pytest.warns(UserWarning, match="63"):
        Kernel.from_folder(f"{package}.{name}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Kernel.from_folder(f"{package}.{name}", check_name_length=False)
    ok = "k" * 48
    package = make_package(tmp_path, {f"{ok}/__init__.py": "", f"{ok}/{ok}_kernels.py": HOST.format(name=ok)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Kernel.from_folder(f"{package}.{ok}")


def test_folder_declares_its_kernel_in_its_own_init(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = make_package(
        tmp_path,
        {
            "push/__init__.py": "import cunumpy as xp\nkernel = xp.kernels.Kernel.from_folder(__name__, host_suffix='_pyccel')\n",
            "push/push_pyccel.py": HOST.format(name="push"),
        },
    )
    module = importlib.import_module(f"{package}.push")
    assert module.kernel.name == "push" and not module.kernel.has_cuda


# --------------------------------------------------------------------------- device dispatch


def test_catalog_device_dispatch_under_the_fake(catalog, device_only, monkeypatch):
    launches = []

    class Hook:
        def launch(self, kernel, args, grid, block, shared_mem):
            launches.append((kernel.name, grid, block))

    monkeypatch.setattr(_cuda_kernel, "emulation_hook", Hook())
    a, factors = xp.zeros((37, 21)), xp.ones(37)
    catalog["scale_rows"](a, factors, block=(16, 8))
    assert launches == [("scale_rows", (3, 3), (16, 8))]
    with pytest.raises(NotImplementedError, match="smooth_cuda.cu"):
        catalog["smooth"](xp.ones(4), xp.zeros(4))
    fallback = KernelCatalog.from_package("kernel_pkg", missing_cuda="fallback", host_options={"outputs": (1,)})
    out = xp.zeros(4)
    with pytest.warns(RuntimeWarning, match="smooth"):
        fallback["smooth"](xp.ones(4), out)
    np.testing.assert_allclose(out.get(), 1.0)


# --------------------------------------------------------------------------- Pyccel


def _pyccel_exe():
    exe = shutil.which("pyccel") or str(Path(sys.executable).parent / "pyccel")
    return exe if os.path.exists(exe) else None


@pytest.fixture(scope="session")
def pyccel_compile(tmp_path_factory):
    """compile_host for the example package: Pyccel to C, each module once per session."""
    pytest.importorskip("pyccel")
    exe = _pyccel_exe()
    if exe is None:
        pytest.skip("the pyccel command is not installed")
    built = {}

    def compile_host(module):
        source = Path(module.__file__)
        if source in built:
            return built[source]
        work = tmp_path_factory.mktemp("pyccel_" + source.stem)
        shutil.copy(source, work)
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        for command in (["compile", "--language", "c"], ["--language", "c"]):
            done = subprocess.run([exe, *command, source.name], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=600)  # fmt: skip
            libraries = list(work.glob(f"{source.stem}*.so"))
            if done.returncode == 0 and libraries:
                break
        if done.returncode != 0 or not libraries:
            raise RuntimeError(f"pyccel failed:\n{done.stdout}\n{done.stderr}")
        spec = importlib.util.spec_from_file_location(source.stem, libraries[0])
        compiled = importlib.util.module_from_spec(spec)
        sys.modules[source.stem] = compiled  # the stub lookup finds the module by name
        spec.loader.exec_module(compiled)
        built[source] = compiled
        return compiled

    return compile_host


@pytest.mark.nosan
def test_pyccel_compiled_host_through_the_catalog(pyccel_compile):
    cat = KernelCatalog.from_package("kernel_pkg", compile_host=pyccel_compile, outputs="annotations")
    axpy = cat["axpy"]
    with xp.use_backend("numpy"), warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed compile would warn
        x, y = np.arange(8.0), np.ones(8)
        axpy(0.5, x, y, 8)
        np.testing.assert_allclose(y, 1.0 + 0.5 * x)
        compiled = axpy._implementation_set.get("pyccel")
        assert compiled.compiled and type(compiled.build()).__name__ == "builtin_function_or_method"
        # The parameter names of the compiled function come from Pyccel's stub.
        assert Kernel(compiled.build()).host_parameters() == ("alpha", "x", "y", "n")
        axpy.check_signature()


# --------------------------------------------------------------------------- parity of the example package

from cunumpy import kernel_testing  # noqa: E402


@pytest.mark.nosan  # the CPU emulation spawns a C++ compiler
@pytest.mark.parametrize("kernel", kernel_testing.parity_cases(KernelCatalog.from_package("kernel_pkg")))
def test_example_package_parity(kernel):
    """Host vs CUDA for every ported kernel with test arguments: on a GPU, or on the fake CuPy
    through the CPU emulation; skipped (with the reason) where neither is available."""
    kernel_testing.check_parity(kernel)


def test_bad_options_are_type_errors():
    with pytest.raises(TypeError, match="host_options"):
        Kernel.from_folder("kernel_pkg.axpy", host_options=[("outputs", (0,))])
    with pytest.raises(TypeError, match="compile_host"):
        Kernel.from_folder("kernel_pkg.axpy", compile_host="pyccel")
    with pytest.raises(TypeError, match="extra_implementations"):
        Kernel.from_folder("kernel_pkg.axpy", extra_implementations=[1])
    with pytest.raises(TypeError, match="host_fallback"):
        KernelCatalog.from_package("kernel_pkg", host_fallback=3)


@pytest.mark.nosan
def test_building_a_catalog_loads_no_implementation():
    """Construction imports the host modules only: Numba is imported when its implementation
    is first selected, and nothing is compiled."""
    code = (
        f"import sys; sys.path.insert(0, {str(PACKAGE_DIR.parent)!r})\n"
        "import cunumpy as xp\n"
        "cat = xp.kernels.KernelCatalog.from_package('kernel_pkg')\n"
        "assert 'numba' not in sys.modules, 'numba imported at construction'\n"
        "assert not any(k.cuda_kernel.is_compiled for k in cat.values() if k.has_cuda)\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CUNUMPY_FAKE_CUPY"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
