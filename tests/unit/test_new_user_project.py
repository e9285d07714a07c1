"""A new user's package runs its device side without a GPU and without code changes (issue
23, "done when"): a stencil and a particle push with CUDA ports, a host-only kernel, a
KernelCatalog, a program, and tests with the plugin's ``backend`` fixture, a marker and the
parity helpers, all under ``CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy``."""

import os
import subprocess
import sys
import textwrap

import pytest
from _emulation_support import requires_compiler

pytestmark = [pytest.mark.nosan, requires_compiler]  # child interpreters; the emulation compiles

FILES = {
    "userpkg/__init__.py": "",
    "userpkg/kernels/__init__.py": """
        import cunumpy as xp

        catalog = xp.kernels.KernelCatalog.from_package(__name__, missing_cuda="fallback")
    """,
    "userpkg/kernels/diffuse/__init__.py": "",
    "userpkg/kernels/diffuse/diffuse_kernels.py": """
        def diffuse(u: "float[:]", out: "float[:]", n: int):
            for i in range(1, n - 1):
                out[i] = u[i] + 0.25 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    """,
    "userpkg/kernels/diffuse/diffuse_cuda.cu": """
        extern "C" __global__ void diffuse(const double* u, double* out, long long n) {
            long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
            if (i < 1 || i >= n - 1) return;
            out[i] = u[i] + 0.25 * (u[i - 1] - 2.0 * u[i] + u[i + 1]);
        }
    """,
    "userpkg/kernels/diffuse/diffuse_test_args.py": """
        import numpy as np
        import cunumpy as xp

        OUTPUTS = ("out",)


        def make_args(backend, seed):
            rng = np.random.default_rng(seed)
            return (xp.to_cunumpy(rng.random(100)), xp.zeros(100), 100)
    """,
    "userpkg/kernels/push/__init__.py": "",
    "userpkg/kernels/push/push_kernels.py": """
        def push(x: "float[:]", v: "float[:]", dt: float, n: int):
            for i in range(n):
                x[i] = x[i] + dt * v[i]
    """,
    "userpkg/kernels/push/push_cuda.cu": """
        #include <cunumpy/index.cuh>

        extern "C" __global__ void push(double* x, const double* v, double dt, long long n) {
            CUNUMPY_THREAD_1D(i, n);
            x[i] += dt * v[i];
        }
    """,
    "userpkg/kernels/push/push_test_args.py": """
        import numpy as np
        import cunumpy as xp

        N_THREADS = 300
        RTOL = 1e-14


        def make_args(backend, seed):
            rng = np.random.default_rng(seed)
            return (xp.to_cunumpy(rng.random(300)), xp.to_cunumpy(rng.random(300)), 0.1, 300)
    """,
    "userpkg/kernels/energy/__init__.py": "",
    "userpkg/kernels/energy/energy_kernels.py": """
        def energy(v: "float[:]", e: "float[:]", n: int):
            total = 0.0
            for i in range(n):
                total += 0.5 * v[i] * v[i]
            e[0] = total
    """,
    "step8.py": """
        import numpy as np

        import cunumpy as xp
        from userpkg.kernels import catalog

        n = 300
        rng = np.random.default_rng(1)
        x, v = xp.to_cunumpy(rng.random(n)), xp.to_cunumpy(rng.random(n))
        u, out = xp.to_cunumpy(np.sin(np.linspace(0, 3, n))), xp.zeros(n)
        for _ in range(10):
            catalog["push"](x, v, 0.01, n, n_threads=n)
            catalog["diffuse"](u, out, n, n_threads=n)
            u, out = out, u
        e = xp.zeros(1)
        catalog["energy"](v, e, n)
        print(xp.get_backend(), f"{float(xp.to_numpy(x).sum()):.12f} {float(xp.to_numpy(u).sum()):.12f} "
              f"{float(xp.to_numpy(e)[0]):.12f}")
    """,
    "tests/test_user.py": """
        import numpy as np
        import pytest

        import cunumpy as xp
        from cunumpy import kernel_testing as kt
        from userpkg.kernels import catalog


        def test_push_moves_every_particle(backend):
            x, v = xp.zeros(50), xp.ones(50)
            catalog["push"](x, v, 0.5, 50, n_threads=50)
            assert xp.get_array_backend(x) == backend
            assert np.allclose(xp.to_numpy(x), 0.5)


        @pytest.mark.requires_device_backend
        def test_the_stencil_on_the_device():
            u = xp.to_cunumpy(np.arange(5.0) ** 2)
            out = xp.zeros(5)
            catalog["diffuse"](u, out, 5, n_threads=5)
            assert xp.to_numpy(out)[1:4].tolist() == [1.5, 4.5, 9.5]


        @pytest.mark.parametrize("kernel", kt.parity_cases(catalog))
        def test_parity(kernel):
            kt.check_parity(kernel)
    """,
}


def _project(root):
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    (root / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\ntestpaths = tests\npythonpath = .\n")
    return root


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUNUMPY_", "PYTEST_"))}
    env["CUNUMPY_EMULATION_CACHE"] = os.environ["CUNUMPY_EMULATION_CACHE"]  # the test run's own
    env.update(extra)
    return env


def test_the_program_runs_unchanged_on_the_fake_cupy(tmp_path):
    root = _project(tmp_path)

    def run(**env):
        result = subprocess.run(
            [sys.executable, "step8.py"],
            capture_output=True,
            text=True,
            cwd=root,
            env=_env(PYTHONPATH=str(root), **env),
            timeout=300,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout.split()

    host = run()
    fake = run(CUNUMPY_FAKE_CUPY="1", CUNUMPY_BACKEND="cupy")
    assert host[0] == "numpy" and fake[0] == "cupy"
    assert fake[1:] == host[1:]


def test_the_tests_run_unchanged_on_the_fake_cupy(tmp_path):
    root = _project(tmp_path)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-c",
            str(root / "pytest.ini"),
            "--rootdir",
            str(root),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        env=_env(CUNUMPY_FAKE_CUPY="1", CUNUMPY_BACKEND="cupy"),
        timeout=600,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for test in (
        "test_push_moves_every_particle[numpy]",
        "test_push_moves_every_particle[cupy]",
        "test_the_stencil_on_the_device",
        "test_parity[diffuse]",
        "test_parity[push]",
    ):
        assert f"::{test} PASSED" in out, out
    assert "SKIPPED" not in out and "5 passed" in out, out
