"""A Pyccel-compiled function has no Python signature: PyccelKernel reads its parameter
names from Pyccel's .pyi stub, so outputs declared by name work on the device path as on
NumPy (they used to raise KeyError on the device path only)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cunumpy as xp

SOURCE = """
from typing import Final


def scaled_copy(x: 'Final[float[:]]', out: 'float[:]', a: 'float', n: 'int'):
    for i in range(n):
        out[i] = a * x[i]
"""

pytestmark = pytest.mark.nosan  # spawns Pyccel and a C compiler


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    pytest.importorskip("pyccel")
    exe = shutil.which("pyccel", path=str(Path(sys.executable).parent)) or shutil.which("pyccel")
    if exe is None:
        pytest.skip("the pyccel command is not installed")
    work = tmp_path_factory.mktemp("pyccel_outputs")
    (work / "stub_named_kernels.py").write_text(SOURCE)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(
        [exe, "compile", "--language", "c", "stub_named_kernels.py"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    built = sorted(work.glob("stub_named_kernels*.so"))
    assert done.returncode == 0 and built, done.stdout + done.stderr
    sys.path.insert(0, str(work))
    try:
        import stub_named_kernels
    finally:
        sys.path.remove(str(work))
    assert type(stub_named_kernels.scaled_copy).__name__ == "builtin_function_or_method"
    return stub_named_kernels.scaled_copy


def test_names_of_a_compiled_function_come_from_the_stub(compiled):
    kernel = xp.kernels.PyccelKernel(compiled, outputs=("out",))
    assert kernel.parameters == ("x", "out", "a", "n")


def test_named_output_is_copied_back_on_the_device_path(compiled, on_backend):
    kernel = xp.kernels.PyccelKernel(compiled, outputs=("out",))
    x = xp.to_cunumpy(np.arange(5.0))
    out = xp.to_cunumpy(np.zeros(5))
    kernel(x, out, 2.0, 5)
    np.testing.assert_array_equal(xp.to_numpy(out), 2.0 * np.arange(5.0))


def test_an_unknown_name_is_refused_on_the_device_path(compiled, device_only):
    kernel = xp.kernels.PyccelKernel(compiled, outputs=("result",))
    x = xp.to_cunumpy(np.arange(3.0))
    with pytest.raises(KeyError, match="matches no parameter"):
        kernel(x, xp.to_cunumpy(np.zeros(3)), 1.0, 3)
