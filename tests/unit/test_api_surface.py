"""The documented import paths exist, forbidden ones do not, and `import cunumpy` stays light."""

import importlib
import os
import subprocess
import sys

import pytest

import cunumpy as xp

# Names of the seed guide's cheat sheet and API.md that the foundation provides.
FOUNDATION_NAMES = [
    "set_backend",
    "use_backend",
    "get_backend",
    "backend_info",
    "cupy_available",
    "MIN_CUPY_VERSION",
    "cupy_version_supported",
    "get_array_backend",
    "get_array_module",
    "is_cpu",
    "is_gpu",
    "same_backend",
    "assert_same_backend",
    "to_numpy",
    "to_cupy",
    "to_cunumpy",
    "as_device_array",
    "to_host_async",
    "synchronize",
    "host_call",
    "evaluate_on_host",
    "setup_on_host",
    "default_float_dtype",
    "require_version",
    "__version__",
    "numpy_backend",
    "cupy_backend",
    "scipy",
    "optimize",
    "integrate",
    "profiling.timed_region",
    "profiling.Timing",
    "profiling.nvtx_range",
    "profiling.count_transfers",
    "profiling.assert_no_transfers",
    "profiling.TransferCounter",
    "profiling.TransferEvent",
    "profiling.TransferBudget",
    "cuda.device_count",
    "cuda.set_device",
    "cuda.memory_info",
    "cuda.free_memory",
    "cuda.pin_memory",
    "cuda.bind_local_device",
    "cuda.set_device_for_rank",
    "cuda.max_shared_memory_per_block",
    "cuda.DEFAULT_SHARED_MEMORY_PER_BLOCK",
    "cuda.is_hip",
    "cuda.stream",
    "cuda.create_stream",
    "cuda.create_event",
    "cuda.record_event",
    "cuda.wait_event",
    "cuda.HostStream",
    "cuda.HostEvent",
    "cuda.set_cuda_debug",
    "cuda.get_cuda_debug",
    "cuda.cuda_debug",
    "cuda.DEBUG_OPTIONS",
    "memory.HostStaging",
    "memory.StagedCopy",
    "memory.HostCopy",
    "memory.DeviceMirror",
    "rng.get_rng",
    "mpi.get_mpi",
    "mpi.launched_under_mpi",
    "mpi.local_rank",
    "mpi.is_serial",
    "mpi.SerialMPI",
    "mpi.SerialComm",
    "mpi.SerialRequest",
    "mpi.SerialStatus",
    "mpi.OVERRIDE_VARIABLE",
]


@pytest.mark.parametrize("path", FOUNDATION_NAMES)
def test_documented_name_resolves(path):
    obj = xp
    for part in path.split("."):
        obj = getattr(obj, part)
    assert obj is not None or path.endswith("_backend")


def test_public_submodules_declare_all():
    for name in ("profiling", "cuda", "memory", "rng", "mpi", "kernels", "algorithms", "arguments", "xp"):
        module = importlib.import_module(f"cunumpy.{name}")
        assert isinstance(module.__all__, list)
        for exported in module.__all__:
            assert hasattr(module, exported), f"cunumpy.{name}.__all__ lists missing {exported}"


def _fresh(code, **env):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CUNUMPY_")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120)


HEAVY = ("cupy", "mpi4py", "scipy", "pytest", "pyccel", "petsc4py", "numba", "mlx")


def test_import_cunumpy_imports_no_heavy_library():
    code = (
        "import sys, cunumpy as xp\n"
        "a = xp.zeros(3); xp.to_numpy(a); xp.get_array_backend(a); xp.backend_info(); xp.cuda.device_count()\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    result = _fresh(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_kernel_testing_is_not_imported_by_cunumpy():
    result = _fresh("import sys, cunumpy; print('cunumpy.kernel_testing' in sys.modules)")
    assert result.stdout.strip() == "False", result.stderr


def test_compat_module_xp_is_not_imported_by_cunumpy():
    result = _fresh("import sys, cunumpy; print('cunumpy.xp' in sys.modules, hasattr(cunumpy, 'xp'))")
    assert result.stdout.strip() == "False False", result.stderr


def test_llm_guide_ships_with_the_package():
    import pathlib

    guide = pathlib.Path(xp.__file__).parent / "LLM_GUIDE.md"
    text = guide.read_text()
    assert "import cunumpy as xp" in text
    assert (pathlib.Path(xp.__file__).parent / "py.typed").exists()
